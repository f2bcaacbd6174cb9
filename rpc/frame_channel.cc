#include "rpc/frame_channel.h"

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/error.hpp>
#include <asio/post.hpp>
#include <asio/redirect_error.hpp>
#include <asio/use_awaitable.hpp>
#include <cstring>

namespace authrpc {
namespace {

constexpr std::size_t kInitialReadBuffer = 16 * 1024;

}  // namespace

FrameChannel::FrameChannel(std::unique_ptr<Stream> stream, std::size_t max_frame_size)
    : stream_(std::move(stream)),
      max_frame_size_(max_frame_size),
      in_(kInitialReadBuffer),
      drained_(stream_->executor()) {}

FrameChannel::~FrameChannel() { close(); }

asio::awaitable<std::error_code> FrameChannel::fill(std::size_t need) {
  while (in_end_ - in_begin_ < need) {
    if (in_.size() - in_begin_ < need) {
      // Compact, then grow if the frame is larger than the buffer.
      std::memmove(in_.data(), in_.data() + in_begin_, in_end_ - in_begin_);
      in_end_ -= in_begin_;
      in_begin_ = 0;
      if (in_.size() < need) in_.resize(std::max(need, in_.size() * 2));
    }
    std::error_code ec;
    const auto n = co_await stream_->read_some(
        asio::buffer(in_.data() + in_end_, in_.size() - in_end_), ec);
    if (ec) co_return ec;
    in_end_ += n;
  }
  co_return std::error_code();
}

asio::awaitable<Status> FrameChannel::read_exact(std::uint8_t* out, std::size_t n) {
  in_begin_ += consume_next_;
  consume_next_ = 0;
  if (auto ec = co_await fill(n)) {
    if (ec == asio::error::eof) co_return Status(Errc::kConnectionClosed, "peer closed");
    co_return Status(ec, "read");
  }
  std::memcpy(out, in_.data() + in_begin_, n);
  in_begin_ += n;
  co_return Status();
}

bool FrameChannel::frame_buffered() const noexcept {
  const std::size_t begin = in_begin_ + consume_next_;
  const std::size_t have = in_end_ - begin;
  if (have < wire::kFrameHeaderSize) return false;
  auto header = wire::parse_frame_header(
      reinterpret_cast<const std::uint8_t*>(in_.data() + begin), max_frame_size_);
  return !header.ok() || have >= wire::kLengthFieldSize + header->length;
}

asio::awaitable<Result<Frame>> FrameChannel::read_frame() {
  in_begin_ += consume_next_;
  consume_next_ = 0;
  if (in_begin_ == in_end_) in_begin_ = in_end_ = 0;

  auto closed_status = [this](std::error_code ec) {
    if (ec != asio::error::eof) return Status(ec, "read");
    if (in_end_ == in_begin_) return Status(Errc::kConnectionClosed, "peer closed the connection");
    return Status(Errc::kProtocolError, "connection closed inside a frame (truncated frame)");
  };

  if (auto ec = co_await fill(wire::kFrameHeaderSize)) co_return closed_status(ec);
  auto header = wire::parse_frame_header(
      reinterpret_cast<const std::uint8_t*>(in_.data() + in_begin_), max_frame_size_);
  if (!header.ok()) co_return header.status();
  const std::size_t total = wire::kLengthFieldSize + header->length;
  if (auto ec = co_await fill(total)) co_return closed_status(ec);
  consume_next_ = total;
  co_return Frame{*header, std::string_view(in_.data() + in_begin_ + wire::kFrameHeaderSize,
                                            total - wire::kFrameHeaderSize)};
}

void FrameChannel::schedule_flush() {
  if (writer_active_ || closed_ || out_.empty()) return;
  writer_active_ = true;
  asio::co_spawn(stream_->executor(),
                 [self = shared_from_this()]() { return self->write_loop(); }, asio::detached);
}

asio::awaitable<void> FrameChannel::write_loop() {
  // Let the current turn of the event loop queue more frames first.
  co_await asio::post(stream_->executor(), asio::use_awaitable);
  while (!out_.empty() && !closed_) {
    writing_.swap(out_);
    out_.clear();
    in_flight_ = writing_.size();
    std::error_code ec;
    const asio::const_buffer buffer(writing_.data(), writing_.size());
    co_await stream_->write_all(std::span(&buffer, 1), ec);
    in_flight_ = 0;
    writing_.clear();
    if (ec) {
      write_error_ = ec;
      close();
      break;
    }
  }
  writer_active_ = false;
  if (close_when_flushed_) {
    close();
  } else if (shutdown_when_flushed_ && !closed_) {
    stream_->shutdown_send();
  }
  drained_.cancel();
}

void FrameChannel::close_after_flush() {
  close_when_flushed_ = true;
  if (writer_active_) return;
  if (out_.empty()) {
    close();
  } else {
    schedule_flush();
  }
}

void FrameChannel::shutdown_after_flush() {
  shutdown_when_flushed_ = true;
  if (writer_active_ || closed_) return;
  if (out_.empty()) {
    stream_->shutdown_send();
  } else {
    schedule_flush();
  }
}

asio::awaitable<void> FrameChannel::discard_input() {
  in_begin_ = in_end_ = consume_next_ = 0;
  for (;;) {
    std::error_code ec;
    co_await stream_->read_some(asio::buffer(in_.data(), in_.size()), ec);
    if (ec) co_return;
  }
}

void FrameChannel::close() noexcept {
  if (closed_) return;
  closed_ = true;
  out_.clear();
  stream_->close();
  drained_.cancel();
}

asio::awaitable<void> FrameChannel::wait_pending_below(std::size_t limit) {
  while (pending_bytes() > limit && !closed_) {
    drained_.expires_at(asio::steady_timer::time_point::max());
    std::error_code ec;
    co_await drained_.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
}

}  // namespace authrpc
