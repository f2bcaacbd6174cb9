// `minibench sessions`: per transport and method, N sequential authrpc
// sessions — a new connection + negotiation + one sys.whoami call + close,
// timed from before connect to the call's reply — against a floor measured
// in the same run, in the same blocks, on the same kind of socket:
//   - simple (and other methods without Kerberos): floor/<transport>, the
//     bare session (connect + 1-byte echo + close);
//   - kerberos, kerberos-sasl: floor/gss (tcp) or floor/gss-unix, connect +
//     one GSSAPI token each way + close (gss_floor.h), with the same
//     credentials and replay cache settings. Their rows also report the KDC's
//     requests per session.
//
// The client takes the fast path: wait_for_authentication = false, so the
// preamble, HELLO and the REQUEST leave in one write.
//
// Rows "<method>/<transport>", "floor/<transport>", "floor/gss",
// "floor/gss-unix"; targets: simple p50 ≤ 1.25 × floor p50; kerberos p50 ≤
// 1.15 × floor/gss p50 and (tcp) ≤ 0.6 × kerberos-sasl/tcp p50; 0 KDC
// requests per session after the warm-up.
#pragma once

#include <asio/any_io_executor.hpp>
#include <asio/awaitable.hpp>

#include "minibench/plan.h"
#include "minibench/report.h"

namespace minibench {

inline constexpr double kSessionTarget = 1.25;
inline constexpr double kKerberosSessionTarget = 1.15;
inline constexpr double kKerberosVsSaslTarget = 0.6;
// token/unix p50 against simple/unix p50 in the same run (Hadoop:
// 46x): the one-message exchange. token/tcp is the challenge exchange (one
// round trip more, docs/TOKENS.md "Replay") and has no target.
inline constexpr double kTokenVsSimpleTarget = 1.3;

// Runs on `ex` (one thread); adds rows and targets to `report`.
asio::awaitable<authrpc::Status> run_sessions(asio::any_io_executor ex, const BenchPlan& plan,
                                              Report& report);

}  // namespace minibench
