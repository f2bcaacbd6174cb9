#include "authrpc/rpc/call_stream.h"

#include <asio/redirect_error.hpp>
#include <asio/use_awaitable.hpp>
#include <algorithm>
#include <cerrno>
#include <sys/stat.h>
#include <unistd.h>

#include "authrpc/rpc/messages.h"
#include "authrpc/rpc/shm_stream_plane.h"
#include "authrpc/rpc/stream_input_budget.h"

namespace authrpc {

// One zero-copy write(string_view) waiting for its bytes to leave.
struct CallStream::WriteWait {
  explicit WriteWait(const asio::any_io_executor& ex) : timer(ex) {}
  asio::steady_timer timer;
  bool done = false;
  std::error_code ec;
};

CallStream::CallStream(std::shared_ptr<FrameChannel> channel, std::uint32_t call_id,
                       std::uint32_t receive_window, std::uint32_t send_window,
                       Clock::time_point deadline)
    : channel_(std::move(channel)),
      pool_(std::make_shared<BufferPool>(std::max<std::size_t>(receive_window, 4u << 20))),
      call_id_(call_id),
      deadline_(deadline),
      read_event_(channel_->byte_stream().executor()),
      write_event_(channel_->byte_stream().executor()),
      send_window_(send_window),
      credit_(send_window),
      receive_window_(receive_window) {}

CallStream::~CallStream() {
  if (input_budget_) input_budget_->release(buffered_);
}

asio::awaitable<bool> CallStream::wait(asio::steady_timer& event) {
  event.expires_at(deadline_);
  std::error_code ec;
  co_await event.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  if (!ec && deadline_ != Clock::time_point::max() && Clock::now() >= deadline_) {
    deadline_passed();
    co_return false;
  }
  co_return true;
}

void CallStream::deadline_passed() {
  fail_locally(Status(Errc::kDeadlineExceeded, "streaming call timed out"));
}

void CallStream::fail_locally(Status why) {
  if (failed()) return;
  fail(std::move(why));
  if (on_local_failure_) {
    auto hook = std::move(on_local_failure_);
    hook(failure_);
  }
}

bool CallStream::can_send(std::size_t size) const noexcept {
  if (send_window_ == 0) return false;
  const std::int64_t need = static_cast<std::int64_t>(std::min<std::size_t>(size, send_window_ / 2));
  return credit_ >= need;
}

Status CallStream::send_status() const {
  if (failed()) return failure_;
  if (output_end_) return *output_end_;
  if (channel_->closed()) return Status(Errc::kConnectionClosed, "connection closed");
  return Status();
}

Status CallStream::check_size(std::size_t size) const {
  if (size + wire::kFrameHeaderSize > channel_->max_frame_size()) {
    return Status(Errc::kFrameTooLarge, "message of " + std::to_string(size) +
                                            " bytes exceeds the frame limit");
  }
  return Status();
}

asio::awaitable<Status> CallStream::wait_credit(std::size_t size) {
  if (Status s = check_size(size); !s.ok()) co_return s;
  for (;;) {
    if (Status s = send_status(); !s.ok()) co_return s;
    if (can_send(size)) co_return Status();
    if (!co_await wait(write_event_)) co_return failure_;
  }
}

asio::awaitable<Status> CallStream::shm_write_failed(Status s) {
  if (s.code == ShmErrc::kPeerClosed || s.code == ShmErrc::kPeerGone) {
    // The reader closed or dropped the ring because its side cancelled,
    // failed or finished the call (or its process ended); the reason
    // (CANCEL, RESPONSE, the connection's end) follows on the socket: report that.
    asio::steady_timer grace(executor(), std::chrono::seconds(1));
    while (send_status().ok() && Clock::now() < grace.expiry()) {
      write_event_.expires_at(grace.expiry());
      std::error_code ec;
      co_await write_event_.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    }
  }
  if (Status why = send_status(); !why.ok()) co_return why;
  co_return s;
}

asio::awaitable<Status> CallStream::write(std::string_view message) {
  if (shm_ && send_status().ok()) {
    const bool ring = co_await shm_->ready_to_write();
    if (ring) {
      if (Status s = check_size(message.size()); !s.ok()) co_return s;
      Status s = co_await shm_->write(message);
      if (!s.ok()) co_return co_await shm_write_failed(std::move(s));
      co_return s;
    }
  }
  if (Status s = co_await wait_credit(message.size()); !s.ok()) co_return s;
  auto waiter = std::make_shared<WriteWait>(channel_->byte_stream().executor());
  wire::append_data_header(channel_->out(), call_id_, message.size());
  channel_->append_view(message, [waiter](std::error_code ec) {
    waiter->done = true;
    waiter->ec = ec;
    waiter->timer.cancel();
  });
  credit_ -= static_cast<std::int64_t>(message.size());
  channel_->flush_now();
  while (!waiter->done) {
    // Not bounded by the deadline: the bytes must not be released while the
    // connection may still be writing them (a closed connection completes
    // the write with an error).
    waiter->timer.expires_at(Clock::time_point::max());
    std::error_code ec;
    co_await waiter->timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
  if (waiter->ec) {
    if (Status s = send_status(); !s.ok()) co_return s;
    co_return Status(waiter->ec, "write");
  }
  co_return Status();
}

asio::awaitable<Status> CallStream::write(Payload message) {
  if (shm_ && send_status().ok()) {
    const bool ring = co_await shm_->ready_to_write();
    if (ring) {
      if (Status s = check_size(message.size()); !s.ok()) co_return s;
      Status s = co_await shm_->write(std::move(message));
      if (!s.ok()) co_return co_await shm_write_failed(std::move(s));
      co_return s;
    }
  }
  if (Status s = co_await wait_credit(message.size()); !s.ok()) co_return s;
  credit_ -= static_cast<std::int64_t>(message.size());
  wire::append_data_header(channel_->out(), call_id_, message.size());
  channel_->append_payload(std::move(message));
  channel_->flush_now();
  co_return Status();
}

Payload CallStream::allocate(std::size_t size) { return pool_->take(size); }

asio::awaitable<Result<Payload>> CallStream::acquire(std::size_t size) {
  if (shm_ && send_status().ok()) {
    const bool ring = co_await shm_->ready_to_write();
    if (ring) {
      auto payload = co_await shm_->acquire(size);
      if (!payload.ok()) co_return co_await shm_write_failed(payload.status());
      co_return payload;
    }
  }
  if (Status s = send_status(); !s.ok()) co_return s;
  co_return pool_->take(size);
}

void CallStream::set_shm(std::shared_ptr<ShmLink> link) {
  if (shm_ || !link) return;
  shm_ = std::make_shared<ShmStreamPlane>(std::move(link), channel_, call_id_);
  std::weak_ptr<CallStream> weak = weak_from_this();
  shm_->arm_deadline(deadline_, [weak] {
    if (auto self = weak.lock()) self->deadline_passed();
  });
}

Status CallStream::attach_shm_ring(std::shared_ptr<ShmLink> link, ShmRing ring) {
  if (failed() || input_end_) return Status();  // late: the ring is dropped (the writer sees it gone)
  set_shm(std::move(link));
  if (Status s = shm_->attach_reader(std::move(ring)); !s.ok()) return s;
  shm_attached_ = true;
  read_event_.cancel();
  return Status();
}

bool CallStream::shm_writing() const noexcept { return shm_ && shm_->writing(); }
bool CallStream::shm_reading() const noexcept { return shm_attached_; }

bool CallStream::zero_copy_files() const noexcept {
  return channel_->byte_stream().can_send_file();
}

asio::awaitable<Status> CallStream::send_file(int fd, std::uint64_t offset, std::uint64_t length) {
  const std::size_t chunk =
      std::min(kFileChunk, channel_->max_frame_size() - wire::kFrameHeaderSize);
  const bool zero_copy = zero_copy_files();
  struct stat st {};
  if (::fstat(fd, &st) != 0) co_return Status(std::error_code(errno, std::system_category()), "fstat");
  if (offset > static_cast<std::uint64_t>(st.st_size) ||
      length > static_cast<std::uint64_t>(st.st_size) - offset) {
    co_return Status(Errc::kOutOfRange, "file region beyond the end of the file");
  }
  while (length > 0) {
    const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(length, chunk));
    if (zero_copy) {
      if (Status s = co_await wait_credit(n); !s.ok()) co_return s;
      auto waiter = std::make_shared<WriteWait>(channel_->byte_stream().executor());
      wire::append_data_header(channel_->out(), call_id_, n);
      channel_->append_file(fd, offset, n, [waiter](std::error_code ec) {
        waiter->done = true;
        waiter->ec = ec;
        waiter->timer.cancel();
      });
      credit_ -= static_cast<std::int64_t>(n);
      channel_->flush_now();
      while (!waiter->done) {
        waiter->timer.expires_at(Clock::time_point::max());
        std::error_code ec;
        co_await waiter->timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
      }
      if (waiter->ec == asio::error::eof) {
        // The peer has seen a frame header promising bytes that will not
        // come: the connection cannot be used any more.
        channel_->close();
        co_return Status(Errc::kOutOfRange, "file shorter than the region to send");
      }
      if (waiter->ec) {
        if (Status s = send_status(); !s.ok()) co_return s;
        co_return Status(waiter->ec, "sendfile");
      }
    } else {
      // TLS: read the region into pooled buffers (the copy the encryption
      // needs anyway), written as ordinary messages.
      Payload buffer = pool_->take(n);
      std::size_t got = 0;
      while (got < n) {
        const ssize_t r = ::pread(fd, buffer.mutable_data() + got, n - got,
                                  static_cast<off_t>(offset + got));
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) co_return Status(std::error_code(errno, std::system_category()), "pread");
        if (r == 0) co_return Status(Errc::kOutOfRange, "file shorter than the region to send");
        got += static_cast<std::size_t>(r);
      }
      if (Status s = co_await write(std::move(buffer)); !s.ok()) co_return s;
    }
    offset += n;
    length -= n;
  }
  co_return Status();
}

asio::awaitable<Result<std::optional<Payload>>> CallStream::read() {
  for (;;) {
    if (failed()) co_return failure_;
    if (!queue_.empty()) {
      Payload message = std::move(queue_.front());
      queue_.pop_front();
      buffered_ -= message.size();
      if (input_budget_) input_budget_->release(message.size());
      unreturned_ += message.size();
      return_credit();
      co_return std::optional<Payload>(std::move(message));
    }
    if (shm_ && shm_->reading()) {
      auto m = co_await shm_->read(channel_->max_frame_size());
      if (failed()) co_return failure_;
      if (!m.ok()) {
        // The peer cannot see this failure (kCorrupted, kPeerGone...): fail()
        // closes our ring, and its reader, having drained it, waits for the
        // socket's word. Tell it (the client sends CANCEL), as for a
        // deadline (shm_stream_plane_test, ClientRingReadFailureCancelsTheCall).
        fail_locally(m.status());
        co_return m.status();
      }
      if (*m) co_return std::move(*m);
      continue;  // the ring has ended: the socket says how the call ended
    }
    if (input_end_) {
      if (input_end_->ok() && shm_ && shm_->truncated()) {
        fail(Status(ShmErrc::kCorrupted, "the peer ended the call after a message it did not finish"));
        co_return failure_;
      }
      if (input_end_->ok()) co_return std::optional<Payload>();
      co_return *input_end_;
    }
    if (!co_await wait(read_event_)) co_return failure_;
  }
}

void CallStream::return_credit() {
  if (unreturned_ < receive_window_ / 4 || unreturned_ == 0 || input_end_ || channel_->closed()) {
    return;
  }
  wire::append_window_update(channel_->out(), call_id_, static_cast<std::uint32_t>(unreturned_));
  outstanding_ -= unreturned_;
  unreturned_ = 0;
  channel_->schedule_flush();
}

Status CallStream::on_data(Payload message) {
  if (failed() || input_end_) return Status();  // late: dropped
  const std::size_t size = message.size();
  const std::uint64_t limit =
      receive_window_ - std::min<std::uint64_t>(size, receive_window_ / 2);
  if (outstanding_ > limit) {
    return Status(Errc::kProtocolError, "flow control: " + std::to_string(size) +
                                            "-byte DATA beyond the window of call " +
                                            std::to_string(call_id_));
  }
  outstanding_ += size;
  buffered_ += size;
  if (input_budget_) input_budget_->add(size);
  queue_.push_back(std::move(message));
  read_event_.cancel();
  return Status();
}

Status CallStream::on_window_update(std::uint32_t increment) {
  if (send_window_ == 0) {
    send_window_ = increment;  // the first update announces the window
    credit_ = increment;
  } else {
    credit_ += increment;
    if (credit_ > static_cast<std::int64_t>(send_window_)) {
      return Status(Errc::kProtocolError, "flow control: credit above the window of call " +
                                              std::to_string(call_id_));
    }
  }
  write_event_.cancel();
  return Status();
}

void CallStream::end_input(Status status) {
  if (input_end_) return;
  input_end_ = std::move(status);
  // A reader waiting on a ring the peer never closed must learn the end
  // here: the caller (the connection) forgets the call after this.
  if (shm_) shm_->peer_finished();
  read_event_.cancel();
}

void CallStream::end_output(Status status) {
  if (output_end_) return;
  if (shm_) shm_->close_writer(status);  // before the final frame goes out
  output_end_ = std::move(status);
  write_event_.cancel();
}

void CallStream::send_control(wire::FrameType type) {
  if (channel_->closed()) return;
  if (type == wire::FrameType::kEndStream) {
    if (shm_) shm_->close_writer(Status(Errc::kFailedPrecondition, "the stream has ended"));  // before END_STREAM
    wire::append_end_stream(channel_->out(), call_id_);
  } else {
    wire::append_cancel(channel_->out(), call_id_);
  }
  channel_->flush_now();
}

void CallStream::fail(Status why) {
  if (failed()) return;
  failure_ = std::move(why);
  if (shm_) shm_->fail(failure_);
  queue_.clear();
  if (input_budget_) input_budget_->release(buffered_);
  buffered_ = 0;
  read_event_.cancel();
  write_event_.cancel();
}

}  // namespace authrpc
