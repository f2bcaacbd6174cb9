// FrameChannel: the framing layer of one connection, shared by the client and
// server halves. It owns the ByteStream, reads whole frames into one growing
// buffer, and coalesces outgoing frames: everything queued during one turn of
// the event loop leaves in a single write.
//
// Threading: every method runs on the byte stream's executor. There is one
// reader (the connection's coroutine) and one write in flight at a time.
#pragma once

#include <asio/awaitable.hpp>
#include <asio/steady_timer.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "authrpc/rpc/payload.h"
#include "authrpc/rpc/transport.h"
#include "authrpc/rpc/wire.h"

namespace authrpc {

struct Frame {
  wire::FrameHeader header;
  std::string_view body;  // valid until the next read on the channel
  // A large DATA frame whose body has not been read yet (see
  // set_direct_data_threshold): `body` is empty and the caller must take the
  // body with read_body() or skip_body() before reading the next frame.
  bool body_pending = false;
};

class FrameChannel final : public std::enable_shared_from_this<FrameChannel>,
                           private WriteCompletion {
 public:
  FrameChannel(std::unique_ptr<ByteStream> byte_stream, std::size_t max_frame_size);
  ~FrameChannel();
  FrameChannel(const FrameChannel&) = delete;  // in_ may point into the object
  FrameChannel& operator=(const FrameChannel&) = delete;

  // For a byte stream that needs_open() (an accepted tls:// connection,
  // rpc/tls_listener.h): runs its open() and reads and writes through the
  // stream it returns from then on. Before anything else; close() ends it.
  // Errors as read_exact()'s.
  asio::awaitable<Status> open_byte_stream();
  // Reads exactly `n` raw bytes (the preamble).
  asio::awaitable<Status> read_exact(std::uint8_t* out, std::size_t n);
  // The next complete frame. kConnectionClosed on a clean end of stream,
  // kProtocolError for a stream ending inside a frame, kFrameTooLarge and
  // kProtocolError for bad headers, the transport's code otherwise.
  asio::awaitable<Result<Frame>> read_frame();
  // The next frame if it is already buffered (or the error its header makes),
  // without a coroutine; nullopt when more input is needed — then call
  // read_frame(). For loops that often find the next frame already read.
  std::optional<Result<Frame>> buffered_frame();
  // True if a complete frame is already buffered (no read would block).
  bool frame_buffered() const noexcept;
  // The serving loop's fast path: takes the next frame into `frame` if it
  // is whole in the buffer with a sound header, without buffered_frame()'s
  // Result. False otherwise — nothing whole yet, a bad header, a large
  // DATA body to be read directly — and then buffered_frame() or
  // read_frame() says which. Taking a frame releases the one before it.
  bool take_buffered(Frame& frame) noexcept;
  // True if any input beyond the frame last returned (and its header-only
  // body) is buffered: false means every byte read so far was returned.
  bool input_buffered() const noexcept { return in_end_ > in_begin_ + consume_next_; }
  // The input read but not returned as a frame: after read_frame() refused
  // a header, the bytes it refused ("HTTP/1.1 400 ..." from a peer that is
  // not an authrpc server). Valid until the next read.
  std::string_view unread_input() const noexcept {
    return {in_ + in_begin_ + consume_next_, in_end_ - in_begin_ - consume_next_};
  }
  // DATA frames with a body above `bytes` that is not buffered yet come back
  // from read_frame()/buffered_frame() with body_pending: the caller reads
  // the body straight into a buffer of its own (read_body), so that large
  // messages are read into pre-sized buffers and never through (or copied
  // out of) the channel's buffer. Default: never.
  void set_direct_data_threshold(std::size_t bytes) noexcept { direct_data_threshold_ = bytes; }
  // Reads the pending body (Frame::body_pending) into `out`, which must hold
  // header.body_size() bytes.
  asio::awaitable<Status> read_body(char* out);
  // Reads and drops the pending body.
  asio::awaitable<Status> skip_body();

  // The buffer to append whole frames to (see rpc/messages.h); call
  // schedule_flush() after appending.
  std::string& out() noexcept { return out_; }
  // Sends what is queued once the current turn of the event loop is over, so
  // that frames queued in the same turn leave in one write.
  void schedule_flush();
  // Starts writing what is queued now (the write is attempted inline). For
  // the end of a batch, when nothing else will be queued this turn.
  void flush_now();
  // Writes what is queued, then closes the stream.
  void close_after_flush();
  // Writes what is queued, then ends the sending side only, so the peer reads
  // every frame before end of stream (closing with unread input would reset
  // the connection and could destroy the last frames). The caller keeps
  // reading — see discard_input() — and closes.
  void shutdown_after_flush();
  // Reads and drops input until end of stream or an error.
  asio::awaitable<void> discard_input();
  // Closes at once; queued bytes are dropped.
  void close() noexcept;
  bool closed() const noexcept { return closed_; }

  // Scatter/gather: these append bytes behind what out() holds now, sent in
  // order with it but never copied into it (one gathered write, or
  // sendfile for a file region). Call schedule_flush()/flush_now() after.
  // `payload` is released once written (or the channel fails).
  void append_payload(Payload payload);
  // `bytes` must stay valid until `done` reports the write's outcome (OK
  // once written to the stream, an error if the channel fails first).
  void append_view(std::string_view bytes, std::function<void(std::error_code)> done);
  // `length` bytes of file `fd` from `offset`, sent with ByteStream::send_file
  // (only if byte_stream().can_send_file()); `done` as for append_view.
  void append_file(int fd, std::uint64_t offset, std::size_t length,
                   std::function<void(std::error_code)> done);

  // Gives the write buffers' capacity back to the allocator when nothing is
  // queued or being written: for an owner's connection that has been quiet
  // a while (ServerConnection::on_tick), which then holds no buffer at all
  // while it waits (the read side waits in the inline buffer, see fill()).
  // The next frame queued allocates again.
  void release_idle_buffers();

  // Parking the reader (ServerConnection, docs/DESIGN.md "Idle connections
  // park"): true with no input buffered and a stream that can
  // wait for input without a read (ByteStream::can_wait_readable()): the
  // owner may then wait with byte_stream().wait_readable() instead of
  // read_frame(). (A write may go on meanwhile.)
  bool parkable() const noexcept;
  // parkable(), the reader waits in read_frame() now, and nothing is queued
  // or being written (interrupting the read cancels the stream's writes).
  bool reader_parkable() const noexcept {
    return idle_read_ && !interrupting_ && !writer_active_ && !has_output() && parkable();
  }
  // If reader_parkable(), ends that wait: read_frame() returns an error at
  // once, with read_interrupted() true, and the owner may wait for input
  // with byte_stream().wait_readable() instead. (Input that had already
  // arrived is returned as usual.) True if it did.
  bool interrupt_reader() noexcept;
  // The last read_frame() failed because interrupt_reader() ended its wait.
  bool read_interrupted() const noexcept { return read_interrupted_; }
  // Input waits in a heap buffer rather than the inline one (a frame larger
  // than that came in the last burst). An interrupted reader gives it back.
  bool holds_heap_read_buffer() const noexcept { return in_heap_ != nullptr; }

  // Bytes queued or being written; waits until that drops to `limit`.
  std::size_t pending_bytes() const noexcept { return out_.size() + segment_bytes_ + in_flight_; }
  asio::awaitable<void> wait_pending_below(std::size_t limit);
  // Called each time the writer has written all that was queued (or
  // stopped on an error): the owner's count of what it holds may drop.
  void set_on_drained(std::function<void()> hook) { on_drained_ = std::move(hook); }

  ByteStream& byte_stream() noexcept { return *byte_stream_; }
  std::size_t max_frame_size() const noexcept { return max_frame_size_; }
  // Changes the limit for frames read from now on (a server raises it once
  // the peer has authenticated); a frame already returned is not rechecked.
  void set_max_frame_size(std::size_t bytes) noexcept { max_frame_size_ = bytes; }
  std::error_code write_error() const noexcept { return write_error_; }
  // Bytes read from the stream, and handed to it for writing, so far: plain
  // counts on the channel's own thread, which its owner folds into shared
  // metrics now and then (no atomic per read or write).
  std::uint64_t bytes_received() const noexcept { return bytes_received_; }
  std::uint64_t bytes_sent() const noexcept { return bytes_sent_; }

 private:
  void start_writer(bool defer);
  void write_next();
  void write_done(std::error_code ec) override;
  void finish_writer();
  asio::awaitable<std::error_code> fill(std::size_t need);
  // Nothing is buffered: back to the inline buffer if the last burst of
  // input fitted it (see in_).
  void start_burst() noexcept;

  // Bytes sent from outside the out buffer (append_payload/view/file).
  struct Segment {
    std::size_t at = 0;  // where in the out buffer it goes
    const char* data = nullptr;
    std::size_t size = 0;
    Payload payload;
    std::function<void(std::error_code)> done;
    int fd = -1;  // ≥ 0: a file region at `offset`
    std::uint64_t offset = 0;
  };
  // A new segment of `size` bytes at the end of what out_ holds now, for
  // the caller to say where they are.
  Segment& push_segment(std::size_t size);
  bool has_output() const noexcept { return !out_.empty() || !segments_.empty(); }
  // Makes the frame at in_begin_ with `header` a pending-body frame if the
  // threshold says so.
  bool defer_body(const wire::FrameHeader& header) noexcept;
  void write_gathered();  // the next piece of a batch with segments
  static void complete_segments(std::vector<Segment>& segments, std::error_code ec);

  std::unique_ptr<ByteStream> byte_stream_;
  std::size_t max_frame_size_;
  // Read buffer: in_inline_, or in_heap_ once a read has filled that (left
  // uninitialized: zeroing cost more than a whole negotiation; grows to the
  // largest frame seen). Back to in_inline_ when fill() finds nothing
  // buffered and what came since it last did (burst_) fitted in_inline_.
  static constexpr std::size_t kInlineReadBuffer = 256;
  char in_inline_[kInlineReadBuffer];
  std::unique_ptr<char[]> in_heap_;
  char* in_ = in_inline_;
  std::size_t in_capacity_ = kInlineReadBuffer;
  std::size_t burst_ = 0;
  std::size_t in_begin_ = 0;     // first unconsumed byte
  std::size_t in_end_ = 0;       // one past the last buffered byte
  std::size_t consume_next_ = 0; // bytes of the last returned frame
  std::string out_;
  std::string writing_;
  asio::const_buffer write_buffer_;
  std::shared_ptr<FrameChannel> keepalive_;  // set while a write is pending
  std::size_t in_flight_ = 0;
  bool writer_active_ = false;
  bool writer_deferred_ = false;  // a writer is scheduled but has not written yet
  bool close_when_flushed_ = false;
  bool shutdown_when_flushed_ = false;
  bool closed_ = false;
  bool idle_read_ = false;          // read_frame() waits with nothing buffered
  bool interrupting_ = false;       // interrupt_reader() cancelled that wait
  bool read_interrupted_ = false;   // and read_frame() returned for it
  std::error_code write_error_;
  std::size_t direct_data_threshold_ = static_cast<std::size_t>(-1);
  std::size_t pending_body_ = 0;  // bytes of a body_pending frame not yet taken
  std::uint64_t bytes_received_ = 0;
  std::uint64_t bytes_sent_ = 0;
  std::vector<Segment> segments_;          // queued along with out_
  std::size_t segment_bytes_ = 0;          // their size
  std::vector<Segment> writing_segments_;  // being written along with writing_
  std::size_t write_pos_ = 0;              // next byte of writing_ to hand to the stream
  std::size_t write_segment_ = 0;          // next segment of writing_segments_
  std::vector<asio::const_buffer> gather_;
  std::optional<asio::steady_timer> drained_;  // signalled when the writer drains; made on first use
  std::function<void()> on_drained_;
};

}  // namespace authrpc
