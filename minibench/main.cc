// minibench: session-establishment and call latency of authrpc, each row
// next to a bare-socket floor measured in the same run. See kUsage.
//
// Process layout: the server side runs in a child process forked before this
// process starts any thread (server_child.h); the client side runs as Asio
// coroutines on a ClientRuntime with one IO thread.
#include <asio/co_spawn.hpp>
#include <asio/executor_work_guard.hpp>
#include <asio/io_context.hpp>
#include <algorithm>
#include <cerrno>
#include <csignal>
#include <sched.h>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "auth/mechanism_registry.h"
#include "client/client_runtime.h"
#include "minibench/calls.h"
#include "minibench/floor.h"
#include "minibench/report.h"
#include "minibench/server_child.h"
#include "minibench/sessions.h"

namespace minibench {
namespace {

using authrpc::Endpoint;
using authrpc::Status;

constexpr const char* kUsage = R"(usage: minibench [sessions|calls] [options]
       minibench floor-server URI...

Measures authrpc against a bare-socket floor in the same run. Each row prints
n, mean, p50, p95, p99, max (µs), iterations per second and its ratio to its
floor (p50 / floor p50).

  sessions   N sequential sessions per transport: new connection + negotiation
             + one sys.whoami call + close, timed from before connect to the
             reply; floor: connect + 1-byte echo + close on a bare listener.
             Target: p50 <= 1.25 x floor p50.
  calls      N 1-byte sys.echo calls on one open connection; floor: a 1-byte
             ping-pong on one raw connection. Target: p50 <= 1.3 x floor p50.
  (none)     sessions, then calls.
  floor-server URI...
             run bare echo listeners (the floors) on the given endpoints until
             SIGINT/SIGTERM, for --floor-server.

options:
  --method M          authentication method (default simple)
  --transport T       tcp, unix or all (default all)
  -n N                timed iterations per row (default 1000)
  --warmup W          untimed iterations per row before timing (default 100)
  --blocks B          each row and its floor alternate in B blocks (default 10)
  --server-threads K  IO threads of the spawned authrpc server (default 1)
  --server URI        measure a running authrpc-server at URI instead of
                      spawning one (its transport only; no floor unless
                      --floor-server is given)
  --floor-server URI  with --server: a bare echo server (minibench floor-server)
                      on the same kind of socket, for the floor rows
  --floor-thread T    where the spawned floor listeners run: "server" (default:
                      on the authrpc server's IO thread, so both are placed
                      alike by the scheduler) or "own" (a thread of their own)
  --server-cpu C      pin the spawned server (all its threads) to CPU C
  --client-cpu C      pin the client (this process) to CPU C
  --json FILE         also write {"rows": [...], "targets": [...]} to FILE
  --quiet             no progress lines on stderr
  --help              this text

The server runs in a child process: an authrpc server on tcp://127.0.0.1:0 and
an abstract unix socket, plus a bare echo listener per transport (the floors),
by default on the authrpc server's IO thread. The client runs on one IO thread
in this process. Nothing is pinned unless asked: where the scheduler puts the
two threads (same CPU or not) moves every number, so compare ratios, not
absolute times, and use --client-cpu/--server-cpu for a fixed layout.
Exit status: 0 when measured (targets met or not), 1 on a failure, 2 for usage.
)";

struct Args {
  bool sessions = true;
  bool calls = true;
  bool floor_server_mode = false;
  std::vector<std::string> floor_listen;
  std::string method = "simple";
  std::string transport = "all";
  bool transport_given = false;
  std::size_t n = 1000;
  std::size_t warmup = 100;
  std::size_t blocks = 10;
  std::size_t server_threads = 1;
  bool server_threads_given = false;
  std::string server;
  std::string floor_server;
  bool floors_on_server_thread = true;
  int server_cpu = -1;
  int client_cpu = -1;
  std::string json;
  bool progress = true;
};

int usage_error(const std::string& message) {
  std::fprintf(stderr, "minibench: %s\n(minibench --help for usage)\n", message.c_str());
  return 2;
}

bool parse_count(const std::string& text, std::size_t& out, std::size_t min) {
  char* end = nullptr;
  errno = 0;
  const unsigned long long v = std::strtoull(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno != 0 || text[0] == '-' || v < min) return false;
  out = static_cast<std::size_t>(v);
  return true;
}

// 0: parsed; otherwise the exit status (help printed or usage error).
int parse_args(int argc, char** argv, Args& args) {
  int i = 1;
  if (i < argc) {
    const std::string mode = argv[i];
    if (mode == "sessions") {
      args.calls = false;
      ++i;
    } else if (mode == "calls") {
      args.sessions = false;
      ++i;
    } else if (mode == "floor-server") {
      args.floor_server_mode = true;
      for (++i; i < argc; ++i) args.floor_listen.emplace_back(argv[i]);
      if (args.floor_listen.empty()) return usage_error("floor-server needs at least one URI");
      return 0;
    }
  }
  for (; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&](std::string& out) {
      if (i + 1 >= argc) return false;
      out = argv[++i];
      return true;
    };
    std::string v;
    if (arg == "--help" || arg == "-h") {
      std::fputs(kUsage, stdout);
      return -1;
    } else if (arg == "--quiet") {
      args.progress = false;
    } else if (arg == "sessions" || arg == "calls" || arg == "floor-server") {
      return usage_error("the mode '" + arg + "' must come first");
    } else if (!value(v)) {
      return usage_error("unknown option or missing value: '" + arg + "'");
    } else if (arg == "--method") {
      args.method = v;
    } else if (arg == "--transport") {
      if (v != "tcp" && v != "unix" && v != "all") {
        return usage_error("--transport: tcp, unix or all");
      }
      args.transport = v;
      args.transport_given = true;
    } else if (arg == "-n") {
      if (!parse_count(v, args.n, 1)) return usage_error("-n: a positive count");
    } else if (arg == "--warmup") {
      if (!parse_count(v, args.warmup, 0)) return usage_error("--warmup: a count");
    } else if (arg == "--blocks") {
      if (!parse_count(v, args.blocks, 1)) return usage_error("--blocks: a positive count");
    } else if (arg == "--server-threads") {
      if (!parse_count(v, args.server_threads, 1)) {
        return usage_error("--server-threads: a positive count");
      }
      args.server_threads_given = true;
    } else if (arg == "--server") {
      args.server = v;
    } else if (arg == "--floor-server") {
      args.floor_server = v;
    } else if (arg == "--floor-thread") {
      if (v != "server" && v != "own") return usage_error("--floor-thread: server or own");
      args.floors_on_server_thread = v == "server";
    } else if (arg == "--server-cpu" || arg == "--client-cpu") {
      std::size_t cpu = 0;
      if (!parse_count(v, cpu, 0) || cpu >= CPU_SETSIZE) return usage_error(arg + ": a CPU number");
      (arg == "--server-cpu" ? args.server_cpu : args.client_cpu) = static_cast<int>(cpu);
    } else if (arg == "--json") {
      args.json = v;
    } else {
      return usage_error("unknown option '" + arg + "'");
    }
  }
  const auto registry = authrpc::MechanismRegistry::with_builtins();
  bool known = false;
  for (const auto& name : registry.client_names()) known = known || name == args.method;
  if (!known) {
    std::string names;
    for (const auto& name : registry.client_names()) names += (names.empty() ? "" : ", ") + name;
    return usage_error("--method: unknown method '" + args.method + "' (available: " + names + ")");
  }
  if (!args.floor_server.empty() && args.server.empty()) {
    return usage_error("--floor-server needs --server");
  }
  if (!args.server.empty() && (args.server_threads_given || args.server_cpu >= 0)) {
    return usage_error("--server-threads and --server-cpu apply to the spawned server only");
  }
  args.blocks = std::min(args.blocks, args.n);
  return 0;
}

// `minibench floor-server URI...`: bare echo listeners until SIGINT/SIGTERM.
int run_floor_server(const Args& args) {
  std::vector<Endpoint> endpoints;
  for (const auto& uri : args.floor_listen) {
    auto ep = Endpoint::parse(uri);
    if (!ep.ok()) return usage_error(ep.status().to_string());
    endpoints.push_back(*ep);
  }
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  asio::io_context io{1};
  std::vector<std::unique_ptr<FloorServer>> servers;
  for (const auto& ep : endpoints) {
    auto server = FloorServer::start(io.get_executor(), ep);
    if (!server.ok()) {
      std::fprintf(stderr, "minibench: %s\n", server.status().to_string().c_str());
      return 1;
    }
    std::printf("%s\n", (*server)->endpoint().to_string().c_str());
    servers.push_back(std::move(*server));
  }
  std::fflush(stdout);
  auto work = asio::make_work_guard(io);
  std::thread thread([&io] { io.run(); });
  int received = 0;
  sigwait(&signals, &received);
  io.stop();
  thread.join();
  return 0;
}

// Where to measure: a spawned child's endpoints, or --server/--floor-server.
authrpc::Result<std::vector<TransportServers>> servers_for(const Args& args,
                                                           const ServerChild* child) {
  std::vector<TransportServers> servers;
  if (child == nullptr) {
    auto server = Endpoint::parse(args.server);
    if (!server.ok()) return server.status();
    TransportServers t{std::string(server->scheme_name()), *server, std::nullopt};
    if (args.transport_given && args.transport != "all" && args.transport != t.transport) {
      return Status(authrpc::Errc::kInvalidArgument,
                    "--transport " + args.transport + " but --server is " + t.transport);
    }
    if (!args.floor_server.empty()) {
      auto floor = Endpoint::parse(args.floor_server);
      if (!floor.ok()) return floor.status();
      if (floor->scheme != server->scheme) {
        return Status(authrpc::Errc::kInvalidArgument,
                      "--floor-server must use the same transport as --server");
      }
      t.floor = *floor;
    }
    servers.push_back(std::move(t));
    return servers;
  }
  for (const std::string transport : {"tcp", "unix"}) {
    if (args.transport != "all" && args.transport != transport) continue;
    servers.push_back({transport, child->endpoints().at("authrpc/" + transport),
                       child->endpoints().at("floor/" + transport)});
  }
  return servers;
}

int run(const Args& args) {
  std::signal(SIGPIPE, SIG_IGN);
  std::unique_ptr<ServerChild> child;
  if (args.server.empty()) {
    // Forks: no thread may exist in this process yet.
    auto spawned = ServerChild::spawn(
        {args.method, args.server_threads, args.server_cpu, args.floors_on_server_thread});
    if (!spawned.ok()) {
      std::fprintf(stderr, "minibench: %s\n", spawned.status().to_string().c_str());
      return 1;
    }
    child = std::move(*spawned);
  }
  if (args.client_cpu >= 0 && !pin_to_cpu(args.client_cpu)) {
    std::fprintf(stderr, "minibench: cannot pin the client to CPU %d\n", args.client_cpu);
    return 1;
  }
  auto servers = servers_for(args, child.get());
  if (!servers.ok()) return usage_error(servers.status().to_string());

  BenchPlan plan;
  plan.method = args.method;
  plan.n = args.n;
  plan.warmup = args.warmup;
  plan.blocks = args.blocks;
  plan.progress = args.progress;
  plan.transports = std::move(*servers);

  if (child) {
    std::printf("minibench: method %s; server: child pid %d, %zu IO thread(s); floors: bare "
                "echo listeners on %s; client: 1 IO thread\n",
                args.method.c_str(), static_cast<int>(child->pid()), args.server_threads,
                args.floors_on_server_thread ? "the server's IO thread" : "a thread of their own");
    if (args.client_cpu >= 0 || args.server_cpu >= 0) {
      std::printf("minibench: pinned: client to CPU %d, server to CPU %d (-1: not pinned)\n",
                  args.client_cpu, args.server_cpu);
    }
  } else {
    std::printf("minibench: method %s; server: %s (not spawned); client: 1 IO thread\n",
                args.method.c_str(), args.server.c_str());
    if (args.floor_server.empty()) {
      std::printf("minibench: no --floor-server: floor rows are left out, rows have no ratio\n");
    }
  }
  std::printf("minibench: n %zu, warm-up %zu, %zu interleaved blocks; times in µs\n", plan.n,
              plan.warmup, plan.blocks);
  std::fflush(stdout);

  Report report;
  Status status;
  // The client side runs on a ClientRuntime, as an application's would.
  authrpc::ClientRuntime runtime(1);
  asio::io_context& io = runtime.next_context();
  std::promise<void> done;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        if (args.sessions) status = co_await run_sessions(io.get_executor(), plan, report);
        if (status.ok() && args.calls) status = co_await run_calls(io.get_executor(), plan, report);
      },
      [&](std::exception_ptr e) {
        if (e) {
          try {
            std::rethrow_exception(e);
          } catch (const std::exception& ex) {
            status = Status(authrpc::Errc::kInternal, std::string("exception: ") + ex.what());
          }
        }
        done.set_value();
      });
  done.get_future().wait();
  if (child) child->stop();

  if (!status.ok()) {
    std::fprintf(stderr, "minibench: %s\n", status.to_string().c_str());
    return 1;
  }
  report.print_rows(stdout);
  report.print_targets(stdout);
  if (!args.json.empty()) {
    if (Status s = report.write_json(args.json); !s.ok()) {
      std::fprintf(stderr, "minibench: %s\n", s.to_string().c_str());
      return 1;
    }
  }
  return 0;
}

}  // namespace
}  // namespace minibench

int main(int argc, char** argv) {
  minibench::Args args;
  if (int rc = minibench::parse_args(argc, argv, args); rc != 0) return rc < 0 ? 0 : rc;
  if (args.floor_server_mode) return minibench::run_floor_server(args);
  return minibench::run(args);
}
