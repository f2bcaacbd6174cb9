// The measurement schedule every mode shares: `warmup` untimed iterations of a
// row and of its floor, then `n` timed iterations of each in `blocks`
// alternating blocks — the floor first in even blocks, the row first in odd
// ones — so that drift and bursts of noise hit both alike, and each block
// yields a paired ratio.
//
// Runs on the caller's executor; iterations never overlap.
#pragma once

#include <asio/awaitable.hpp>
#include <functional>
#include <optional>
#include <string>

#include "minibench/plan.h"
#include "minibench/stats.h"
#include "rpc/result.h"

namespace minibench {

// One iteration: its timed part, or why it failed (which ends the run).
using Iteration = std::function<asio::awaitable<authrpc::Result<Clock::duration>>()>;

struct Measured {
  Iteration iteration;
  Samples* samples;
};

// `label` names the pair in progress lines ("sessions tcp").
asio::awaitable<authrpc::Status> run_interleaved(const BenchPlan& plan, const std::string& label,
                                                 Measured row, std::optional<Measured> floor);

// "[minibench] <message>" on stderr, if plan.progress.
void progress(const BenchPlan& plan, const std::string& message);

}  // namespace minibench
