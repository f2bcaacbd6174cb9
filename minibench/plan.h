// BenchPlan: what one benchmark mode (sessions, calls) is asked to measure —
// the sizes, and for each transport where the authrpc server and its bare
// floor listen. Shared by sessions.cc and calls.cc.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "rpc/endpoint.h"

namespace minibench {

// The servers to measure on one transport.
struct TransportServers {
  std::string transport;                   // "tcp" or "unix"
  authrpc::Endpoint authrpc;               // an authrpc server
  std::optional<authrpc::Endpoint> floor;  // a bare echo server; none: no floor row
};

struct BenchPlan {
  std::string method = "simple";
  std::size_t n = 1000;       // measured iterations per row
  std::size_t warmup = 100;   // untimed iterations per row first
  std::size_t blocks = 10;    // a row and its floor alternate in this many blocks
  bool progress = true;       // progress lines on stderr
  std::vector<TransportServers> transports;  // measured in this order
};

}  // namespace minibench
