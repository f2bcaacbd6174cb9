#include "authrpc/rpc/payload.h"

#include <cstring>
#include <new>

namespace authrpc {
namespace {

// Owns a single heap block made by Payload::copy_of.
class HeapOwner final : public PayloadOwner {
 public:
  void release(char* data, std::size_t) noexcept override { delete[] data; }
};

}  // namespace

Payload Payload::copy_of(std::string_view bytes) {
  static const auto owner = std::make_shared<HeapOwner>();
  char* data = new char[bytes.size() == 0 ? 1 : bytes.size()];
  if (!bytes.empty()) std::memcpy(data, bytes.data(), bytes.size());
  return Payload(data, bytes.size(), bytes.size(), owner);
}

Payload& Payload::operator=(Payload&& other) noexcept {
  if (this == &other) return *this;
  reset();
  data_ = other.data_;
  size_ = other.size_;
  capacity_ = other.capacity_;
  owner_ = std::move(other.owner_);
  other.data_ = nullptr;
  other.size_ = other.capacity_ = 0;
  return *this;
}

void Payload::reset() noexcept {
  if (owner_) {
    owner_->release(data_, capacity_);
    owner_.reset();
  }
  data_ = nullptr;
  size_ = capacity_ = 0;
}

BufferPool::~BufferPool() {
  for (const auto& b : free_) delete[] b.data;
}

Payload BufferPool::take(std::size_t size) {
  {
    std::lock_guard lock(mu_);
    // Most recently released first: its bytes are likely still in the
    // cache, so the next message is written into warm memory.
    for (std::size_t i = free_.size(); i-- > 0;) {
      if (free_[i].capacity >= size) {
        const Block b = free_[i];
        free_.erase(free_.begin() + static_cast<std::ptrdiff_t>(i));
        cached_bytes_ -= b.capacity;
        return Payload(b.data, size, b.capacity, shared_from_this());
      }
    }
  }
  const std::size_t capacity = size == 0 ? 1 : size;
  char* data = new char[capacity];  // uninitialized
  return Payload(data, size, capacity, shared_from_this());
}

void BufferPool::release(char* data, std::size_t capacity) noexcept {
  {
    std::lock_guard lock(mu_);
    if (cached_bytes_ + capacity <= max_cached_bytes_) {
      try {
        free_.push_back({data, capacity});
        cached_bytes_ += capacity;
        return;
      } catch (...) {  // no memory for the list: just free the block
      }
    }
  }
  delete[] data;
}

}  // namespace authrpc
