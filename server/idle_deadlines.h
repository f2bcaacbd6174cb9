// Internal: IdleDeadlines, when the reactor's sweeper acts on a connection:
// the deadline of its negotiation or of its linger, and the time of its
// last activity, from which its idle timeout and the release of its idle
// buffers count. decide() is the sweeper's choice for one tick.
//
// Owned by its ServerConnection and used only on the connection's thread:
// run and linger set the deadline, serve and finish_call touch() it (inline:
// once per read), on_tick asks decide(), park() files the connection under
// idle_deadline().
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>

namespace authrpc {

// Where a connection is in its life, as its sweeper sees it.
enum class ConnectionPhase : std::uint8_t { kNegotiating, kServing, kGoingAway, kLingering };

class IdleDeadlines {
 public:
  using Clock = std::chrono::steady_clock;

  // What a sweeper tick does to the connection.
  enum class Action {
    kNone,
    kReleaseBuffers,      // quiet a while: its buffers go back to the allocator
    kPark,                // as kReleaseBuffers, and its idle read is interrupted
    kNegotiationTimeout,  // the negotiation's deadline passed
    kIdleTimeout,         // quiet for the idle timeout
    kLingerOver,          // the linger's deadline passed: close
  };

  // The negotiation (or the linger) must be over by `deadline`.
  void set_deadline(Clock::time_point deadline) noexcept { deadline_ = deadline; }
  // Input came, or a call ended.
  void touch(Clock::time_point now) noexcept { last_activity_ = now; }
  // When a quiet connection times out (`idle_timeout` 0: never).
  Clock::time_point idle_deadline(std::chrono::milliseconds idle_timeout) const noexcept {
    return idle_timeout.count() > 0 ? last_activity_ + idle_timeout : Clock::time_point::max();
  }

  // The tick at `now` for a connection in `phase` with `in_flight` calls
  // running and, if `streams_open`, streaming calls open. A quiet serving
  // connection with no stream open parks: its coroutines end until the
  // next frame (docs/DESIGN.md, "Idle connections park").
  Action decide(ConnectionPhase phase, Clock::time_point now, std::size_t in_flight,
                bool streams_open, std::chrono::milliseconds idle_timeout) const noexcept;

 private:
  Clock::time_point deadline_;
  Clock::time_point last_activity_;
};

}  // namespace authrpc
