// Internal: the state a Server shares with its connections. Not installed.
#pragma once

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <memory>

#include <asio/executor_work_guard.hpp>
#include <asio/io_context.hpp>
#include <asio/steady_timer.hpp>
#include <asio/thread_pool.hpp>
#include <atomic>
#include <condition_variable>
#include <map>
#include <unordered_map>
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

// Connections linked through the connections themselves (each is a
// ConnectionList::Hook): joining and leaving allocate nothing and hash
// nothing. Circular, with the list's own node as the sentinel, so that a
// connection leaves (or moves to another list) without knowing which list
// holds it. Does not own them — each connection's coroutine or parked wait
// does. Touched only on the reactor's thread.
class ConnectionList {
 public:
  struct Hook {
    Hook* prev = nullptr;
    Hook* next = nullptr;
    // Quick ticks it has been visited in ReactorConnections' fresh list.
    std::uint8_t fresh_visits = 0;
  };
  ConnectionList() noexcept { head_.prev = head_.next = &head_; }
  ConnectionList(const ConnectionList&) = delete;  // the sentinel points at itself
  ConnectionList& operator=(const ConnectionList&) = delete;

  void insert(Hook& h) noexcept {
    h.prev = &head_;
    h.next = head_.next;
    head_.next->prev = &h;
    head_.next = &h;
  }
  // Unlinks `h` from whichever list holds it, if any.
  static void erase(Hook& h) noexcept {
    if (h.next == nullptr) return;
    h.prev->next = h.next;
    h.next->prev = h.prev;
    h.prev = h.next = nullptr;
  }
  bool empty() const noexcept { return head_.next == &head_; }
  // The first one, unlinked; null if none.
  Hook* pop_front() noexcept {
    if (empty()) return nullptr;
    Hook* h = head_.next;
    erase(*h);
    return h;
  }
  // Moves every connection of `other` here (this list must be empty).
  void take_all(ConnectionList& other) noexcept {
    if (other.empty()) return;
    head_.next = other.head_.next;
    head_.prev = other.head_.prev;
    head_.next->prev = head_.prev->next = &head_;
    other.head_.prev = other.head_.next = &other.head_;
  }
  // f(C&) for each (C: so that ServerConnection need only be complete where
  // this is called). `f` may move the connection it is given to another
  // list, never touch the others' links.
  template <typename C = ServerConnection, typename F>
  void for_each(F f) {
    for (Hook* h = head_.next; h != &head_;) {
      Hook* next = h->next;
      f(static_cast<C&>(*h));
      h = next;
    }
  }

 private:
  Hook head_;
};

// A connection with no call in flight and no frame for this long gives its
// buffers back (FrameChannel::release_idle_buffers) and parks at the
// sweeper's next visit: short enough that a connection held open for later
// holds none most of the time, long enough that a busy one never pays for it.
inline constexpr std::chrono::milliseconds kReleaseBuffersAfter{100};

// Every connection a reactor serves. Awake ones are visited by the sweeper
// every tick (negotiation and linger deadlines, idle buffers, parking);
// those just accepted or woken (fresh) also at the quick ticks in between,
// every kReleaseBuffersAfter, for their first kFreshVisits of them, so that
// one that goes quiet at once parks within two of those intervals however
// long the sweeper's tick is (a quarter of the shortest timeout, up to
// 500 ms; a connection is made fresh again once it has authenticated):
// after a burst of new connections, each would otherwise hold its coroutine
// frames and buffers until then, and their memory, freed between the
// connections that stay, would remain resident (docs/DESIGN.md, "Idle
// connections park"). A busy connection is visited by the quick ticks only then.
// Parked ones (ServerConnection::park) have nothing to do until their idle
// deadline: they wait in a timing wheel, in the bucket of that deadline, and
// a tick visits only the buckets that have come due. So a tick costs the
// awake connections and the due ones, not every connection (a walk of all
// takes ~2.5 ms at 10,000 idle connections: docs/PERFORMANCE.md, "Measured
// costs behind the code"). A connection leaves only from its own handlers, never during a
// walk.
class ReactorConnections {
 public:
  using Clock = std::chrono::steady_clock;
  using Hook = ConnectionList::Hook;

  // Accepted or woken, wherever it was: visited every tick, and at the
  // quick ticks while fresh.
  void insert(Hook& h) noexcept {
    ConnectionList::erase(h);
    h.fresh_visits = 0;
    fresh_.insert(h);
  }
  void erase(Hook& h) noexcept { ConnectionList::erase(h); }
  // Parked: visited from the tick at which `deadline` (its idle timeout;
  // time_point::max(): none) has passed — from the start of its bucket, so
  // up to a bucket's width early. `span`: how far ahead of `now` a deadline
  // can lie (the idle timeout), which sizes the wheel when first used.
  void park(Hook& h, Clock::time_point deadline, Clock::duration span, Clock::time_point now) {
    ConnectionList::erase(h);
    if (deadline == Clock::time_point::max()) {
      undated_.insert(h);
      return;
    }
    if (!buckets_) {
      // Half the wheel spans the idle timeout; the other half is room for
      // the cursor's lag (up to a tick, at most a quarter of it): a deadline
      // never lands in a bucket the next sweeps would visit early.
      width_ = std::max<Clock::duration>(span / (kBuckets / 2), std::chrono::milliseconds(1));
      buckets_ = std::make_unique<ConnectionList[]>(kBuckets);
      cursor_ = slot_of(now);
    }
    // One already due goes where the next tick looks first.
    buckets_[std::max(slot_of(deadline), cursor_) % kBuckets].insert(h);
  }
  // Every connection (Server::stop).
  template <typename C = ServerConnection, typename F>
  void for_each(F f) {
    fresh_.for_each<C>(f);
    awake_.for_each<C>(f);
    undated_.for_each<C>(f);
    if (buckets_) {
      for (std::size_t i = 0; i < kBuckets; ++i) buckets_[i].for_each<C>(f);
    }
  }
  // The awake connections, then the fresh ones (after the awake ones, so
  // that those joining the awake list in this tick are not visited twice),
  // then the parked ones whose bucket has come due by `now` (the sweeper).
  // Those of now's own bucket that are not due yet stay, and are visited
  // again next tick.
  template <typename C = ServerConnection, typename F>
  void sweep(Clock::time_point now, F f) {
    awake_.for_each<C>(f);
    sweep_fresh<C>(f);
    if (!buckets_) return;
    const std::uint64_t last = slot_of(now);
    for (std::uint64_t slot = cursor_, n = 0; slot <= last && n < kBuckets; ++slot, ++n) {
      buckets_[slot % kBuckets].for_each<C>(f);
    }
    cursor_ = last;
  }
  // The fresh connections (a quick tick): each joins the awake ones after
  // its kFreshVisits-th, then at least 2 x kReleaseBuffersAfter after it was
  // inserted (the first comes up to one interval after that).
  template <typename C = ServerConnection, typename F>
  void sweep_fresh(F f) {
    // Those not visited yet go back to the fresh list if `f` throws, rather
    // than stay linked to a list that is gone.
    struct Visiting {
      ConnectionList list;
      ConnectionList& back;
      ~Visiting() {
        while (Hook* h = list.pop_front()) back.insert(*h);
      }
    } visiting{{}, fresh_};
    visiting.list.take_all(fresh_);
    // Each is placed before its visit, so that `f` may still move it.
    while (Hook* h = visiting.list.pop_front()) {
      if (++h->fresh_visits >= kFreshVisits) {
        awake_.insert(*h);
      } else {
        fresh_.insert(*h);
      }
      f(static_cast<C&>(*h));
    }
  }
  static constexpr std::uint8_t kFreshVisits = 3;

 private:
  static constexpr std::size_t kBuckets = 64;
  std::uint64_t slot_of(Clock::time_point t) const noexcept {
    return static_cast<std::uint64_t>(t.time_since_epoch() / width_);
  }

  ConnectionList fresh_;  // accepted or woken, fewer than kFreshVisits quick ticks ago
  ConnectionList awake_;
  ConnectionList undated_;  // parked with no idle timeout: only stop() visits them
  std::unique_ptr<ConnectionList[]> buckets_;
  Clock::duration width_{};
  std::uint64_t cursor_ = 0;  // the slot of the last sweep
};

// One IO thread: its event loop, its share of every listener, and the
// connections it serves. `connections` is touched only on `thread`.
// Timeouts are enforced by one sweeper timer per reactor that visits the
// connections each tick (as Kudu's reactors do; parked ones only when due,
// see ReactorConnections), so that a session arms no timer of its own.
struct Reactor {
  // Declared before `io`, so that it outlives the handlers `io` destroys:
  // a connection whose handlers were abandoned at stop leaves it then.
  ReactorConnections connections;
  // One thread runs `io`, and sockets are only touched from it, so the
  // per-socket locks of the reactor are off (posting from other threads stays
  // safe: the scheduler keeps its lock).
  asio::io_context io{ASIO_CONCURRENCY_HINT_UNSAFE_IO};
  asio::steady_timer sweeper{io};
  bool stopping = false;  // set on `thread` by Server::stop()
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work;
  std::vector<std::unique_ptr<Listener>> listeners;
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

  // The method service.method names, with the table's views of its names
  // and of the bytes a REQUEST naming it starts with (request_names; empty
  // before start()).
  const Service::Method* find_method(std::string_view service, std::string_view method,
                                     std::string_view* service_name,
                                     std::string_view* method_name,
                                     std::string_view* names_wire = nullptr) const;
  void log(LogLevel level, const std::string& message) const {
    if (options.log) options.log(level, message);
  }

  ServerOptions options;
  PreauthBudget budget;
  std::map<std::string, Service, std::less<>> services;
  // Each method's wire::encode_request_names(), made in start() once the
  // services are fixed (ServerConnection's REQUEST fast path).
  std::unordered_map<const Service::Method*, std::string> request_names;
  // Each service's describe_service() as JSON text, made in start() too
  // (sys.describe answers from them).
  std::map<std::string, std::string, std::less<>> descriptions;
  std::vector<std::unique_ptr<Reactor>> reactors;
  std::unique_ptr<asio::thread_pool> blocking_pool;
  // Made by start() when options.metrics is set; the connections count in it.
  std::unique_ptr<ServerMetrics> metrics;
  MetricsRegistry::CallbackId unauthenticated_gauge = 0;
  std::vector<Endpoint> bound;

  // What the connections hold for their peers (ServerOptions::max_buffered_bytes):
  // each adds the change of its own share (MemoryShare::account).
  std::atomic<std::int64_t> buffered_bytes{0};
  std::atomic<std::uint64_t> reads_paused_for_memory{0};
  std::atomic<std::uint64_t> connections_accepted{0};
  std::atomic<std::uint64_t> connections_active{0};
  std::atomic<std::uint64_t> connections_parked{0};  // ServerConnection::park()
  std::atomic<std::uint64_t> connections_refused_busy{0};
  std::atomic<std::uint64_t> connections_refused_per_address{0};
  std::atomic<std::uint64_t> connections_refused_per_user{0};
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
