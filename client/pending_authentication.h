// PendingAuthentication: a client connection's wait for negotiation to end.
// It owns the connect deadline (a DeadlineQueue entry that closes the
// channel if negotiation outlasts it), the timer that callers waiting for
// AUTH_SUCCESS wait on (Client::Connection::wait_authenticated), and the
// spent auth session, dropped after the first response: ending a GSSAPI
// context is costly, better spent once the first response is delivered. A
// value member of Client::Connection: open() starts the deadline, run() ends
// it and wakes the waiters, fail() does both.
#pragma once

#include <asio/any_io_executor.hpp>
#include <asio/steady_timer.hpp>
#include <chrono>
#include <memory>
#include <optional>

#include "authrpc/auth/mechanism.h"
#include "authrpc/rpc/deadline_queue.h"

namespace authrpc {

class FrameChannel;

class PendingAuthentication final : public DeadlineQueue::Entry {
 public:
  using Clock = std::chrono::steady_clock;

  PendingAuthentication() = default;
  ~PendingAuthentication() override { cancel(); }

  // `channel` closes at `deadline` unless negotiation is over() first.
  void start(FrameChannel& channel, DeadlineQueue& deadlines, Clock::time_point deadline,
             const asio::any_io_executor& ex);
  // Negotiation ended, either way: the deadline is off.
  void over() noexcept { cancel(); }
  // The deadline closed the channel.
  bool timed_out() const noexcept { return timed_out_; }

  // Where negotiate_client hands the successful session.
  std::unique_ptr<ClientAuthSession>* spent() noexcept { return &spent_; }
  // A response has been delivered (once per batch of them).
  void drop_spent() noexcept { spent_.reset(); }

  // The timer a caller waits on until wake() (made on first use).
  asio::steady_timer& event(const asio::any_io_executor& ex);
  // Every waiter resumes and looks at the connection's state again.
  void wake();

 private:
  void expired() override;

  FrameChannel* channel_ = nullptr;
  bool timed_out_ = false;
  std::optional<asio::steady_timer> event_;
  std::unique_ptr<ClientAuthSession> spent_;
};

}  // namespace authrpc
