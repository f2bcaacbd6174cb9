// Per-thread metric cells (base/metric_cells.h): rows leased and
// given back as threads come and go, counts kept across that, the shared row
// for threads without a row, zeroed offsets for new metrics, Spans that
// find no room, and fork().
#include "authrpc/base/metric_cells.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <latch>
#include <memory>
#include <thread>
#include <vector>

#include "authrpc/base/metrics.h"

namespace authrpc {
namespace {

using metric_cells::kMaxRows;
using metric_cells::kRowWords;
using metric_cells::row_stats;

// Threads one after another: each leases a row, counts, and gives the row
// back at exit; the next one goes on in the same row. Nothing is lost and
// the rows made do not grow with the threads.
TEST(MetricCellsTest, ThreadsThatExitLeaveTheirCountsAndTheirRows) {
  Counter c;
  c.inc();  // this thread's row
  const auto before = row_stats();
  constexpr int kThreads = 50, kEach = 1000;
  for (int t = 0; t < kThreads; ++t) {
    std::thread([&] {
      for (int i = 0; i < kEach; ++i) c.inc();
    }).join();
  }
  EXPECT_EQ(c.value(), 1u + kThreads * kEach);
  const auto after = row_stats();
  EXPECT_EQ(after.leased, before.leased);
  EXPECT_LE(after.made, before.made + 1);
}

// Many threads at once, with reads meanwhile: every update counted, and a
// reader never sees the sum go down.
TEST(MetricCellsTest, ConcurrentThreadsCountEveryUpdate) {
  Counter c;
  Histogram h;
  constexpr int kThreads = 8, kEach = 200'000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kEach; ++i) {
        c.inc();
        h.observe(std::chrono::microseconds(i % 100));
      }
    });
  }
  std::uint64_t last = 0;
  for (int i = 0; i < 1000; ++i) {
    const std::uint64_t v = c.value();
    ASSERT_GE(v, last);
    last = v;
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(c.value(), std::uint64_t{kThreads} * kEach);
  EXPECT_EQ(h.data().count, std::uint64_t{kThreads} * kEach);
}

// More threads holding rows at once than there are rows: the rest add to
// the shared row, atomically, and nothing is lost.
TEST(MetricCellsTest, ThreadsBeyondTheRowsShareOneRowAndLoseNothing) {
  Counter c;
  constexpr int kThreads = static_cast<int>(kMaxRows) + 16, kEach = 2000;
  std::latch all_counting(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      c.inc();  // leases a row, or finds none
      all_counting.arrive_and_wait();  // every thread holds what it got
      for (int i = 1; i < kEach; ++i) c.inc();
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(c.value(), std::uint64_t{kThreads} * kEach);
  EXPECT_LE(row_stats().made, kMaxRows);
}

// A thread's update from a destructor that runs after its row went back
// (thread_local objects die in reverse order of construction) is counted,
// in the shared row.
TEST(MetricCellsTest, AnUpdateAfterTheThreadsLeaseEndedIsCounted) {
  Counter c;
  struct IncOnExit {
    Counter* c = nullptr;
    ~IncOnExit() {
      if (c) c->inc(7);
    }
  };
  std::thread([&] {
    thread_local IncOnExit on_exit;  // constructed before the row's lease
    on_exit.c = &c;
    c.inc();
  }).join();
  EXPECT_EQ(c.value(), 8u);
}

// A metric made where one died starts at zero, in every row.
TEST(MetricCellsTest, AMetricAtAFreedOffsetStartsAtZero) {
  auto first = std::make_unique<Counter>();
  first->inc(5);
  std::thread([&] { first->inc(6); }).join();
  ASSERT_EQ(first->value(), 11u);
  first.reset();
  Counter second;  // the same size: the same offset
  EXPECT_EQ(second.value(), 0u);
  second.inc();
  EXPECT_EQ(second.value(), 1u);
}

// Spans that do not fit in the rows keep cells of their own and count the
// same; once the big ones are gone, the rows have room again.
TEST(MetricCellsTest, MetricsBeyondTheRowsCountInCellsOfTheirOwn) {
  // Histograms of (bounds + 2) cells, enough to fill every row twice.
  std::vector<double> bounds;
  for (int i = 1; i <= 4094; ++i) bounds.push_back(i * 1e-6);
  std::vector<std::unique_ptr<Histogram>> big;
  for (std::uint32_t used = 0; used < 2 * kRowWords; used += 4096) {
    big.push_back(std::make_unique<Histogram>(bounds));
  }
  Histogram& last = *big.back();
  std::thread([&] { last.observe(std::chrono::microseconds(3)); }).join();
  last.observe(std::chrono::seconds(1));
  const auto d = last.data();
  EXPECT_EQ(d.count, 2u);
  EXPECT_EQ(d.cumulative[2], 1u);  // 3 µs: the bucket of bound 3 µs
  EXPECT_DOUBLE_EQ(d.sum_seconds, 1.000003);
  metric_cells::Span beyond(4096);
  EXPECT_FALSE(beyond.in_rows());
  big.clear();
  metric_cells::Span after(4096);
  EXPECT_TRUE(after.in_rows());
  after.add(4095, 2);
  EXPECT_EQ(after.sum(4095), 2u);
}

// A metric freed while a thread that counted in it lives on: the next
// metric at its offset starts at zero in that thread's row too.
TEST(MetricCellsTest, AFreedMetricsCountsInALiveThreadsRowAreGone) {
  auto first = std::make_unique<Counter>();
  Counter* second = nullptr;
  std::latch counted(1), replaced(1);
  std::thread other([&] {
    first->inc(40);
    counted.count_down();
    replaced.wait();
    second->inc(2);
  });
  counted.wait();
  first.reset();
  Counter fresh;  // the same size: the same offset
  second = &fresh;
  replaced.count_down();
  other.join();
  EXPECT_EQ(fresh.value(), 2u);
}

// A child forked while another thread makes and frees metrics (and so
// takes the table's lock) counts on in its own table.
//
// The forks start once the other thread is in its loop, where making,
// counting in and freeing a Counter takes the table's lock and allocates
// nothing. A thread that is still starting allocates, and the allocator of
// AddressSanitizer's runtime (gcc 12, clang 14) takes no lock at fork
// (newer runtimes do): a fork then left the child's
// first malloc waiting forever on a lock of the parent's, about 1 run in 15
// under load. glibc's malloc is safe there; ours is the lock under test.
TEST(MetricCellsTest, AChildForkedWhileAnotherThreadMakesMetricsCounts) {
  std::atomic<bool> stop{false};
  std::atomic<bool> churning{false};
  std::thread churn([&] {
    while (!stop.load()) {
      Counter c;
      c.inc();
      churning.store(true);
    }
  });
  while (!churning.load()) std::this_thread::yield();
  for (int i = 0; i < 20; ++i) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      Counter c;
      std::thread([&] { c.inc(3); }).join();
      c.inc(4);
      ::_exit(c.value() == 7 ? 0 : 1);
    }
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child " << i;
  }
  stop = true;
  churn.join();
}

}  // namespace
}  // namespace authrpc
