// A clock for short intervals read very often: the server's per-call
// processing time (one read per inline call), minibench's per-call latency.
// Where the kernel keeps its own time with the CPU's time-stamp counter
// (x86-64, invariant TSC, clocksource "tsc"), a read is one `rdtsc` and an
// interval is converted to nanoseconds at a rate measured once against
// steady_clock; elsewhere the ticks are steady_clock's nanoseconds. Ticks
// read on different threads compare (the kernel checked that the CPUs'
// counters agree); an interval that comes out negative reads as zero. Not
// for deadlines or wall time. Why, what it costs, and its limits:
// docs/OPERATIONS.md, "Clocks".
//
// The first read decides which clock it is, once per process, and measures
// the rate (~200 µs); a server that counts makes that read when it starts.
// Thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

namespace authrpc {

class CycleClock {
 public:
  using Ticks = std::uint64_t;

  // The time now, in ticks.
  static Ticks now() noexcept {
    // Acquire: a thread that reads TSC ticks also sees their rate (a plain
    // load on x86-64).
    const Mode mode = mode_.load(std::memory_order_acquire);
#if defined(__x86_64__)
    if (mode == Mode::kTsc) [[likely]] return __rdtsc();
#endif
    if (mode == Mode::kSteady) return steady_ns();
    return decide_and_read();
  }

  // The time from `from` to `to` (both from now()); zero if `to` is earlier.
  static std::chrono::nanoseconds elapsed(Ticks from, Ticks to) noexcept {
    if (to <= from) return std::chrono::nanoseconds(0);
    const std::uint64_t ticks = to - from;
#if defined(__x86_64__)
    const std::uint64_t mult = ns_per_tick_q32_.load(std::memory_order_relaxed);
    if (mult != 0) {
      const Wide ns = static_cast<Wide>(ticks) * mult >> 32;
      return std::chrono::nanoseconds(
          static_cast<std::int64_t>(ns > Wide{INT64_MAX} ? Wide{INT64_MAX} : ns));
    }
#endif
    return std::chrono::nanoseconds(
        static_cast<std::int64_t>(ticks > std::uint64_t{INT64_MAX} ? INT64_MAX : ticks));
  }

  // True if ticks are the TSC's (decided by the first now()).
  static bool uses_tsc() noexcept;

 private:
  enum class Mode : std::uint8_t { kUnknown, kTsc, kSteady };
#if defined(__x86_64__)
  // A tick count times the rate (one `mul` on x86-64).
  __extension__ typedef unsigned __int128 Wide;
#endif

  static Ticks steady_ns() noexcept {
    return static_cast<Ticks>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                  std::chrono::steady_clock::now().time_since_epoch())
                                  .count());
  }
  // The first read: decides the mode (and measures the rate), then reads.
  static Ticks decide_and_read() noexcept;

  static inline std::atomic<Mode> mode_{Mode::kUnknown};
  // Nanoseconds per tick × 2^32; 0 while ticks are nanoseconds.
  static inline std::atomic<std::uint64_t> ns_per_tick_q32_{0};
};

}  // namespace authrpc
