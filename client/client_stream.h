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
#include <string>

#include "authrpc/base/result.h"
#include "authrpc/rpc/stream_half.h"

namespace authrpc {

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

// Reading and writing (StreamHalf, rpc/stream_half.h): read() gives the
// server's next message, nullopt once the server has finished the call
// successfully (finish() then returns its final payload), the call's status
// (typed: kCancelled, kDeadlineExceeded, the handler's error,
// kConnectionClosed...) otherwise; write() waits while the server's window
// is full and fails with the call's status once the server has ended the
// call; buffered_bytes() counts the server's messages received and not yet
// read.
class ClientStream : public StreamHalf {
 public:
  // Made by Client::async_open_stream().
  ClientStream(std::shared_ptr<CallStream> stream, std::shared_ptr<ClientStreamOwner> owner);
  ~ClientStream();
  ClientStream(const ClientStream&) = delete;
  ClientStream& operator=(const ClientStream&) = delete;

  std::uint32_t call_id() const noexcept;

  // Ends the client's messages (END_STREAM) and goes on reading: read()
  // gives the server's messages until it finishes the call. A write()
  // after it fails with kFailedPrecondition. Idempotent.
  void end_writes();
  // Ends the client's messages (end_writes()), drops server messages not
  // read yet, and returns the server's final response.
  asio::awaitable<Result<std::string>> finish();
  // Ends the call now: the server is told (CANCEL); reads and writes fail
  // with kCancelled. Idempotent; nothing happens after the call finished.
  void cancel();

 private:
  std::shared_ptr<ClientStreamOwner> owner_;
  bool ended_ = false;  // END_STREAM sent
};

}  // namespace authrpc
