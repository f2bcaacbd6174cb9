// The summary table of `minibench sessions`, printed after the detail lines
// in the shape of HADOOP-6637's MiniRPCBenchmark table: one line per
// transport × TLS, one column per kind of security (No security | Kerberos |
// Delegation token), each cell the mean in ms and the p50 in µs of that row,
// and each secure cell's p50 ratio to the No security cell of its line. A
// second table gives the interop (Cyrus SASL) paths the same way, a third
// (when measured) the bearer access tokens (jwt, over TLS only) with a line
// of the cold JWT check per algorithm (jwt-verify/<alg>), and a closing note
// says what is cached across sessions and how many connections the server
// accepted per session. Called by minibench/main.cc.
#pragma once

#include <cstddef>
#include <cstdio>
#include <vector>

#include "minibench/report.h"

namespace minibench {

// `warmup`: the warm-up sessions of each row (for the connection check).
void print_summary(std::FILE* out, const std::vector<Row>& rows, std::size_t warmup);

}  // namespace minibench
