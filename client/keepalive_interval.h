// Internal: how long a client connection waits before its next keepalive
// look (ClientOptions::keepalive). Called by the connection's Keepalive on
// the connection's thread; no state but a per-thread random stream.
//
// Each wait is drawn from [0.8, 1] x the keepalive. With a fixed wait,
// connections opened together (a pool filled at start-up, minibench idle's
// windows) would PING together for as long as they live, and a timer run
// that starts late gathers the next ones into the same burst, so bursts only
// grow; the server then wakes them back to back, ahead of everything else
// (docs/DESIGN.md, "What an idle connection costs"). Shorter, never longer:
// the gap between frames stays under twice the keepalive.
#pragma once

#include <chrono>

namespace authrpc {

std::chrono::steady_clock::duration keepalive_interval(std::chrono::milliseconds keepalive);

}  // namespace authrpc
