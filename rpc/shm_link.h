// The per-connection half of the shared-memory data plane of streaming calls
// on unix:// connections (docs/SHM.md "Integration", docs/PROTOCOL.md
// section 7); rpc/shm_stream_plane.h is the per-call half.
//
// ShmLink: one per connection. The client offers (SHM_HELLO) after
// authentication if its options allow and the server's SO_PEERCRED passes
// its policy; the server answers (SHM_ACCEPT) after checking the client's.
// Made by the client connection and the server connection; streams hold it.
// It also keeps the descriptors that arrived on the connection until an
// SHM_RING claims them (take_shm_ring).
//
// Threading: everything on the connection's executor.
#pragma once

#include <asio/any_io_executor.hpp>
#include <asio/awaitable.hpp>
#include <asio/steady_timer.hpp>
#include <deque>
#include <memory>
#include <string_view>
#include <vector>

#include "authrpc/base/result.h"
#include "authrpc/rpc/frame_channel.h"
#include "authrpc/rpc/shm_handoff.h"
#include "authrpc/rpc/shm_options.h"
#include "authrpc/rpc/shm_ring.h"
#include "authrpc/rpc/unique_fd.h"

namespace authrpc {

class ShmLink {
 public:
  enum class State { kOffered, kActive, kRefused };

  // Client, once authenticated: null if shm is off, the connection is not a
  // Unix socket, or the server's credentials fail the policy; otherwise
  // appends SHM_HELLO to the channel and returns the offered link.
  static std::shared_ptr<ShmLink> offer(FrameChannel& channel, const ShmOptions& options);
  // Server, on SHM_HELLO: appends SHM_ACCEPT with the outcome; the link if
  // accepted, else null (and `why` says why: off, or the client's uid).
  static std::shared_ptr<ShmLink> answer(FrameChannel& channel, const ShmOptions& options,
                                         Status* why);
  // Client, on SHM_ACCEPT. A malformed body is kProtocolError.
  Status on_accept(std::string_view body);
  // Client: waits until the server has answered (or the connection ended:
  // call cancel_wait()).
  asio::awaitable<void> wait_answer();
  void cancel_wait() { answered_.cancel(); }

  State state() const noexcept { return state_; }
  bool active() const noexcept { return state_ == State::kActive; }
  const Status& refusal() const noexcept { return refusal_; }
  const ShmOptions& options() const noexcept { return options_; }

  // Descriptors that arrived on the connection, oldest first: an SHM_RING
  // frame takes the four of its ring.
  std::vector<UniqueFd> take_ring_fds(FrameChannel& channel);
  // Descriptors taken from the connection and not yet claimed by an SHM_RING.
  std::size_t pending_fds() const noexcept { return fds_.size(); }

  ShmLink(const ShmOptions& options, asio::any_io_executor ex, State state)
      : options_(options), state_(state), answered_(ex) {}

 private:
  ShmOptions options_;
  State state_;
  Status refusal_;
  asio::steady_timer answered_;
  std::deque<UniqueFd> fds_;
};

// The receiving side of SHM_RING: takes the frame's four descriptors from
// the link, checks the frame's geometry against the region's and attaches
// the ring (ShmRing::attach's checks). kProtocolError / ShmErrc::kBadHandoff
// / kBadGeometry if anything is wrong.
Result<ShmRing> take_shm_ring(ShmLink& link, FrameChannel& channel, const Frame& frame);

}  // namespace authrpc
