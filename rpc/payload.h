// Payload: one message of a streaming call as a span of bytes plus whoever
// must be told when its holder is done with them. Received messages arrive
// as Payloads (the consumer reads them in place and drops them), and a
// sender can fill a Payload in place and hand it over (no copy into a frame
// buffer). Who owns the bytes is a PayloadOwner: a BufferPool for socket
// transports (read straight into a pooled block), a shared-memory ring slot
// for the shm data plane (docs/DATAPLANE.md).
//
// Threading: a Payload may be dropped on any thread; its owner must accept
// release() from any thread.
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace authrpc {

// Gets the bytes of a Payload back when the Payload is dropped.
class PayloadOwner {
 public:
  virtual ~PayloadOwner() = default;
  // `data` and `capacity` as the Payload was made with.
  virtual void release(char* data, std::size_t capacity) noexcept = 0;
};

class Payload {
 public:
  Payload() = default;
  // `size` bytes at `data` (of `capacity`), handed back to `owner` when
  // dropped; a null owner means the bytes are not owned (a static view).
  Payload(char* data, std::size_t size, std::size_t capacity,
          std::shared_ptr<PayloadOwner> owner) noexcept
      : data_(data), size_(size), capacity_(capacity), owner_(std::move(owner)) {}
  // A heap copy of `bytes` (for tests and small messages).
  static Payload copy_of(std::string_view bytes);

  Payload(Payload&& other) noexcept { *this = std::move(other); }
  Payload& operator=(Payload&& other) noexcept;
  Payload(const Payload&) = delete;
  Payload& operator=(const Payload&) = delete;
  ~Payload() { reset(); }

  std::string_view view() const noexcept { return {data_, size_}; }
  const char* data() const noexcept { return data_; }
  // Writable: for a Payload from allocate() that the sender fills in place.
  char* mutable_data() noexcept { return data_; }
  std::size_t size() const noexcept { return size_; }
  std::size_t capacity() const noexcept { return capacity_; }
  // Shrinks (never grows) what is sent or seen, e.g. after a short fill.
  void resize(std::size_t size) noexcept { size_ = size < capacity_ ? size : capacity_; }
  bool empty() const noexcept { return size_ == 0; }
  // Releases the bytes now.
  void reset() noexcept;

 private:
  char* data_ = nullptr;
  std::size_t size_ = 0;
  std::size_t capacity_ = 0;
  std::shared_ptr<PayloadOwner> owner_;
};

// Uninitialized heap blocks, recycled: take() returns a cached block large
// enough if there is one (no allocation, no zeroing, no fresh pages to fault
// in on the hot path), and dropped Payloads come back here. Keeps at most
// `max_cached_bytes` in blocks (a stream passes its window: what it may hold
// at once anyway).
class BufferPool final : public PayloadOwner, public std::enable_shared_from_this<BufferPool> {
 public:
  explicit BufferPool(std::size_t max_cached_bytes = 4 * 1024 * 1024)
      : max_cached_bytes_(max_cached_bytes) {}
  ~BufferPool() override;
  // A Payload of `size` bytes (contents undefined).
  Payload take(std::size_t size);
  void release(char* data, std::size_t capacity) noexcept override;

 private:
  struct Block {
    char* data;
    std::size_t capacity;
  };
  std::mutex mu_;
  std::vector<Block> free_;
  std::size_t cached_bytes_ = 0;
  std::size_t max_cached_bytes_;
};

}  // namespace authrpc
