// CycleClock (base/cycle_clock.h): intervals that agree with
// steady_clock, across threads too, and reads that never go negative or
// overflow.
#include "authrpc/base/cycle_clock.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <thread>

namespace authrpc {
namespace {

using namespace std::chrono_literals;
using Steady = std::chrono::steady_clock;

// A CycleClock interval and a steady_clock one taken around it.
struct Bracket {
  std::chrono::nanoseconds cycle, outer, inner;
};

Bracket measure(std::chrono::milliseconds pause) {
  const auto outer_from = Steady::now();
  const CycleClock::Ticks from = CycleClock::now();
  const auto inner_from = Steady::now();
  std::this_thread::sleep_for(pause);
  const auto inner_to = Steady::now();
  const CycleClock::Ticks to = CycleClock::now();
  const auto outer_to = Steady::now();
  return {CycleClock::elapsed(from, to), outer_to - outer_from, inner_to - inner_from};
}

TEST(CycleClockTest, IntervalsAgreeWithSteadyClock) {
  // The rate is measured here, not in the interval.
  RecordProperty("ticks", CycleClock::uses_tsc() ? "tsc" : "steady_clock");
  for (const auto pause : {1ms, 20ms, 100ms}) {
    const Bracket b = measure(pause);
    // Within the steady_clock reads around it and inside it, give or take
    // the rate's error (~1e-4; 0.1 % allowed).
    EXPECT_GE(b.cycle.count(), b.inner.count() - b.inner.count() / 1000) << pause.count() << " ms";
    EXPECT_LE(b.cycle.count(), b.outer.count() + b.outer.count() / 1000) << pause.count() << " ms";
  }
}

TEST(CycleClockTest, TicksFromAnotherThreadCompare) {
  CycleClock::Ticks there = 0;
  const auto steady_there = Steady::now();
  std::thread([&] { there = CycleClock::now(); }).join();
  std::this_thread::sleep_for(2ms);
  const CycleClock::Ticks here = CycleClock::now();
  const auto steady_here = Steady::now();
  EXPECT_GE(CycleClock::elapsed(there, here), 2ms);
  EXPECT_LE(CycleClock::elapsed(there, here), (steady_here - steady_there) * 1001 / 1000);
}

TEST(CycleClockTest, AnEarlierEndIsZero) {
  const CycleClock::Ticks a = CycleClock::now();
  std::this_thread::sleep_for(1ms);
  const CycleClock::Ticks b = CycleClock::now();
  EXPECT_GT(CycleClock::elapsed(a, b).count(), 0);
  EXPECT_EQ(CycleClock::elapsed(b, a).count(), 0);
  EXPECT_EQ(CycleClock::elapsed(a, a).count(), 0);
}

TEST(CycleClockTest, TheLongestIntervalDoesNotOverflow) {
  for (int calibrated = 0; calibrated < 2; ++calibrated) {
    // Before the first read, where this test runs alone (ticks taken for
    // nanoseconds: clamped), then at the clock's rate.
    if (calibrated) (void)CycleClock::now();
    const auto longest = CycleClock::elapsed(0, UINT64_MAX);
    EXPECT_GT(longest.count(), 0);
    EXPECT_GT(CycleClock::elapsed(0, UINT64_MAX / 4).count(), 0);
    EXPECT_LE(CycleClock::elapsed(0, UINT64_MAX / 4), longest);
  }
}

}  // namespace
}  // namespace authrpc
