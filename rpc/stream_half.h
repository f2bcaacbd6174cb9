// StreamHalf: what both handles on a streaming call (ClientStream,
// client/client_stream.h, and ServerStream, server/server_stream.h) offer
// alike: reading the peer's messages, writing this side's, and the state of
// flow control and shared memory. It owns a share of the call's CallStream
// (rpc/call_stream.h); each handle adds what only its side does.
//
// Threading: as the handle's (the call's executor).
#pragma once

#include <asio/awaitable.hpp>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>

#include "authrpc/base/result.h"
#include "authrpc/rpc/payload.h"

namespace authrpc {

class CallStream;

class StreamHalf {
 public:
  // The peer's next message; nullopt once the peer has ended its messages
  // (each handle says what ends the call and which statuses follow).
  asio::awaitable<Result<std::optional<Payload>>> read();
  // Sends `message` without copying it; returns once it is written. Waits
  // while the peer's window is full.
  asio::awaitable<Status> write(std::string_view message);
  // A buffer to fill in place for write(Payload), which returns once queued.
  Payload allocate(std::size_t size);
  asio::awaitable<Status> write(Payload message);
  // Waits for a buffer of `size` bytes to fill in place and pass to
  // write(Payload): on a shared-memory stream (unix://, docs/SHM.md) a slot
  // of the ring itself, so the message is never copied.
  asio::awaitable<Result<Payload>> acquire(std::size_t size);
  // True once this side's messages go through shared memory (after the
  // first write), or the peer's arrive through it.
  bool shm_writing() const noexcept;
  bool shm_reading() const noexcept;
  // Bytes of the peer's messages received and not yet read.
  std::size_t buffered_bytes() const noexcept;
  std::uint32_t receive_window() const noexcept;

 protected:
  explicit StreamHalf(std::shared_ptr<CallStream> stream);
  // Not a handle of its own: only as part of a ClientStream or ServerStream.
  ~StreamHalf() = default;
  StreamHalf(const StreamHalf&) = default;
  StreamHalf(StreamHalf&&) = default;
  StreamHalf& operator=(const StreamHalf&) = default;
  StreamHalf& operator=(StreamHalf&&) = default;

  std::shared_ptr<CallStream> stream_;
};

}  // namespace authrpc
