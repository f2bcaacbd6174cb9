// The shared-memory data plane of streaming calls on unix:// connections:
// a stream's messages in one direction travel through a ring of slots in
// shared memory (rpc/shm_ring.h) instead of DATA frames, while everything
// else (opening, credit for the socket path, the final RESPONSE, CANCEL)
// stays on the socket. docs/SHM.md ("Integration") has the design,
// docs/PROTOCOL.md section 7 the frames.
//
// ShmLink: one per connection. The client offers (SHM_HELLO) after
// authentication if its options allow and the server's SO_PEERCRED passes
// its policy; the server answers (SHM_ACCEPT) after checking the client's.
// Made by the client connection and the server connection; streams hold it.
//
// ShmStreamPlane: one per streaming call (owned by its CallStream). As a
// writer it creates a ring on the stream's first message and hands it over
// (SHM_RING with the descriptors); as a reader it holds the ring the peer
// handed over and gives out Payloads that view the slots in place.
//
// Threading: everything on the connection's executor; Payloads it gives out
// may be dropped on any thread (the release is dispatched to the executor).
#pragma once

#include <asio/any_io_executor.hpp>
#include <asio/awaitable.hpp>
#include <asio/steady_timer.hpp>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "authrpc/rpc/frame_channel.h"
#include "authrpc/rpc/payload.h"
#include "authrpc/security/base/result.h"
#include "authrpc/rpc/shm_handoff.h"
#include "authrpc/rpc/shm_options.h"
#include "authrpc/rpc/shm_ring.h"

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

class ShmStreamPlane final : public PayloadOwner,
                             public std::enable_shared_from_this<ShmStreamPlane> {
 public:
  ShmStreamPlane(std::shared_ptr<ShmLink> link, std::shared_ptr<FrameChannel> channel,
                 std::uint32_t call_id);
  ~ShmStreamPlane() override;

  // Called when the call's deadline passes while a ring operation waits.
  void arm_deadline(std::chrono::steady_clock::time_point deadline, std::function<void()> expired);

  // --- Writing (one writer at a time).
  // On the first call: creates a ring and hands it over if the link is
  // active; true from then on if the stream's messages go to the ring, false
  // if they go to the socket (no shm, the setup failed: fallback; or
  // close_writer()/fail() ran first, even during this call's wait: the
  // caller's send path then reports the stream's end).
  asio::awaitable<bool> ready_to_write();
  bool writing() const noexcept { return writer_.has_value(); }
  // Copies `message` into slots (once) and commits them.
  asio::awaitable<Status> write(std::string_view message);
  // Commits a slot from acquire() in place; copies any other buffer.
  asio::awaitable<Status> write(Payload message);
  // A writable Payload of `size` bytes: a ring slot (filled in place, no
  // copy) if the message fits one and none is lent out already, else a
  // pooled buffer that write() copies.
  asio::awaitable<Result<Payload>> acquire(std::size_t size);
  // The writer's orderly end: the reader gets every slot, then the end; a
  // write still waiting for a slot fails with `why`. Before the first
  // write's ring exists: no ring will be made.
  void close_writer(const Status& why);

  // --- Reading (one reader at a time).
  Status attach_reader(ShmRing ring);
  // A ring is attached and has not ended.
  bool reading() const noexcept { return reader_.has_value() && !reader_ended_; }
  // The ring ended inside a message (its writer stopped mid-message): that
  // message is lost, so a successful end of the call is not one.
  bool truncated() const noexcept { return truncated_; }
  // The next message (a view into the slot, released when dropped; a
  // message spanning slots is assembled in a pooled buffer); nullopt at the
  // ring's end (the writer's close, peer_finished(), or a close inside a
  // message: truncated()); a typed failure (ShmErrc::kPeerGone, kCorrupted,
  // the reason given to fail()) otherwise.
  asio::awaitable<Result<std::optional<Payload>>> read(std::size_t max_message);

  // The peer's final frame for our reading direction (RESPONSE, END_STREAM)
  // arrived on the socket: the ring holds all it ever will. read() drains it,
  // then reports the ring's end, even if the writer never closed it.
  void peer_finished();

  // The call failed: pending ring waits end with `why`; our ring is closed
  // (the peer's reader drains it and waits for the socket's word), the
  // peer's writer is told to stop.
  void fail(const Status& why);

  void release(char* data, std::size_t capacity) noexcept override;

 private:
  // Yields to the executor every few ring operations (see the .cc).
  asio::awaitable<void> take_turn();
  void released(char* data) noexcept;
  void drain_released();
  Status send_ring(ShmRing& ring);

  struct Held {
    const char* data;
    bool done;
  };
  std::shared_ptr<ShmLink> link_;
  std::shared_ptr<FrameChannel> channel_;
  asio::any_io_executor executor_;
  std::uint32_t call_id_;
  std::shared_ptr<BufferPool> pool_;
  bool write_decided_ = false;
  // close_writer() or fail() ran, with or without a ring: none is handed
  // over after that (the stream's final frame may have left already).
  bool writer_closed_ = false;
  std::optional<ShmWriter> writer_;
  char* lent_ = nullptr;  // the acquired slot a Payload holds, not yet committed
  std::optional<ShmReader> reader_;
  bool reader_ended_ = false;
  bool truncated_ = false;
  std::deque<Held> held_;  // reader views given out, oldest first
  std::optional<asio::steady_timer> deadline_;
  unsigned operations_ = 0;  // ring reads and writes since the last yield
};

}  // namespace authrpc
