// The measurement schedule every mode shares: `warmup` untimed iterations of
// each row and of its floor, then `n` timed iterations of each in `blocks`
// blocks whose order rotates — with one row and its floor, the floor first in
// even blocks and the row first in odd ones — so that drift and bursts of
// noise hit all of them alike, and each block yields a paired ratio.
//
// Runs on the caller's executor; iterations never overlap.
#pragma once

#include <asio/any_io_executor.hpp>
#include <asio/awaitable.hpp>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "minibench/plan.h"
#include "minibench/stats.h"
#include "authrpc/base/result.h"

namespace minibench {

// One iteration: its timed part, or why it failed (which ends the run).
using Iteration = std::function<asio::awaitable<authrpc::Result<Clock::duration>>()>;
// The same on a given executor (the concurrent schedule runs one per thread).
using IterationOn =
    std::function<asio::awaitable<authrpc::Result<Clock::duration>>(asio::any_io_executor)>;

struct Measured {
  Iteration iteration;
  Samples* samples;
  // Optional: a running total of events outside this process (the KDC's
  // requests), read before and after each of the row's blocks — outside the
  // block's timing — and credited to it with samples->add_events().
  std::function<long()> events = {};
  // Optional: the row's name for progress lines.
  std::string name = {};
  // Optional: the iteration on any executor. Needed when plan.concurrency > 1:
  // every block (and the warm-up) then runs on plan.concurrency threads of
  // its own at once, each with its own io_context (concurrency.h).
  IterationOn on = {};
  // Optional: the server's accepted-connection total, read around each block
  // like `events` and credited with samples->add_connections(), so that a
  // test can check each session opened a connection of its own.
  std::function<long()> connections = {};
};

// Measures several rows against one floor in the same blocks; `label`
// names the group in progress lines ("sessions tcp"). group[0] is the floor
// (or, without one, the first row). Warm-up runs the rows in order, then
// group[0]; block b starts with group[b % size] and goes round.
asio::awaitable<authrpc::Status> run_group(const BenchPlan& plan, const std::string& label,
                                           std::vector<Measured> group, bool has_floor);

// "[minibench] <message>" on stderr, if plan.progress.
void progress(const BenchPlan& plan, const std::string& message);

}  // namespace minibench
