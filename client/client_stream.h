// ClientStream: the client's handle on one streaming call, made by
// Client::async_open_stream(). A server-streaming call ("get") reads the
// server's messages until read() returns nullopt; a client-streaming call
// ("put") writes messages and then finish()es; both directions may be used
// at once. Flow control bounds what either side buffers (docs/DATAPLANE.md).
//
// Threading: use it from coroutines on the client's executor. Dropping it
// before the call has finished cancels the call.
#pragma once

#include <asio/awaitable.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "authrpc/base/result.h"
#include "authrpc/rpc/payload.h"

namespace authrpc {

class CallStream;

struct StreamOptions {
  // Deadline for the whole call; 0: ClientOptions::default_call_timeout.
  std::chrono::milliseconds timeout{0};
  // Bytes of the server's messages this end buffers at most (its receive
  // window); 0: kDefaultStreamWindow.
  std::uint32_t window = 0;
};

// Internal: what a ClientStream needs from its connection
// (client/client_connection.h).
class ClientStreamOwner {
 public:
  // Forgets the call and tells the server (CANCEL), if it is still known.
  virtual void cancel_stream(std::uint32_t call_id) = 0;

 protected:
  virtual ~ClientStreamOwner() = default;
};

class ClientStream {
 public:
  // Made by Client::async_open_stream().
  ClientStream(std::shared_ptr<CallStream> stream, std::shared_ptr<ClientStreamOwner> owner);
  ~ClientStream();
  ClientStream(const ClientStream&) = delete;
  ClientStream& operator=(const ClientStream&) = delete;

  std::uint32_t call_id() const noexcept;

  // The server's next message; nullopt once the server has finished the
  // call successfully (finish() then returns its final payload); the call's
  // status (typed: kCancelled, kDeadlineExceeded, the handler's error,
  // kConnectionClosed...) otherwise.
  asio::awaitable<Result<std::optional<Payload>>> read();

  // Sends `message` without copying it; returns once it is written. Waits
  // while the server's window is full. Fails with the call's status once the
  // server has ended the call.
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

  // Ends the client's messages (END_STREAM), drops server messages not read
  // yet, and returns the server's final response.
  asio::awaitable<Result<std::string>> finish();
  // Ends the call now: the server is told (CANCEL); reads and writes fail
  // with kCancelled. Idempotent; nothing happens after the call finished.
  void cancel();

  // Bytes of the server's messages received and not yet read.
  std::size_t buffered_bytes() const noexcept;
  std::uint32_t receive_window() const noexcept;

 private:
  std::shared_ptr<CallStream> stream_;
  std::shared_ptr<ClientStreamOwner> owner_;
  bool ended_ = false;  // END_STREAM sent
};

}  // namespace authrpc
