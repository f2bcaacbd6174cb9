// `minibench calls`: per transport, N sequential sys.echo calls with a 1-byte
// payload on one open, authenticated connection (each awaited before the
// next), against a bare ping-pong (1 byte each way) on one raw connection to
// the floor's echo server, measured in the same run.
//
// Rows "calls/<transport>" and "floor/<transport>-pingpong"; target: the
// call's p50 ≤ 1.3 × the ping-pong's p50.
#pragma once

#include <asio/any_io_executor.hpp>
#include <asio/awaitable.hpp>

#include "minibench/plan.h"
#include "minibench/report.h"

namespace minibench {

inline constexpr double kCallTarget = 1.3;

// Runs on `ex` (one thread); adds rows and targets to `report`.
asio::awaitable<authrpc::Status> run_calls(asio::any_io_executor ex, const BenchPlan& plan,
                                           Report& report);

}  // namespace minibench
