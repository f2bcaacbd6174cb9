// DeadlineQueue: cheap deadlines for everything that runs on one io_context
// (an Asio service, one per context). All deadlines share one steady_timer
// armed for the earliest; adding a deadline and removing one are a few
// pointer updates, where a timer per deadline costs an arm, a cancel and a
// cancelled-handler run, on the critical path of every session
// (docs/PERFORMANCE.md, "Measured costs behind the code").
//
// The entries wait in a few lanes, each a list in deadline order. Deadlines
// of one timeout arrive in order (the same timeout, started later), so an
// entry joins, at the back, the lane whose last deadline is the latest at
// or before its own: as many lanes as timeouts in use (connects, calls,
// keepalives), and no walk past the entries of another timeout. (One sorted
// list would walk 100,000 keepalives for every new connection's shorter
// negotiation deadline: docs/DESIGN.md, "Idle connections park".) Deadlines
// that arrive out of order (no lane fits) are sorted into the shortest lane
// by a walk.
//
// Who uses it: the client connection (connect and negotiation deadlines, call
// deadlines), the socket transport's connect and the TLS client's handshake
// (SocketDeadline, below).
//
// The timer's wait does not count as work of an io_context when it was armed
// from one of the context's handlers (as connections do): with no entry left,
// run() returns as it would without the queue. (The wait is left armed
// because cancelling it would cost what the queue saves.)
//
// Threading: like the connections that use it, a queue belongs to an
// io_context run by one thread (each ClientRuntime loop, each server
// reactor); entries are added, cancelled and fired on that thread.
#pragma once

#include <asio/any_io_executor.hpp>
#include <asio/execution_context.hpp>
#include <asio/io_context.hpp>
#include <asio/steady_timer.hpp>
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <system_error>

namespace authrpc {

class DeadlineQueue final : public asio::execution_context::service {
 public:
  using Clock = std::chrono::steady_clock;

  // One deadline. The owner implements expired(), which runs on the queue's
  // thread once the deadline has passed unless cancel() came first. An entry
  // is in at most one queue; destroying it cancels it.
  class Entry {
   public:
    Entry() = default;
    Entry(const Entry&) = delete;
    Entry& operator=(const Entry&) = delete;
    // Removes the entry if it is queued; a no-op otherwise.
    void cancel() noexcept;
    bool queued() const noexcept { return queue_ != nullptr; }

   protected:
    virtual ~Entry() { cancel(); }
    virtual void expired() = 0;
    // The context is shutting down with this entry still queued (it has been
    // removed and will never expire). An entry that parks something only the
    // context could otherwise free (a waiting caller's handler) lets go of it
    // here. Default: nothing.
    virtual void abandoned() noexcept {}

   private:
    friend class DeadlineQueue;
    DeadlineQueue* queue_ = nullptr;
    Entry* prev_ = nullptr;
    Entry* next_ = nullptr;
    Clock::time_point deadline_;
    std::uint8_t lane_ = 0;  // its index in queue_->lanes_
  };

  static inline asio::execution_context::id id;

  explicit DeadlineQueue(asio::execution_context& context);
  ~DeadlineQueue() override;

  // The queue of the context behind `ex` (created on first use). Looking it
  // up takes the context's service-registry lock: look it up once per
  // connection, not per call.
  static DeadlineQueue& of(const asio::any_io_executor& ex);

  // Queues `entry` (cancelling any earlier registration) to expire at
  // `deadline`. `ex` must belong to this queue's context.
  void add(Entry& entry, Clock::time_point deadline, const asio::any_io_executor& ex);

 private:
  // Entries in deadline order, earliest first.
  struct Lane {
    Entry* head = nullptr;
    Entry* tail = nullptr;
    std::size_t size = 0;
  };
  static constexpr std::size_t kLanes = 8;

  void shutdown() override;
  // Where `deadline` goes: the lane it can join at the back, or, with every
  // lane in use and each ending later, the shortest (sorted in from its back).
  Lane& lane_for(Clock::time_point deadline) noexcept;
  void unlink(Entry& entry) noexcept;
  Entry* earliest() const noexcept;
  void arm(Clock::time_point when);
  void on_timer();

  asio::io_context* io_ = nullptr;  // null for other kinds of context: their waits count as work
  std::array<Lane, kLanes> lanes_;
  std::size_t lanes_used_ = 0;  // lanes_[0, lanes_used_) have held entries (empty ones are reused)
  std::optional<asio::steady_timer> timer_;
  Clock::time_point armed_for_ = Clock::time_point::max();
  bool shut_down_ = false;
};

// Closes a socket (any Asio socket) if its deadline passes first, so that a
// pending connect, wait or TLS handshake on it completes with an error. A
// DeadlineQueue entry rather than a timer of its own: most connects (Unix
// sockets, loopback TCP) and handshakes finish long before, and a timer
// armed and cancelled for each would cost more than their own work. Used by
// the socket transport's connect and the TLS client's handshake.
template <typename Socket>
class SocketDeadline final : public DeadlineQueue::Entry {
 public:
  explicit SocketDeadline(Socket& socket) : socket_(socket) {}
  ~SocketDeadline() override { cancel(); }

  void start(const asio::any_io_executor& ex, std::chrono::steady_clock::time_point deadline) {
    if (deadline == std::chrono::steady_clock::time_point::max()) return;
    DeadlineQueue::of(ex).add(*this, deadline, ex);
  }
  bool timed_out() const noexcept { return timed_out_; }

 private:
  void expired() override {
    timed_out_ = true;
    std::error_code ignored;
    socket_.close(ignored);  // the pending wait or connect completes with an error
  }

  Socket& socket_;
  bool timed_out_ = false;
};

}  // namespace authrpc
