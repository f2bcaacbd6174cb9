// ServerStream: the server's handle on one streaming call, what a streaming
// method's handler (Service::add_stream) gets: the opening request, the
// client's messages (read) and a way to send messages back (write, allocate
// + write, send_file). The handler's return value ends the call: its payload
// or status travels in the final RESPONSE, after every message it wrote.
//
// Threading: use it only from the handler's coroutine (the connection's IO
// thread), and not after the handler has returned.
#pragma once

#include <asio/awaitable.hpp>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "authrpc/base/result.h"
#include "authrpc/rpc/payload.h"

namespace authrpc {

class CallStream;

class ServerStream {
 public:
  // Made by the server connection for each streaming call.
  ServerStream(std::shared_ptr<CallStream> stream, std::string request);

  // The payload of the call's opening frame (its parameters).
  std::string_view request() const noexcept { return request_; }

  // The client's next message; nullopt once the client has ended its
  // messages; kCancelled if the client cancelled or went away.
  asio::awaitable<Result<std::optional<Payload>>> read();
  // Sends `message` without copying it (returns once it is written); waits
  // while the client's window is full.
  asio::awaitable<Status> write(std::string_view message);
  // A buffer to fill in place and pass to write(Payload), which returns as
  // soon as it is queued.
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
  // Sends a file region as messages of up to 1 MiB: sendfile(2), zero-copy,
  // on plaintext TCP and Unix connections; read + write over TLS.
  asio::awaitable<Status> send_file(int fd, std::uint64_t offset, std::uint64_t length);
  bool zero_copy_files() const noexcept;
  // Bytes of the client's messages received and not yet read.
  std::size_t buffered_bytes() const noexcept;
  std::uint32_t receive_window() const noexcept;

 private:
  std::shared_ptr<CallStream> stream_;
  std::string request_;
};

}  // namespace authrpc
