// HeldRequests: the requests a client connection makes before AUTH_SUCCESS.
// Each is kept until then: a server that refuses or challenges the client's
// last negotiation message drops the requests pipelined behind it, and they
// are sent again behind the next one. A request too large to travel before
// AUTH_SUCCESS (over wire::kMinNegotiationFrameSize, the least a server
// reads before authentication), and every one after it, waits for
// AUTH_SUCCESS. A value member of Client::Connection: call() hands it the
// requests made while negotiating, negotiate_client's event hook sends them
// behind the last message or takes them back, run() releases the rest.
#pragma once

#include <cstddef>
#include <string>

namespace authrpc {

class FrameChannel;

class HeldRequests {
 public:
  // Where call() appends a request while calls wait for the last message.
  std::string& buffer() noexcept { return held_; }
  // call(): a request was appended at `start` of `out` — buffer() itself
  // while calls wait, else the channel's output behind the last message
  // (`following`: a copy is kept). False if calls must wait from now on:
  // the request was too large and left `out` to wait for AUTH_SUCCESS.
  bool keep(std::string& out, std::size_t start, bool following);
  // The last negotiation message is queued: the requests that may travel
  // before AUTH_SUCCESS go to `out` behind it. True if all did (the calls
  // that follow may go out too).
  bool send_behind_last(std::string& out);
  // The server dropped what followed the last message: all are sent again.
  void dropped() noexcept { sent_ = 0; }
  // AUTH_SUCCESS: the requests that waited for it are written to `channel`,
  // and the copies dropped.
  void release(FrameChannel& channel);

 private:
  std::string held_;
  std::size_t sent_ = 0;                     // bytes of held_ behind the last message
  std::size_t deferred_ = std::string::npos;  // where the first request too large starts
};

}  // namespace authrpc
