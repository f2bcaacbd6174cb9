// `minibench sessions`: per transport, N sequential authrpc sessions — a new
// connection + negotiation + one sys.whoami call + close, timed from before
// connect to the call's reply — against the bare floor session (connect +
// 1-byte echo + close) measured in the same run on the same kind of socket.
//
// The client takes the fast path: wait_for_authentication = false, so the
// preamble, HELLO and the REQUEST leave in one write.
//
// Rows "<method>/<transport>" and "floor/<transport>"; target: the session's
// p50 ≤ 1.25 × the floor's p50.
#pragma once

#include <asio/any_io_executor.hpp>
#include <asio/awaitable.hpp>

#include "minibench/plan.h"
#include "minibench/report.h"

namespace minibench {

inline constexpr double kSessionTarget = 1.25;

// Runs on `ex` (one thread); adds rows and targets to `report`.
asio::awaitable<authrpc::Status> run_sessions(asio::any_io_executor ex, const BenchPlan& plan,
                                              Report& report);

}  // namespace minibench
