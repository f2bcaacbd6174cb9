#include "minibench/stats.h"

#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>

namespace minibench {

std::optional<std::int64_t> process_cpu_ns(pid_t pid) {
  clockid_t clock = CLOCK_PROCESS_CPUTIME_ID;
  if (pid != ::getpid() && ::clock_getcpuclockid(pid, &clock) != 0) return std::nullopt;
  timespec ts{};
  if (::clock_gettime(clock, &ts) != 0) return std::nullopt;
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

std::string fmt(const char* format, double v) {
  char text[64];
  std::snprintf(text, sizeof text, format, v);
  return text;
}

void Samples::begin_block() { blocks_.emplace_back(); }

void Samples::add(Clock::duration d) {
  if (blocks_.empty()) begin_block();
  blocks_.back().push_back(std::chrono::duration<double, std::micro>(d).count());
}

void Samples::add_all(const std::vector<double>& us) {
  if (blocks_.empty()) begin_block();
  blocks_.back().insert(blocks_.back().end(), us.begin(), us.end());
}

void Samples::add_events(long n, bool timed) {
  std::optional<long>& total = timed ? timed_events_ : warmup_events_;
  total = total.value_or(0) + n;
}

std::vector<double> Samples::all_us() const {
  std::vector<double> all;
  for (const auto& block : blocks_) all.insert(all.end(), block.begin(), block.end());
  return all;
}

double percentile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  const auto rank = static_cast<std::size_t>(std::ceil(q * static_cast<double>(sorted.size())));
  return sorted[std::clamp<std::size_t>(rank, 1, sorted.size()) - 1];
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return percentile(values, 0.5);
}

Summary summarize(const Samples& samples) {
  auto us = samples.all_us();
  std::sort(us.begin(), us.end());
  Summary s;
  s.n = us.size();
  if (us.empty()) return s;
  s.mean_us = std::accumulate(us.begin(), us.end(), 0.0) / static_cast<double>(us.size());
  s.p50_us = percentile(us, 0.50);
  s.p95_us = percentile(us, 0.95);
  s.p99_us = percentile(us, 0.99);
  s.p999_us = percentile(us, 0.999);
  s.max_us = us.back();
  const double wall_s = std::chrono::duration<double>(samples.wall()).count();
  s.per_s = wall_s > 0 ? static_cast<double>(us.size()) / wall_s : 0;
  return s;
}

}  // namespace minibench
