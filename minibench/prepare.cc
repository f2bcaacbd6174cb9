#include "minibench/prepare.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "authrpc/auth/mechanism_registry.h"
#include "authrpc/security/tls_context.h"
#include "minibench/stats.h"
#include "minibench/jwt_bench.h"
#include "minibench/methods.h"
#include "minibench/server_child.h"
#include "minibench/sessions.h"
#include "minibench/tokens.h"

namespace minibench {
namespace {

using authrpc::Endpoint;
using authrpc::Errc;
using authrpc::Status;

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

// The spawned server's options for `methods`: each one's server half (a
// bearer-secret method is dropped, or refused when asked for by name, if
// the run has no TLS rows), the token store, the floors.
authrpc::Result<ServerChildOptions> child_options(const Args& args, std::vector<MethodPlan>& methods,
                                                  PreparedRun& run) {
  const auto registry = authrpc::MechanismRegistry::with_builtins();
  const std::string issuer = token_issuer(registry);  // the token rows fetch over it
  const KerberosSetup* kerberos = run.kerberos();
  ServerChildOptions options;
  if ((args.sessions || call_load(args)) && tls_rows(args)) {
    auto certs = ThrowawayCerts::make();
    if (certs.ok()) {
      run.tls_certs = std::move(*certs);
      options.tls = ServerChildOptions::TlsFiles{run.tls_certs->dir() + "/server.pem",
                                                 run.tls_certs->dir() + "/server.key"};
    } else {
      std::fprintf(stderr, "minibench: the TLS rows are skipped: %s\n", certs.status().to_string().c_str());
    }
  }
  // Without TLS rows a bearer secret has none (and the server, encryption
  // disabled on tcp://, would refuse to enable it).
  for (auto it = methods.begin(); it != methods.end();) {
    if (!it->tls_only || options.tls) {
      ++it;
      continue;
    }
    if (!it->optional) return Status(Errc::kInternal, "the " + it->name + " rows need TLS rows");
    std::fprintf(stderr, "minibench: the %s rows are skipped: no TLS rows\n", it->name.c_str());
    it = methods.erase(it);
  }
  bool has_kerberos = false, has_token = false;
  for (auto& m : methods) {
    const bool token = is_token_method(registry, m.name);
    has_token = has_token || token;
    has_kerberos = has_kerberos || m.name == issuer;
    nlohmann::json server_options = m.kerberos && !token ? kerberos->server_options() : nlohmann::json::object();
    if (m.issued_jwt) {
      if (!run.jwt_issuer) {
        auto made = BenchJwtIssuer::make();
        if (!made.ok()) return made.status();
        run.jwt_issuer = std::move(*made);
      }
      server_options = run.jwt_issuer->server_options();
      m.client_options = run.jwt_issuer->client_options();
    }
    options.mechanisms.push_back({m.name, std::move(server_options), m.optional});
  }
  // The token is fetched over Kerberos; --token-ops uses the file store.
  if (has_token && !has_kerberos) options.mechanisms.push_back({issuer, kerberos->server_options(), false});
  if (has_token) {
    run.token_dir = make_token_dir();
    if (run.token_dir.empty()) return Status(Errc::kInternal, "cannot create a token store directory");
    options.token_store_dir = run.token_dir + "/store";
    options.token_zk_connect = args.zk_connect;
  }
  const bool gss_rows = std::any_of(methods.begin(), methods.end(),
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
  return options;
}

// Spawns the server child (and the cold row's): no thread may exist in this
// process yet. Drops the methods the child could not enable.
Status spawn_servers(const Args& args, std::vector<MethodPlan>& methods, PreparedRun& run) {
  auto options = child_options(args, methods, run);
  if (!options.ok()) return options.status();
  auto spawned = ServerChild::spawn(*options);
  if (!spawned.ok()) return spawned.status();
  run.child = std::move(*spawned);
  for (const auto& [name, why] : run.child->skipped()) {
    std::fprintf(stderr, "minibench: the %s rows are skipped: %s\n", name.c_str(), why.c_str());
    std::erase_if(methods, [&](const MethodPlan& m) { return m.name == name; });
  }
  if (methods.empty()) return Status(Errc::kInternal, "no method left to measure");
  // The cold row: the same issuer's token on a second server whose
  // verified-token cache is off, so that every session pays the signature
  // and claim checks. A server of its own because one server enables a
  // mechanism once; forked now, as the first, before any thread exists.
  const auto issued = std::find_if(methods.begin(), methods.end(), [](const MethodPlan& m) { return m.issued_jwt; });
  if (issued == methods.end() || !args.sessions || !options->tls) return {};
  ServerChildOptions cold;
  cold.mechanisms = {{issued->name, run.jwt_issuer->cold_server_options(), false}};
  cold.tls = options->tls;
  cold.server_threads = options->server_threads;
  cold.cpu = options->cpu;
  cold.floors_on_server_thread = options->floors_on_server_thread;
  cold.in_process = options->in_process;
  cold.acl_file = options->acl_file;
  cold.metrics = options->metrics;
  auto spawned_cold = ServerChild::spawn(cold);
  if (!spawned_cold.ok()) {
    return Status(spawned_cold.code(), "the " + issued->name + "-cold server: " + spawned_cold.status().to_string());
  }
  run.cold_child = std::move(*spawned_cold);
  return {};
}

// The token rows' client options: the --token-file, or one token fetched
// over Kerberos for all of them. A --server without Kerberos or a token
// service has its token rows skipped.
Status fetch_tokens(const Args& args, std::vector<MethodPlan>& methods, PreparedRun& run) {
  const auto registry = authrpc::MechanismRegistry::with_builtins();
  std::optional<nlohmann::json> token_options;  // one token for all token rows
  // As `authrpc call --token-file`: the token for the server's URI.
  if (!args.token_file.empty()) token_options = nlohmann::json{{"token_file", args.token_file}};
  for (auto it = methods.begin(); it != methods.end();) {
    auto& m = *it;
    if (!is_token_method(registry, m.name)) {
      ++it;
      continue;
    }
    if (!token_options && run.token_dir.empty()) {
      run.token_dir = make_token_dir();
      if (run.token_dir.empty()) return Status(Errc::kInternal, "cannot create a token directory");
    }
    if (!token_options) {
      auto fetched = fetch_token(*run.token_server, run.kerberos()->client_options(), run.token_dir + "/bench.tokens");
      const auto code = fetched.code();
      if (!fetched.ok() && !run.child &&
          (code == Errc::kMechanismUnavailable || code == Errc::kNotFound || code == Errc::kUnimplemented)) {
        // A running server without Kerberos or a token service: as for a
        // method it does not offer, skip the rows rather than the run.
        std::fprintf(stderr, "minibench: the %s rows are skipped: %s\n", m.name.c_str(),
                     fetched.status().to_string().c_str());
        it = methods.erase(it);
        continue;
      }
      if (!fetched.ok()) return fetched.status();
      token_options = *fetched;
    }
    m.client_options = *token_options;
    if (const RowLabel* label = row_label(m.name); label != nullptr && label->client_options) {
      m.client_options.update(nlohmann::json::parse(label->client_options));
    }
    ++it;
  }
  if (methods.empty()) return Status(Errc::kInternal, "no method left to measure");
  return {};
}

// The TLS servers, the connection counters and the CPU clock of a plan.
Status fill_servers(const Args& args, PreparedRun& run) {
  BenchPlan& plan = run.plan;
  const ServerChild* child = run.child.get();
  if (child && tls_rows(args) && child->endpoints().contains("authrpc/tls")) {
    plan.tls = TlsServers{child->endpoints().at("authrpc/tls"), child->endpoints().at("floor/tls"),
                          run.tls_certs->dir() + "/ca.pem"};
    if (const auto echo = child->endpoints().find("echo-floor/tls"); echo != child->endpoints().end() && args.floors) {
      plan.tls->echo_floor = echo->second;
    }
    if (run.cold_child) {
      auto counter = run.cold_child->connection_counter();
      if (!counter.ok()) return counter.status();
      plan.tls->cold = TlsServers::Cold{run.cold_child->endpoints().at("authrpc/tls"), std::move(*counter)};
    }
  } else if (!child && args.tls != "off" && run.token_server->endpoint.scheme == Endpoint::Scheme::kTls) {
    plan.tls = TlsServers{run.token_server->endpoint, std::nullopt, args.ca};
  }
  if (!child) return {};
  auto counter = child->connection_counter();
  if (!counter.ok()) return counter.status();
  plan.server_connections = std::move(*counter);
  plan.cpu_used = [self = ::getpid(), server = child->pid()]() -> std::optional<std::chrono::nanoseconds> {
    const auto mine = process_cpu_ns(self);
    const auto theirs = server >= 0 ? process_cpu_ns(server) : std::optional<std::int64_t>(0);
    if (!mine || !theirs) return std::nullopt;
    return std::chrono::nanoseconds(*mine + *theirs);
  };
  if (plan.metrics == MetricsMode::kCompare) {
    auto twin = child->connection_counter("authrpc-nometrics/unix");
    if (!twin.ok()) return twin.status();
    plan.nometrics_server_connections = std::move(*twin);
  }
  return {};
}

// A usage error: what the options asked for does not fit the servers.
Status misfit(const Status& s, bool& usage) {
  usage = true;
  return Status(Errc::kInvalidArgument, s.to_string());
}

}  // namespace

PreparedRun::~PreparedRun() {
  if (!token_dir.empty()) std::filesystem::remove_all(token_dir);
}

authrpc::Result<std::unique_ptr<PreparedRun>> prepare(const Args& args, bool& usage) {
  usage = false;
  // Sets the Kerberos environment: before the fork, before any thread.
  auto selected = select_methods(args);
  if (!selected.ok()) {
    usage = selected.code() == Errc::kInvalidArgument;  // a method the options cannot have
    return selected.status();
  }
  auto run = std::make_unique<PreparedRun>();
  run->realm = std::move(selected->realm);
  std::vector<MethodPlan>& methods = selected->methods;
  if (args.server.empty()) {
    if (Status s = spawn_servers(args, methods, *run); !s.ok()) return s;
  }
  if (args.client_cpu >= 0 && !pin_to_cpu(args.client_cpu)) {
    return Status(Errc::kInternal, "cannot pin the client to CPU " + std::to_string(args.client_cpu));
  }
  auto servers = servers_for(args, run->child.get());
  if (!servers.ok()) return misfit(servers.status(), usage);
  if (run->child) {
    run->token_server.emplace();
    run->token_server->endpoint = run->child->endpoints().at("authrpc/tcp");
  } else {
    auto fetch = external_server_options(args);
    if (!fetch.ok()) return misfit(fetch.status(), usage);
    run->token_server = *fetch;
  }
  if (Status s = fetch_tokens(args, methods, *run); !s.ok()) return s;

  BenchPlan& plan = run->plan;
  plan.methods = std::move(methods);
  plan.calls_method = selected->calls_method;
  if (run->kerberos() != nullptr) plan.kerberos = *run->kerberos();
  plan.n = args.n;
  plan.warmup = args.warmup;
  plan.blocks = args.blocks;
  plan.progress = args.progress;
  plan.transports = std::move(*servers);
  plan.plaintext = args.tls != "on";
  plan.concurrency = args.concurrency;
  plan.depth = args.depth;
  plan.duration_s = args.duration_s;
  plan.calls_api = args.api == "proto" ? CallsApi::kProto
                   : args.api == "all" ? CallsApi::kAll
                                       : CallsApi::kBytes;
  plan.external_server = !run->child;
  plan.metrics = args.metrics == "off"       ? MetricsMode::kOff
                 : args.metrics == "compare" ? MetricsMode::kCompare
                                             : MetricsMode::kOn;
  if (Status s = fill_servers(args, *run); !s.ok()) return s;
  return run;
}

void describe(const Args& args, const PreparedRun& run) {
  const BenchPlan& plan = run.plan;
  const ServerChild* child = run.child.get();
  const KerberosSetup* kerberos = run.kerberos();
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

}

}  // namespace minibench
