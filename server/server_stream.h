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
#include <string>
#include <string_view>

#include "authrpc/base/result.h"
#include "authrpc/rpc/stream_half.h"

namespace authrpc {

// Reading and writing (StreamHalf, rpc/stream_half.h): read() gives the
// client's next message, nullopt once the client has ended its messages,
// kCancelled if the client cancelled or went away; write() waits while the
// client's window is full; buffered_bytes() counts the client's messages
// received and not yet read.
class ServerStream : public StreamHalf {
 public:
  // Made by the server connection for each streaming call.
  ServerStream(std::shared_ptr<CallStream> stream, std::string request);

  // The payload of the call's opening frame (its parameters).
  std::string_view request() const noexcept { return request_; }

  // Sends a file region as messages of up to 1 MiB: sendfile(2), zero-copy,
  // on plaintext TCP and Unix connections; read + write over TLS.
  asio::awaitable<Status> send_file(int fd, std::uint64_t offset, std::uint64_t length);
  bool zero_copy_files() const noexcept;

 private:
  std::string request_;
};

}  // namespace authrpc
