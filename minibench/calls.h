// `minibench calls`: per transport, N sequential sys.echo calls with a 1-byte
// payload on one open, authenticated connection (each awaited before the
// next), against a bare ping-pong (1 byte each way) on one raw connection to
// the floor's echo server, measured in the same run.
//
// Rows "calls/<transport>" and "floor/<transport>-pingpong"; target: the
// call's p50 ≤ 1.3 × the ping-pong's p50. With plan.calls_api kProto, the
// typed rows (typed_calls.h) on the same connection instead of
// "calls/<transport>"; with kAll, both, in the same blocks.
//
// With --concurrency K or --depth D above 1, calls under load instead. Per
// transport (tcp, unix, and tls:// when the run has TLS rows): K
// authenticated connections, each driven by a client thread of its own (its
// own io_context, like K independent clients), each with D coroutines making
// 1-byte sys.echo calls back to back — D calls in flight per connection —
// for plan.duration_s; and next to it the echo floor (echo_floor.h) doing
// the same on K raw connections with D messages in flight, measured in the
// same run. The row and its floor alternate in plan.blocks blocks of
// duration_s / blocks each, rotating as schedule.h's groups do, after a
// warm-up of one block each; connections are opened before the warm-up and
// kept for the whole row.
//
// Rows "calls/<transport> c<K>d<D>" (TLS: "calls+tls/tcp c<K>d<D>") and
// "floor/<transport>-echo c<K>d<D>" with calls/s (per_s: calls completed
// over the blocks' wall time) and per-call latency; target: calls/s ≥
// kCallLoadTarget × the floor's, for tcp and unix.
//
// run_call_load() is called by run.cc on the thread of its client runtime,
// which it blocks while the rows run (nothing else runs there meanwhile).
#pragma once

#include <asio/any_io_executor.hpp>
#include <asio/awaitable.hpp>
#include <string>

#include "minibench/plan.h"
#include "minibench/report.h"

namespace minibench {

inline constexpr double kCallTarget = 1.3;
inline constexpr double kCallLoadTarget = 0.8;

// Runs on `ex` (one thread); adds rows and targets to `report`.
asio::awaitable<authrpc::Status> run_calls(asio::any_io_executor ex, const BenchPlan& plan,
                                           Report& report);

// "c8d16": the suffix of the rows for plan.concurrency and plan.depth.
std::string call_load_shape(const BenchPlan& plan);

authrpc::Status run_call_load(const BenchPlan& plan, Report& report);

}  // namespace minibench
