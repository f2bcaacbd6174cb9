// BenchPlan: what one benchmark mode (sessions, calls) is asked to measure —
// the sizes, the methods, and for each transport where the authrpc server and
// its floors listen. Shared by sessions.cc and calls.cc.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "minibench/realm.h"
#include "authrpc/rpc/endpoint.h"

namespace minibench {

// What the spawned server and minibench's clients count (--metrics).
enum class MetricsMode {
  kOn,   // into the process's registry, as an application's would (the default)
  kOff,  // nothing: ServerOptions::metrics and ClientOptions::metrics null
  // Both in one run: each plaintext session row and calls row is measured
  // again, in the same blocks, against a second server in the same child
  // that counts nothing, by a client that counts nothing — the row named
  // metrics_off_row(name) — and held to kMetricsCostTarget × it.
  kCompare,
};

// Counting may cost at most 3 % of a session's or a call's p50.
inline constexpr double kMetricsCostTarget = 1.03;

// "simple/tcp" → "simple/tcp [metrics off]": the row's twin in --metrics compare.
inline std::string metrics_off_row(const std::string& row) { return row + " [metrics off]"; }

// Which sequential calls rows `minibench calls` measures (--api): the
// 1-byte sys.echo row, the typed rows beside their bytes rows
// (typed_calls.h), or both in the same blocks.
enum class CallsApi { kBytes, kProto, kAll };

// The servers to measure on one transport.
struct TransportServers {
  std::string transport;                   // "tcp" or "unix"
  authrpc::Endpoint authrpc;               // an authrpc server
  std::optional<authrpc::Endpoint> floor;  // a bare echo server; none: no floor row
  std::optional<authrpc::Endpoint> gss_floor;  // a floor/gss server; none: no floor/gss row
  // MetricsMode::kCompare: the same server with metrics off.
  std::optional<authrpc::Endpoint> authrpc_nometrics = std::nullopt;
  // The echo floor of calls under load (echo_floor.h); none: no floor row.
  std::optional<authrpc::Endpoint> echo_floor = std::nullopt;
};

// Which floor a method's session rows are held to.
enum class FloorKind {
  kBare,  // floor/<transport>: connect + 1-byte echo + close
  kGss,   // floor/gss (tcp), floor/gss-unix: connect + one GSSAPI token each way + close
};

// One authentication method to measure, by its MechanismRegistry name.
struct MethodPlan {
  std::string name;                                      // "simple", "kerberos", ...
  nlohmann::json client_options = nlohmann::json::object();  // for make_client
  FloorKind floor = FloorKind::kBare;
  bool tcp_only = false;       // no unix row
  // Carries a bearer secret (auth/mechanism_traits.h): never sent over
  // plaintext tcp://, and over unix: only where both sides opt in, so it
  // has its +tls row only.
  bool tls_only = false;
  // Authenticates with an access token minibench issues itself
  // (minibench/jwt_bench.h); also measures the jwt-verify/<alg> rows.
  bool issued_jwt = false;
  bool kerberos = false;       // its rows report KDC requests per session
  // Not asked for by name (--method): if its client cannot be created, its
  // rows are skipped with a note rather than ending the run.
  bool optional = false;
  std::optional<double> target;  // session p50 ≤ target × floor p50
  // With --concurrency K > 1: sessions/s ≥ rate_target × the floor's
  // sessions/s (CPU per session under load).
  std::optional<double> rate_target;
};

// The TLS server and floor of a run (the +tls rows and floor/tls).
struct TlsServers {
  authrpc::Endpoint authrpc;  // tls://127.0.0.1:<port>
  std::optional<authrpc::Endpoint> floor;  // floor/tls; none: no floor row (--server)
  std::string ca_file;        // the CA the clients trust
  // A second server whose issued-JWT method (MethodPlan::issued_jwt) has its
  // verified-token cache off: the <method>-cold+tls/tcp row.
  struct Cold {
    authrpc::Endpoint authrpc;
    std::function<long()> server_connections;  // as BenchPlan's
  };
  std::optional<Cold> cold = std::nullopt;
  // The TLS echo floor of calls under load (echo_floor.h).
  std::optional<authrpc::Endpoint> echo_floor = std::nullopt;
};

struct BenchPlan {
  std::vector<MethodPlan> methods;  // sessions: measured in this order on each transport
  std::string calls_method;  // calls: the connection authenticates with it (main.cc)
  CallsApi calls_api = CallsApi::kBytes;
  std::optional<KerberosSetup> kerberos;  // set when a Kerberos method is measured
  std::size_t n = 1000;       // measured iterations per row
  std::size_t warmup = 100;   // untimed iterations per row first
  std::size_t blocks = 10;    // a row and its floor alternate in this many blocks
  bool progress = true;       // progress lines on stderr
  // Client threads establishing sessions at once (sessions): 1 runs
  // every iteration on the caller's executor, K > 1 runs each block on K
  // threads (schedule.h). Calls under load: K connections, each on a
  // thread of its own (calls.h).
  std::size_t concurrency = 1;
  // Calls under load (calls.h): calls in flight per connection, and
  // how long each row runs (its blocks share it).
  std::size_t depth = 1;
  double duration_s = 3;
  std::vector<TransportServers> transports;  // measured in this order
  bool plaintext = true;  // sessions over `transports` (false: --tls on, TLS rows only)
  std::optional<TlsServers> tls;             // set: TLS rows after the others
  // The server is a running one (--server), not spawned: sessions first
  // checks which methods it offers and skips the others (sessions.cc).
  bool external_server = false;
  // CPU time used so far by this process and the spawned server child
  // together (process_cpu_ns, minibench/stats.h), read around each timed
  // block of the concurrent schedule: CPU per session, which is what
  // sessions/s measures on an otherwise idle machine, and what other work on
  // a shared one disturbs least. Null: not measured (--server).
  std::function<std::optional<std::chrono::nanoseconds>()> cpu_used;
  // The authrpc server's accepted-connection total (all its endpoints),
  // read outside the timings; null: not available (--server).
  std::function<long()> server_connections;
  MetricsMode metrics = MetricsMode::kOn;
  // kCompare: the metrics-off server's accepted-connection total, as above.
  std::function<long()> nometrics_server_connections;

  // Whether the rows' clients count (ClientOptions::metrics) — the
  // "[metrics off]" rows' never do.
  bool client_metrics() const { return metrics != MetricsMode::kOff; }

  const MethodPlan* method(const std::string& name) const {
    for (const auto& m : methods) {
      if (m.name == name) return &m;
    }
    return nullptr;
  }
};

}  // namespace minibench
