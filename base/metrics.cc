#include "authrpc/base/metrics.h"

#include "authrpc/base/status.h"

#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <deque>
#include <map>
#include <stdexcept>

#ifndef AUTHRPC_VERSION
#define AUTHRPC_VERSION "unknown"
#endif
#ifndef AUTHRPC_GIT_COMMIT
#define AUTHRPC_GIT_COMMIT "unknown"
#endif

namespace authrpc {

std::string_view authrpc_version() { return AUTHRPC_VERSION; }
std::string_view authrpc_git_commit() { return AUTHRPC_GIT_COMMIT; }

// ---- Histogram

std::span<const double> Histogram::latency_buckets() {
  static constexpr double kBounds[] = {0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005,
                                       0.001,   0.0025,   0.005,   0.01,   0.025,   0.05,
                                       0.1,     0.25,     0.5,     1,      2.5,     5,
                                       10};
  return kBounds;
}

Histogram::Histogram(std::span<const double> upper_bounds_seconds)
    : bounds_(upper_bounds_seconds.begin(), upper_bounds_seconds.end()),
      cells_(static_cast<std::uint32_t>(upper_bounds_seconds.size() + 2)) {
  if (!std::is_sorted(bounds_.begin(), bounds_.end()) ||
      std::adjacent_find(bounds_.begin(), bounds_.end()) != bounds_.end()) {
    throw std::logic_error("histogram bounds must be strictly ascending");
  }
  bounds_ns_.reserve(bounds_.size());
  for (double b : bounds_) bounds_ns_.push_back(static_cast<std::int64_t>(std::llround(b * 1e9)));
}

void Histogram::observe(std::chrono::nanoseconds d) noexcept {
  const std::int64_t ns = std::max<std::int64_t>(d.count(), 0);
  // Bounds are few (≤ ~20) and most observations land low: a linear scan
  // touches one cache line and predicts well.
  std::size_t i = 0;
  while (i < bounds_ns_.size() && ns > bounds_ns_[i]) ++i;
  cells_.add(static_cast<std::uint32_t>(i), 1, static_cast<std::uint32_t>(bounds_ns_.size() + 1),
             static_cast<std::uint64_t>(ns));
}

void Histogram::observe_seconds(double seconds) noexcept {
  if (!(seconds >= 0)) seconds = 0;  // also NaN
  if (seconds > 1e9) seconds = 1e9;
  observe(std::chrono::nanoseconds(static_cast<std::int64_t>(seconds * 1e9)));
}

Histogram::Data Histogram::data() const {
  Data d;
  d.upper_bounds = bounds_;
  std::vector<std::uint64_t> cells(bounds_.size() + 2);  // buckets, +Inf, sum
  cells_.sum_all(cells);
  d.cumulative.resize(bounds_.size() + 1);
  std::uint64_t running = 0;
  for (std::size_t i = 0; i <= bounds_.size(); ++i) {
    running += cells[i];
    d.cumulative[i] = running;
  }
  d.count = running;
  d.sum_seconds = static_cast<double>(cells.back()) / 1e9;
  return d;
}

// ---- MetricsRegistry

namespace {

std::vector<std::string> label_names(const MetricLabels& labels) {
  std::vector<std::string> names;
  names.reserve(labels.size());
  for (const auto& [name, value] : labels) names.push_back(name);
  return names;
}

const char* type_name(MetricType t) {
  switch (t) {
    case MetricType::kCounter: return "counter";
    case MetricType::kGauge: return "gauge";
    case MetricType::kHistogram: return "histogram";
  }
  return "?";
}

// /proc/self/stat fields 14, 15 (utime, stime in clock ticks), and statm's
// resident pages. Linux only; zero elsewhere.
double process_cpu_seconds() {
  struct rusage ru {};
  if (getrusage(RUSAGE_SELF, &ru) != 0) return 0;
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

double process_resident_bytes() {
  std::FILE* f = std::fopen("/proc/self/statm", "re");
  if (!f) return 0;
  unsigned long size = 0, resident = 0;
  const int n = std::fscanf(f, "%lu %lu", &size, &resident);
  std::fclose(f);
  if (n != 2) return 0;
  return static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE));
}

double process_open_fds() {
  DIR* d = opendir("/proc/self/fd");
  if (!d) return 0;
  double n = 0;
  while (const dirent* e = readdir(d)) {
    if (e->d_name[0] != '.') ++n;
  }
  closedir(d);
  return n - 1;  // the directory stream's own descriptor
}

}  // namespace

struct MetricsRegistry::Impl {
  struct Child {
    MetricLabels labels;
    std::unique_ptr<Counter> counter;
    std::unique_ptr<Gauge> gauge;
    std::unique_ptr<Histogram> histogram;
    CallbackId callback = 0;  // a callback gauge: its id
    std::function<double()> read;
  };
  struct Family {
    std::string name;
    std::string help;
    MetricType type;
    std::vector<std::string> label_names;
    std::deque<Child> children;  // stable addresses
  };

  Child& child(std::string_view name, std::string_view help, MetricType type,
               const MetricLabels& labels, bool callback) {
    auto it = families.find(name);
    if (it == families.end()) {
      it = families.emplace(std::string(name),
                            Family{std::string(name), std::string(help), type, label_names(labels), {}})
               .first;
    }
    Family& f = it->second;
    if (f.type != type) {
      throw std::logic_error("metric " + f.name + " is a " + type_name(f.type) + ", asked as a " +
                             type_name(type));
    }
    if (f.label_names != label_names(labels)) {
      throw std::logic_error("metric " + f.name + " asked with other label names");
    }
    for (Child& c : f.children) {
      if (c.labels != labels) continue;
      // Callback children of equal labels add up (snapshot()); a cell and a
      // callback of equal labels would be two series of one name.
      if ((c.callback != 0) != callback) {
        throw std::logic_error("metric " + f.name + " mixes a callback and a cell of equal labels");
      }
      if (!callback) return c;
    }
    Child& c = f.children.emplace_back();
    c.labels = labels;
    return c;
  }

  mutable std::mutex mu;
  std::map<std::string, Family, std::less<>> families;
  std::vector<std::shared_ptr<void>> extensions;  // owned; extensions_ points into them
  CallbackId next_callback = 1;
  const double start_time_s =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  const std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
};

MetricsRegistry::MetricsRegistry() : impl_(std::make_unique<Impl>()) {}
MetricsRegistry::~MetricsRegistry() = default;

Counter& MetricsRegistry::counter(std::string_view name, std::string_view help,
                                  const MetricLabels& labels) {
  std::lock_guard lock(impl_->mu);
  auto& c = impl_->child(name, help, MetricType::kCounter, labels, false);
  if (!c.counter) c.counter = std::make_unique<Counter>();
  return *c.counter;
}

Gauge& MetricsRegistry::gauge(std::string_view name, std::string_view help,
                              const MetricLabels& labels) {
  std::lock_guard lock(impl_->mu);
  auto& c = impl_->child(name, help, MetricType::kGauge, labels, false);
  if (!c.gauge) c.gauge = std::make_unique<Gauge>();
  return *c.gauge;
}

Histogram& MetricsRegistry::histogram(std::string_view name, std::string_view help,
                                      const MetricLabels& labels,
                                      std::span<const double> upper_bounds) {
  std::lock_guard lock(impl_->mu);
  auto& c = impl_->child(name, help, MetricType::kHistogram, labels, false);
  if (!c.histogram) c.histogram = std::make_unique<Histogram>(upper_bounds);
  return *c.histogram;
}

MetricsRegistry::CallbackId MetricsRegistry::gauge_callback(std::string_view name,
                                                            std::string_view help,
                                                            const MetricLabels& labels,
                                                            std::function<double()> read) {
  std::lock_guard lock(impl_->mu);
  auto& c = impl_->child(name, help, MetricType::kGauge, labels, true);
  c.read = std::move(read);
  c.callback = impl_->next_callback++;
  return c.callback;
}

void MetricsRegistry::remove_callback(CallbackId id) {
  if (id == 0) return;
  std::lock_guard lock(impl_->mu);
  for (auto it = impl_->families.begin(); it != impl_->families.end(); ++it) {
    auto& children = it->second.children;
    for (auto c = children.begin(); c != children.end(); ++c) {
      if (c->callback == id) {
        children.erase(c);  // only callback children are ever erased
        if (children.empty()) impl_->families.erase(it);
        return;
      }
    }
  }
}

MetricsSnapshot MetricsRegistry::snapshot() const {
  MetricsSnapshot out;
  {
    std::lock_guard lock(impl_->mu);
    out.reserve(impl_->families.size() + 6);
    for (const auto& [name, f] : impl_->families) {
      MetricFamily mf{f.name, f.help, f.type, {}};
      mf.samples.reserve(f.children.size());
      for (const auto& c : f.children) {
        MetricSample s;
        s.labels = c.labels;
        if (c.counter) s.value = static_cast<double>(c.counter->value());
        else if (c.gauge) s.value = static_cast<double>(c.gauge->value());
        else if (c.histogram) s.histogram = c.histogram->data();
        else if (c.read) s.value = c.read();
        // Callback gauges of one name and labels (two servers of a process
        // each reporting their own) add up into one series.
        if (c.read) {
          auto same = std::find_if(mf.samples.begin(), mf.samples.end(),
                                   [&](const MetricSample& o) { return o.labels == s.labels; });
          if (same != mf.samples.end()) {
            same->value += s.value;
            continue;
          }
        }
        mf.samples.push_back(std::move(s));
      }
      out.push_back(std::move(mf));
    }
  }
  auto add = [&out](std::string name, std::string help, MetricType type, double v,
                    MetricLabels labels = {}) {
    MetricFamily mf{std::move(name), std::move(help), type, {}};
    MetricSample s;
    s.labels = std::move(labels);
    s.value = v;
    mf.samples.push_back(std::move(s));
    out.push_back(std::move(mf));
  };
  const double uptime =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - impl_->start).count();
  add("authrpc_build_info", "The authrpc version and commit this process was built from (always 1).",
      MetricType::kGauge, 1,
      {{"version", std::string(authrpc_version())}, {"commit", std::string(authrpc_git_commit())}});
  add("authrpc_uptime_seconds", "Seconds since this metrics registry was created.",
      MetricType::kGauge, uptime);
  add("process_cpu_seconds_total", "User and system CPU time spent, in seconds.",
      MetricType::kCounter, process_cpu_seconds());
  add("process_open_fds", "Open file descriptors.", MetricType::kGauge, process_open_fds());
  struct rlimit fds {};
  add("process_max_fds", "The limit on open file descriptors (RLIMIT_NOFILE, soft).",
      MetricType::kGauge,
      getrlimit(RLIMIT_NOFILE, &fds) == 0 && fds.rlim_cur != RLIM_INFINITY
          ? static_cast<double>(fds.rlim_cur)
          : 0);
  add("process_resident_memory_bytes", "Resident memory size in bytes.", MetricType::kGauge,
      process_resident_bytes());
  add("process_start_time_seconds", "Start time of the metrics registry since the Unix epoch, in seconds.",
      MetricType::kGauge, impl_->start_time_s);
  std::sort(out.begin(), out.end(),
            [](const MetricFamily& a, const MetricFamily& b) { return a.name < b.name; });
  return out;
}

double MetricsRegistry::value(std::string_view name, const MetricLabels& labels) const {
  std::lock_guard lock(impl_->mu);
  auto it = impl_->families.find(name);
  if (it == impl_->families.end()) return 0;
  double sum = 0;
  for (const auto& c : it->second.children) {
    if (c.labels != labels) continue;
    if (c.counter) sum += static_cast<double>(c.counter->value());
    else if (c.gauge) sum += static_cast<double>(c.gauge->value());
    else if (c.read) sum += c.read();
    else if (c.histogram) sum += static_cast<double>(c.histogram->data().count);
  }
  return sum;
}

std::size_t MetricsRegistry::next_extension_index() {
  static std::atomic<std::size_t> next{0};
  const std::size_t i = next.fetch_add(1);
  if (i >= kMaxExtensions) throw std::logic_error("too many metrics registry extensions");
  return i;
}

void* MetricsRegistry::install_extension(std::size_t index,
                                         const std::function<std::shared_ptr<void>()>& make) {
  // Made outside the lock: T's constructor asks the registry for cells.
  auto made = make();
  std::lock_guard lock(impl_->mu);
  if (void* p = extensions_[index].load(std::memory_order_acquire)) return p;  // lost a race
  impl_->extensions.push_back(made);
  extensions_[index].store(made.get(), std::memory_order_release);
  return made.get();
}

Counter& LazyCounter::resolve(MetricsRegistry& registry, std::string_view name,
                              std::string_view help, const MetricLabels& labels) {
  // Two threads may both get here: the registry hands both the same child.
  Counter& c = registry.counter(name, help, labels);
  cell_.store(&c, std::memory_order_release);
  return c;
}

std::size_t code_slot(std::uint16_t wire_code) noexcept {
  if (wire_code <= 16) return wire_code;
  if (wire_code >= 100 && wire_code <= 110) return 17 + (wire_code - 100);
  return kCodeSlots - 1;
}

std::string code_label(std::uint16_t wire_code) {
  if (wire_code == 0) return "ok";
  if (code_slot(wire_code) == kCodeSlots - 1) return "other";
  std::string out(errc_name(static_cast<Errc>(wire_code)));
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::shared_ptr<MetricsRegistry> default_metrics_registry() {
  // Leaked on purpose: clients and servers in static objects may count
  // during exit.
  static auto* registry = new std::shared_ptr<MetricsRegistry>(std::make_shared<MetricsRegistry>());
  return *registry;
}

}  // namespace authrpc
