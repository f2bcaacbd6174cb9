// Internal: the state a Server shares with its connections. Not installed.
#pragma once

#include <array>

#include <asio/executor_work_guard.hpp>
#include <asio/io_context.hpp>
#include <asio/steady_timer.hpp>
#include <asio/thread_pool.hpp>
#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <future>
#include <optional>
#include <thread>

#include "authrpc/rpc/unique_fd.h"
#include "authrpc/server/preauth_budget.h"
#include "authrpc/server/server.h"
#include "authrpc/server/server_metrics.h"

namespace authrpc {

class ServerConnection;

// The connections a reactor serves, linked through the connections
// themselves (each is a ConnectionList::Hook): joining and leaving allocate
// nothing and hash nothing, once per session. The list does not own them —
// each connection's coroutine does. Touched only on the reactor's thread;
// a connection leaves only from its coroutine's completion, never while the
// list is being walked.
class ConnectionList {
 public:
  struct Hook {
    Hook* prev = nullptr;
    Hook* next = nullptr;
  };
  void insert(Hook& h) noexcept {
    h.prev = nullptr;
    h.next = head_;
    if (head_ != nullptr) head_->prev = &h;
    head_ = &h;
  }
  void erase(Hook& h) noexcept {
    (h.prev != nullptr ? h.prev->next : head_) = h.next;
    if (h.next != nullptr) h.next->prev = h.prev;
    h.prev = h.next = nullptr;
  }
  // f(ServerConnection&) for each (C: so that ServerConnection need only be
  // complete where this is called).
  template <typename C = ServerConnection, typename F>
  void for_each(F f) const {
    for (Hook* h = head_; h != nullptr; h = h->next) f(static_cast<C&>(*h));
  }

 private:
  Hook* head_ = nullptr;
};

// One IO thread: its event loop, its share of every listener, and the
// connections it serves. `connections` is touched only on `thread`.
// Timeouts are enforced by one sweeper timer per reactor that visits every
// connection each tick (as Kudu's reactors do), so that a session arms no
// timer of its own.
struct Reactor {
  // One thread runs `io`, and sockets are only touched from it, so the
  // per-socket locks of the reactor are off (posting from other threads stays
  // safe: the scheduler keeps its lock).
  asio::io_context io{ASIO_CONCURRENCY_HINT_UNSAFE_IO};
  asio::steady_timer sweeper{io};
  bool stopping = false;  // set on `thread` by Server::stop()
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work;
  std::vector<std::unique_ptr<Listener>> listeners;
  ConnectionList connections;
  // Closed when accept() runs out of descriptors, so that the connection
  // waiting can still be accepted and told SERVER_BUSY; then reopened. Two:
  // one for that connection, one spare while it is refused (server.cc).
  std::array<UniqueFd, 2> reserve_fds;
  std::thread thread;
  std::promise<void> exited;  // set when `thread` leaves io.run()
};

class Server::Impl {
 public:
  explicit Impl(ServerOptions options);

  const Service::Method* find_method(std::string_view service, std::string_view method,
                                     std::string_view* service_name,
                                     std::string_view* method_name) const;
  void log(LogLevel level, const std::string& message) const {
    if (options.log) options.log(level, message);
  }

  ServerOptions options;
  PreauthBudget budget;
  std::map<std::string, Service, std::less<>> services;
  std::vector<std::unique_ptr<Reactor>> reactors;
  std::unique_ptr<asio::thread_pool> blocking_pool;
  // Made by start() when options.metrics is set; the connections count in it.
  std::unique_ptr<ServerMetrics> metrics;
  MetricsRegistry::CallbackId unauthenticated_gauge = 0;
  std::vector<Endpoint> bound;

  std::atomic<std::uint64_t> connections_accepted{0};
  std::atomic<std::uint64_t> connections_active{0};
  std::atomic<std::uint64_t> connections_parked{0};  // ServerConnection::park()
  std::atomic<std::uint64_t> connections_refused_busy{0};
  std::atomic<std::uint64_t> connections_shed{0};
  std::atomic<std::uint64_t> connections_shed_per_address{0};
  std::atomic<std::uint64_t> accept_out_of_descriptors{0};
  std::atomic<std::uint64_t> negotiation_failures{0};
  std::atomic<std::uint64_t> protocol_errors{0};
  std::atomic<std::uint64_t> calls_ok{0};
  std::atomic<std::uint64_t> calls_failed{0};

  std::mutex mu;
  std::condition_variable cv;
  enum class State { kNew, kRunning, kStopping, kStopped } state = State::kNew;
};

}  // namespace authrpc
