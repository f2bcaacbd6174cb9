#include "minibench/args.h"

#include <sched.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "authrpc/auth/mechanism_registry.h"
#include "authrpc/base/log.h"
#include "authrpc/tools/cli_exit.h"
#include "authrpc/tools/flag_parser.h"
#include "minibench/methods.h"

namespace minibench {
namespace {

using authrpc::Status;
using authrpc::cli::count;
using authrpc::cli::one_of;

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
             With --api proto: typed calls instead of the 1-byte ones —
             authrpc.bench.Echo (minibench/bench_echo.proto, inline like
             sys.echo) through its generated stub on the same connection,
             with a small message (an 8-byte string, an int64 and a bool:
             19 bytes encoded) and a 1 KiB one (a bytes field of 1024
             bytes), each beside sys.echo calls sending the same encoded
             bytes: rows "calls/<transport> proto small", "... bytes small",
             "... proto 1KiB", "... bytes 1KiB". Target: proto small p50
             <= 1.05 x bytes small p50 (the codec's cost). --api all: both,
             in the same blocks.
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
  --api bytes|proto|all
                      calls: the 1-byte sys.echo rows (bytes, the default),
                      the typed rows beside their bytes rows (proto), or
                      both (all); see calls above
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

constexpr const char* kSee = "minibench --help";

// on|off (or two other words) as a bool: true for the first.
authrpc::cli::FlagParser::OnValue choice(bool* out, std::string_view yes, std::string_view no) {
  return [out, yes, no](std::string_view v) {
    if (v != yes && v != no) return Status(authrpc::Errc::kInvalidArgument, std::string(yes) + " or " + std::string(no));
    *out = v == yes;
    return Status();
  };
}

authrpc::cli::FlagParser::OnValue cpu(int* out) {
  return [out](std::string_view v) {
    std::size_t n = 0;
    if (!count(&n, 0, CPU_SETSIZE - 1)(v).ok()) {
      return Status(authrpc::Errc::kInvalidArgument, "a CPU number");
    }
    *out = static_cast<int>(n);
    return Status();
  };
}

}  // namespace

void BlockSizes::add_options(authrpc::cli::FlagParser& parser) {
  parser.value("-n", count(&n, 1, SIZE_MAX))
      .value("--warmup", count(&warmup, 0, SIZE_MAX))
      .value("--blocks", count(&blocks, 1, SIZE_MAX));
}

namespace {

void add_options(authrpc::cli::FlagParser& p, Args& args) {
  p.flag("--quiet", [&args] { args.progress = false; })
      .flag("--in-process", &args.in_process)
      .value("--method",
             [&args](std::string_view v) {
               args.methods_given = true;
               if (v == "all") {
                 args.methods.clear();
                 return Status();
               }
               return authrpc::cli::list(&args.methods)(v);
             })
      .value("--krb5-conf", &args.realm.krb5_conf)
      .value("--keytab", &args.realm.keytab)
      .value("--service-principal", &args.realm.service_principal)
      .value("--principal", &args.realm.principal)
      .value("--client-keytab", &args.realm.client_keytab)
      .value("--kdc-log", &args.realm.kdc_log)
      .value("--replay-cache", choice(&args.realm.replay_cache, "on", "off"))
      .value("--transport",
             [&args](std::string_view v) {
               args.transport_given = true;
               return one_of(&args.transport, {"tcp", "unix", "all"})(v);
             });
  args.add_options(p);
  p.value("--server-threads",
          [&args](std::string_view v) {
            args.server_threads_given = true;
            return count(&args.server_threads, 1, SIZE_MAX)(v);
          })
      .value("--server", &args.server)
      .value("--floor-server", &args.floor_server)
      .value("--floors", choice(&args.floors, "on", "off"))
      .value("--floor-thread", choice(&args.floors_on_server_thread, "server", "own"))
      .value("--server-cpu", cpu(&args.server_cpu))
      .value("--client-cpu", cpu(&args.client_cpu))
      .value("--json", &args.json)
      .value("--tls", one_of(&args.tls, {"on", "off", "both"}))
      .value("--concurrency", count(&args.concurrency, 1, 1024))
      .value("--depth", count(&args.depth, 1, 4096))
      .value("--duration",
             [&args](std::string_view v) {
               const std::string text(v);
               char* end = nullptr;
               args.duration_s = std::strtod(text.c_str(), &end);
               if (text.empty() || *end != '\0' || !(args.duration_s > 0) || args.duration_s > 3600) {
                 return Status(authrpc::Errc::kInvalidArgument, "seconds, above 0 and at most 3600");
               }
               return Status();
             })
      .value("--plot", &args.plot)
      .value("--token-file", &args.token_file)
      .value("--ca", &args.ca)
      .value("--zk-connect", &args.zk_connect)
      .value("--acl", &args.acl_file)
      .value("--metrics", one_of(&args.metrics, {"on", "off", "compare"}))
      .value("--api", one_of(&args.api, {"bytes", "proto", "all"}))
      .value("--token-ops", count(&args.token_ops, 0, SIZE_MAX));
}

// The options that only make sense together: "" when they fit.
std::string misfit(const Args& args) {
  const auto registry = authrpc::MechanismRegistry::with_builtins();
  for (const auto& method : args.methods) {
    if (row_label(method) == nullptr && !registered(registry, method)) {
      std::string names;
      for (const auto& name : registry.client_names()) names += (names.empty() ? "" : ", ") + name;
      return "--method: unknown method '" + method + "' (available: " + names + ")";
    }
  }
  if (!args.floor_server.empty() && args.server.empty()) return "--floor-server needs --server";
  if (args.server.empty() && (!args.token_file.empty() || !args.ca.empty())) {
    return "--token-file and --ca apply to --server (the spawned server makes its own)";
  }
  if (args.api != "bytes") {
    if (!args.calls) return "--api applies to calls";
    if (call_load(args)) {
      return "--api " + args.api + ": the typed rows are sequential calls, not calls under load";
    }
    if (!args.server.empty()) {
      return "--api " + args.api + " needs the spawned server (it serves authrpc.bench.Echo)";
    }
  }
  if (args.server.empty()) return "";
  if (args.in_process) return "--in-process applies to the spawned server, not --server";
  if (args.metrics == "compare") {
    return "--metrics compare needs the spawned server (its metrics-off twin), not --server";
  }
  if (args.server_threads_given || args.server_cpu >= 0) {
    return "--server-threads and --server-cpu apply to the spawned server only";
  }
  return "";
}

}  // namespace

bool tls_rows(const Args& args) { return args.tls == "on" || (args.tls == "both" && args.transport != "unix"); }

bool call_load(const Args& args) { return args.calls && (args.concurrency > 1 || args.depth > 1); }

int usage_error(const std::string& message) { return authrpc::cli::report_usage("minibench", message, kSee); }

std::optional<int> parse_args(int argc, char** argv, Args& args) {
  int i = 1;
  const std::string mode = i < argc ? argv[i] : "";
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
    return std::nullopt;
  }
  authrpc::cli::FlagParser parser;
  add_options(parser, args);
  std::vector<std::string> positional;
  parser.positional(&positional);
  if (auto code = authrpc::cli::parse_or_exit(parser, argc - i, argv + i, kUsage, "minibench", kSee)) return code;
  if (!positional.empty()) {
    const std::string& arg = positional.front();
    if (arg == "sessions" || arg == "calls" || arg == "floor-server") {
      return usage_error("the mode '" + arg + "' must come first");
    }
    return usage_error("unexpected argument '" + authrpc::escape_for_log(arg) + "'");
  }
  if (const std::string why = misfit(args); !why.empty()) return usage_error(why);
  args.blocks = std::min(args.blocks, args.n);
  return std::nullopt;
}

}  // namespace minibench
