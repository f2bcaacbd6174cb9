#include "authrpc/rpc/frame_channel.h"

#include <asio/error.hpp>
#include <asio/post.hpp>
#include <asio/redirect_error.hpp>
#include <asio/use_awaitable.hpp>
#include <algorithm>
#include <cstring>
#include <utility>

namespace authrpc {
namespace {

// Reads start in the channel's inline buffer; once a read fills it, in a
// heap buffer small enough for the allocator's per-thread cache (a
// negotiation's frames are a few hundred bytes), and once a read fills that,
// in a larger one, so that streams of frames take few reads.
constexpr std::size_t kInitialReadBuffer = 1000;
constexpr std::size_t kSteadyReadBuffer = 16 * 1024;
constexpr std::size_t kInitialWriteBuffer = 512;

}  // namespace

FrameChannel::FrameChannel(std::unique_ptr<ByteStream> byte_stream, std::size_t max_frame_size)
    : byte_stream_(std::move(byte_stream)), max_frame_size_(max_frame_size) {
  out_.reserve(kInitialWriteBuffer);
}

FrameChannel::~FrameChannel() { close(); }

void FrameChannel::start_burst() noexcept {
  // If what came since the buffer was last empty fitted the inline buffer,
  // wait in it: a connection that waits for its next frame (an idle one most
  // of all) holds no heap buffer, and small frames (a call, a PING) never
  // take one (docs/DESIGN.md, "Accept").
  in_begin_ = in_end_ = 0;
  if (in_heap_ && burst_ <= kInlineReadBuffer) {
    in_heap_.reset();
    in_ = in_inline_;
    in_capacity_ = kInlineReadBuffer;
  }
  burst_ = 0;
}

asio::awaitable<std::error_code> FrameChannel::fill(std::size_t need) {
  if (in_begin_ == in_end_) start_burst();
  while (in_end_ - in_begin_ < need) {
    if (in_capacity_ - in_begin_ < need || (in_end_ == in_capacity_ && in_capacity_ < kSteadyReadBuffer)) {
      // Compact, into a larger buffer if the frame does not fit or a smaller
      // buffer has filled up.
      const std::size_t live = in_end_ - in_begin_;
      if (in_capacity_ < need || in_capacity_ < kSteadyReadBuffer) {
        const std::size_t capacity = in_heap_
                                         ? std::max({need, in_capacity_ * 2, kSteadyReadBuffer})
                                         : std::max(need, kInitialReadBuffer);
        auto bigger = std::make_unique_for_overwrite<char[]>(capacity);
        std::memcpy(bigger.get(), in_ + in_begin_, live);
        in_heap_ = std::move(bigger);
        in_ = in_heap_.get();
        in_capacity_ = capacity;
      } else {
        std::memmove(in_, in_ + in_begin_, live);
      }
      in_begin_ = 0;
      in_end_ = live;
    }
    const auto space = asio::buffer(in_ + in_end_, in_capacity_ - in_end_);
    std::error_code ec;
    // read_some() tries the stream before it waits.
    const std::size_t n = co_await byte_stream_->read_some(space, ec);
    if (ec) co_return ec;
    in_end_ += n;
    burst_ += n;
    bytes_received_ += n;
  }
  co_return std::error_code();
}

asio::awaitable<Status> FrameChannel::open_byte_stream() {
  std::error_code ec;
  auto opened = co_await byte_stream_->open(ec);
  if (ec == asio::error::eof) co_return Status(Errc::kConnectionClosed, "peer closed");
  if (ec) co_return Status(ec, "read");
  if (opened) byte_stream_ = std::move(opened);
  co_return Status();
}

asio::awaitable<Status> FrameChannel::read_exact(std::uint8_t* out, std::size_t n) {
  in_begin_ += consume_next_;
  consume_next_ = 0;
  if (auto ec = co_await fill(n)) {
    if (ec == asio::error::eof) co_return Status(Errc::kConnectionClosed, "peer closed");
    co_return Status(ec, "read");
  }
  std::memcpy(out, in_ + in_begin_, n);
  in_begin_ += n;
  co_return Status();
}

bool FrameChannel::frame_buffered() const noexcept {
  const std::size_t begin = in_begin_ + consume_next_;
  const std::size_t have = in_end_ - begin;
  if (have < wire::kFrameHeaderSize) return false;
  wire::FrameHeader header;
  if (!wire::decode_frame_header(reinterpret_cast<const std::uint8_t*>(in_ + begin),
                                 max_frame_size_, header)) {
    return true;  // buffered_frame() reports it
  }
  return have >= wire::kLengthFieldSize + header.length;
}

bool FrameChannel::take_buffered(Frame& frame) noexcept {
  in_begin_ += consume_next_;
  consume_next_ = 0;
  if (in_begin_ == in_end_) in_begin_ = in_end_ = 0;
  if (in_end_ - in_begin_ < wire::kFrameHeaderSize) return false;
  wire::FrameHeader header;
  if (!wire::decode_frame_header(reinterpret_cast<const std::uint8_t*>(in_ + in_begin_),
                                 max_frame_size_, header)) {
    return false;  // buffered_frame() reports it
  }
  const std::size_t total = wire::kLengthFieldSize + header.length;
  if (in_end_ - in_begin_ < total) return false;  // or a body to read directly
  consume_next_ = total;
  frame.header = header;
  frame.body = std::string_view(in_ + in_begin_ + wire::kFrameHeaderSize,
                                total - wire::kFrameHeaderSize);
  frame.body_pending = false;
  return true;
}

std::optional<Result<Frame>> FrameChannel::buffered_frame() {
  if (Frame frame; take_buffered(frame)) return Result<Frame>(frame);
  // Nothing whole (the frame before is released), or a header to refuse,
  // or a large DATA body to be read directly.
  if (in_end_ - in_begin_ < wire::kFrameHeaderSize) return std::nullopt;
  const auto* bytes = reinterpret_cast<const std::uint8_t*>(in_ + in_begin_);
  wire::FrameHeader header;
  if (!wire::decode_frame_header(bytes, max_frame_size_, header)) {
    return Result<Frame>(wire::parse_frame_header(bytes, max_frame_size_).status());
  }
  if (defer_body(header)) return Result<Frame>(Frame{header, {}, true});
  return std::nullopt;
}

asio::awaitable<Result<Frame>> FrameChannel::read_frame() {
  read_interrupted_ = false;
  if (auto frame = buffered_frame()) co_return std::move(*frame);

  auto closed_status = [this](std::error_code ec) {
    if (ec != asio::error::eof) return Status(ec, "read");
    if (in_end_ == in_begin_) return Status(Errc::kConnectionClosed, "peer closed the connection");
    return Status(Errc::kProtocolError, "connection closed inside a frame (truncated frame)");
  };

  // Output queued this turn leaves before we wait for input: the peer is
  // probably waiting for it, and a read now would only find nothing.
  if (writer_deferred_ && in_end_ - in_begin_ < wire::kFrameHeaderSize) {
    co_await asio::post(byte_stream_->executor(), asio::use_awaitable);
  }
  if (in_begin_ == in_end_) {
    // Nothing buffered, the usual wait (and an idle connection's): read
    // here rather than in fill(), whose coroutine frame every connection
    // would hold while it waits.
    start_burst();
    std::error_code ec;
    idle_read_ = true;
    const std::size_t n = co_await byte_stream_->read_some(asio::buffer(in_, in_capacity_), ec);
    idle_read_ = false;
    if (std::exchange(interrupting_, false) && ec == asio::error::operation_aborted && !closed_) {
      read_interrupted_ = true;
      // Parked, the connection waits without a buffer: a heap one (the last
      // input was larger than the inline buffer, a negotiation's) goes back
      // now rather than after the next small input, which for an idle
      // connection is its first keepalive.
      burst_ = 0;
      start_burst();
      co_return Status(ec, "read interrupted to park the connection");
    }
    if (ec) co_return closed_status(ec);
    in_end_ = n;
    burst_ = n;
    bytes_received_ += n;
  }
  if (in_end_ - in_begin_ < wire::kFrameHeaderSize) {
    if (auto ec = co_await fill(wire::kFrameHeaderSize)) co_return closed_status(ec);
  }
  auto header = wire::parse_frame_header(
      reinterpret_cast<const std::uint8_t*>(in_ + in_begin_), max_frame_size_);
  if (!header.ok()) co_return header.status();
  const std::size_t total = wire::kLengthFieldSize + header->length;
  if (in_end_ - in_begin_ < total) {
    if (defer_body(*header)) co_return Frame{*header, {}, true};
    if (auto ec = co_await fill(total)) co_return closed_status(ec);
  }
  consume_next_ = total;
  co_return Frame{*header, std::string_view(in_ + in_begin_ + wire::kFrameHeaderSize,
                                            total - wire::kFrameHeaderSize)};
}

bool FrameChannel::defer_body(const wire::FrameHeader& header) noexcept {
  if (header.type != wire::FrameType::kData || header.body_size() <= direct_data_threshold_) {
    return false;
  }
  consume_next_ = wire::kFrameHeaderSize;
  pending_body_ = header.body_size();
  return true;
}

asio::awaitable<Status> FrameChannel::read_body(char* out) {
  in_begin_ += consume_next_;
  consume_next_ = 0;
  const std::size_t need = pending_body_;
  pending_body_ = 0;
  const std::size_t have = std::min(in_end_ - in_begin_, need);
  std::memcpy(out, in_ + in_begin_, have);
  in_begin_ += have;
  if (in_begin_ == in_end_) in_begin_ = in_end_ = 0;
  std::size_t done = have;
  while (done < need) {
    // Straight from the stream into the caller's buffer; without a trip
    // through the event loop while input is waiting.
    const auto space = asio::buffer(out + done, need - done);
    std::error_code ec;
    std::size_t n = byte_stream_->try_read_some(space, ec);
    if (ec == asio::error::would_block) {
      ec.clear();
      n = co_await byte_stream_->read_some(space, ec);
    }
    if (ec == asio::error::eof) {
      // Within a large message a vanished peer is the likely cause, not a
      // malformed stream: report it as the connection loss it is.
      co_return Status(Errc::kConnectionClosed, "connection closed inside a message");
    }
    if (ec) co_return Status(ec, "read");
    done += n;
    bytes_received_ += n;
  }
  co_return Status();
}

asio::awaitable<Status> FrameChannel::skip_body() {
  const std::size_t size = pending_body_;
  auto scratch = std::make_unique_for_overwrite<char[]>(size == 0 ? 1 : size);
  co_return co_await read_body(scratch.get());
}

void FrameChannel::append_payload(Payload payload) {
  Segment& s = push_segment(payload.size());
  s.data = payload.data();
  s.payload = std::move(payload);
}

void FrameChannel::append_view(std::string_view bytes, std::function<void(std::error_code)> done) {
  Segment& s = push_segment(bytes.size());
  s.data = bytes.data();
  s.done = std::move(done);
}

void FrameChannel::append_file(int fd, std::uint64_t offset, std::size_t length,
                               std::function<void(std::error_code)> done) {
  Segment& s = push_segment(length);
  s.fd = fd;
  s.offset = offset;
  s.done = std::move(done);
}

FrameChannel::Segment& FrameChannel::push_segment(std::size_t size) {
  Segment& s = segments_.emplace_back();
  s.at = out_.size();
  s.size = size;
  segment_bytes_ += size;
  return s;
}

void FrameChannel::complete_segments(std::vector<Segment>& segments, std::error_code ec) {
  // Moved out first: a callback may queue more output.
  std::vector<Segment> finished;
  finished.swap(segments);
  for (auto& s : finished) {
    s.payload.reset();
    if (s.done) s.done(ec);
  }
}

void FrameChannel::schedule_flush() {
  if (writer_active_ || closed_ || !has_output()) return;
  start_writer(true);
}

void FrameChannel::flush_now() {
  if (closed_ || !has_output()) return;
  if (!writer_active_) {
    start_writer(false);
  } else if (writer_deferred_) {
    // A deferred writer has not run yet: write now; the deferred one will
    // find nothing left to do.
    writer_deferred_ = false;
    write_next();
  }
}

void FrameChannel::start_writer(bool defer) {
  writer_active_ = true;
  if (!defer) {
    write_next();
    return;
  }
  // Let the current turn of the event loop queue more frames first.
  writer_deferred_ = true;
  asio::post(byte_stream_->executor(), [self = shared_from_this()] {
    if (!self->writer_deferred_) return;  // flush_now() started it already
    self->writer_deferred_ = false;
    self->write_next();
  });
}

void FrameChannel::write_next() {
  if (closed_ || write_error_ || !has_output()) {
    out_.clear();
    segment_bytes_ = 0;
    complete_segments(segments_, write_error_ ? write_error_ : asio::error::operation_aborted);
    finish_writer();
    return;
  }
  bytes_sent_ += out_.size() + segment_bytes_;
  std::size_t written = 0;
  if (segments_.empty()) {
    // Try the stream first: a batch it takes whole is done here, with no
    // completion to post (a session's every write, on plaintext sockets).
    std::error_code ec;
    written = byte_stream_->try_write(asio::buffer(out_), ec);
    if (!ec && written == out_.size()) {
      out_.clear();
      finish_writer();
      return;
    }
    if (ec) written = 0;  // would_block, or an error write_all() will report
  }
  writing_.swap(out_);
  out_.clear();
  in_flight_ = writing_.size() - written;
  keepalive_ = shared_from_this();
  if (segments_.empty()) {
    write_buffer_ = asio::buffer(writing_) + written;
    byte_stream_->write_all(std::span(&write_buffer_, 1), *this);
    return;
  }
  writing_segments_.swap(segments_);
  in_flight_ += segment_bytes_;
  segment_bytes_ = 0;
  write_pos_ = 0;
  write_segment_ = 0;
  write_gathered();
}

void FrameChannel::write_gathered() {
  // Memory pieces go out in one gathered write; a file region on its own.
  gather_.clear();
  for (;;) {
    const std::size_t next_at = write_segment_ < writing_segments_.size()
                                    ? writing_segments_[write_segment_].at
                                    : writing_.size();
    if (write_pos_ < next_at) {
      gather_.push_back(asio::buffer(writing_.data() + write_pos_, next_at - write_pos_));
      write_pos_ = next_at;
    }
    if (write_segment_ == writing_segments_.size()) break;
    const Segment& s = writing_segments_[write_segment_];
    if (s.fd >= 0) {
      if (!gather_.empty()) break;
      ++write_segment_;
      byte_stream_->send_file(s.fd, s.offset, s.size, *this);
      return;
    }
    gather_.push_back(asio::buffer(s.data, s.size));
    ++write_segment_;
  }
  byte_stream_->write_all(gather_, *this);
}

void FrameChannel::write_done(std::error_code ec) {
  if (!writing_segments_.empty()) {
    if (!ec && (write_pos_ < writing_.size() || write_segment_ < writing_segments_.size())) {
      write_gathered();
      return;
    }
    complete_segments(writing_segments_, ec);
  }
  const auto self = std::move(keepalive_);
  in_flight_ = 0;
  writing_.clear();
  if (ec) {
    // Stop writing, but leave the stream open: the peer may have sent an
    // ERROR saying why it went away, and the reader should get to see it.
    write_error_ = ec;
    out_.clear();
    segment_bytes_ = 0;
    complete_segments(segments_, ec);
    finish_writer();
    return;
  }
  write_next();
}

void FrameChannel::finish_writer() {
  writer_active_ = false;
  if (close_when_flushed_) {
    close();
  } else if (shutdown_when_flushed_ && !closed_) {
    byte_stream_->shutdown_send();
  }
  if (drained_) drained_->cancel();
  if (on_drained_) on_drained_();
}

void FrameChannel::close_after_flush() {
  close_when_flushed_ = true;
  if (writer_active_) return;
  if (!has_output()) {
    close();
  } else {
    schedule_flush();
  }
}

void FrameChannel::shutdown_after_flush() {
  shutdown_when_flushed_ = true;
  if (closed_) return;
  if (writer_active_) {
    flush_now();  // a deferred writer: start it now
  } else if (!has_output()) {
    byte_stream_->shutdown_send();
  } else {
    flush_now();
  }
}

asio::awaitable<void> FrameChannel::discard_input() {
  in_begin_ = in_end_ = consume_next_ = pending_body_ = 0;
  for (;;) {
    std::error_code ec;
    co_await byte_stream_->read_some(asio::buffer(in_, in_capacity_), ec);
    if (ec) co_return;
  }
}

void FrameChannel::close() noexcept {
  if (closed_) return;
  closed_ = true;
  out_.clear();
  segment_bytes_ = 0;
  complete_segments(segments_, asio::error::operation_aborted);
  byte_stream_->close();
  if (drained_) drained_->cancel();
}

void FrameChannel::release_idle_buffers() {
  if (closed_ || writer_active_ || has_output()) return;
  // An empty std::string holds no allocation (small-string storage).
  if (out_.capacity() > std::string().capacity()) std::string().swap(out_);
  if (writing_.capacity() > std::string().capacity()) std::string().swap(writing_);
}

bool FrameChannel::parkable() const noexcept {
  return !input_buffered() && pending_body_ == 0 && !closed_ && byte_stream_->can_wait_readable();
}

bool FrameChannel::interrupt_reader() noexcept {
  if (!reader_parkable()) return false;
  interrupting_ = true;
  byte_stream_->cancel_read();  // no write is in progress (reader_parkable)
  return true;
}

asio::awaitable<void> FrameChannel::wait_pending_below(std::size_t limit) {
  while (pending_bytes() > limit && !closed_) {
    if (!drained_) drained_.emplace(byte_stream_->executor());
    drained_->expires_at(asio::steady_timer::time_point::max());
    std::error_code ec;
    co_await drained_->async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
}

}  // namespace authrpc
