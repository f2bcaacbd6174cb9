// Metrics: counters, gauges and histograms that the session and call paths
// update without a lock, grouped in a MetricsRegistry that an exposition
// (the admin listener's /metrics, the sys.stats RPC, `authrpc stats`) reads
// as a Snapshot.
//
// Why not prometheus-cpp's own cells (docs/OPERATIONS.md, "Why our own
// counters"): its Histogram::Observe takes a mutex and Family::Add allocates
// on every call. Here a metric's children are resolved once — when a server
// starts, or when a method is registered — and an update adds to the
// calling thread's own cells (metric_cells.h), with no locked instruction.
// prometheus-cpp is used only to write the text format
// (components/admin/admin_server.cc).
//
// Names and labels follow Prometheus' conventions: `authrpc_` prefix, base
// units (`_seconds`, `_bytes`), `_total` on counters, and only label values
// from a fixed set (a mechanism, an error code, a method registered at
// start) — never a peer address or a user name.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "authrpc/base/metric_cells.h"

namespace authrpc {

// Label name/value pairs of one child, in the order the family declares.
using MetricLabels = std::vector<std::pair<std::string, std::string>>;

// A monotonically increasing count. Thread-safe; inc() adds to the calling
// thread's cell (metric_cells.h): no locked instruction; value() sums the
// cells.
class Counter {
 public:
  void inc(std::uint64_t n = 1) noexcept { cells_.add(0, n); }
  std::uint64_t value() const noexcept { return cells_.sum(0); }

 private:
  metric_cells::Span cells_{1};
};

// A value that goes up and down (open connections, calls in flight).
class Gauge {
 public:
  void add(std::int64_t n = 1) noexcept { value_.fetch_add(n, std::memory_order_relaxed); }
  void sub(std::int64_t n = 1) noexcept { value_.fetch_sub(n, std::memory_order_relaxed); }
  void set(std::int64_t v) noexcept { value_.store(v, std::memory_order_relaxed); }
  std::int64_t value() const noexcept { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<std::int64_t> value_{0};
};

// Durations in fixed buckets (upper bounds in seconds, ascending; +Inf is
// implied). observe() finds the bucket by a few integer compares and adds to
// two of the calling thread's cells (bucket, sum); the count is the sum of
// the buckets.
class Histogram {
 public:
  // 10 µs … 10 s, 1-2.5-5 steps: sessions (~30 µs – 50 ms) and calls.
  static std::span<const double> latency_buckets();

  explicit Histogram(std::span<const double> upper_bounds_seconds = latency_buckets());
  void observe(std::chrono::nanoseconds d) noexcept;
  void observe_seconds(double seconds) noexcept;

  struct Data {
    std::vector<double> upper_bounds;  // seconds; +Inf not included
    std::vector<std::uint64_t> cumulative;  // one per bound, then +Inf (= count)
    std::uint64_t count = 0;
    double sum_seconds = 0;
  };
  Data data() const;

 private:
  std::vector<double> bounds_;
  std::vector<std::int64_t> bounds_ns_;
  // A bucket per bound, then +Inf's, then the sum in nanoseconds.
  metric_cells::Span cells_;
};

enum class MetricType { kCounter, kGauge, kHistogram };

// A read of every metric, for an exposition. Plain values: no locks held.
struct MetricSample {
  MetricLabels labels;
  double value = 0;      // counter, gauge
  Histogram::Data histogram;  // histogram
};
struct MetricFamily {
  std::string name;
  std::string help;
  MetricType type = MetricType::kCounter;
  std::vector<MetricSample> samples;
};
using MetricsSnapshot = std::vector<MetricFamily>;

// Owns metric families and their children. Children are created on first
// request (a mutex, a lookup) and live as long as the registry, at a stable
// address: callers ask once and keep the reference. Collection (snapshot())
// takes the same mutex and reads the cells with relaxed loads; the cells'
// updaters never take it.
//
// A server and the clients of a process may share one registry: the same
// name and labels give the same child, so their counts add up. Asking for
// an existing name with another type or other label names is a programming
// error (std::logic_error), like registering two families of one name.
class MetricsRegistry {
 public:
  MetricsRegistry();
  ~MetricsRegistry();
  MetricsRegistry(const MetricsRegistry&) = delete;
  MetricsRegistry& operator=(const MetricsRegistry&) = delete;

  Counter& counter(std::string_view name, std::string_view help, const MetricLabels& labels = {});
  Gauge& gauge(std::string_view name, std::string_view help, const MetricLabels& labels = {});
  Histogram& histogram(std::string_view name, std::string_view help, const MetricLabels& labels = {},
                       std::span<const double> upper_bounds = Histogram::latency_buckets());

  // A gauge computed at collection time (open descriptors, a queue's length).
  // The function runs under the registry's mutex on the collecting thread; it
  // must not call back into the registry. Returns an id for remove_callback();
  // whoever registers a callback that captures an object removes it before the
  // object dies.
  using CallbackId = std::uint64_t;
  CallbackId gauge_callback(std::string_view name, std::string_view help, const MetricLabels& labels,
                            std::function<double()> read);
  void remove_callback(CallbackId id);

  // Every family with at least one child, sorted by name, children in the
  // order created. Includes the process metrics (process_start_time_seconds,
  // process_open_fds, process_max_fds, process_resident_memory_bytes, process_cpu_seconds_total,
  // authrpc_uptime_seconds, authrpc_build_info).
  MetricsSnapshot snapshot() const;

  // The value of one counter or gauge child (0 if absent): for tests and
  // sys.stats' summaries.
  double value(std::string_view name, const MetricLabels& labels = {}) const;

  // A component's cells for this registry, made once (T's constructor takes
  // the registry) and kept as long as the registry: what lets a short-lived
  // object, such as a client connection, find its resolved cells with one
  // atomic load instead of a lookup under the lock.
  template <typename T>
  T& extension() {
    static const std::size_t index = next_extension_index();
    if (void* p = extensions_[index].load(std::memory_order_acquire)) return *static_cast<T*>(p);
    return *static_cast<T*>(install_extension(
        index, [this] { return std::shared_ptr<void>(std::make_shared<T>(*this)); }));
  }

 private:
  static constexpr std::size_t kMaxExtensions = 8;
  static std::size_t next_extension_index();
  void* install_extension(std::size_t index, const std::function<std::shared_ptr<void>()>& make);

  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::array<std::atomic<void*>, kMaxExtensions> extensions_{};
};

// A counter child created on first use (label values known only then, e.g.
// a status code) and kept: the first increment takes the registry's lock,
// the rest one atomic load.
// `labels` is a callable returning the MetricLabels, called only the first
// time: building label strings on every event would cost more than the
// count itself (~800 instructions a call, measured with callgrind).
class LazyCounter {
 public:
  template <typename MakeLabels>
  Counter& get(MetricsRegistry& registry, std::string_view name, std::string_view help,
               MakeLabels&& labels) {
    if (Counter* c = cell_.load(std::memory_order_acquire)) return *c;
    return resolve(registry, name, help, labels());
  }

 private:
  Counter& resolve(MetricsRegistry& registry, std::string_view name, std::string_view help,
                   const MetricLabels& labels);
  std::atomic<Counter*> cell_{nullptr};
};

// Wire status codes (base/status.h) as a dense index for arrays of
// cells: 0–16, 100–110, then one slot for any other value.
inline constexpr std::size_t kCodeSlots = 29;
std::size_t code_slot(std::uint16_t wire_code) noexcept;
// The `code`/`outcome` label of a wire code: "ok", the code's name in lower
// case ("permission_denied"), or "other".
std::string code_label(std::uint16_t wire_code);

// The registry that ServerOptions::metrics and ClientOptions::metrics use by
// default: one per process, created on first use, never destroyed.
std::shared_ptr<MetricsRegistry> default_metrics_registry();

// The version and commit authrpc was built from (authrpc_build_info).
std::string_view authrpc_version();
std::string_view authrpc_git_commit();

}  // namespace authrpc
