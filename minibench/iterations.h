// The two timed iterations of authrpc's rows, written once: a fresh session
// (the sessions and TLS rows, idle's fresh-session rows) and a 1-byte echo
// call on an open connection (the calls rows, idle's calls rows). Called by
// sessions.cc, tls_sessions.cc, calls.cc and idle.cc.
#pragma once

#include <asio/any_io_executor.hpp>
#include <asio/awaitable.hpp>

#include "authrpc/base/result.h"
#include "authrpc/client/client.h"
#include "minibench/stats.h"

namespace minibench {

// New connection + negotiation + one sys.whoami call + close, timed from
// before connect to the reply. `base` is copied before the clock starts;
// the close is let finish after it stops, so that this session's teardown
// does not run inside the next one's timing (the bare floor client closes
// synchronously).
asio::awaitable<authrpc::Result<Clock::duration>> timed_session(asio::any_io_executor ex,
                                                                const authrpc::ClientOptions& base);

// One 1-byte sys.echo call on `client`, timed from before the call to the
// reply; a reply other than the byte sent is kDataLoss.
asio::awaitable<authrpc::Result<Clock::duration>> timed_echo(authrpc::Client& client);

}  // namespace minibench
