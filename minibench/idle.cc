#include "minibench/idle.h"

#include <asio/co_spawn.hpp>
#include <asio/post.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/use_future.hpp>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "authrpc/auth/mechanism_registry.h"
#include "authrpc/auth/mechanisms/simple/simple.h"
#include "authrpc/client/client.h"
#include "authrpc/client/client_runtime.h"
#include "authrpc/tools/cli_exit.h"
#include "authrpc/tools/flag_parser.h"
#include "minibench/args.h"
#include "minibench/schedule.h"
#include "minibench/realm.h"
#include "minibench/rotation.h"
#include "minibench/run_info.h"
#include "minibench/server_child.h"
#include "minibench/stats.h"
#include "minibench/tokens.h"

namespace minibench {

const char* const kIdleHelp = R"(  idle [--connections N] [--method simple,token] [--transport tcp|unix]
       [--addresses A] [--idle-timeout-ms T] [--keepalive-ms K] [-n N]
       [--warmup W] [--blocks B] [--window W] [--server-threads K] [--exact]
       [--json FILE] [--quiet]
             N (default 10000) idle authenticated connections held by one
             server: its memory per connection, and fresh sessions and calls
             with them held next to the same without (quiet: before opening
             them and after closing them, pooled). The connections alternate
             between the methods (default simple and token; token fetches a
             delegation token over Kerberos from a throwaway realm first, and
             is left out with a note when krb5kdc is missing), each
             authenticated before the next counts, at most --window (default
             32) negotiating at once; over tcp they come from A (default 4)
             source addresses 127.0.0.2... (ClientOptions::local_address),
             round robin, so that no address needs more than its ~28,000
             ephemeral ports. The server (a child process, K IO threads,
             default 1) closes connections idle for T ms (default 10000); the
             clients send a keepalive PING after K ms with nothing sent
             (default T / 4, at most T / 2; ClientOptions::keepalive). Once every connection
             is open, minibench waits until the last opened has been idle for
             T + K ms, so that every connection has outlived the idle timeout
             on its keepalives, then reads the server's memory and measures;
             at the end it checks that all N are still open (their status,
             the server's count) and answer a sys.echo each.
             Rows (n each per phase, default 1000, W untimed first, default
             100, in B interleaved blocks, default 10): fresh <method>/<t>
             session (connect + negotiation + sys.whoami + close) per method,
             and calls/<t> (1-byte sys.echo on one open connection).
             Memory of the server child (/proc/<pid>/status and
             smaps_rollup: RSS, Pss, Private; and the malloc heap in use,
             mallinfo2, all arenas), before opening and with N held; per
             connection = difference / N. Only user-space memory: the kernel's
             socket structures and buffers are not in RSS (the TCP buffer
             pages of /proc/net/sockstat are shown beside it, system-wide).
             This process's RSS per connection is shown too (the clients).
             The idle connections have a client thread of their own, the
             measured client another (on 2 CPUs they share them with the
             server: a loaded machine moves the p99s, and one that starves
             the idle connections' thread of CPU for longer than the idle
             timeout less 2 keepalives loses connections, exit status 1).
             Descriptors: minibench raises its soft RLIMIT_NOFILE to the hard
             limit (the server child inherits it); each side holds one
             descriptor per connection, so N is at most the hard limit less a
             reserve of 512. A larger N is measured at that largest N, said
             so in the output and JSON ("n_asked"), unless --exact (then it
             fails). Targets: server memory per connection <= 4 KiB; each
             fresh session row's p99 with N held <= 2 x its quiet p99.
)";

namespace {

using authrpc::Client;
using authrpc::ClientOptions;
using authrpc::Endpoint;
using authrpc::Errc;
using authrpc::Result;
using authrpc::Status;

constexpr const char* kSee = "minibench idle --help";
constexpr double kMemoryTarget = 4.0;    // KiB per connection
constexpr double kLatencyTarget = 2.0;   // p99 with idle / quiet p99
constexpr std::size_t kDescriptorReserve = 512;
constexpr std::size_t kTargetN = 100'000;  // the N the targets are set for

struct IdleArgs : BlockSizes {
  std::size_t connections = 10'000;
  std::vector<std::string> methods = {"simple", "token"};  // names: idle row label
  bool methods_given = false;
  std::string transport = "tcp";
  std::size_t addresses = 4;
  std::chrono::milliseconds idle_timeout{10000};
  std::optional<std::chrono::milliseconds> keepalive;
  std::size_t window = 32;
  std::size_t server_threads = 1;
  bool exact = false;
  std::string json;
  bool progress = true;
};

// --- memory ----------------------------------------------------------------

// The "<key>: <n> kB" lines of a /proc file, in KiB.
std::map<std::string, double> proc_kib(const std::string& path) {
  std::map<std::string, double> out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    const auto colon = line.find(':');
    if (colon == std::string::npos || line.find(" kB") == std::string::npos) continue;
    out[line.substr(0, colon)] = std::atof(line.c_str() + colon + 1);
  }
  return out;
}

// Pages of TCP socket buffers, system-wide (/proc/net/sockstat "TCP: ... mem M").
std::optional<double> sockstat_tcp_kib() {
  std::ifstream in("/proc/net/sockstat");
  for (std::string line; std::getline(in, line);) {
    if (!line.starts_with("TCP:")) continue;
    const auto at = line.find(" mem ");
    if (at == std::string::npos) return std::nullopt;
    return std::atof(line.c_str() + at + 5) * static_cast<double>(::sysconf(_SC_PAGESIZE)) / 1024;
  }
  return std::nullopt;
}

// One reading of both processes' memory, in KiB.
struct MemoryReading {
  double rss = 0, pss = 0, private_kib = 0;  // server child
  double heap = 0;                           // server child's malloc heap in use
  double client_rss = 0;                     // this process
  std::optional<double> kernel_tcp;          // /proc/net/sockstat, system-wide
  long server_connections = -1;              // its connections_active
  long server_parked = -1;                   // and connections_parked

  nlohmann::ordered_json json() const {
    return {{"server_rss_kib", rss},
            {"server_pss_kib", pss},
            {"server_private_kib", private_kib},
            {"server_heap_in_use_kib", heap},
            {"client_rss_kib", client_rss},
            {"kernel_tcp_buffers_kib", kernel_tcp ? nlohmann::ordered_json(*kernel_tcp)
                                                  : nlohmann::ordered_json(nullptr)},
            {"server_connections_active", server_connections},
            {"server_connections_parked", server_parked}};
  }
};

Result<MemoryReading> read_memory(const ServerChild& child) {
  MemoryReading m;
  const std::string proc = "/proc/" + std::to_string(child.pid());
  const auto status = proc_kib(proc + "/status");
  const auto rollup = proc_kib(proc + "/smaps_rollup");
  if (!status.contains("VmRSS") || !rollup.contains("Pss")) {
    return Status(Errc::kUnavailable, "cannot read " + proc + "/status and smaps_rollup");
  }
  m.rss = status.at("VmRSS");
  m.pss = rollup.at("Pss");
  m.private_kib = rollup.at("Private_Clean") + rollup.at("Private_Dirty");
  m.client_rss = proc_kib("/proc/self/status")["VmRSS"];
  m.kernel_tcp = sockstat_tcp_kib();
  auto heap = child.memory();
  if (!heap.ok()) return heap.status();
  m.heap = (*heap)["heap_in_use"].get<double>() / 1024;
  m.server_connections = (*heap)["connections_active"].get<long>();
  m.server_parked = (*heap).value("connections_parked", -1L);
  return m;
}

// --- sessions and calls ----------------------------------------------------

// Runs `work` on `io` and waits for its result from this (another) thread.
template <typename T>
T run_on(asio::io_context& io, asio::awaitable<T> work) {
  return asio::co_spawn(io, std::move(work), asio::use_future).get();
}

// A row measured in phases: quiet (no idle connections) and idle.
struct LatencyRow {
  std::string name;              // "fresh simple/tcp session", "calls/tcp"
  std::optional<ClientOptions> session;  // set: fresh sessions with these; else calls
  std::vector<double> quiet_us, idle_us;
};

// `count` iterations of `row` on `io` (`calls`: the open connection of the
// calls row); the samples in µs, or the first failure.
Result<std::vector<double>> measure(asio::io_context& io, const LatencyRow& row, Client* calls,
                                    std::size_t count) {
  return run_on(io, [&]() -> asio::awaitable<Result<std::vector<double>>> {
    std::vector<double> us;
    us.reserve(count);
    for (std::size_t i = 0; i < count; ++i) {
      auto t = row.session ? co_await timed_session(io.get_executor(), *row.session) : co_await timed_echo(*calls);
      if (!t.ok()) co_return Status(t.code(), row.name + ": " + t.status().message);
      us.push_back(std::chrono::duration<double, std::micro>(*t).count());
    }
    co_return us;
  }());
}

// One phase: warm-up, then every row in `blocks` blocks whose order rotates
// (rotation.h).
Status measure_phase(asio::io_context& io, std::vector<LatencyRow>& rows, Client* calls,
                     const IdleArgs& args, bool idle, const char* label) {
  if (args.progress) std::fprintf(stderr, "minibench idle: measuring (%s)\n", label);
  const std::size_t sizes[] = {rows.size()};
  for (const Turn& t : rotation(sizes, args.blocks, true)) {
    LatencyRow& row = rows[t.side];
    auto us = measure(io, row, calls, t.timed ? block_share(args.n, args.blocks, t.block) : args.warmup);
    if (!us.ok()) return us.status();
    if (!t.timed) continue;
    auto& into = idle ? row.idle_us : row.quiet_us;
    into.insert(into.end(), us->begin(), us->end());
  }
  return Status();
}

struct Percentiles {
  std::size_t n = 0;
  double p50 = 0, p99 = 0, max = 0;
};

Percentiles percentiles(std::vector<double> us) {
  std::sort(us.begin(), us.end());
  return {us.size(), percentile(us, 0.5), percentile(us, 0.99), us.empty() ? 0 : us.back()};
}

// --- the idle connections --------------------------------------------------

// Runs job(i) for i in [0, count) on `io`, at most `window` at once; the
// number that succeeded, and the first failure.
std::pair<std::size_t, Status> windowed(asio::io_context& io, std::size_t count, std::size_t window,
                                        const std::function<asio::awaitable<Status>(std::size_t)>& job,
                                        bool progress, const char* what) {
  std::deque<std::future<Status>> running;
  std::size_t ok = 0;
  Status first_failure;
  auto last_note = Clock::now();
  auto collect = [&] {
    Status s = running.front().get();
    running.pop_front();
    if (s.ok()) {
      ++ok;
    } else if (first_failure.ok()) {
      first_failure = std::move(s);
    }
  };
  for (std::size_t i = 0; i < count; ++i) {
    if (running.size() >= window) collect();
    if (!first_failure.ok()) break;
    running.push_back(asio::co_spawn(io, job(i), asio::use_future));
    if (progress && Clock::now() - last_note > std::chrono::seconds(2)) {
      last_note = Clock::now();
      std::fprintf(stderr, "minibench idle: %s %zu/%zu\n", what, i, count);
    }
  }
  while (!running.empty()) collect();
  return {ok, first_failure};
}

// Reads argv: nullopt to go on; else the exit status (help printed: 0).
std::optional<int> parse_idle_args(int argc, char** argv, IdleArgs& args) {
  using authrpc::cli::count;
  constexpr std::size_t kAny = SIZE_MAX;
  const auto ms = [](std::chrono::milliseconds* out, std::size_t min) {
    return [out, min](std::string_view v) {
      std::size_t n = 0;
      if (auto s = count(&n, min, kAny)(v); !s.ok()) return s;
      *out = std::chrono::milliseconds(n);
      return Status();
    };
  };
  authrpc::cli::FlagParser parser;
  parser.value("--connections", count(&args.connections, 1, kAny))
      .value("--method",
             [&args](std::string_view v) {
               args.methods_given = true;
               if (auto s = authrpc::cli::list(&args.methods)(v); !s.ok()) return s;
               for (const auto& m : args.methods) {
                 if (m != "simple" && m != "token") {  // names: idle row label
                   return Status(authrpc::Errc::kInvalidArgument, "simple, token or both (simple,token)");
                 }
               }
               return Status();
             })
      .value("--transport", authrpc::cli::one_of(&args.transport, {"tcp", "unix"}))
      .value("--addresses", count(&args.addresses, 1, 250))
      .value("--idle-timeout-ms", ms(&args.idle_timeout, 100))
      .value("--keepalive-ms",
             [&args, ms](std::string_view v) {
               std::chrono::milliseconds k{};
               if (auto s = ms(&k, 1)(v); !s.ok()) return s;
               args.keepalive = k;
               return Status();
             });
  args.add_options(parser);
  parser.value("--window", count(&args.window, 1, kAny))
      .value("--server-threads", count(&args.server_threads, 1, kAny))
      .flag("--exact", &args.exact)
      .value("--json", &args.json)
      .flag("--quiet", [&args] { args.progress = false; });
  const std::string help = std::string("usage: minibench idle [options]\n") + kIdleHelp;
  if (auto code = authrpc::cli::parse_or_exit(parser, argc, argv, help, "minibench", kSee, "idle: ")) return code;
  // A PING can come up to two intervals apart (ClientOptions::keepalive):
  // a quarter leaves half the idle timeout for a loaded machine's delays.
  if (args.keepalive.value_or(args.idle_timeout / 4) * 2 >= args.idle_timeout) {
    return authrpc::cli::report_usage("minibench", "idle: --keepalive-ms must be below half --idle-timeout-ms", kSee);
  }
  args.blocks = std::min(args.blocks, args.n);
  return std::nullopt;
}

// --- the run, in steps ------------------------------------------------------

// What run_idle's steps set up, measure and report.
struct IdleRun {
  IdleArgs args;
  std::chrono::milliseconds keepalive{};
  nlohmann::ordered_json machine;
  // Descriptors (size_to_descriptors).
  rlim_t soft_before = 0;
  std::size_t hard = 0, largest = 0, n = 0;
  std::string limit_note;
  // The server and the clients' mechanisms (start_server).
  std::unique_ptr<BenchRealm> realm;
  std::string token_dir;
  std::unique_ptr<ServerChild> child;
  int server_pid = -1;
  Endpoint endpoint;
  std::map<std::string, std::shared_ptr<authrpc::ClientMechanism>> mechanisms;
  // What was measured (hold_and_measure).
  std::vector<LatencyRow> rows;
  MemoryReading before, with;
  Result<MemoryReading> after = Status(Errc::kUnavailable, "not read");
  double open_seconds = 0, held_seconds = 0;
  std::size_t still_open = 0, answered = 0;
  Status echo_failure;
  long server_active = -1;

  IdleRun() = default;
  IdleRun(const IdleRun&) = delete;
  IdleRun& operator=(const IdleRun&) = delete;
  ~IdleRun() {
    child.reset();  // stopped before its token store goes
    std::error_code ignored;
    if (!token_dir.empty()) std::filesystem::remove_all(token_dir, ignored);
  }

  ClientOptions options_for(const std::string& method) const {
    ClientOptions o;
    o.endpoint = endpoint;
    o.mechanisms = {mechanisms.at(method)};
    o.connect_timeout = std::chrono::seconds(30);
    return o;
  }
};

// Descriptors: one per connection on each side. Raised here, before the
// fork, so that the server child has the same limit; N is what it allows.
Status size_to_descriptors(IdleRun& run) {
  rlimit limit{};
  ::getrlimit(RLIMIT_NOFILE, &limit);
  run.soft_before = limit.rlim_cur;
  if (limit.rlim_cur != limit.rlim_max) {
    rlimit raised{limit.rlim_max, limit.rlim_max};
    if (::setrlimit(RLIMIT_NOFILE, &raised) == 0) limit = raised;
  }
  run.hard = limit.rlim_max == RLIM_INFINITY ? static_cast<std::size_t>(-1) : static_cast<std::size_t>(limit.rlim_max);
  run.largest = run.hard > kDescriptorReserve ? run.hard - kDescriptorReserve : 0;
  const std::size_t asked = run.args.connections;
  run.n = std::min(asked, run.largest);
  run.limit_note = "RLIMIT_NOFILE: soft " + std::to_string(run.soft_before) + " raised to the hard limit " +
                   std::to_string(run.hard) + " in this process and the server child (which inherits it); " +
                   "each side holds one descriptor per connection, so at most " + std::to_string(run.largest) +
                   " connections (the hard limit less " + std::to_string(kDescriptorReserve) + " in reserve)";
  std::printf("minibench idle: %s\n", run.limit_note.c_str());
  if (run.n == asked) return {};
  if (run.args.exact || run.n == 0) {
    return Status(Errc::kResourceExhausted,
                  std::to_string(asked) + " connections cannot be held here: " + run.limit_note +
                      " (the hard limit is raised only with privilege, e.g. CAP_SYS_RESOURCE or limits.conf)");
  }
  std::printf("minibench idle: %zu connections asked; measuring the largest N this limit "
              "allows, %zu (--exact: fail instead)\n",
              asked, run.n);
  return {};
}

// The token method's realm and token directory (before the fork: the realm
// sets the Kerberos environment the child inherits). Without a realm the
// token connections are left out, unless --method asked for them.
Status open_realm(IdleRun& run) {
  auto& methods = run.args.methods;
  if (std::find(methods.begin(), methods.end(), "token") == methods.end()) return {};  // names: idle row label
  auto opened = BenchRealm::open(RealmFlags{});
  if (!opened.ok() && run.args.methods_given) {
    return Status(opened.code(), "token needs a Kerberos realm: " + opened.status().to_string());
  }
  if (!opened.ok()) {
    std::fprintf(stderr, "minibench idle: the token connections are left out: %s\n",
                 opened.status().to_string().c_str());
    std::erase(methods, std::string("token"));  // names: idle row label
    return {};
  }
  run.realm = std::move(*opened);
  const char* tmp = std::getenv("TMPDIR");
  std::string t = std::string(tmp && *tmp ? tmp : "/tmp") + "/minibench-idle-XXXXXX";
  if (::mkdtemp(t.data()) == nullptr) return Status(Errc::kInternal, "cannot create a token directory");
  run.token_dir = t;
  return {};
}

// Spawns the server child (no thread exists yet) and makes the clients'
// mechanisms, one instance per method shared by its clients (the token
// method's token fetched over Kerberos).
Status start_server(IdleRun& run) {
  const auto registry = authrpc::MechanismRegistry::with_builtins();
  ServerChildOptions options;
  options.server_threads = run.args.server_threads;
  options.idle_timeout = run.args.idle_timeout;
  // Room for every idle connection and the measured ones beside them.
  options.max_connections = run.n + 64;
  options.mechanisms.push_back({"simple", nlohmann::json::object(), false});  // names: idle row label
  const std::string issuer = token_issuer(registry);  // the token is fetched over it
  if (run.realm) {
    options.mechanisms.push_back({"token", nlohmann::json::object(), false});
    options.mechanisms.push_back({issuer, run.realm->setup().server_options(), false});
    options.token_store_dir = run.token_dir + "/store";
  }
  auto spawned = ServerChild::spawn(options);
  if (!spawned.ok()) return spawned.status();
  run.child = std::move(*spawned);
  run.server_pid = static_cast<int>(run.child->pid());
  run.endpoint = run.child->endpoints().at("authrpc/" + run.args.transport);
  run.mechanisms["simple"] = std::make_shared<authrpc::SimpleClientMechanism>("minibench");  // names: idle row label
  if (!run.realm) return {};
  ClientOptions fetch_from;
  fetch_from.endpoint = run.child->endpoints().at("authrpc/tcp");
  auto token = fetch_token(fetch_from, run.realm->setup().client_options(), run.token_dir + "/bench.tokens");
  if (!token.ok()) return token.status();
  auto made = registry.make_client("token", *token);  // names: idle row label
  if (!made.ok()) return Status(made.code(), "token client: " + made.status().to_string());
  run.mechanisms["token"] = *made;
  return {};
}

void print_header(const IdleRun& run) {
  const IdleArgs& args = run.args;
  std::string methods;
  for (const auto& x : args.methods) methods += (methods.empty() ? "" : ", ") + x;
  const std::string from =
      args.transport == "tcp"
          ? " from " + std::to_string(args.addresses) + " source address(es) 127.0.0.2-" + "127.0.0." +
                std::to_string(1 + args.addresses) + ", at most " +
                std::to_string((run.n + args.addresses - 1) / args.addresses) + " ports each"
          : "";
  std::printf("minibench idle: N %zu authenticated connections (%s, alternately) over %s%s; "
              "server: child pid %d, %zu IO thread(s), idle timeout %lld ms; clients: keepalive "
              "%lld ms, at most %zu negotiating at once; n %zu per row and phase, warm-up %zu, "
              "%zu blocks; times in µs\n",
              run.n, methods.c_str(), args.transport.c_str(), from.c_str(), run.server_pid, args.server_threads,
              static_cast<long long>(args.idle_timeout.count()), static_cast<long long>(run.keepalive.count()),
              args.window, args.n, args.warmup, args.blocks);
  std::fflush(stdout);
}

// Opens N connections on `holder`, each authenticated, from the source
// addresses in turn.
Status open_idle(IdleRun& run, asio::io_context& holder, std::vector<std::unique_ptr<Client>>& idle) {
  const IdleArgs& args = run.args;
  const auto opening = Clock::now();
  auto [opened, failure] = windowed(
      holder, run.n, args.window,
      [&](std::size_t i) -> asio::awaitable<Status> {
        ClientOptions o = run.options_for(args.methods[i % args.methods.size()]);
        o.keepalive = run.keepalive;
        o.metrics = nullptr;  // held, not measured
        if (args.transport == "tcp") o.local_address = "127.0.0." + std::to_string(2 + i % args.addresses);
        auto client = co_await Client::async_connect(holder.get_executor(), std::move(o));
        if (!client.ok()) co_return client.status();
        idle[i] = std::move(*client);
        co_return Status();
      },
      args.progress, "opened");
  run.open_seconds = std::chrono::duration<double>(Clock::now() - opening).count();
  if (opened < run.n) {
    return Status(failure.code, "opened " + std::to_string(opened) + " of " + std::to_string(run.n) +
                                    " connections: " + failure.to_string());
  }
  std::printf("minibench idle: %zu connections opened and authenticated in %.1f s (%.0f/s)\n", run.n,
              run.open_seconds, static_cast<double>(run.n) / run.open_seconds);
  std::fflush(stdout);
  return {};
}

// Whether the held connections are still open and answering: counts them
// and asks each for a sys.echo.
void check_held(IdleRun& run, asio::io_context& holder, const std::vector<std::unique_ptr<Client>>& idle) {
  for (const auto& c : idle) run.still_open += c && c->connection_status().ok() ? 1 : 0;
  auto [answered, failure] = windowed(
      holder, run.n, 256,
      [&](std::size_t i) -> asio::awaitable<Status> {
        auto reply = co_await idle[i]->async_call("sys", "echo", "x");
        co_return reply.ok() ? Status() : reply.status();
      },
      false, "");
  run.answered = answered;
  run.echo_failure = failure;
}

// The phases: quiet before; N opened and held idle past the idle timeout on
// keepalives alone; fresh sessions and calls with them held; closed, quiet
// again; the server's memory between them. Two client threads: the idle
// connections' and the measured clients', so that keepalives are not
// handled inside a timed session's turns.
Status hold_and_measure(IdleRun& run) {
  const IdleArgs& args = run.args;
  authrpc::ClientRuntime holder_runtime(1);
  authrpc::ClientRuntime measuring_runtime(1);
  asio::io_context& holder = holder_runtime.next_context();
  asio::io_context& measuring = measuring_runtime.next_context();
  for (const auto& method : args.methods) {
    ClientOptions o = run.options_for(method);
    o.wait_for_authentication = false;  // as minibench sessions' rows
    run.rows.push_back({"fresh " + method + "/" + args.transport + " session", std::move(o), {}, {}});
  }
  run.rows.push_back({"calls/" + args.transport, std::nullopt, {}, {}});
  ClientOptions calls_options = run.options_for("simple");  // names: idle row label
  calls_options.keepalive = run.keepalive;  // it waits out the hold too
  auto calls = run_on(measuring, Client::async_connect(measuring.get_executor(), std::move(calls_options)));
  if (!calls.ok()) return Status(calls.code(), "calls connection: " + calls.status().to_string());
  print_header(run);

  Status status = measure_phase(measuring, run.rows, calls->get(), args, false, "quiet, before");
  if (!status.ok()) return status;
  auto before = read_memory(*run.child);
  if (!before.ok()) return before.status();
  run.before = *before;
  std::vector<std::unique_ptr<Client>> idle(run.n);
  auto close_idle = [&] {
    run_on(holder, [&]() -> asio::awaitable<void> {
      idle.clear();
      co_return;
    }());
  };
  status = open_idle(run, holder, idle);
  const auto held_from = Clock::now();
  const auto hold = args.idle_timeout + run.keepalive;
  if (status.ok() && args.progress) {
    std::fprintf(stderr, "minibench idle: holding them idle for %lld ms\n", static_cast<long long>(hold.count()));
  }
  if (status.ok()) std::this_thread::sleep_for(hold);
  auto with = status.ok() ? read_memory(*run.child) : Result<MemoryReading>(status);
  if (!with.ok()) {
    close_idle();
    return with.status();
  }
  run.with = *with;
  status = measure_phase(measuring, run.rows, calls->get(), args, true, "with N idle");
  check_held(run, holder, idle);
  run.held_seconds = std::chrono::duration<double>(Clock::now() - held_from).count();
  auto server_during = read_memory(*run.child);
  run.server_active = server_during.ok() ? server_during->server_connections : -1;
  close_idle();
  if (status.ok()) {
    // The server sees the closes on its next turns.
    for (int i = 0; i < 100; ++i) {
      auto now = read_memory(*run.child);
      if (now.ok() && now->server_connections <= run.before.server_connections + 1) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    status = measure_phase(measuring, run.rows, calls->get(), args, false, "quiet, after");
  }
  run.after = read_memory(*run.child);
  calls->reset();
  run.child->stop();
  return status;
}

// The rows' table on stdout; their JSON, and their targets (lines and JSON).
nlohmann::ordered_json print_rows(const IdleRun& run, nlohmann::ordered_json& targets,
                                  std::vector<std::string>& target_lines) {
  std::printf("\n%-28s %-6s %6s %9s %9s %9s %9s\n", "row", "phase", "n", "p50", "p99", "max", "p99 idle/quiet");
  nlohmann::ordered_json json_rows = nlohmann::ordered_json::array();
  const std::string prefix = "idle N=" + std::to_string(run.n) + ": ";
  for (const auto& row : run.rows) {
    const Percentiles q = percentiles(row.quiet_us), w = percentiles(row.idle_us);
    const double ratio = q.p99 > 0 ? w.p99 / q.p99 : 0;
    std::printf("%-28s %-6s %6zu %9.1f %9.1f %9.1f\n", row.name.c_str(), "quiet", q.n, q.p50, q.p99, q.max);
    std::printf("%-28s %-6s %6zu %9.1f %9.1f %9.1f %9.2f\n", row.name.c_str(), "idle", w.n, w.p50, w.p99, w.max,
                ratio);
    json_rows.push_back({{"name", row.name},
                         {"quiet", {{"n", q.n}, {"p50_us", q.p50}, {"p99_us", q.p99}, {"max_us", q.max}}},
                         {"idle", {{"n", w.n}, {"p50_us", w.p50}, {"p99_us", w.p99}, {"max_us", w.max}}},
                         {"p99_ratio", ratio},
                         {"p50_ratio", q.p50 > 0 ? w.p50 / q.p50 : 0}});
    std::string line = prefix + row.name + " p99 with idle / quiet = " + fmt("%.2f", ratio);
    if (row.session.has_value()) {
      const bool met = ratio <= kLatencyTarget;
      line += " <= " + fmt("%.0f", kLatencyTarget) + (met ? " -> met" : " -> NOT met");
      targets.push_back({{"target", row.name + " p99 with idle / quiet"},
                         {"n", run.n},
                         {"value", ratio},
                         {"limit", kLatencyTarget},
                         {"met", met}});
    } else {
      line += " (no target)";
    }
    target_lines.push_back(line);
  }
  return json_rows;
}

// KiB per held connection: (with N - before) / N.
double per_connection(const IdleRun& run, double with_kib, double before_kib) {
  return (with_kib - before_kib) / static_cast<double>(run.n);
}

// The memory table and what was held, on stdout.
void print_memory(const IdleRun& run) {
  const MemoryReading &before = run.before, &with = run.with;
  const auto& after = run.after;
  std::printf("\nmemory, KiB (server child pid %d; per connection = (with N - before) / N):\n", run.server_pid);
  std::printf("%-34s %12s %12s %12s %14s\n", "", "before", "with N", "after close", "per connection");
  auto mem_line = [&](const char* name, double MemoryReading::*field) {
    std::printf("%-34s %12.0f %12.0f %12s %14.2f\n", name, before.*field, with.*field,
                after.ok() ? fmt("%.0f", (*after).*field).c_str() : "-",
                per_connection(run, with.*field, before.*field));
  };
  mem_line("server RSS", &MemoryReading::rss);
  mem_line("server Pss", &MemoryReading::pss);
  mem_line("server Private (clean + dirty)", &MemoryReading::private_kib);
  mem_line("server malloc heap in use", &MemoryReading::heap);
  mem_line("client (this process) RSS", &MemoryReading::client_rss);
  if (before.kernel_tcp && with.kernel_tcp) {
    std::printf("%-34s %12.0f %12.0f %12s %14.2f\n", "kernel TCP buffers (system-wide)", *before.kernel_tcp,
                *with.kernel_tcp, after.ok() && after->kernel_tcp ? fmt("%.0f", *after->kernel_tcp).c_str() : "-",
                per_connection(run, *with.kernel_tcp, *before.kernel_tcp));
  }
  std::printf("(RSS, Pss and Private count user-space pages only; the kernel's per-socket "
              "structures are in neither column)\n");
  std::printf("server connections parked when read (waiting with no coroutine): %ld of %ld\n", with.server_parked,
              with.server_connections);
  std::printf("\nheld: %zu of %zu still open after %.1f s (idle timeout %lld ms, keepalive %lld "
              "ms); the server counted %ld open; sys.echo answered on %zu of %zu%s%s\n",
              run.still_open, run.n, run.held_seconds, static_cast<long long>(run.args.idle_timeout.count()),
              static_cast<long long>(run.keepalive.count()), run.server_active, run.answered, run.n,
              run.echo_failure.ok() ? "" : "; first failure: ",
              run.echo_failure.ok() ? "" : run.echo_failure.to_string().c_str());
}

// The --json file: rows, memory, what was held, targets and the run.
Status write_json(const IdleRun& run, const nlohmann::ordered_json& json_rows, const nlohmann::ordered_json& targets,
                  const std::vector<std::string>& target_lines, const std::string& not_measured) {
  const IdleArgs& args = run.args;
  nlohmann::ordered_json info = {{"mode", "idle"},
                                 {"n_asked", args.connections},
                                 {"n", run.n},
                                 {"methods", args.methods},
                                 {"transport", args.transport},
                                 {"addresses", args.transport == "tcp" ? args.addresses : 0},
                                 {"idle_timeout_ms", args.idle_timeout.count()},
                                 {"keepalive_ms", run.keepalive.count()},
                                 {"per_phase_n", args.n},
                                 {"warmup", args.warmup},
                                 {"blocks", args.blocks},
                                 {"server_threads", args.server_threads},
                                 {"rlimit_nofile_soft_before", run.soft_before},
                                 {"rlimit_nofile_hard", run.hard},
                                 {"largest_n", run.largest}};
  info.update(run.machine);
  const MemoryReading &before = run.before, &with = run.with;
  const auto per = [&run](double w, double b) { return per_connection(run, w, b); };
  nlohmann::ordered_json memory = {
      {"before", before.json()},
      {"with_n", with.json()},
      {"after_close", run.after.ok() ? run.after->json() : nlohmann::ordered_json(nullptr)},
      {"per_connection_kib",
       {{"server_rss", per(with.rss, before.rss)},
        {"server_pss", per(with.pss, before.pss)},
        {"server_private", per(with.private_kib, before.private_kib)},
        {"server_heap_in_use", per(with.heap, before.heap)},
        {"client_rss", per(with.client_rss, before.client_rss)},
        {"kernel_tcp_buffers", before.kernel_tcp && with.kernel_tcp
                                   ? nlohmann::ordered_json(per(*with.kernel_tcp, *before.kernel_tcp))
                                   : nlohmann::ordered_json(nullptr)}}}};
  nlohmann::ordered_json out = {
      {"rows", json_rows},
      {"memory", memory},
      {"held",
       {{"still_open", run.still_open},
        {"echo_answered", run.answered},
        {"server_connections_active", run.server_active},
        {"seconds", run.held_seconds},
        {"open_seconds", run.open_seconds}}},
      {"targets", targets},
      {"target_lines", target_lines},
      {"not_measured", not_measured.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(not_measured)},
      {"run", info}};
  return write_file(args.json, out.dump(2) + "\n");
}

// The report: rows, memory, what was held, targets; --json. The exit status.
int report(const IdleRun& run) {
  nlohmann::ordered_json targets = nlohmann::ordered_json::array();
  std::vector<std::string> target_lines;
  const nlohmann::ordered_json json_rows = print_rows(run, targets, target_lines);
  print_memory(run);
  const bool held = run.still_open == run.n && run.answered == run.n;
  const double rss_per = per_connection(run, run.with.rss, run.before.rss);
  const bool memory_met = rss_per <= kMemoryTarget;
  const std::string prefix = "idle N=" + std::to_string(run.n) + ": ";
  target_lines.insert(target_lines.begin(), prefix + "server memory per connection = " + fmt("%.2f", rss_per) +
                                                " KiB <= " + fmt("%.0f", kMemoryTarget) + " KiB" +
                                                (memory_met ? " -> met" : " -> NOT met"));
  targets.insert(targets.begin(), nlohmann::ordered_json{{"target", "server memory per connection (RSS) KiB"},
                                                         {"n", run.n},
                                                         {"value", rss_per},
                                                         {"limit", kMemoryTarget},
                                                         {"met", memory_met}});
  std::string not_measured;
  if (run.n < kTargetN) {
    not_measured = "idle N=" + std::to_string(kTargetN) + ": not measured: " +
                   (run.largest < kTargetN
                        ? "this machine's " + run.limit_note + " (scripts/idle_vm.sh runs it in a QEMU guest)"
                        : std::string("run with --connections ") + std::to_string(kTargetN));
    target_lines.push_back(not_measured);
  }
  std::printf("\ntargets:\n");
  for (const auto& line : target_lines) std::printf("%s\n", line.c_str());
  if (!held) std::printf("FAILED: the idle connections were not all held open\n");
  if (!run.args.json.empty()) {
    if (Status s = write_json(run, json_rows, targets, target_lines, not_measured); !s.ok()) {
      std::fprintf(stderr, "minibench idle: %s\n", s.message.c_str());
      return 1;
    }
  }
  return held ? 0 : 1;
}

}  // namespace

int run_idle(int argc, char** argv) {
  IdleRun run;
  if (auto code = parse_idle_args(argc, argv, run.args)) return *code;
  run.keepalive = run.args.keepalive.value_or(run.args.idle_timeout / 4);
  std::signal(SIGPIPE, SIG_IGN);
  run.machine = machine_info();
  for (Status (*step)(IdleRun&) : {size_to_descriptors, open_realm, start_server, hold_and_measure}) {
    if (Status s = step(run); !s.ok()) {
      std::fprintf(stderr, "minibench idle: %s\n", s.to_string().c_str());
      return 1;
    }
  }
  return report(run);
}

}  // namespace minibench
