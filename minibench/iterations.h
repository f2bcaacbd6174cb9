// The two timed iterations of authrpc's rows, written once: a fresh session
// (the sessions and TLS rows, measured as a group by run_session_group(),
// and idle's fresh-session rows) and a 1-byte echo
// call on an open connection (the calls rows, idle's calls rows). Called by
// sessions.cc, tls_sessions.cc, calls.cc and idle.cc.
#pragma once

#include <asio/any_io_executor.hpp>
#include <asio/awaitable.hpp>

#include "authrpc/base/result.h"
#include "authrpc/client/client.h"
#include "minibench/report.h"
#include "minibench/schedule.h"
#include "minibench/stats.h"

namespace minibench {

// New connection + negotiation + one sys.whoami call + close, timed from
// before connect to the reply. `base` is copied before the clock starts;
// the close is let finish after it stops, so that this session's teardown
// does not run inside the next one's timing (the bare floor client closes
// synchronously).
asio::awaitable<authrpc::Result<Clock::duration>> timed_session(asio::any_io_executor ex,
                                                                const authrpc::ClientOptions& base);

// A row of run_session_group(): timed_session() with `options`.
struct SessionRow {
  std::string name;
  std::string method;
  authrpc::ClientOptions options;
  std::function<long()> events = {};       // as Measured::events
  std::function<long()> connections = {};  // as Measured::connections
};

// Measures `rows` beside `floor` (if set; its `samples` are set here) as one
// group named `label` (run_group); returns their rows on `transport`
// (compared_row()), after the floor's (floor_row()) if there is one.
asio::awaitable<authrpc::Result<std::vector<Row>>> run_session_group(
    asio::any_io_executor ex, const BenchPlan& plan, const std::string& label,
    const std::string& transport, std::optional<Measured> floor, const std::vector<SessionRow>& rows);

// One 1-byte sys.echo call on `client`, timed from before the call to the
// reply; a reply other than the byte sent is kDataLoss.
asio::awaitable<authrpc::Result<Clock::duration>> timed_echo(authrpc::Client& client);

}  // namespace minibench
