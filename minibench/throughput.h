// `minibench throughput`: bulk-transfer speed of authrpc streaming calls, in
// the style of arrow-flight-benchmark (DoGet / DoPut of fixed-size batches
// over S concurrent streams), next to a floor measured in the same run: a
// bare socket (or bare OpenSSL) stream of the same bytes in the same batch
// size, with no framework. See kThroughputUsage in throughput.cc.
//
// Process layout as in the rest of minibench: the server side (an authrpc
// Server with a streaming "bench" service on tcp, unix and tls, and the bare
// floor listeners) runs in a child process forked before any thread; the
// client side runs in this process (authrpc rows on one ClientRuntime IO
// thread, floor rows on one plain thread per stream).
#pragma once

namespace minibench {

// argv holds the options after the word "throughput". Returns the exit
// status: 0 measured (targets met or not), 1 failure, 2 usage.
int run_throughput(int argc, char** argv);

// The help paragraph main.cc's --help shows for this mode.
extern const char* const kThroughputHelp;

}  // namespace minibench
