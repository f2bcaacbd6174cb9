// minibench: session-establishment and call latency of authrpc, each row
// next to a bare-socket floor measured in the same run (args.cc's kUsage),
// and the throughput, storm and idle benchmarks. This file only dispatches:
// a subcommand to its run_X; sessions and calls go through their stages,
// args.h (parse), prepare.h (plan), run.h (run, report).
//
// Process layout: the server side runs in a child process forked before this
// process starts any thread (server_child.h); the client side runs as Asio
// coroutines on a ClientRuntime with one IO thread.
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <string>

#include "authrpc/base/metrics.h"
#include "minibench/args.h"
#include "minibench/floor.h"
#include "minibench/idle.h"
#include "minibench/prepare.h"
#include "minibench/run.h"
#include "minibench/run_info.h"
#include "minibench/storm.h"
#include "minibench/throughput.h"

namespace minibench {
namespace {

// `minibench [sessions|calls] [options]`, its stages in order.
int run_sessions_and_calls(const Args& args) {
  std::signal(SIGPIPE, SIG_IGN);
  const nlohmann::ordered_json machine = machine_info();  // the load before this run adds to it
  bool usage = false;
  auto run = prepare(args, usage);
  if (!run.ok() && usage) return usage_error(run.status().message);
  if (!run.ok()) {
    std::fprintf(stderr, "minibench: %s\n", run.status().to_string().c_str());
    return 1;
  }
  describe(args, **run);
  Report report;
  nlohmann::ordered_json counted;
  if (authrpc::Status s = measure(args, **run, report, counted); !s.ok()) {
    std::fprintf(stderr, "minibench: %s\n", s.to_string().c_str());
    return 1;
  }
  return report_run(args, **run, report, counted, machine);
}

int print_version() {
  const auto version = authrpc::authrpc_version();
  const auto commit = authrpc::authrpc_git_commit();
  std::printf("minibench %.*s (commit %.*s)\n", static_cast<int>(version.size()), version.data(),
              static_cast<int>(commit.size()), commit.data());
  return 0;
}

}  // namespace
}  // namespace minibench

int main(int argc, char** argv) {
  const std::string command = argc > 1 ? argv[1] : "";
  if (command == "--version" || command == "version") return minibench::print_version();
  if (command == "throughput") return minibench::run_throughput(argc - 2, argv + 2);
  if (command == "storm") return minibench::run_storm(argc - 2, argv + 2);
  if (command == "idle") return minibench::run_idle(argc - 2, argv + 2);
  minibench::Args args;
  if (auto code = minibench::parse_args(argc, argv, args)) return *code;
  if (args.floor_server_mode) return minibench::run_floor_server(args);
  const int rc = minibench::run_sessions_and_calls(args);
  if (args.in_process) {
    // The in-process server's threads run until the end: no static
    // destructors under them.
    std::fflush(nullptr);
    ::_exit(rc);
  }
  return rc;
}
