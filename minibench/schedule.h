// The measurement schedule every mode shares: `warmup` untimed iterations of
// each row and of its floor, then `n` timed iterations of each in `blocks`
// blocks whose order rotates — with one row and its floor, the floor first in
// even blocks and the row first in odd ones — so that drift and bursts of
// noise hit all of them alike, and each block yields a paired ratio.
//
// Runs on the caller's executor; iterations never overlap — except under
// `minibench sessions --concurrency K`, where a block of a row's iterations
// is spread over K client threads that establish sessions at the same time
// (a reconnect storm, as a service owner sees one). Each thread runs its own
// single-threaded io_context (its own epoll loop, like K independent
// clients), its share of the block back to back, each iteration timed on its
// own, while the caller's thread waits. Floors under concurrency get the same
// treatment: the floor's block runs on K threads too, so a row's ratio
// compares like with like (K concurrent authrpc sessions against K
// concurrent bare sessions on the same server).
//
// Also the two timed iterations of authrpc's rows, written once: a fresh
// session (the sessions and TLS rows, measured as a group by
// run_session_group(), and idle's fresh-session rows) and an echo call on an
// open connection (the calls rows, the bytes rows beside the typed ones,
// idle's calls rows).
#pragma once

#include <asio/any_io_executor.hpp>
#include <asio/awaitable.hpp>
#include <exception>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "minibench/plan.h"
#include "minibench/report.h"
#include "minibench/stats.h"
#include "authrpc/base/result.h"
#include "authrpc/client/client.h"

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
  // its own at once, each with its own io_context (see above).
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

// How a coroutine that threw `e` failed: kInternal, "exception: <what()>"
// (an exception not derived from std::exception goes on up).
authrpc::Status exception_status(std::exception_ptr e);

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

// One sys.echo call of `payload` (by default 1 byte) on `client`, timed
// from before the call to the reply; a reply other than the bytes sent is
// kDataLoss. `payload` must stay valid until the call completes.
asio::awaitable<authrpc::Result<Clock::duration>> timed_echo(authrpc::Client& client,
                                                             std::string_view payload = "x");

}  // namespace minibench
