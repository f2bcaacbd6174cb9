// `minibench storm`: legitimate sessions next to a storm of unauthenticated
// connections. A server in a child process (simple mechanism,
// tcp://127.0.0.1, default pre-authentication limits unless given) serves N
// sequential `simple` sessions — connect + negotiation + one sys.whoami call
// + close — first quietly, then while an attacker thread keeps --connections
// silent (or, with --slow, byte-dripping) connections open from --addresses
// source addresses 127.0.0.2, 127.0.0.3, …, re-opening each one the server
// closes. Prints p50/p99 of both phases and their ratios, the attacker's
// connection rate and the server's shed/refused counts. The storm is bounded
// by its connection count and by --max-seconds.
//
// Process layout as in the rest of minibench: the server and the attacker
// processes are forked before any thread; the sessions run on this
// process's main thread. Each attacker process raises its RLIMIT_NOFILE to
// the hard limit and holds at most that many connections less 256, so a
// storm larger than one process's limit runs in several; it says so.
#pragma once

namespace minibench {

// argv holds the options after the word "storm". Returns the exit status:
// 0 measured, 1 failure, 2 usage.
int run_storm(int argc, char** argv);

// The help paragraph main.cc's usage shows for this mode.
extern const char* const kStormHelp;

}  // namespace minibench
