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
#include <cmath>
#include <filesystem>
#include <cerrno>
#include <csignal>
#include <sched.h>
#include <unistd.h>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "authrpc/auth/mechanism_registry.h"
#include "authrpc/client/client_runtime.h"
#include "minibench/args.h"
#include "minibench/call_load.h"
#include "minibench/calls.h"
#include "minibench/cpu_clock.h"
#include "minibench/floor.h"
#include "minibench/idle.h"
#include "minibench/jwt_bench.h"
#include "minibench/methods.h"
#include "minibench/metrics_count.h"
#include "minibench/realm.h"
#include "minibench/report.h"
#include "minibench/plot.h"
#include "minibench/run_info.h"
#include "minibench/server_child.h"
#include "minibench/sessions.h"
#include "minibench/summary.h"
#include "minibench/tokens.h"
#include "minibench/tls_sessions.h"
#include "authrpc/base/metrics.h"
#include "authrpc/security/tls_context.h"
#include "minibench/throughput.h"
#include "minibench/storm.h"

namespace minibench {
namespace {

using authrpc::Endpoint;
using authrpc::Status;

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
    if (server->scheme == Endpoint::Scheme::kTls) {
      if (!args.floor_server.empty()) {
        return Status(authrpc::Errc::kInvalidArgument,
                      "--floor-server: no TLS floor server exists; leave it out for tls://");
      }
      return servers;  // the TLS rows only (tls_plan)
    }
    TransportServers t{std::string(server->scheme_name()), *server, std::nullopt, std::nullopt};
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
    TransportServers t{transport, child->endpoints().at("authrpc/" + transport),
                       child->endpoints().at("floor/" + transport), std::nullopt};
    if (!args.floors) t.floor.reset();
    if (const auto twin = child->endpoints().find("authrpc-nometrics/" + transport);
        twin != child->endpoints().end()) {
      t.authrpc_nometrics = twin->second;
    }
    if (const auto gss = child->endpoints().find("gss-floor/" + transport);
        gss != child->endpoints().end() && args.floors) {
      t.gss_floor = gss->second;
    }
    if (const auto echo = child->endpoints().find("echo-floor/" + transport);
        echo != child->endpoints().end() && args.floors) {
      t.echo_floor = echo->second;
    }
    servers.push_back(std::move(t));
  }
  return servers;
}

// A private directory for the token rows (credentials file, token store).
std::string make_token_dir() {
  const char* tmp = std::getenv("TMPDIR");
  std::string t = std::string(tmp && *tmp ? tmp : "/tmp") + "/minibench-tokens-XXXXXX";
  return ::mkdtemp(t.data()) != nullptr ? t : std::string();
}

std::string joined_names(const std::vector<MethodPlan>& methods) {
  std::string out;
  for (const auto& m : methods) out += (out.empty() ? "" : ", ") + m.name;
  return out;
}

// A tls:// --server's client settings (its CA); tcp:// and unix: need none.
authrpc::Result<authrpc::ClientOptions> external_server_options(const Args& args) {
  auto endpoint = Endpoint::parse(args.server);
  if (!endpoint.ok()) return endpoint.status();
  authrpc::ClientOptions o;
  o.endpoint = *endpoint;
  if (endpoint->scheme == Endpoint::Scheme::kTls) {
    authrpc::security::TlsClientOptions tls;
    tls.ca_file = args.ca;
    auto context = authrpc::security::TlsClientContext::create(tls);
    if (!context.ok()) return Status(context.code(), "--ca: " + context.status().message);
    o.tls = std::move(*context);
  } else if (!args.ca.empty()) {
    return Status(authrpc::Errc::kInvalidArgument, "--ca needs a tls:// --server");
  }
  return o;
}

// The --json file's "run" object: what was measured, how, and where and when
// (`machine`: run_info.h, read when the run began).
nlohmann::ordered_json run_info(const Args& args, const BenchPlan& plan, const ServerChild* child,
                                const nlohmann::ordered_json& machine) {
  nlohmann::ordered_json methods = nlohmann::ordered_json::array();
  for (const auto& m : plan.methods) methods.push_back(m.name);
  nlohmann::ordered_json info = {
          {"mode", args.sessions && args.calls ? "all" : args.sessions ? "sessions" : "calls"},
          {"n", plan.n},
          {"warmup", plan.warmup},
          {"blocks", plan.blocks},
          {"concurrency", plan.concurrency},
          {"depth", plan.depth},
          {"duration_s", plan.duration_s},
          {"tls", args.tls},
          {"methods", methods},
          {"server", !child                ? args.server
                     : child->in_process() ? std::string("in process")
                                           : std::string("child process")},
          {"server_threads", child ? nlohmann::ordered_json(args.server_threads) : nullptr},
          {"metrics", args.metrics}};
  info.update(machine);
  return info;
}

// Whether --metrics took effect, in words: "--metrics on: the server
// counted, the rows' clients counted (...)". Each side's authrpc_* counter
// total (metrics_count.h) is > 0 if it counted, 0 if it counted nothing,
// null if it had no registry; the totals themselves go to the JSON only
// (they add bytes to events: a sign of life, not a figure). In process the
// server counts into the clients' registry (the process's).
void print_counted(std::FILE* out, const std::string& setting,
                   const nlohmann::ordered_json& counted, bool in_process) {
  auto did = [&](const char* key) {
    const auto& v = counted.at(key);
    return v.is_null() ? std::string("had no metrics registry")
           : v.get<double>() > 0 ? std::string("counted")
                                 : std::string("counted nothing");
  };
  std::string line = "--metrics " + setting + ": ";
  if (counted.contains("server")) line += "the server " + did("server") + ", ";
  if (counted.contains("nometrics_server")) {
    line += "the metrics-off server " + did("nometrics_server") + ", ";
  }
  line += std::string("the rows' clients") +
          (in_process ? ", whose registry the in-process server shares, " : " ") + did("clients");
  line += " (their authrpc_* counters; totals: --json run.metrics_counted)";
  std::fprintf(out, "%s\n", line.c_str());
}

int run(const Args& args) {
  std::signal(SIGPIPE, SIG_IGN);
  const nlohmann::ordered_json machine = machine_info();  // the load before this run adds to it
  // Sets the Kerberos environment: before the fork, before any thread.
  auto selected = select_methods(args);
  if (!selected.ok()) {
    std::fprintf(stderr, "minibench: %s\n", selected.status().to_string().c_str());
    return selected.code() == authrpc::Errc::kInvalidArgument ? 2 : 1;
  }
  Selection& selection = *selected;
  const KerberosSetup* kerberos = selection.realm ? &selection.realm->setup() : nullptr;
  const auto registry = authrpc::MechanismRegistry::with_builtins();
  const std::string issuer = token_issuer(registry);  // the token rows fetch over it

  std::unique_ptr<ServerChild> child;
  std::unique_ptr<ServerChild> cold_child;  // the <method>-cold+tls/tcp row's server
  std::string token_dir;  // the token rows' credentials file and store
  struct RemoveDir {
    std::string* dir;
    ~RemoveDir() {
      if (!dir->empty()) std::filesystem::remove_all(*dir);
    }
  } remove_token_dir{&token_dir};
  std::unique_ptr<ThrowawayCerts> tls_certs;  // removed at the end of the run
  std::unique_ptr<BenchJwtIssuer> jwt_issuer;  // its files too
  if (args.server.empty()) {
    ServerChildOptions options;
    bool has_kerberos = false, has_token = false;
    if ((args.sessions || call_load(args)) && tls_rows(args)) {
      auto certs = ThrowawayCerts::make();
      if (certs.ok()) {
        tls_certs = std::move(*certs);
        options.tls = ServerChildOptions::TlsFiles{tls_certs->dir() + "/server.pem",
                                                   tls_certs->dir() + "/server.key"};
      } else {
        std::fprintf(stderr, "minibench: the TLS rows are skipped: %s\n",
                     certs.status().to_string().c_str());
      }
    }
    // Without TLS rows a bearer secret has none (and the server, encryption
    // disabled on tcp://, would refuse to enable it).
    for (auto it = selection.methods.begin(); it != selection.methods.end();) {
      if (!it->tls_only || options.tls) {
        ++it;
        continue;
      }
      if (!it->optional) {
        std::fprintf(stderr, "minibench: the %s rows need TLS rows\n", it->name.c_str());
        return 1;
      }
      std::fprintf(stderr, "minibench: the %s rows are skipped: no TLS rows\n", it->name.c_str());
      it = selection.methods.erase(it);
    }
    for (auto& m : selection.methods) {
      const bool token = is_token_method(registry, m.name);
      has_token = has_token || token;
      has_kerberos = has_kerberos || m.name == issuer;
      nlohmann::json server_options =
          m.kerberos && !token ? kerberos->server_options() : nlohmann::json::object();
      if (m.issued_jwt) {
        if (!jwt_issuer) {
          auto made = BenchJwtIssuer::make();
          if (!made.ok()) {
            std::fprintf(stderr, "minibench: %s\n", made.status().to_string().c_str());
            return 1;
          }
          jwt_issuer = std::move(*made);
        }
        server_options = jwt_issuer->server_options();
        m.client_options = jwt_issuer->client_options();
      }
      options.mechanisms.push_back({m.name, std::move(server_options), m.optional});
    }
    // The token is fetched over Kerberos; --token-ops uses the file store.
    if (has_token && !has_kerberos) {
      options.mechanisms.push_back({issuer, kerberos->server_options(), false});
    }
    if (has_token) {
      token_dir = make_token_dir();
      if (token_dir.empty()) {
        std::fprintf(stderr, "minibench: cannot create a token store directory\n");
        return 1;
      }
      options.token_store_dir = token_dir + "/store";
      options.token_zk_connect = args.zk_connect;
    }
    const bool gss_rows =
        std::any_of(selection.methods.begin(), selection.methods.end(),
                    [](const MethodPlan& m) { return m.floor == FloorKind::kGss; });
    if (args.sessions && gss_rows) options.gss_floor = kerberos->acceptor();
    options.server_threads = args.server_threads;
    options.acl_file = args.acl_file;
    options.cpu = args.server_cpu;
    options.floors_on_server_thread = args.floors_on_server_thread;
    options.in_process = args.in_process;
    options.metrics = args.metrics != "off";
    options.nometrics_server = args.metrics == "compare";
    options.echo_floors = call_load(args);
    // Forks: no thread may exist in this process yet.
    auto spawned = ServerChild::spawn(options);
    if (!spawned.ok()) {
      std::fprintf(stderr, "minibench: %s\n", spawned.status().to_string().c_str());
      return 1;
    }
    child = std::move(*spawned);
    for (const auto& [name, why] : child->skipped()) {
      std::fprintf(stderr, "minibench: the %s rows are skipped: %s\n", name.c_str(), why.c_str());
      std::erase_if(selection.methods, [&](const MethodPlan& m) { return m.name == name; });
    }
    if (selection.methods.empty()) {
      std::fprintf(stderr, "minibench: no method left to measure\n");
      return 1;
    }
    // The cold row: the same issuer's token on a second server whose
    // verified-token cache is off, so that every session pays the signature
    // and claim checks. A server of its own because one server enables a
    // mechanism once; forked now, as the first, before any thread exists.
    const auto issued = std::find_if(selection.methods.begin(), selection.methods.end(),
                                     [](const MethodPlan& m) { return m.issued_jwt; });
    if (issued != selection.methods.end() && args.sessions && options.tls) {
      ServerChildOptions cold;
      cold.mechanisms = {{issued->name, jwt_issuer->cold_server_options(), false}};
      cold.tls = options.tls;
      cold.server_threads = options.server_threads;
      cold.cpu = options.cpu;
      cold.floors_on_server_thread = options.floors_on_server_thread;
      cold.in_process = options.in_process;
      cold.acl_file = options.acl_file;
      cold.metrics = options.metrics;
      auto spawned_cold = ServerChild::spawn(cold);
      if (!spawned_cold.ok()) {
        std::fprintf(stderr, "minibench: the %s-cold server: %s\n", issued->name.c_str(),
                     spawned_cold.status().to_string().c_str());
        return 1;
      }
      cold_child = std::move(*spawned_cold);
    }
  }
  if (args.client_cpu >= 0 && !pin_to_cpu(args.client_cpu)) {
    std::fprintf(stderr, "minibench: cannot pin the client to CPU %d\n", args.client_cpu);
    return 1;
  }
  auto servers = servers_for(args, child.get());
  if (!servers.ok()) return usage_error(servers.status().to_string());

  // Where the token is fetched (and --token-ops run): the server's first
  // endpoint, plaintext or TLS.
  std::optional<authrpc::ClientOptions> token_server;
  if (child) {
    token_server.emplace();
    token_server->endpoint = child->endpoints().at("authrpc/tcp");
  } else {
    auto fetch = external_server_options(args);
    if (!fetch.ok()) return usage_error(fetch.status().to_string());
    token_server = *fetch;
  }
  std::optional<nlohmann::json> token_options;  // one token for all token rows
  if (!args.token_file.empty()) {
    // As `authrpc call --token-file`: the token for the server's URI.
    token_options = nlohmann::json{{"token_file", args.token_file}};
  }
  for (auto it = selection.methods.begin(); it != selection.methods.end();) {
    auto& m = *it;
    if (!is_token_method(registry, m.name)) {
      ++it;
      continue;
    }
    if (!token_options && token_dir.empty()) {
      token_dir = make_token_dir();
      if (token_dir.empty()) {
        std::fprintf(stderr, "minibench: cannot create a token directory\n");
        return 1;
      }
    }
    if (!token_options) {
      auto fetched = fetch_token(*token_server, kerberos->client_options(),
                                 token_dir + "/bench.tokens");
      const auto code = fetched.code();
      if (!fetched.ok() && !child &&
          (code == authrpc::Errc::kMechanismUnavailable || code == authrpc::Errc::kNotFound ||
           code == authrpc::Errc::kUnimplemented)) {
        // A running server without Kerberos or a token service: as for a
        // method it does not offer, skip the rows rather than the run.
        std::fprintf(stderr, "minibench: the %s rows are skipped: %s\n", m.name.c_str(),
                     fetched.status().to_string().c_str());
        it = selection.methods.erase(it);
        continue;
      }
      if (!fetched.ok()) {
        std::fprintf(stderr, "minibench: %s\n", fetched.status().to_string().c_str());
        return 1;
      }
      token_options = *fetched;
    }
    m.client_options = *token_options;
    if (const RowLabel* label = row_label(m.name); label != nullptr && label->client_options) {
      m.client_options.update(nlohmann::json::parse(label->client_options));
    }
    ++it;
  }
  if (selection.methods.empty()) {
    std::fprintf(stderr, "minibench: no method left to measure\n");
    return 1;
  }

  BenchPlan plan;
  plan.methods = std::move(selection.methods);
  plan.calls_method = selection.calls_method;
  if (kerberos != nullptr) plan.kerberos = *kerberos;
  plan.n = args.n;
  plan.warmup = args.warmup;
  plan.blocks = args.blocks;
  plan.progress = args.progress;
  plan.transports = std::move(*servers);
  plan.plaintext = args.tls != "on";
  plan.concurrency = args.concurrency;
  plan.depth = args.depth;
  plan.duration_s = args.duration_s;
  plan.external_server = !child;
  plan.metrics = args.metrics == "off"       ? MetricsMode::kOff
                 : args.metrics == "compare" ? MetricsMode::kCompare
                                             : MetricsMode::kOn;
  if (child && tls_rows(args) && child->endpoints().contains("authrpc/tls")) {
    plan.tls = TlsServers{child->endpoints().at("authrpc/tls"), child->endpoints().at("floor/tls"),
                          tls_certs->dir() + "/ca.pem"};
    if (const auto echo = child->endpoints().find("echo-floor/tls");
        echo != child->endpoints().end() && args.floors) {
      plan.tls->echo_floor = echo->second;
    }
    if (cold_child) {
      auto counter = cold_child->connection_counter();
      if (!counter.ok()) {
        std::fprintf(stderr, "minibench: %s\n", counter.status().to_string().c_str());
        return 1;
      }
      plan.tls->cold = TlsServers::Cold{cold_child->endpoints().at("authrpc/tls"),
                                        std::move(*counter)};
    }
  } else if (!child && args.tls != "off" &&
             token_server->endpoint.scheme == Endpoint::Scheme::kTls) {
    plan.tls = TlsServers{token_server->endpoint, std::nullopt, args.ca};
  }
  if (child) {
    auto counter = child->connection_counter();
    if (!counter.ok()) {
      std::fprintf(stderr, "minibench: %s\n", counter.status().to_string().c_str());
      return 1;
    }
    plan.server_connections = std::move(*counter);
    plan.cpu_used = [self = ::getpid(), server = child->pid()]()
        -> std::optional<std::chrono::nanoseconds> {
      const auto mine = process_cpu_ns(self);
      const auto theirs = server >= 0 ? process_cpu_ns(server) : std::optional<std::int64_t>(0);
      if (!mine || !theirs) return std::nullopt;
      return std::chrono::nanoseconds(*mine + *theirs);
    };
    if (plan.metrics == MetricsMode::kCompare) {
      auto twin = child->connection_counter("authrpc-nometrics/unix");
      if (!twin.ok()) {
        std::fprintf(stderr, "minibench: %s\n", twin.status().to_string().c_str());
        return 1;
      }
      plan.nometrics_server_connections = std::move(*twin);
    }
  }

  const std::string methods = joined_names(plan.methods);
  if (child) {
    const std::string where = child->in_process()
                                  ? std::string("in this process (--in-process)")
                                  : "child pid " + std::to_string(child->pid());
    std::printf("minibench: methods %s; server: %s, %zu IO thread(s); floors: bare "
                "echo listeners%s on %s; client: %s\n",
                methods.c_str(), where.c_str(), args.server_threads,
                child->endpoints().contains("gss-floor/tcp") ? " and floor/gss" : "",
                args.floors_on_server_thread ? "the server's IO thread" : "a thread of their own",
                args.concurrency > 1
                    ? (std::to_string(args.concurrency) + " threads at once (--concurrency)").c_str()
                    : "1 IO thread");
    if (args.client_cpu >= 0 || args.server_cpu >= 0) {
      std::printf("minibench: pinned: client to CPU %d, server to CPU %d (-1: not pinned)\n",
                  args.client_cpu, args.server_cpu);
    }
  } else {
    std::printf("minibench: methods %s; server: %s (not spawned); client: 1 IO thread\n",
                methods.c_str(), args.server.c_str());
    if (args.floor_server.empty()) {
      std::printf("minibench: no --floor-server: floor rows are left out, rows have no ratio\n");
    } else {
      // The floor is another process than the server here: on a 2-CPU
      // machine one may share the client's CPU and the other not, which
      // moves a loopback round trip by 3x either way (docs/PERFORMANCE.md,
      // "What each floor does").
      std::printf("minibench: the floor server is a process of its own: pin it and the server "
                  "to the same CPU (taskset -c) or the ratio measures where the scheduler put "
                  "them\n");
    }
  }
  if (kerberos != nullptr) {
    std::printf("minibench: kerberos: %s; service %s; client: %s; replay cache %s; KDC requests "
                "%s\n",
                kerberos->description.c_str(), kerberos->service_principal.c_str(),
                kerberos->client_credentials().c_str(),
                !kerberos->replay_cache ? "off"
                : kerberos->replay_cache_dir.empty()
                    ? "on"
                    : ("on (" + kerberos->replay_cache_dir + ")").c_str(),
                kerberos->kdc_log.empty() ? "not counted (no --kdc-log)"
                                          : ("counted in " + kerberos->kdc_log).c_str());
  }
  std::printf("minibench: metrics: %s\n",
              plan.metrics == MetricsMode::kOff
                  ? (child ? "off (the server and the clients count nothing)"
                           : "off (the clients count nothing; the server as it is configured)")
              : plan.metrics == MetricsMode::kOn
                  ? "on (the server and the clients count into the process's registry)"
                  : "compare (each plaintext session row and calls row also against a second "
                    "server in the same child, with the same options and threads, and by a "
                    "client, both counting nothing: the \"[metrics off]\" rows, in the same "
                    "blocks)");
  std::printf("minibench: n %zu, warm-up %zu, %zu interleaved blocks; times in µs\n", plan.n,
              plan.warmup, plan.blocks);
  if (call_load(args)) {
    std::printf("minibench: calls under load: %zu connections (a client thread each) x %zu "
                "calls in flight, %g s per row in %zu blocks after a block of warm-up; echo "
                "floors on %s\n",
                plan.concurrency, plan.depth, plan.duration_s, plan.blocks,
                !child ? "none (--server)"
                : args.server_threads > 1
                    ? (std::to_string(args.server_threads) + " IO threads of their own").c_str()
                : args.floors_on_server_thread ? "the server's IO thread"
                                               : "the floors' thread");
  }
  std::fflush(stdout);

  Report report;
  Status status;
  // The cold check of an issued JWT, beside its warm session row.
  const bool jwt_verify_rows =
      args.sessions && std::any_of(plan.methods.begin(), plan.methods.end(),
                                   [](const MethodPlan& m) { return m.issued_jwt; });
  // What the rows' clients count (the token fetch before them may count too).
  const double client_counted_before = counted_total(*authrpc::default_metrics_registry());
  // The client side runs on a ClientRuntime, as an application's would.
  authrpc::ClientRuntime runtime(1);
  asio::io_context& io = runtime.next_context();
  std::promise<void> done;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        if (args.sessions) status = co_await run_sessions(io.get_executor(), plan, report);
        if (status.ok() && jwt_verify_rows) {
          status = co_await run_jwt_verify(io.get_executor(), plan, report);
        }
        if (status.ok() && args.calls) {
          if (call_load(args)) {
            status = run_call_load(plan, report);
          } else {
            status = co_await run_calls(io.get_executor(), plan, report);
          }
        }
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
  // --metrics reached the server and the clients: what each counted.
  nlohmann::ordered_json counted = {
      {"clients", counted_total(*authrpc::default_metrics_registry()) - client_counted_before}};
  if (status.ok() && child) {
    for (const auto& [key, endpoint] : {std::pair{"server", "authrpc/unix"},
                                        std::pair{"nometrics_server", "authrpc-nometrics/unix"}}) {
      if (!child->endpoints().contains(endpoint)) continue;
      auto read = child->counted(endpoint);
      if (!read.ok()) {
        status = read.status();
        break;
      }
      counted[key] = *read ? nlohmann::ordered_json(**read) : nlohmann::ordered_json(nullptr);
    }
  }
  if (status.ok() && args.token_ops > 0 && child && kerberos != nullptr) {
    status = run_token_ops(token_server->endpoint, kerberos->client_options(), args.token_ops,
                           stdout);
  }
  if (cold_child) cold_child->stop();
  if (child) child->stop();

  if (!status.ok()) {
    std::fprintf(stderr, "minibench: %s\n", status.to_string().c_str());
    return 1;
  }
  report.print_rows(stdout);
  if (args.sessions) print_summary(stdout, report.rows(), plan.warmup);
  report.print_targets(stdout);
  report.print_metrics_cost(stdout);
  print_counted(stdout, args.metrics, counted, child && child->in_process());
  auto info = run_info(args, plan, child.get(), machine);
  info["metrics_counted"] = counted;
  report.set_run_info(std::move(info));
  if (!args.plot.empty()) {
    const std::string title = std::string("minibench ") +
                              (args.sessions && args.calls ? "sessions and calls"
                               : args.sessions           ? "sessions"
                                                         : "calls") +
                              ": each row beside its floor (n " +
                              std::to_string(plan.n) + " per row" +
                              (plan.concurrency > 1
                                   ? ", " + std::to_string(plan.concurrency) + " client threads"
                                   : std::string()) +
                              ")";
    if (Status s = write_plot(args.plot, report, title); !s.ok()) {
      std::fprintf(stderr, "minibench: %s\n", s.to_string().c_str());
      return 1;
    }
  }
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
  if (argc > 1 && (std::string(argv[1]) == "--version" || std::string(argv[1]) == "version")) {
    const auto version = authrpc::authrpc_version();
    const auto commit = authrpc::authrpc_git_commit();
    std::printf("minibench %.*s (commit %.*s)\n", static_cast<int>(version.size()), version.data(),
                static_cast<int>(commit.size()), commit.data());
    return 0;
  }
  if (argc > 1 && std::string(argv[1]) == "throughput") return minibench::run_throughput(argc - 2, argv + 2);
  if (argc > 1 && std::string(argv[1]) == "storm") return minibench::run_storm(argc - 2, argv + 2);
  if (argc > 1 && std::string(argv[1]) == "idle") return minibench::run_idle(argc - 2, argv + 2);
  minibench::Args args;
  if (auto code = minibench::parse_args(argc, argv, args)) return *code;
  if (args.floor_server_mode) return minibench::run_floor_server(args);
  const int rc = minibench::run(args);
  if (args.in_process) {
    // The in-process server's threads run until the end: no static
    // destructors under them.
    std::fflush(nullptr);
    ::_exit(rc);
  }
  return rc;
}
