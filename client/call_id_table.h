// CallIdTable: the unary calls of one client connection that wait for their
// responses, found by call id, and the connection's next call id. Owned by
// Client::Connection, used on its executor's thread only; the values are
// not owned (each is a PendingCall in the waiting call's coroutine frame).
//
// An open-addressing table (Robin Hood linear probing, deletion by backward
// shift) instead of std::unordered_map: a pipelined client inserts and removes one
// entry per call, and a hash map would allocate and free a node for each —
// about 400 instructions of the client's per-call cost (docs/DESIGN.md,
// "Calls"). Here a call costs a probe or two and allocates nothing; the
// slots grow (and shrink) by doubling. Call ids are the client's own,
// increasing (never 0, the empty mark), so the id itself is the hash: the
// calls in flight sit in consecutive slots, each in its own, and taking one
// moves nothing (Robin Hood order lets the backward shift stop at the first
// entry in its home slot; plain linear probing would walk the whole run).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

namespace authrpc {

template <typename T>
class CallIdTable {
 public:
  // The connection's next call id, for a unary or a streaming call:
  // increasing, never 0.
  std::uint32_t next_id() noexcept {
    std::uint32_t id = next_id_++;
    if (id == 0) id = next_id_++;
    return id;
  }

  std::size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }

  // `id` must not be 0 nor present.
  void insert(std::uint32_t id, T* value) {
    if ((size_ + 1) * 2 > capacity_) rehash(capacity_ == 0 ? kMinCapacity : capacity_ * 2);
    Slot entry{id, value};
    std::size_t distance = 0;  // of `entry` from its home slot
    for (std::size_t i = id & mask();; i = (i + 1) & mask(), ++distance) {
      if (slots_[i].id == 0) {
        slots_[i] = entry;
        ++size_;
        return;
      }
      // Robin Hood: the entry farther from home keeps the slot.
      const std::size_t resident = distance_at(i);
      if (resident < distance) {
        std::swap(entry, slots_[i]);
        distance = resident;
      }
    }
  }

  // Removes the entry for `id` and returns its value; null if there is none.
  T* take(std::uint32_t id) noexcept {
    if (id == 0 || size_ == 0) return nullptr;
    for (std::size_t i = id & mask();; i = (i + 1) & mask()) {
      if (slots_[i].id == 0) return nullptr;
      if (slots_[i].id == id) {
        T* value = slots_[i].value;
        remove_at(i);
        shrink_if_sparse();
        return value;
      }
    }
  }

  // Removes every entry whose id satisfies `pred` and returns their values.
  template <typename Pred>
  std::vector<T*> take_if(Pred pred) {
    std::vector<std::uint32_t> ids;
    for (std::size_t i = 0; i < capacity_; ++i) {
      if (slots_[i].id != 0 && pred(slots_[i].id)) ids.push_back(slots_[i].id);
    }
    std::vector<T*> out;
    out.reserve(ids.size());
    for (const std::uint32_t id : ids) out.push_back(take(id));
    return out;
  }

  // Removes every entry and returns their values.
  std::vector<T*> take_all() {
    std::vector<T*> out;
    out.reserve(size_);
    for (std::size_t i = 0; i < capacity_; ++i) {
      if (slots_[i].id != 0) out.push_back(slots_[i].value);
    }
    slots_.reset();
    capacity_ = size_ = 0;
    return out;
  }

 private:
  struct Slot {
    std::uint32_t id = 0;  // 0: empty
    T* value = nullptr;
  };
  static constexpr std::size_t kMinCapacity = 16;

  std::size_t mask() const noexcept { return capacity_ - 1; }

  // How far the entry in slot `i` sits from its home slot.
  std::size_t distance_at(std::size_t i) const noexcept {
    return (i - (slots_[i].id & mask())) & mask();
  }

  // Backward shift: the entries after `i` that are not in their home slot
  // move back one, so that every entry stays reachable without tombstones;
  // in Robin Hood order none after the first one at home needs to.
  void remove_at(std::size_t i) noexcept {
    for (std::size_t j = (i + 1) & mask(); slots_[j].id != 0 && distance_at(j) != 0;
         j = (j + 1) & mask()) {
      slots_[i] = slots_[j];
      i = j;
    }
    slots_[i] = {};
    --size_;
  }

  void shrink_if_sparse() {
    if (capacity_ > kMinCapacity && size_ * 8 < capacity_) rehash(capacity_ / 2);
  }

  void rehash(std::size_t capacity) {
    auto old = std::move(slots_);
    const std::size_t old_capacity = capacity_;
    slots_ = std::make_unique<Slot[]>(capacity);
    capacity_ = capacity;
    size_ = 0;
    for (std::size_t i = 0; i < old_capacity; ++i) {
      if (old[i].id != 0) insert(old[i].id, old[i].value);
    }
  }

  std::unique_ptr<Slot[]> slots_;
  std::size_t capacity_ = 0;  // a power of two, or 0
  std::size_t size_ = 0;
  std::uint32_t next_id_ = 1;
};

}  // namespace authrpc
