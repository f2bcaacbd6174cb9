// minibench idle: what N idle authenticated connections cost a server — its
// memory per connection, and the latency of fresh sessions and calls made
// while they are held, next to the same with none held. The
// connections are authrpc::Clients of this process (simple and token,
// alternately), spread over several loopback source addresses
// (ClientOptions::local_address) and kept open past the server's idle
// timeout by their keepalive PINGs (ClientOptions::keepalive); the server is
// a ServerChild (server_child.h) whose memory is read from /proc and from its
// malloc (minibench_stats.memory). Called by minibench/main.cc for
// `minibench idle ...`; options in kIdleHelp.
#pragma once

namespace minibench {

extern const char* const kIdleHelp;

// argv: the options after "idle". Exit status: 0 measured (targets met or
// not), 1 a failure (connections not opened, or not held open), 2 usage.
int run_idle(int argc, char** argv);

}  // namespace minibench
