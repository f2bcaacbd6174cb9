#include "authrpc/base/cycle_clock.h"

#include <cstdio>
#include <cstring>
#include <mutex>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace authrpc {
namespace {

#if defined(__x86_64__)
// The kernel keeps time with the TSC only once it has found it invariant
// and synchronised across CPUs; without that, ticks from two CPUs do not
// compare.
bool kernel_trusts_tsc() noexcept {
  std::FILE* f = std::fopen("/sys/devices/system/clocksource/clocksource0/current_clocksource", "re");
  if (f == nullptr) return false;
  char name[32] = {};
  const bool read = std::fgets(name, sizeof name, f) != nullptr;
  std::fclose(f);
  name[std::strcspn(name, "\n")] = '\0';
  return read && std::strcmp(name, "tsc") == 0;
}

// CPUID 0x80000007 EDX bit 8: the TSC runs at a constant rate in every
// power state.
bool invariant_tsc() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  // (gcc declares the maximum unsigned, clang int.)
  if (static_cast<unsigned>(__get_cpuid_max(0x80000000u, nullptr)) < 0x80000007u) return false;
  __cpuid(0x80000007u, eax, ebx, ecx, edx);
  return (edx & (1u << 8)) != 0;
}

struct Sample {
  std::uint64_t tsc;
  std::uint64_t ns;
};

// A TSC reading and a steady_clock one taken together: of five tries, the
// one whose two TSC reads around the clock read are closest (the least
// likely to have been interrupted), at their midpoint.
// `steady_ns` reads steady_clock in nanoseconds (CycleClock's own).
Sample sample(std::uint64_t (*steady_ns)() noexcept) noexcept {
  Sample best{0, 0};
  std::uint64_t best_gap = UINT64_MAX;
  for (int i = 0; i < 5; ++i) {
    const std::uint64_t before = __rdtsc();
    const std::uint64_t ns = steady_ns();
    const std::uint64_t after = __rdtsc();
    if (after - before < best_gap) {
      best_gap = after - before;
      best = {before + (after - before) / 2, ns};
    }
  }
  return best;
}

constexpr std::uint64_t kCalibrationNs = 200'000;
#endif

std::once_flag g_decided;

}  // namespace

bool CycleClock::uses_tsc() noexcept {
  (void)now();
  return mode_.load(std::memory_order_acquire) == Mode::kTsc;
}

CycleClock::Ticks CycleClock::decide_and_read() noexcept {
  std::call_once(g_decided, [] {
#if defined(__x86_64__)
    if (invariant_tsc() && kernel_trusts_tsc()) {
      // The rate over ~200 µs: each end is good to a few tens of ns, so the
      // rate to ~1e-4, enough for histograms of durations.
      const Sample a = sample(steady_ns);
      while (steady_ns() - a.ns < kCalibrationNs) {
      }
      const Sample b = sample(steady_ns);
      if (b.tsc > a.tsc && b.ns > a.ns) {
        const Wide q32 = (static_cast<Wide>(b.ns - a.ns) << 32) / (b.tsc - a.tsc);
        if (q32 > 0 && q32 < (static_cast<Wide>(1) << 63)) {
          ns_per_tick_q32_.store(static_cast<std::uint64_t>(q32), std::memory_order_relaxed);
          mode_.store(Mode::kTsc, std::memory_order_release);
          return;
        }
      }
    }
#endif
    mode_.store(Mode::kSteady, std::memory_order_release);
  });
  return now();
}

}  // namespace authrpc
