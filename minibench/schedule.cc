#include "minibench/schedule.h"

#include <cstdio>
#include <unistd.h>

namespace minibench {
namespace {

std::size_t block_size(std::size_t n, std::size_t blocks, std::size_t b) {
  return n / blocks + (b < n % blocks ? 1 : 0);
}

asio::awaitable<authrpc::Status> run_block(Measured& m, std::size_t count, bool timed) {
  const long events_before = m.events ? m.events() : 0;
  if (timed) m.samples->begin_block();
  const auto start = Clock::now();
  for (std::size_t i = 0; i < count; ++i) {
    auto elapsed = co_await m.iteration();
    if (!elapsed.ok()) co_return elapsed.status();
    if (timed) m.samples->add(*elapsed);
  }
  if (timed) m.samples->add_wall(Clock::now() - start);
  if (m.events) m.samples->add_events(m.events() - events_before, timed);
  co_return authrpc::Status();
}

}  // namespace

void progress(const BenchPlan& plan, const std::string& message) {
  if (plan.progress) std::fprintf(stderr, "[minibench] %s\n", message.c_str());
}

asio::awaitable<authrpc::Status> run_interleaved(const BenchPlan& plan, const std::string& label,
                                                 Measured row, std::optional<Measured> floor) {
  std::vector<Measured> group;
  if (floor) group.push_back(std::move(*floor));
  group.push_back(std::move(row));
  co_return co_await run_group(plan, label, std::move(group), floor.has_value());
}

asio::awaitable<authrpc::Status> run_group(const BenchPlan& plan, const std::string& label,
                                           std::vector<Measured> group, bool has_floor) {
  const bool tty = plan.progress && ::isatty(STDERR_FILENO);
  const std::size_t size = group.size();
  progress(plan, label + ": " + std::to_string(plan.warmup) + " warm-up + " +
                     std::to_string(plan.n) + " timed" +
                     (size > 1 ? " each" : "") + (has_floor ? " (and floor)" : "") + " in " +
                     std::to_string(plan.blocks) + " blocks");
  authrpc::Status s;
  for (std::size_t i = 1; s.ok() && i <= size; ++i) {
    s = co_await run_block(group[i % size], plan.warmup, false);
  }
  for (std::size_t b = 0; s.ok() && b < plan.blocks; ++b) {
    if (tty) {
      std::fprintf(stderr, "\r[minibench] %s: block %zu/%zu\x1b[K", label.c_str(), b + 1,
                   plan.blocks);
    }
    const std::size_t count = block_size(plan.n, plan.blocks, b);
    for (std::size_t i = 0; s.ok() && i < size; ++i) {
      s = co_await run_block(group[(b + i) % size], count, true);
    }
  }
  if (tty) std::fprintf(stderr, "\r\x1b[K");
  if (!s.ok()) s.message = label + ": " + s.message;
  co_return s;
}

}  // namespace minibench
