// The shared-memory data plane of one streaming call on a unix://
// connection: the call's messages in one direction travel through a ring of
// slots in shared memory (rpc/shm_ring.h) instead of DATA frames, while
// everything else (opening, credit for the socket path, the final RESPONSE,
// CANCEL) stays on the socket. docs/SHM.md ("Integration") has the design,
// docs/PROTOCOL.md section 7 the frames.
//
// ShmStreamPlane: one per streaming call (owned by its CallStream), on the
// connection's ShmLink (rpc/shm_link.h). As a writer it creates a ring on the
// stream's first message and hands it over (SHM_RING with the descriptors);
// as a reader it holds the ring the peer handed over and gives out Payloads
// that view the slots in place.
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

#include "authrpc/base/result.h"
#include "authrpc/rpc/frame_channel.h"
#include "authrpc/rpc/payload.h"
#include "authrpc/rpc/shm_link.h"
#include "authrpc/rpc/shm_ring.h"

namespace authrpc {

// Hands the peer end of `ring` over on the Unix socket `socket`: takes its
// descriptors and sends them with the SHM_RING frame for `call_id`. Blocks
// (poll) only if the socket's buffer fills after the first byte left;
// asio::error::would_block if not even that went. Each ShmStreamPlane's
// ring goes so, and a test's raw peer sends its rings the same way.
Status send_shm_ring(int socket, std::uint32_t call_id, ShmRing& ring);

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
