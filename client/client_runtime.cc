#include "authrpc/client/client_runtime.h"

#include <asio/executor_work_guard.hpp>
#include <future>
#include <memory>
#include <asio/post.hpp>
#include <asio/steady_timer.hpp>

namespace authrpc {

namespace {

// Keeps one timer of the loop armed at all times, a second ahead. A timer
// that expires later than the earliest armed one is queued without a syscall,
// so the connect, negotiation and call timers of a session — all seconds
// away — cost no timerfd_settime; only this tick does, once a second.
constexpr auto kAnchorInterval = std::chrono::seconds(1);

// How long a stopping loop may sit idle, its queue drained, before the
// operations still waiting on it are abandoned.
constexpr auto kIdleGrace = std::chrono::seconds(1);

void rearm_anchor(asio::steady_timer& anchor) {
  anchor.expires_after(kAnchorInterval);
  anchor.async_wait([&anchor](std::error_code ec) {
    if (!ec) rearm_anchor(anchor);
  });
}

}  // namespace

struct ClientRuntime::Loop {
  // One thread runs `io` and sockets are only touched from it: no per-socket
  // locks (posting from other threads stays safe).
  asio::io_context io{ASIO_CONCURRENCY_HINT_UNSAFE_IO};
  asio::executor_work_guard<asio::io_context::executor_type> work{io.get_executor()};
  asio::steady_timer anchor{io};
  std::promise<void> exited;
  std::thread thread{[this] {
    rearm_anchor(anchor);
    io.run();
    exited.set_value();
  }};
};

ClientRuntime::ClientRuntime(std::size_t threads) {
  if (threads == 0) threads = 1;
  for (std::size_t i = 0; i < threads; ++i) loops_.push_back(std::make_unique<Loop>());
}

ClientRuntime::~ClientRuntime() {
  // Let the loops finish what is queued (e.g. calls failing with kCancelled
  // after their Client closed), however long that takes on a loaded machine;
  // stop a loop that is idle but still has operations waiting (a Client that
  // outlives its runtime).
  for (auto& loop : loops_) {
    loop->work.reset();
    asio::post(loop->io, [l = loop.get()] { l->anchor.cancel(); });
  }
  for (auto& loop : loops_) {
    std::future<void> exited = loop->exited.get_future();
    while (exited.wait_for(kIdleGrace) != std::future_status::ready) {
      // Not gone yet: a marker posted now runs once every handler queued
      // before it has. If it runs within the grace, the loop is idle and
      // only waiting operations keep it: stop it. If not, the loop is still
      // working through its queue: wait again.
      auto marker = std::make_shared<std::promise<void>>();
      std::future<void> ran = marker->get_future();
      asio::post(loop->io, [marker] { marker->set_value(); });
      if (ran.wait_for(kIdleGrace) == std::future_status::ready &&
          exited.wait_for(kIdleGrace) != std::future_status::ready) {
        loop->io.stop();
        break;
      }
    }
    loop->thread.join();
  }
}

asio::io_context& ClientRuntime::next_context() {
  return loops_[next_++ % loops_.size()]->io;
}

}  // namespace authrpc
