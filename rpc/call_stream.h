// CallStream: the state of one streaming call ("stream" in authrpc means a
// streaming call; docs/DESIGN.md "Names") that the client and the server
// share; its two handles wrap it (ClientStream, client/client_stream.h, and
// ServerStream, server/server_stream.h): credit-based flow control in both
// directions, DATA frames written with scatter/gather (a frame header in
// the channel's buffer, the payload sent from where it lies), large DATA
// bodies read straight into pooled buffers, and the call's end, errors and
// cancellation. docs/DATAPLANE.md explains the design; docs/PROTOCOL.md
// section 6 the frames.
//
// Flow control (per direction): the receiver announces a window W. A sender
// may send a message of n bytes when its credit is at least min(n, W/2);
// sending takes n from the credit (it may go below zero). The receiver
// returns credit (WINDOW_UPDATE) once it has handed at least W/4 bytes to
// its application. So a receiver never buffers more than W bytes of
// messages of up to W/2 bytes (W/2 + n for a larger message), and a sender
// waiting for credit is always unblocked (it waits only while more than W/2
// is outstanding, which is more than W/4).
//
// Threading and ownership: every method runs on the channel's executor. The
// connection's reader delivers frames (receive_buffer, on_data,
// on_window_update, end_input/end_output, fail); one reader and one writer
// coroutine of the application use read() and write()/send_file(). Shared
// (shared_ptr) by the connection's call table and the application's handle.
#pragma once

#include <asio/awaitable.hpp>
#include <asio/steady_timer.hpp>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "authrpc/base/result.h"
#include "authrpc/rpc/frame_channel.h"
#include "authrpc/rpc/payload.h"

namespace authrpc {

class ShmLink;
class ShmStreamPlane;
class ShmRing;
class StreamInputBudget;

// Default receive window per streaming call and direction.
inline constexpr std::uint32_t kDefaultStreamWindow = 8 * 1024 * 1024;
// DATA bodies above this are read straight into the message's own buffer.
inline constexpr std::size_t kDirectDataThreshold = 8 * 1024;
// A file region is sent as messages of at most this many bytes.
inline constexpr std::size_t kFileChunk = 1024 * 1024;

class CallStream : public std::enable_shared_from_this<CallStream> {
 public:
  using Clock = std::chrono::steady_clock;

  // `receive_window`: the W this end announces (and returns credit for).
  // `send_window`: the peer's W, or 0 until its first WINDOW_UPDATE says.
  CallStream(std::shared_ptr<FrameChannel> channel, std::uint32_t call_id,
             std::uint32_t receive_window, std::uint32_t send_window,
             Clock::time_point deadline);
  ~CallStream();

  std::uint32_t call_id() const noexcept { return call_id_; }

  // --- Sending: DATA frames to the peer. One writer at a time.
  // Waits for credit, then sends `message` without copying it; returns once
  // it has been written to the connection (so the caller may reuse it).
  asio::awaitable<Status> write(std::string_view message);
  // Waits for credit, then queues `message` (from allocate(), filled in
  // place) and returns at once; the buffer is released once written.
  asio::awaitable<Status> write(Payload message);
  // A buffer of `size` bytes for the sender to fill in place.
  Payload allocate(std::size_t size);
  // The same, waiting if need be: on a shared-memory stream a ring slot
  // (filled in place, committed by write(Payload) without a copy).
  asio::awaitable<Result<Payload>> acquire(std::size_t size);
  // Sends `length` bytes of `fd` from `offset` as messages of at most
  // kFileChunk bytes: zero-copy sendfile(2) where the transport can
  // (plaintext sockets), else read into pooled buffers and written.
  asio::awaitable<Status> send_file(int fd, std::uint64_t offset, std::uint64_t length);
  // True if send_file() is zero-copy on this connection.
  bool zero_copy_files() const noexcept;

  // --- Receiving. One reader at a time.
  // The next message; nullopt once the peer has ended its messages
  // normally; the failure (typed) otherwise.
  asio::awaitable<Result<std::optional<Payload>>> read();
  // Bytes received and not yet handed to the application by read().
  std::size_t buffered_bytes() const noexcept { return buffered_; }
  // Counts buffered_bytes() in the connection's sum as well (server side).
  void set_input_budget(std::shared_ptr<StreamInputBudget> budget) { input_budget_ = std::move(budget); }
  std::uint32_t receive_window() const noexcept { return receive_window_; }

  // --- For the connection's reader.
  // Where the body of a DATA frame of `size` bytes goes.
  Payload receive_buffer(std::size_t size) { return pool_->take(size); }
  // A message arrived; kProtocolError if the peer overran its credit.
  Status on_data(Payload message);
  Status on_window_update(std::uint32_t increment);
  // The peer has no more messages: read() drains what is queued, then
  // returns nullopt (`status` OK) or `status`.
  void end_input(Status status);
  // The call is over for sending: write() fails with `status`.
  void end_output(Status status);
  // The call failed (cancelled, deadline, connection lost): queued input is
  // dropped and every read and write fails with `why`. Idempotent.
  void fail(Status why);
  // fail(), then the on_local_failure hook: for failures the peer cannot
  // see (the deadline, a broken ring).
  void fail_locally(Status why);
  bool failed() const noexcept { return !failure_.ok(); }
  // Failed, or the peer has ended its messages (the call is over for reading).
  bool finished() const noexcept { return failed() || input_end_.has_value(); }
  // The final response's payload (client side: the RESPONSE that ended the call).
  std::string& final_message() noexcept { return final_message_; }
  const asio::any_io_executor& executor() const noexcept {
    return channel_->byte_stream().executor();
  }
  // Sends a frame about this call that carries no body (END_STREAM, CANCEL).
  void send_control(wire::FrameType type);
  // Called once when the stream fails by itself (its deadline passed, or
  // reading the peer's ring failed), so that the owner can tell the peer
  // (CANCEL) and forget the call.
  void set_on_local_failure(std::function<void(const Status&)> hook) {
    on_local_failure_ = std::move(hook);
  }

  // --- Shared memory (rpc/shm_stream_plane.h), on unix:// connections whose
  // ShmLink is active: messages this end writes go through a ring it
  // creates; a ring the peer hands over (SHM_RING) carries what we read.
  void set_shm(std::shared_ptr<ShmLink> link);
  Status attach_shm_ring(std::shared_ptr<ShmLink> link, ShmRing ring);
  // True once this end's messages go through a ring.
  bool shm_writing() const noexcept;
  bool shm_reading() const noexcept;

 private:
  struct WriteWait;
  bool can_send(std::size_t size) const noexcept;
  asio::awaitable<Status> wait_credit(std::size_t size);
  // Waits for `event` to be signalled; false if the deadline passed.
  asio::awaitable<bool> wait(asio::steady_timer& event);
  void deadline_passed();
  Status send_status() const;
  void return_credit();
  Status check_size(std::size_t size) const;
  asio::awaitable<Status> shm_write_failed(Status s);

  std::shared_ptr<FrameChannel> channel_;
  std::shared_ptr<BufferPool> pool_;
  std::uint32_t call_id_;
  Clock::time_point deadline_;
  asio::steady_timer read_event_;
  asio::steady_timer write_event_;
  Status failure_;  // set by fail()

  // Sending.
  std::uint32_t send_window_;
  std::int64_t credit_;
  std::optional<Status> output_end_;

  // Receiving.
  std::uint32_t receive_window_;
  std::deque<Payload> queue_;
  std::size_t buffered_ = 0;     // bytes in queue_
  std::shared_ptr<StreamInputBudget> input_budget_;  // null: not counted
  std::uint64_t outstanding_ = 0;  // received, credit not yet returned
  std::uint64_t unreturned_ = 0;   // handed to the application, credit not yet returned
  std::optional<Status> input_end_;
  std::function<void(const Status&)> on_local_failure_;
  std::string final_message_;
  std::shared_ptr<ShmStreamPlane> shm_;  // null: the socket only
  bool shm_attached_ = false;            // a reader ring was handed over
};

}  // namespace authrpc
