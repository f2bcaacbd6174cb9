// FrameChannel: the framing layer of one connection, shared by the client and
// server halves. It owns the Stream, reads whole frames into one growing
// buffer, and coalesces outgoing frames: everything queued during one turn of
// the event loop leaves in a single write.
//
// Threading: every method runs on the stream's executor. There is one reader
// (the connection's coroutine) and one write in flight at a time.
#pragma once

#include <asio/awaitable.hpp>
#include <asio/steady_timer.hpp>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "rpc/transport.h"
#include "rpc/wire.h"

namespace authrpc {

struct Frame {
  wire::FrameHeader header;
  std::string_view body;  // valid until the next read on the channel
};

class FrameChannel final : public std::enable_shared_from_this<FrameChannel>,
                           private WriteCompletion {
 public:
  FrameChannel(std::unique_ptr<Stream> stream, std::size_t max_frame_size);
  ~FrameChannel();

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
  // Says input is probably waiting already (a server's fresh connection): the
  // next read tries the stream without waiting before it suspends.
  void expect_input() noexcept { try_read_first_ = true; }
  // True if a complete frame is already buffered (no read would block).
  bool frame_buffered() const noexcept;

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

  // Bytes queued or being written; waits until that drops to `limit`.
  std::size_t pending_bytes() const noexcept { return out_.size() + in_flight_; }
  asio::awaitable<void> wait_pending_below(std::size_t limit);

  Stream& stream() noexcept { return *stream_; }
  std::size_t max_frame_size() const noexcept { return max_frame_size_; }
  std::error_code write_error() const noexcept { return write_error_; }

 private:
  void start_writer(bool defer);
  void write_next();
  void write_done(std::error_code ec) override;
  void finish_writer();
  asio::awaitable<std::error_code> fill(std::size_t need);

  std::unique_ptr<Stream> stream_;
  std::size_t max_frame_size_;
  // Read buffer, left uninitialized (zeroing it cost more than a whole
  // negotiation); grows to the largest frame seen.
  std::unique_ptr<char[]> in_;
  std::size_t in_capacity_ = 0;
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
  bool try_read_first_ = false;
  std::error_code write_error_;
  std::optional<asio::steady_timer> drained_;  // signalled when the writer drains; made on first use
};

}  // namespace authrpc
