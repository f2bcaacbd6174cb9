// Latency samples and their summary. A row's samples are kept per block (the
// interleaved slices of a run) so that ratios can also be compared block by
// block, which shows how much of a difference is noise.
//
// process_cpu_ns(), the clock of the CPU columns: CPU time a process has
// used (user + system, all its threads, exited ones included), in
// nanoseconds, read from the kernel's scheduler clock through
// clock_getcpuclockid() + clock_gettime(). /proc/<pid>/stat counts in clock
// ticks (10 ms at USER_HZ 100), too coarse for a throughput row that lasts
// 60 ms. Works for this process and for a child (the throughput server),
// which the kernel lets any process in its pid namespace read.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace minibench {

using Clock = std::chrono::steady_clock;

// Null if the process is gone or its clock cannot be read.
std::optional<std::int64_t> process_cpu_ns(pid_t pid);

// `v` printed with `format`, one printf conversion of a double ("%.2f").
std::string fmt(const char* format, double v);

class Samples {
 public:
  // Starts a new block; later add() calls land in it.
  void begin_block();
  void add(Clock::duration d);
  // Wall time spent on the row's iterations (including the untimed close).
  void add_wall(Clock::duration d) { wall_ += d; }

  // Events outside this process (KDC requests) that happened during the
  // row's timed blocks or its warm-up; unset: not counted.
  void add_events(long n, bool timed);
  // Connections the server accepted during the row's blocks (warm-up
  // included); unset: not counted.
  void add_connections(long n) { connections_ = connections_.value_or(0) + n; }
  // Merges one thread's share of the current block (concurrent schedule).
  void add_all(const std::vector<double>& us);
  // CPU time (user + system) that minibench and the server child used
  // during a timed block; unset: not measured.
  void add_cpu(std::chrono::nanoseconds cpu) { cpu_ = cpu_.value_or(std::chrono::nanoseconds{}) + cpu; }

  std::vector<double> all_us() const;
  const std::vector<std::vector<double>>& blocks_us() const noexcept { return blocks_; }
  Clock::duration wall() const noexcept { return wall_; }
  std::optional<long> timed_events() const noexcept { return timed_events_; }
  std::optional<long> warmup_events() const noexcept { return warmup_events_; }
  std::optional<long> connections() const noexcept { return connections_; }
  std::optional<std::chrono::nanoseconds> cpu() const noexcept { return cpu_; }

 private:
  std::vector<std::vector<double>> blocks_;
  Clock::duration wall_{};
  std::optional<long> timed_events_, warmup_events_;
  std::optional<long> connections_;
  std::optional<std::chrono::nanoseconds> cpu_;
};

struct Summary {
  std::size_t n = 0;
  double mean_us = 0, p50_us = 0, p95_us = 0, p99_us = 0, p999_us = 0, max_us = 0;
  double per_s = 0;  // iterations per second of wall time (closes included)
};

// Nearest-rank percentile (q in [0, 1]) of sorted values; 0 for none.
double percentile(const std::vector<double>& sorted, double q);
double median(std::vector<double> values);
Summary summarize(const Samples& samples);

}  // namespace minibench
