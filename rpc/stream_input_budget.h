// StreamInputBudget: the bytes a connection's streaming calls have received
// and their handlers not yet read, summed over its streams. Each stream's
// window bounds what it alone may hold (rpc/call_stream.h); this bounds the
// sum, which many open streams with slow handlers would otherwise multiply:
// the connection stops reading its socket while the sum is over its limit
// (ServerOptions::max_stream_bytes_per_connection) and the peer's sends wait
// in TCP's own flow control.
//
// Owned by the connection and shared with its CallStreams, which add and
// release as messages arrive and are read; everything runs on the
// connection's executor (not thread-safe). An observer (the server's
// memory total, server/memory_share.h) learns of changes of at least
// kReportStep bytes, so that the data plane does not touch a shared counter
// per message.
#pragma once

#include <asio/any_io_executor.hpp>
#include <asio/awaitable.hpp>
#include <asio/steady_timer.hpp>
#include <cstddef>
#include <functional>

namespace authrpc {

class StreamInputBudget {
 public:
  static constexpr std::size_t kReportStep = 1 << 20;

  explicit StreamInputBudget(const asio::any_io_executor& executor) : event_(executor) {}

  std::size_t held() const noexcept { return held_; }
  void add(std::size_t bytes) {
    held_ += bytes;
    if (held_ >= reported_ + kReportStep) report();
  }
  // Wakes wait_at_most() once held() is down to its limit.
  void release(std::size_t bytes);
  // Returns once held() <= limit, or at close().
  asio::awaitable<void> wait_at_most(std::size_t limit);
  // The connection has ended: a wait returns, for good.
  void close();

  // Called with the held bytes when they have moved by kReportStep or more
  // since the last call, and when they return to zero.
  void set_observer(std::function<void(std::size_t held)> observer) {
    observer_ = std::move(observer);
  }

 private:
  void report();

  std::size_t held_ = 0;
  std::size_t reported_ = 0;
  std::size_t wake_at_ = 0;
  bool waiting_ = false;
  bool closed_ = false;
  asio::steady_timer event_;
  std::function<void(std::size_t)> observer_;
};

}  // namespace authrpc
