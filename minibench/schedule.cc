#include "minibench/schedule.h"

#include "minibench/rotation.h"
#include <asio/this_coro.hpp>
#include <cstdio>
#include <unistd.h>

#include "minibench/concurrency.h"

namespace minibench {
namespace {

asio::awaitable<authrpc::Status> run_block(const BenchPlan& plan, Measured& m, std::size_t count,
                                           bool timed) {
  const long events_before = m.events ? m.events() : 0;
  const long connections_before = m.connections ? m.connections() : 0;
  if (timed) m.samples->begin_block();
  if (plan.concurrency > 1 && m.on) {
    const auto cpu_before = timed && plan.cpu_used ? plan.cpu_used() : std::nullopt;
    ConcurrentBlock block = run_concurrently(m.on, count, plan.concurrency);
    if (!block.status.ok()) co_return block.status;
    if (timed) {
      m.samples->add_all(block.us);
      m.samples->add_wall(block.wall);
      if (cpu_before) {
        if (const auto cpu_after = plan.cpu_used()) m.samples->add_cpu(*cpu_after - *cpu_before);
      }
    }
  } else {
    const auto start = Clock::now();
    for (std::size_t i = 0; i < count; ++i) {
      auto elapsed = co_await m.iteration();
      if (!elapsed.ok()) co_return elapsed.status();
      if (timed) m.samples->add(*elapsed);
    }
    if (timed) m.samples->add_wall(Clock::now() - start);
  }
  if (m.events) m.samples->add_events(m.events() - events_before, timed);
  if (m.connections) m.samples->add_connections(m.connections() - connections_before);
  co_return authrpc::Status();
}

// Progress of one group: on a terminal one line rewritten after each block
// of each row; otherwise a line at most every 2 s (logs of long runs).
class GroupProgress {
 public:
  GroupProgress(const BenchPlan& plan, std::string label)
      : on_(plan.progress), tty_(on_ && ::isatty(STDERR_FILENO)), label_(std::move(label)),
        start_(Clock::now()), last_(start_) {}
  ~GroupProgress() {
    if (tty_) std::fprintf(stderr, "\r\x1b[K");
  }
  void update(const Measured& m, std::size_t done, std::size_t n, std::size_t block,
              std::size_t blocks) {
    if (!on_) return;
    const auto now = Clock::now();
    if (!tty_ && now - last_ < std::chrono::seconds(2)) return;
    last_ = now;
    const double elapsed = std::chrono::duration<double>(now - start_).count();
    std::fprintf(stderr, "%s[minibench] %s: %s %zu/%zu (block %zu/%zu), elapsed %.1f s%s",
                 tty_ ? "\r" : "", label_.c_str(), m.name.empty() ? "row" : m.name.c_str(), done,
                 n, block, blocks, elapsed, tty_ ? "\x1b[K" : "\n");
  }

 private:
  bool on_, tty_;
  std::string label_;
  Clock::time_point start_, last_;
};

}  // namespace

void progress(const BenchPlan& plan, const std::string& message) {
  if (plan.progress) std::fprintf(stderr, "[minibench] %s\n", message.c_str());
}

asio::awaitable<authrpc::Status> run_group(const BenchPlan& plan, const std::string& label,
                                           std::vector<Measured> group, bool has_floor) {
  const std::size_t size = group.size();
  std::string names;
  for (const auto& m : group) {
    if (!m.name.empty()) names += (names.empty() ? "" : ", ") + m.name;
  }
  progress(plan, label + ": " + std::to_string(plan.warmup) + " warm-up + " +
                     std::to_string(plan.n) + " timed" + (size > 1 ? " each" : "") +
                     (has_floor ? " (and floor)" : "") + " in " + std::to_string(plan.blocks) +
                     " blocks" +
                     (plan.concurrency > 1
                          ? ", " + std::to_string(plan.concurrency) + " client threads at once"
                          : std::string()) +
                     (names.empty() ? std::string() : ": " + names));
  GroupProgress bar(plan, label);
  authrpc::Status s;
  std::vector<std::size_t> done(size, 0);
  const std::size_t sizes[] = {size};
  for (const Turn& t : rotation(sizes, plan.blocks, true)) {
    const std::size_t count = t.timed ? block_share(plan.n, plan.blocks, t.block) : plan.warmup;
    s = co_await run_block(plan, group[t.side], count, t.timed);
    if (!s.ok()) break;
    if (!t.timed) continue;
    done[t.side] += count;
    bar.update(group[t.side], done[t.side], plan.n, t.block + 1, plan.blocks);
  }
  if (!s.ok()) s.message = label + ": " + s.message;
  co_return s;
}

}  // namespace minibench
