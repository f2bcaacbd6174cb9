// A clock for short intervals read very often: the server's per-call
// processing time (one read per inline call), minibench's per-call latency.
// Where the kernel keeps its own time with the CPU's time-stamp counter
// (x86-64, invariant TSC, clocksource "tsc"), a read is one `rdtsc` — ~11 ns
// on the development VM, where `clock_gettime` through the vDSO takes ~25 —
// and an interval is converted to nanoseconds at a rate measured once against
// steady_clock. Elsewhere the ticks are steady_clock's nanoseconds. The
// kernel uses the TSC as its clocksource only after checking that it is
// synchronised across CPUs, so ticks read on different threads compare;
// an interval that comes out negative reads as zero. Not for deadlines or
// wall time: steady_clock is the clock those are on (docs/OPERATIONS.md,
// "Clocks").
//
// The first read decides which clock it is and measures the rate (~200 µs,
// once per process); a server that counts makes that read when it starts.
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
  // For a tick count times the rate (GCC and clang; one `mul` on x86-64).
  __extension__ typedef unsigned __int128 Wide;

  // The time now, in ticks.
  static Ticks now() noexcept {
#if defined(__x86_64__)
    // Acquire: a thread that reads TSC ticks also sees their rate (a plain
    // load on x86-64).
    if (mode_.load(std::memory_order_acquire) == Mode::kTsc) [[likely]] return __rdtsc();
#endif
    return now_slow();
  }

  // The time from `from` to `to` (both from now()); zero if `to` is earlier.
  static std::chrono::nanoseconds elapsed(Ticks from, Ticks to) noexcept {
    if (to <= from) return std::chrono::nanoseconds(0);
    const std::uint64_t mult = ns_per_tick_q32_.load(std::memory_order_relaxed);
    const Wide ns = mult == 0 ? Wide{to - from} : static_cast<Wide>(to - from) * mult >> 32;
    constexpr auto kMax = static_cast<Wide>(INT64_MAX);
    return std::chrono::nanoseconds(static_cast<std::int64_t>(ns > kMax ? kMax : ns));
  }

  // True if ticks are the TSC's (decided by the first now()).
  static bool uses_tsc() noexcept;

 private:
  enum class Mode : std::uint8_t { kUnknown, kTsc, kSteady };

  static Ticks now_slow() noexcept;

  static inline std::atomic<Mode> mode_{Mode::kUnknown};
  // Nanoseconds per tick × 2^32; 0 while ticks are nanoseconds.
  static inline std::atomic<std::uint64_t> ns_per_tick_q32_{0};
};

}  // namespace authrpc
