// The metrics core (base/metrics.h): cells, the registry's
// get-or-create, callback gauges, snapshots and concurrent counting.
#include "authrpc/base/metrics.h"

#include <gtest/gtest.h>

#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

namespace authrpc {
namespace {

using namespace std::chrono_literals;

const MetricFamily* find(const MetricsSnapshot& s, std::string_view name) {
  for (const auto& f : s) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

TEST(MetricsTest, SameNameAndLabelsGiveTheSameChild) {
  MetricsRegistry r;
  Counter& a = r.counter("authrpc_test_total", "help", {{"mechanism", "token"}});
  Counter& b = r.counter("authrpc_test_total", "help", {{"mechanism", "token"}});
  Counter& c = r.counter("authrpc_test_total", "help", {{"mechanism", "kerberos"}});
  EXPECT_EQ(&a, &b);
  EXPECT_NE(&a, &c);
  a.inc();
  b.inc(2);
  c.inc();
  EXPECT_EQ(r.value("authrpc_test_total", {{"mechanism", "token"}}), 3);
  EXPECT_EQ(r.value("authrpc_test_total", {{"mechanism", "kerberos"}}), 1);
  EXPECT_EQ(r.value("authrpc_test_total", {{"mechanism", "simple"}}), 0);
  EXPECT_EQ(r.value("authrpc_absent_total"), 0);
}

TEST(MetricsTest, MisuseIsALogicError) {
  MetricsRegistry r;
  r.counter("authrpc_x_total", "help", {{"a", "1"}});
  EXPECT_THROW(r.gauge("authrpc_x_total", "help", {{"a", "1"}}), std::logic_error);
  EXPECT_THROW(r.counter("authrpc_x_total", "help", {{"b", "1"}}), std::logic_error);
  EXPECT_THROW(r.counter("authrpc_x_total", "help"), std::logic_error);
  const double unsorted[] = {0.2, 0.1};
  EXPECT_THROW(r.histogram("authrpc_h_seconds", "help", {}, unsorted), std::logic_error);
}

TEST(MetricsTest, GaugeGoesUpAndDown) {
  MetricsRegistry r;
  Gauge& g = r.gauge("authrpc_open", "help");
  g.add();
  g.add(4);
  g.sub(2);
  EXPECT_EQ(g.value(), 3);
  g.set(-1);
  EXPECT_EQ(r.value("authrpc_open"), -1);
}

TEST(MetricsTest, HistogramBucketsAreCumulativeWithInclusiveUpperBounds) {
  const double bounds[] = {0.001, 0.01, 0.1};
  Histogram h(bounds);
  h.observe(500us);   // ≤ 0.001
  h.observe(1ms);     // = 0.001: inclusive
  h.observe(5ms);     // ≤ 0.01
  h.observe(2s);      // +Inf
  h.observe(-3ms);    // clamped to 0
  h.observe_seconds(0.05);
  h.observe_seconds(-1);
  const auto d = h.data();
  ASSERT_EQ(d.upper_bounds.size(), 3u);
  ASSERT_EQ(d.cumulative.size(), 4u);
  EXPECT_EQ(d.cumulative[0], 4u);  // 500us, 1ms, 0, 0
  EXPECT_EQ(d.cumulative[1], 5u);
  EXPECT_EQ(d.cumulative[2], 6u);
  EXPECT_EQ(d.cumulative[3], 7u);
  EXPECT_EQ(d.count, 7u);
  EXPECT_NEAR(d.sum_seconds, 0.0005 + 0.001 + 0.005 + 2 + 0.05, 1e-9);
}

TEST(MetricsTest, DefaultLatencyBucketsSpanTenMicrosecondsToTenSeconds) {
  const auto b = Histogram::latency_buckets();
  ASSERT_FALSE(b.empty());
  EXPECT_DOUBLE_EQ(b.front(), 1e-5);
  EXPECT_DOUBLE_EQ(b.back(), 10);
}

TEST(MetricsTest, CallbackGaugesAddUpAndCanBeRemoved) {
  MetricsRegistry r;
  const auto a = r.gauge_callback("authrpc_queue_length", "help", {}, [] { return 2.0; });
  const auto b = r.gauge_callback("authrpc_queue_length", "help", {}, [] { return 3.0; });
  auto snap = r.snapshot();
  const MetricFamily* f = find(snap, "authrpc_queue_length");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(f->samples.size(), 1u);  // one series, not two with equal labels
  EXPECT_EQ(f->samples[0].value, 5);
  r.remove_callback(a);
  EXPECT_EQ(r.value("authrpc_queue_length"), 3);
  r.remove_callback(b);
  snap = r.snapshot();
  EXPECT_EQ(find(snap, "authrpc_queue_length"), nullptr);
  r.remove_callback(b);  // twice: nothing
  EXPECT_THROW(
      {
        r.gauge_callback("authrpc_q2", "help", {}, [] { return 1.0; });
        r.gauge("authrpc_q2", "help");
      },
      std::logic_error);
}

TEST(MetricsTest, SnapshotIsSortedAndHasTheProcessMetrics) {
  MetricsRegistry r;
  r.counter("authrpc_z_total", "z").inc(7);
  r.histogram("authrpc_a_seconds", "a").observe(1ms);
  const auto snap = r.snapshot();
  for (std::size_t i = 1; i < snap.size(); ++i) EXPECT_LT(snap[i - 1].name, snap[i].name);
  for (const char* name : {"authrpc_build_info", "authrpc_uptime_seconds", "process_open_fds",
                           "process_max_fds",
                           "process_resident_memory_bytes", "process_cpu_seconds_total",
                           "process_start_time_seconds"}) {
    EXPECT_NE(find(snap, name), nullptr) << name;
  }
  EXPECT_GT(find(snap, "process_open_fds")->samples[0].value, 2);  // at least stdin/out/err
  EXPECT_GT(find(snap, "process_resident_memory_bytes")->samples[0].value, 1 << 20);
  const auto* build = find(snap, "authrpc_build_info");
  ASSERT_EQ(build->samples[0].labels.size(), 2u);
  EXPECT_EQ(build->samples[0].labels[0].first, "version");
  EXPECT_FALSE(build->samples[0].labels[0].second.empty());
  const auto* z = find(snap, "authrpc_z_total");
  EXPECT_EQ(z->type, MetricType::kCounter);
  EXPECT_EQ(z->samples[0].value, 7);
  const auto* a = find(snap, "authrpc_a_seconds");
  EXPECT_EQ(a->type, MetricType::kHistogram);
  EXPECT_EQ(a->samples[0].histogram.count, 1u);
}

// Counting from several threads loses nothing and needs no lock; snapshots
// taken meanwhile see monotone values.
TEST(MetricsTest, ConcurrentUpdatesAreAllCounted) {
  MetricsRegistry r;
  Counter& c = r.counter("authrpc_calls_total", "help");
  Histogram& h = r.histogram("authrpc_call_seconds", "help");
  Gauge& g = r.gauge("authrpc_in_flight", "help");
  constexpr int kThreads = 4, kEach = 100'000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kEach; ++i) {
        g.add();
        c.inc();
        h.observe(std::chrono::microseconds(i % 2000));
        g.sub();
      }
    });
  }
  double last = 0;
  for (int i = 0; i < 20; ++i) {
    const double v = r.value("authrpc_calls_total");
    EXPECT_GE(v, last);
    last = v;
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(c.value(), std::uint64_t{kThreads} * kEach);
  EXPECT_EQ(h.data().count, std::uint64_t{kThreads} * kEach);
  EXPECT_EQ(g.value(), 0);
}

// The labels of a lazily resolved child are built once, not per event.
TEST(MetricsTest, LazyCounterBuildsItsLabelsOnce) {
  MetricsRegistry r;
  LazyCounter lazy;
  int built = 0;
  for (int i = 0; i < 5; ++i) {
    lazy.get(r, "authrpc_lazy_total", "help", [&] {
          ++built;
          return MetricLabels{{"code", code_label(7)}};
        })
        .inc();
  }
  EXPECT_EQ(built, 1);
  EXPECT_EQ(r.value("authrpc_lazy_total", {{"code", "permission_denied"}}), 5);
}

TEST(MetricsTest, CodeLabelsAreBoundedNames) {
  EXPECT_EQ(code_label(0), "ok");
  EXPECT_EQ(code_label(103), "mechanism_unavailable");
  EXPECT_EQ(code_label(999), "other");
  EXPECT_EQ(code_slot(999), kCodeSlots - 1);
  EXPECT_EQ(code_slot(110), kCodeSlots - 2);
}

TEST(MetricsTest, DefaultRegistryIsOnePerProcess) {
  EXPECT_EQ(default_metrics_registry().get(), default_metrics_registry().get());
}

}  // namespace
}  // namespace authrpc
