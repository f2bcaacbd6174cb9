// ResponseBatch: the batch of responses a client connection's reader is
// delivering. A caller it wakes runs inside the delivery, and the request it
// makes next stays in the channel's output until the reader has delivered
// every response it has buffered, so that the requests a batch of responses
// frees leave in one write, as the server's responses do. With metrics the
// responses of a batch are timed to its read, and so are the calls their
// callers make meanwhile: one clock read per batch rather than two per call.
// A value member of Client::Connection: its reader (run) opens and closes
// batches, call() sends through it. All inline: used per call and per
// response.
#pragma once

#include <chrono>

#include "authrpc/rpc/frame_channel.h"

namespace authrpc {

class ResponseBatch {
 public:
  using Clock = std::chrono::steady_clock;

  // The reader's read completed now (timed connections only).
  void read_now() noexcept { read_at_ = Clock::now(); }
  Clock::time_point read_at() const noexcept { return read_at_; }
  // When a call made now starts: the batch's read while one is delivered.
  Clock::time_point call_start() const noexcept { return delivering_ ? read_at_ : Clock::now(); }

  // The reader delivers one RESPONSE between these.
  void begin_delivery() noexcept { delivering_ = true; }
  void end_delivery() noexcept { delivering_ = false; }

  // A request was queued in `channel`: written now, or with the rest of the
  // batch when one is being delivered.
  void send(FrameChannel& channel) {
    if (delivering_) {
      requests_held_ = true;
    } else {
      channel.flush_now();
    }
  }
  // The batch is over: the requests it freed leave in one write.
  void flush(FrameChannel& channel) {
    if (!requests_held_) return;
    requests_held_ = false;
    channel.flush_now();
  }
  // A batch was delivered and nothing more is buffered. A read that finds
  // nothing waits, letting the loop's other work run; a reader that keeps
  // finding input yields every kBatchesPerTurn batches instead (a turn of
  // the loop after every batch cost an epoll_wait of its own). True: yield.
  bool turn_over() noexcept {
    if (++batches_in_turn_ < kBatchesPerTurn) return false;
    batches_in_turn_ = 0;
    return true;
  }

 private:
  static constexpr int kBatchesPerTurn = 8;

  bool delivering_ = false;
  bool requests_held_ = false;
  int batches_in_turn_ = 0;  // batches since the reader last yielded
  Clock::time_point read_at_;
};

}  // namespace authrpc
