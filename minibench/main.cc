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
#include "minibench/call_load.h"
#include "minibench/calls.h"
#include "minibench/cpu_clock.h"
#include "minibench/floor.h"
#include "minibench/idle.h"
#include "minibench/jwt_bench.h"
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

constexpr const char* kUsage = R"(usage: minibench [sessions|calls] [options]
       minibench floor-server URI...
       minibench throughput [options]   (see minibench throughput --help)
       minibench storm [options]        (see minibench storm --help)
       minibench idle [options]         (see minibench idle --help)
       minibench --version

Measures authrpc against a bare-socket floor in the same run. Each row prints
n, mean, p50, p95, p99, max (µs), iterations per second, its ratio to its
floor (p50 / floor p50) and, for Kerberos rows, KDC requests per session;
then a summary table shaped like HADOOP-6637's (transport x TLS by No
security | Kerberos | Delegation token: mean ms / p50 µs, ratio to No
security) and the targets.

  sessions   N sequential sessions per method, transport and TLS setting:
             new connection + negotiation + one sys.whoami call + close,
             timed from before connect to the reply; each session opens a
             connection of its own (the server's accepted connections are
             counted per row and checked: warm-up + n). With no options:
             every method below over tcp and unix, plaintext and TLS (TLS
             runs on tcp: tls://), with the floors tcp, unix, gss, gss-unix
             and tls, against a throwaway local KDC, throwaway certificates
             and a delegation token, server in a child process.
             Floors: floor/<transport> = connect + 1-byte echo + close on a
             bare listener (simple and token rows); floor/gss, floor/gss-unix
             = connect + one GSSAPI token each way (AP-REQ, AP-REP, mutual
             authentication) + close with the same credentials and replay
             cache (kerberos, kerberos-sasl rows); floor/tls = connect + bare
             OpenSSL handshake + 1-byte echo + close (every +tls row).
             Targets: simple p50 <= 1.25 x floor p50; kerberos p50 <= 1.15 x
             floor/gss p50 and <= 0.6 x kerberos-sasl/tcp p50; token/unix
             p50 <= 1.3 x simple/unix p50; simple+tls <= 1.15 x floor/tls;
             token+tls <= 1.2 x simple+tls; jwt+tls <= 1.1 x simple+tls;
             simple+tls-resume <= 0.8 x simple+tls; 0 KDC requests per
             session after the warm-up.
             With jwt: also jwt-verify/RS256, PS256, ES256 and EdDSA, the
             cold check of a token (JwtVerifier::verify_uncached: signature
             and claims, no cache) in this process, no network, no floor.
  calls      N 1-byte sys.echo calls on one open connection; floor: a 1-byte
             ping-pong on one raw connection. Target: p50 <= 1.3 x floor p50.
             With --concurrency K or --depth D above 1: calls under load
             instead — K connections, each on a client thread of its own,
             each with D sys.echo calls in flight (D coroutines calling back
             to back), for --duration seconds per row, over tcp, unix and
             (unless --tls off) tls://: rows "calls/tcp c<K>d<D>" ...
             with calls/s and p50/p99/p99.9 per call. Floor: the same K and
             D on raw connections to an echo server that answers
             length-prefixed messages of authrpc's sizes (28 bytes out, 17
             back) in one write per batch read, on as many IO threads as
             the server: "floor/tcp-echo c<K>d<D>" (floor/tls-echo over
             OpenSSL). Target: calls/s >= 0.8 x the floor's, tcp and unix.
  (none)     sessions, then calls.
  throughput bulk transfer through streaming calls (get/put over tcp, unix,
             tls) next to a bare-socket stream floor, arrow-flight-benchmark
             style; its options: minibench throughput --help.
  storm      legitimate sessions quietly and under a storm of silent or
             slow unauthenticated connections; its options: minibench storm
             --help.
  idle       N idle authenticated connections (simple and token) held past
             the server's idle timeout on keepalives: the server's memory
             per connection, and fresh sessions and calls with them held
             beside the same without; its options: minibench idle --help.
  floor-server URI...
             run bare echo listeners (the floors) on the given endpoints until
             SIGINT/SIGTERM, for --floor-server.

Methods (--method M[,M...] or "all"; default all; with --server: simple):
  simple         no security (the "No security" column)
  kerberos       Kerberos V5 through GSSAPI, authrpc's fast path
  token          delegation token, authrpc's fast path (one message each
                 way) over unix and tls; over plaintext tcp a session
                 ticket from the session before (the first is challenged:
                 one round trip more; the spawned server opts in to both,
                 a --server must set tokens.allow_plaintext and
                 tokens.session_tickets, or every session is challenged);
                 minibench first fetches one over Kerberos from the server
                 (as HADOOP-6637)
  kerberos-sasl  Kerberos through Cyrus SASL GSSAPI (interop)
  token-digest   the same token through Cyrus SASL DIGEST-MD5 (interop)
  token-scram    the same token through Cyrus SASL SCRAM-SHA-256 (interop)
  jwt            an OAuth 2.0 / OIDC access token (a JWT, RS256) that
                 minibench issues itself (an RSA key, its JWKS file and a
                 token file in $TMPDIR), the same token every session (the
                 server's verified-token cache answers after the first); a
                 bearer secret, so over TLS only: jwt+tls/tcp, and
                 jwt-cold+tls/tcp against a second server child with that
                 cache off (a process of its own: pin with --server-cpu to
                 compare it with the warm row; not with --server, which
                 would not trust the issuer)
A method this build does not register, or whose realm cannot be had when it
was not named, is skipped with a note on stderr.

options:
  --method M[,M...]   the methods above, or "all"
  --transport T       tcp, unix or all (default all)
  --tls on|off|both   sessions over TLS (on: only the +tls rows), plaintext
                      only (off) or both (default both). TLS rows run on tcp
                      (tls://): --transport unix leaves them out unless --tls on
  -n N                timed iterations per row (default 1000)
  --warmup W          untimed iterations per row before timing (default 100)
  --blocks B          each row and its floor alternate in B blocks (default 10)
  --concurrency K     sessions: K client threads establish sessions at once,
                      each on an event loop of its own (default 1); every
                      block of a row — and of its floor, which runs the same
                      way, so ratios compare K concurrent sessions with K
                      concurrent bare ones — is spread over the K threads.
                      Rows then report sessions/s (per_s: sessions over the
                      blocks' wall time) and latency percentiles per session,
                      and targets hold sessions/s to the floor's: simple
                      >= 0.9x, token >= 0.8x, kerberos >= 0.95x floor/gss
                      ("sessions c8: sessions/s simple/tcp / floor/tcp =
                      0.77 < 0.9 -> NOT met"; JSON rate_targets). Each such
                      line also gives the CPU time (minibench + the server
                      child) per session of the row and its floor and the
                      floor's over the row's: the rate ratio the CPUs would
                      give if nothing else ran (JSON cpu_us, cpu_ratio).
                      calls: K connections under load (see calls above)
  --depth D           calls: D calls in flight per connection (default 1;
                      above 1: calls under load, see calls above)
  --duration S        calls under load: seconds per row, shared by its blocks
                      (default 3; one more block's worth of warm-up each)
  --server-threads K  IO threads of the spawned authrpc server (default 1;
                      raise it with --concurrency)
  --server URI        measure a running authrpc-server at URI (tcp://,
                      unix: or tls://) instead of spawning one; no floor
                      unless --floor-server is given, no connection count
  --floor-server URI  with --server: a bare echo server (minibench floor-server)
                      on the same kind of socket, for the floor rows
  --token-file FILE   with --server: the token rows use the token for the
                      server's URI from this credentials file (as `authrpc
                      call --token-file`); without it they fetch one over
                      Kerberos from the server (needs the realm flags)
  --ca FILE           with a tls:// --server: the CA bundle (PEM) its
                      certificate must chain to (required for tls://)
  --in-process        run the server on threads of this process instead of a
                      child process (shares the allocator and CPU accounting
                      with the client: for comparison only)
  --floors on|off     off: the bare, GSSAPI and echo floors are not
                      measured (no ratios or targets for the plaintext rows):
                      for profiling, when only the rows' own work should be
                      counted (scripts/session_cost.sh, scripts/call_cost.sh)
  --floor-thread T    where the spawned floor listeners run: "server" (default:
                      on the authrpc server's IO thread, so both are placed
                      alike by the scheduler) or "own" (a thread of their own)
  --server-cpu C      pin the spawned server (all its threads) to CPU C
  --client-cpu C      pin the client (this process) to CPU C
  --acl FILE          the spawned server checks this authorization file
                      (docs/AUTHZ.md) on every session and call; compare
                      against a run without it for what authorization costs
  --token-ops N       also N x (token.get, token.renew, token.cancel) through
                      the spawned server's token service and file store (in
                      $TMPDIR), printing ops/s and p50/p99 per operation
  --metrics on|off|compare
                      what the spawned server and minibench's clients count
                      (docs/OPERATIONS.md): on (default) into the process's
                      metrics registry, as an application does; off:
                      nothing (ServerOptions::metrics and
                      ClientOptions::metrics null; with --server: the
                      clients only); compare: each plaintext session row and
                      calls row twice, in the same blocks — against the
                      server, and as "<row> [metrics off]" against a second
                      server in the same child (same mechanisms, options,
                      threads and pinning; its own IO threads) by a client,
                      both counting nothing — then a "metrics cost" table
                      (p50 on, p50 off, on/off, per-block median) and the
                      target on/off <= 1.03 for simple/tcp, kerberos/tcp and
                      calls/tcp. TLS rows run once, metrics on. Pin
                      (--server-cpu, --client-cpu) for a steadier ratio
  --zk-connect H:P    the spawned server's token store is ZooKeeper at H:P
                      (root /minibench/<pid>, no ACLs) instead of the file store
  --json FILE         also write {"rows": [...], "targets": [...], "run": {...}};
                      "run" also says when and where: time, host, CPU model
                      and count, kernel, load, version, commit, build type,
                      OpenSSL, krb5 and SASL versions
  --plot FILE.svg     also draw a bar chart: one panel per transport (and TLS,
                      calls), each row's p50 (solid) and p99 (pale) beside its
                      floor (grey) on a log time axis, a colour per method;
                      its p50 over the floor's on a linear axis with its
                      targets, met or not; when, where and what ran below
  --quiet             no progress lines on stderr (otherwise: each group's
                      rows, then row i/N, block and elapsed time, rewritten in
                      place on a terminal, every 2 s otherwise)
  --help              this text

Kerberos (kerberos, kerberos-sasl and the token fetch): without the flags
below, minibench starts a throwaway realm — krb5kdc on a free 127.0.0.1 port
in a temporary directory, alice and rpc/localhost with keytabs; clients log
in as alice from her keytab (memory cache) — and stops it at the end; KDC
requests are counted in its log. If the Kerberos tools are missing and no
realm is named, the Kerberos and token rows are skipped with a note on stderr
(an error if --method names them). To use a realm:
  --krb5-conf FILE          its krb5.conf (else KRB5_CONFIG, else the system's)
  --keytab FILE             the service keytab (else KRB5_KTNAME / default)
  --service-principal P     the service principal, e.g. rpc/host@REALM
                            (required to name a realm)
  --principal P --client-keytab FILE
                            the client logs in from a keytab; without them it
                            uses the ticket cache (KRB5CCNAME, after kinit)
  --kdc-log FILE            the KDC's log, to count KDC requests per session
  --replay-cache on|off     the server's (and floor/gss's) replay cache
                            (default on)

Honest measurement: the server runs in a child process (an authrpc server on
tcp://127.0.0.1:0, an abstract unix socket and tls://127.0.0.1:0, plus a bare
echo listener per transport, floor/gss and floor/tls listeners, by default
on the authrpc server's IO thread); the client runs on one IO thread in this
process (K with --concurrency). Every row makes the same sys.whoami call.
Nothing is cached across sessions except what a real client keeps: the
Kerberos service ticket in its credential cache, the TLS session ticket in
the simple+tls-resume row, and the jwt rows' access token, which the
server's verified-token cache answers (not in jwt-cold+tls/tcp: a second
server with that cache off) (labelled; JSON "caching"). Nothing is pinned
unless asked: where the scheduler puts the threads moves every number, so
compare ratios, not absolute times, and use --client-cpu/--server-cpu for a
fixed layout.
Exit status: 0 when measured (targets met or not), 1 on a failure, 2 for usage.
)";

struct Args {
  bool sessions = true;
  bool calls = true;
  bool floor_server_mode = false;
  std::vector<std::string> floor_listen;
  std::vector<std::string> methods;  // empty: the default set
  bool methods_given = false;
  RealmFlags realm;
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
  bool floors = true;  // --floors off: session rows without their floors
  int server_cpu = -1;
  int client_cpu = -1;
  std::string json;
  std::size_t token_ops = 0;
  std::string zk_connect;  // --zk-connect: the token rows' store
  std::string acl_file;
  bool progress = true;
  std::string tls = "both";  // sessions: "on", "off", "both"
  std::size_t concurrency = 1;
  std::size_t depth = 1;        // --depth: calls in flight per connection
  double duration_s = 3;        // --duration: calls under load, per row
  std::string plot;          // --plot FILE.svg
  std::string token_file;    // --token-file, with --server
  std::string ca;            // --ca, with a tls:// --server
  bool in_process = false;   // --in-process
  std::string metrics = "on";  // --metrics on|off|compare
};

// How a method's rows are set up follows from what its mechanism declares
// (auth/mechanism_traits.h), never from its name: one that may be issued
// delegation tokens logs in from the bench realm; a delegation-token one
// authenticates with a token fetched first, over token_issuer() (so it
// needs the realm too, unless --token-file gives the token).
const authrpc::MechanismTraits* traits_of(const authrpc::MechanismRegistry& registry,
                                          const std::string& name) {
  const auto* entry = registry.server(name);
  return entry == nullptr ? nullptr : &entry->traits;
}

// The rows that authenticate with a delegation token fetched first.
bool is_token_method(const authrpc::MechanismRegistry& registry, const std::string& name) {
  const auto* t = traits_of(registry, name);
  return t != nullptr && t->delegation_token;
}

// The rows that carry a bearer secret: +tls rows only (MethodPlan::tls_only).
bool carries_bearer_secret(const authrpc::MechanismRegistry& registry, const std::string& name) {
  const auto* t = traits_of(registry, name);
  return t != nullptr && t->bearer_secret;
}

// The rows that need the bench realm (Kerberos credentials).
bool needs_realm(const authrpc::MechanismRegistry& registry, const std::string& name) {
  const auto* t = traits_of(registry, name);
  return t != nullptr && (t->may_be_issued_tokens || t->delegation_token);
}

// What "all" measures, in this order: each registered method with both
// halves that minibench can run (no client certificate, no TLS: the TLS rows
// are --tls), those without a proof first, then those that prove an
// identity, then the delegation-token ones; by name within each.
std::vector<std::string> measurable_methods(const authrpc::MechanismRegistry& registry) {
  std::vector<std::string> out;
  for (int group = 0; group < 3; ++group) {
    for (const auto& name : registry.server_names()) {
      const auto* t = traits_of(registry, name);
      if (registry.client(name) == nullptr || t->needs_client_certificate || t->needs_tls) continue;
      if ((t->delegation_token ? 2 : t->proves_identity ? 1 : 0) == group) out.push_back(name);
    }
  }
  return out;
}

// Row labels: the floor each method's rows are compared with, the p50
// target they are held to (docs/PERFORMANCE.md, "Sessions"), and whether minibench
// issues the method's credentials itself: which options a method takes is
// the method's own business, so minibench knows it only for the rows it
// labels. A method not listed is held to the bare floor and the session
// target.
struct RowLabel {
  const char* method;
  FloorKind floor;
  std::optional<double> target;
  // With --concurrency: sessions/s held to this fraction of the floor's.
  std::optional<double> rate_target = std::nullopt;
  // An OAuth 2.0 access token (JWT) from BenchJwtIssuer (jwt_bench.h).
  bool issued_jwt = false;
  // Client options (JSON) added to the ones minibench gives the method.
  const char* client_options = nullptr;
};
constexpr RowLabel kRowLabels[] = {
    {"simple", FloorKind::kBare, kSessionTarget, 0.9},                // names: row label
    {"kerberos", FloorKind::kGss, kKerberosSessionTarget, 0.95},      // names: row label
    {"kerberos-sasl", FloorKind::kGss, std::nullopt},                 // names: row label
    // Session tickets over plaintext tcp (the spawned server issues them).
    {"token", FloorKind::kBare, std::nullopt, 0.8, false, R"({"tickets": true})"},  // names: row label
    {"token-digest", FloorKind::kBare, std::nullopt},                 // names: row label
    {"token-scram", FloorKind::kBare, std::nullopt},                  // names: row label
    {"jwt", FloorKind::kBare, std::nullopt, std::nullopt, true},      // names: row label
};

// The method the calls rows and single-method runs use: the first that
// "all" measures, one without a proof when there is one (the cheapest).
std::string baseline_method(const authrpc::MechanismRegistry& registry) {
  const auto all = measurable_methods(registry);
  return all.empty() ? std::string() : all.front();
}

const RowLabel* row_label(const std::string& name) {
  for (const auto& m : kRowLabels) {
    if (name == m.method) return &m;
  }
  return nullptr;
}

bool registered(const authrpc::MechanismRegistry& registry, const std::string& name) {
  const auto clients = registry.client_names();
  const auto servers = registry.server_names();
  return std::find(clients.begin(), clients.end(), name) != clients.end() &&
         std::find(servers.begin(), servers.end(), name) != servers.end();
}

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
    } else if (arg == "--in-process") {
      args.in_process = true;
    } else if (arg == "sessions" || arg == "calls" || arg == "floor-server") {
      return usage_error("the mode '" + arg + "' must come first");
    } else if (!value(v)) {
      return usage_error("unknown option or missing value: '" + arg + "'");
    } else if (arg == "--method") {
      args.methods.clear();
      if (v != "all") {
        for (std::size_t start = 0; start <= v.size();) {
          const std::size_t comma = std::min(v.find(',', start), v.size());
          const std::string name = v.substr(start, comma - start);
          if (name.empty()) return usage_error("--method: a comma-separated list of methods");
          if (std::find(args.methods.begin(), args.methods.end(), name) == args.methods.end()) {
            args.methods.push_back(name);
          }
          start = comma + 1;
        }
      }
      args.methods_given = true;
    } else if (arg == "--krb5-conf") {
      args.realm.krb5_conf = v;
    } else if (arg == "--keytab") {
      args.realm.keytab = v;
    } else if (arg == "--service-principal") {
      args.realm.service_principal = v;
    } else if (arg == "--principal") {
      args.realm.principal = v;
    } else if (arg == "--client-keytab") {
      args.realm.client_keytab = v;
    } else if (arg == "--kdc-log") {
      args.realm.kdc_log = v;
    } else if (arg == "--replay-cache") {
      if (v != "on" && v != "off") return usage_error("--replay-cache: on or off");
      args.realm.replay_cache = v == "on";
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
    } else if (arg == "--floors") {
      if (v != "on" && v != "off") return usage_error("--floors: on or off");
      args.floors = v == "on";
    } else if (arg == "--floor-thread") {
      if (v != "server" && v != "own") return usage_error("--floor-thread: server or own");
      args.floors_on_server_thread = v == "server";
    } else if (arg == "--server-cpu" || arg == "--client-cpu") {
      std::size_t cpu = 0;
      if (!parse_count(v, cpu, 0) || cpu >= CPU_SETSIZE) return usage_error(arg + ": a CPU number");
      (arg == "--server-cpu" ? args.server_cpu : args.client_cpu) = static_cast<int>(cpu);
    } else if (arg == "--json") {
      args.json = v;
    } else if (arg == "--tls") {
      if (v != "on" && v != "off" && v != "both") return usage_error("--tls: on, off or both");
      args.tls = v;
    } else if (arg == "--concurrency") {
      if (!parse_count(v, args.concurrency, 1) || args.concurrency > 1024) {
        return usage_error("--concurrency: a count from 1 to 1024");
      }
    } else if (arg == "--depth") {
      if (!parse_count(v, args.depth, 1) || args.depth > 4096) {
        return usage_error("--depth: a count from 1 to 4096");
      }
    } else if (arg == "--duration") {
      char* end = nullptr;
      args.duration_s = std::strtod(v.c_str(), &end);
      if (v.empty() || *end != '\0' || !(args.duration_s > 0) || args.duration_s > 3600) {
        return usage_error("--duration: seconds, above 0 and at most 3600");
      }
    } else if (arg == "--plot") {
      args.plot = v;
    } else if (arg == "--token-file") {
      args.token_file = v;
    } else if (arg == "--ca") {
      args.ca = v;
    } else if (arg == "--zk-connect") {
      args.zk_connect = v;
    } else if (arg == "--acl") {
      args.acl_file = v;
    } else if (arg == "--metrics") {
      if (v != "on" && v != "off" && v != "compare") {
        return usage_error("--metrics: on, off or compare");
      }
      args.metrics = v;
    } else if (arg == "--token-ops") {
      if (!parse_count(v, args.token_ops, 0)) return usage_error("--token-ops: a count");
    } else {
      return usage_error("unknown option '" + arg + "'");
    }
  }
  const auto registry = authrpc::MechanismRegistry::with_builtins();
  for (const auto& method : args.methods) {
    if (row_label(method) == nullptr && !registered(registry, method)) {
      std::string names;
      for (const auto& name : registry.client_names()) names += (names.empty() ? "" : ", ") + name;
      return usage_error("--method: unknown method '" + method + "' (available: " + names + ")");
    }
  }
  if (!args.floor_server.empty() && args.server.empty()) {
    return usage_error("--floor-server needs --server");
  }
  if (args.server.empty() && (!args.token_file.empty() || !args.ca.empty())) {
    return usage_error("--token-file and --ca apply to --server (the spawned server makes its own)");
  }
  if (!args.server.empty() && args.in_process) {
    return usage_error("--in-process applies to the spawned server, not --server");
  }
  if (!args.server.empty() && args.metrics == "compare") {
    return usage_error("--metrics compare needs the spawned server (its metrics-off twin), not "
                       "--server");
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

// TLS rows run on tcp (tls://): by default unless --transport unix, always
// with --tls on, never with --tls off.
bool tls_rows(const Args& args) {
  return args.tls == "on" || (args.tls == "both" && args.transport != "unix");
}

// Calls under load (call_load.h) instead of sequential calls.
bool call_load(const Args& args) {
  return args.calls && (args.concurrency > 1 || args.depth > 1);
}

// The methods to measure and the realm the Kerberos ones need.
struct Selection {
  std::vector<MethodPlan> methods;
  std::string calls_method;
  std::unique_ptr<BenchRealm> realm;  // null: no Kerberos method
};

// Drops methods this build does not register, and the Kerberos ones when no
// realm can be had and they were not asked for by name (each with a note on
// stderr); opens the realm (setenv: before any thread starts).
authrpc::Result<Selection> select_methods(const Args& args) {
  const auto registry = authrpc::MechanismRegistry::with_builtins();
  const std::string baseline = baseline_method(registry);
  std::vector<std::string> names = args.methods;
  if (!args.methods_given) {
    names.clear();
    if (!args.server.empty() || !args.sessions) {
      names.push_back(baseline);
    } else {
      names = measurable_methods(registry);
    }
  } else if (!args.sessions) {
    // The calls rows run over plaintext tcp:// and unix:.
    std::erase_if(names, [&registry](const std::string& name) {
      return carries_bearer_secret(registry, name);
    });
    if (names.empty()) {
      return Status(authrpc::Errc::kInvalidArgument,
                    "calls run over plaintext tcp:// and unix:, where a bearer secret is never "
                    "sent: --method names no method for them");
    }
    const bool has_baseline = std::find(names.begin(), names.end(), baseline) != names.end();
    names = {has_baseline ? baseline : names.front()};
  }
  std::vector<std::string> kept;
  for (const auto& name : names) {
    if (registered(registry, name)) {
      kept.push_back(name);
    } else {
      std::fprintf(stderr,
                   "minibench: the %s mechanism is not registered in this build: its rows are "
                   "skipped\n",
                   name.c_str());
    }
  }
  // A bearer secret has its +tls row only (MethodPlan::tls_only), and a
  // token minibench issues is trusted by the server it spawns only. Left out
  // quietly when not asked for by name (--tls off asked for no TLS row).
  for (auto it = kept.begin(); it != kept.end();) {
    const RowLabel* label = row_label(*it);
    std::string why;
    if (carries_bearer_secret(registry, *it) && !tls_rows(args)) {
      why = "it carries a bearer secret, sent over TLS only, and this run has no TLS rows (--tls "
            "off, or --transport unix without --tls on)";
    } else if (label != nullptr && label->issued_jwt && !args.server.empty()) {
      why = "minibench issues its access token itself, which only the server it spawns trusts";
    }
    if (why.empty()) {
      ++it;
      continue;
    }
    if (args.methods_given) {
      return Status(authrpc::Errc::kInvalidArgument, "--method " + *it + ": " + why);
    }
    it = kept.erase(it);
  }
  // Kerberos rows, and token rows that fetch their token over Kerberos
  // (not with --token-file).
  auto is_kerberos = [&args, &registry](const std::string& name) {
    return needs_realm(registry, name) &&
           (args.token_file.empty() || !is_token_method(registry, name));
  };
  Selection selection;
  if (std::any_of(kept.begin(), kept.end(), is_kerberos)) {
    if (!args.server.empty() && !args.realm.names_realm()) {
      return Status(authrpc::Errc::kInvalidArgument,
                    "Kerberos rows against --server need its realm: --service-principal (and "
                    "--krb5-conf, --principal/--client-keytab or KRB5CCNAME as needed)");
    }
    auto realm = BenchRealm::open(args.realm);
    if (realm.ok()) {
      selection.realm = std::move(*realm);
    } else if (realm.code() == authrpc::Errc::kNotFound && !args.methods_given) {
      std::fprintf(stderr, "minibench: the Kerberos rows are skipped: %s\n",
                   realm.status().message.c_str());
      std::erase_if(kept, is_kerberos);
    } else {
      return Status(realm.code(), "Kerberos realm: " + realm.status().message);
    }
  }
  if (kept.empty()) return Status(authrpc::Errc::kInvalidArgument, "no method left to measure");

  for (const auto& name : kept) {
    MethodPlan m;
    m.name = name;
    m.target = kSessionTarget;
    if (const RowLabel* label = row_label(name)) {
      m.floor = label->floor;
      m.target = label->target;
      m.rate_target = label->rate_target;
      m.issued_jwt = label->issued_jwt;
    }
    m.tls_only = carries_bearer_secret(registry, name);
    m.kerberos = needs_realm(registry, name) && selection.realm != nullptr;
    if (m.kerberos) m.client_options = selection.realm->setup().client_options();
    m.optional = !args.methods_given;
    selection.methods.push_back(std::move(m));
  }
  // The calls rows run over plaintext: with the baseline, or the first
  // method that may; the spawned server always enables the baseline.
  const bool has_baseline = std::find(kept.begin(), kept.end(), baseline) != kept.end();
  const auto plaintext = std::find_if(kept.begin(), kept.end(), [&registry](const std::string& n) {
    return !carries_bearer_secret(registry, n);
  });
  selection.calls_method = has_baseline || plaintext == kept.end() ? baseline : *plaintext;
  return selection;
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
  if (int rc = minibench::parse_args(argc, argv, args); rc != 0) return rc < 0 ? 0 : rc;
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
