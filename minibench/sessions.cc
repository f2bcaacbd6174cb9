#include "minibench/sessions.h"

#include <asio/post.hpp>
#include <asio/use_awaitable.hpp>
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "authrpc/auth/mechanism_registry.h"
#include "authrpc/client/client.h"
#include "minibench/floor.h"
#include "minibench/gss_floor.h"
#include "tests/testing/kdc_log.h"
#include "minibench/schedule.h"

namespace minibench {
namespace {

using authrpc::ClientMechanism;
using authrpc::ClientOptions;
using authrpc::Result;
using authrpc::Status;
using authrpc::testing::KdcLog;
using authrpc::security::KerberosCredentials;

std::string floor_name(FloorKind kind, const std::string& transport) {
  if (kind == FloorKind::kBare) return "floor/" + transport;
  return transport == "tcp" ? "floor/gss" : "floor/gss-" + transport;
}

// What the Kerberos rows share: the floor/gss client's credentials and the
// KDC's log.
struct KerberosContext {
  std::shared_ptr<const KerberosCredentials> initiator;  // null: the default cache
  std::unique_ptr<KdcLog> kdc_log;                        // null: not counted

  std::function<long()> events() {
    if (!kdc_log) return {};
    return [log = kdc_log.get()] { return static_cast<long>(log->counts().total()); };
  }
};

Result<KerberosContext> kerberos_context(const KerberosSetup& setup) {
  KerberosContext k;
  if (setup.client_keeps_handle()) {
    auto credentials = KerberosCredentials::initiator(setup.initiator());
    if (!credentials.ok()) {
      return Status(authrpc::Errc::kConfigError,
                    "floor/gss client: " + credentials.status().message);
    }
    k.initiator = std::move(*credentials);
  }
  if (!setup.kdc_log.empty()) k.kdc_log = std::make_unique<KdcLog>(setup.kdc_log);
  return k;
}

using Mechanisms = std::map<std::string, std::shared_ptr<ClientMechanism>>;

// A row's client options: `mechanism` on `endpoint`, on the fast path
// (wait_for_authentication off), counting unless `metrics` is false.
ClientOptions row_client(const authrpc::Endpoint& endpoint, std::shared_ptr<ClientMechanism> mechanism,
                         bool metrics) {
  ClientOptions o;
  o.endpoint = endpoint;
  o.mechanisms = {std::move(mechanism)};
  o.wait_for_authentication = false;
  if (!metrics) o.metrics = nullptr;
  return o;
}

// A running server (--server) need not offer every method asked for. One
// untimed session per method before any row: a method the server refuses
// as not offered (MECHANISM_UNAVAILABLE) is dropped from `mechanisms` with a
// note on stderr instead of ending the run midway; any other failure ends
// it, as it would in the row.
asio::awaitable<Status> skip_unoffered(asio::any_io_executor ex, const BenchPlan& plan,
                                       Mechanisms& mechanisms) {
  ClientOptions base = row_client({}, nullptr, plan.client_metrics());
  if (plan.plaintext && !plan.transports.empty()) {
    base.endpoint = plan.transports.front().authrpc;
  } else if (plan.tls) {
    base.endpoint = plan.tls->authrpc;
    auto context = tls_client_context(plan.tls->ca_file, true);
    if (!context.ok()) co_return context.status();
    base.tls = std::move(*context);
  } else {
    co_return Status();
  }
  for (auto it = mechanisms.begin(); it != mechanisms.end();) {
    ClientOptions o = base;
    o.mechanisms = {it->second};
    auto session = co_await timed_session(ex, o);
    if (session.ok()) {
      ++it;
    } else if (session.code() == authrpc::Errc::kMechanismUnavailable) {
      std::fprintf(stderr, "minibench: the %s rows are skipped: %s does not offer it (%s)\n",
                   it->first.c_str(), base.endpoint.to_string().c_str(),
                   session.status().message.c_str());
      it = mechanisms.erase(it);
    } else {
      co_return Status(session.code(), it->first + " session with " + base.endpoint.to_string() +
                                           ": " + session.status().message);
    }
  }
  if (mechanisms.empty()) {
    co_return Status(authrpc::Errc::kMechanismUnavailable,
                     base.endpoint.to_string() + " offers none of the methods asked for");
  }
  co_return Status();
}

// One transport's rows held to one kind of floor, measured as one group.
asio::awaitable<Status> run_floor_group(asio::any_io_executor ex, const BenchPlan& plan,
                                        const TransportServers& target, FloorKind kind,
                                        const Mechanisms& mechanisms, KerberosContext* kerberos,
                                        Report& report) {
  std::vector<const MethodPlan*> methods;
  for (const auto& m : plan.methods) {
    if (m.floor == kind && !m.tls_only && (!m.tcp_only || target.transport == "tcp") &&
        mechanisms.contains(m.name)) {
      methods.push_back(&m);
    }
  }
  if (methods.empty()) co_return Status();

  // With --metrics compare each method has two rows — against the server
  // that counts and, by a client that does not count, against the one that
  // does not — in the same group, so that every block pairs them.
  struct RowSpec {
    const MethodPlan* method;
    std::string name;
    bool off_twin;  // the "[metrics off]" row, against target.authrpc_nometrics
  };
  std::vector<RowSpec> rows;
  for (const MethodPlan* m : methods) {
    const std::string name = m->name + "/" + target.transport;
    rows.push_back({m, name, false});
    if (plan.metrics == MetricsMode::kCompare && target.authrpc_nometrics) {
      rows.push_back({m, metrics_off_row(name), true});
    }
  }

  std::unique_ptr<FloorClient> bare_floor;
  std::unique_ptr<GssFloorClient> gss_floor;
  std::optional<Measured> floor_sessions;
  const std::string floor_label = floor_name(kind, target.transport);
  const auto& floor_endpoint = kind == FloorKind::kBare ? target.floor : target.gss_floor;
  if (floor_endpoint && kind == FloorKind::kBare) {
    auto made = FloorClient::make(*floor_endpoint);
    if (!made.ok()) co_return made.status();
    bare_floor = std::move(*made);
    floor_sessions = Measured{[&]() { return bare_floor->session(ex); }, nullptr, {}, floor_label,
                              [&](asio::any_io_executor e) { return bare_floor->session(e); }};
  } else if (floor_endpoint && kerberos != nullptr) {
    auto made = GssFloorClient::make(*floor_endpoint, kerberos->initiator,
                                     plan.kerberos->service_principal);
    if (!made.ok()) co_return made.status();
    gss_floor = std::move(*made);
    floor_sessions = Measured{[&]() { return gss_floor->session(ex); }, nullptr, kerberos->events(),
                              floor_label, [&](asio::any_io_executor e) { return gss_floor->session(e); }};
  }
  const bool has_floor = floor_sessions.has_value();
  std::vector<SessionRow> sessions;
  for (const RowSpec& r : rows) {
    ClientOptions o = row_client(r.off_twin ? *target.authrpc_nometrics : target.authrpc,
                                 mechanisms.at(r.method->name), !r.off_twin && plan.client_metrics());
    sessions.push_back({r.name, r.method->name, std::move(o), r.method->kerberos && kerberos ? kerberos->events() : nullptr,
                        r.off_twin ? plan.nometrics_server_connections : plan.server_connections});
  }

  const std::string label =
      "sessions " + target.transport + (kind == FloorKind::kGss ? " (Kerberos)" : "");
  auto measured =
      co_await run_session_group(ex, plan, label, target.transport, std::move(floor_sessions), sessions);
  if (!measured.ok()) co_return measured.status();
  if (has_floor) report.add(measured->front());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const MethodPlan& m = *rows[i].method;
    Row row = std::move((*measured)[i + has_floor]);
    row.kerberos = m.kerberos;
    row.metrics = !rows[i].off_twin && plan.client_metrics();
    report.add(std::move(row));
    if (rows[i].off_twin) {
      const std::string on = m.name + "/" + target.transport;
      // The metrics target covers the rows a deployment lives on.
      const bool held = target.transport == "tcp" && (m.name == "simple" || m.name == "kerberos");
      report.add_metrics_cost(on, rows[i].name,
                              held ? std::optional<double>(kMetricsCostTarget) : std::nullopt);
    } else {
      if (m.target) report.add_target(rows[i].name, *m.target);
      if (m.rate_target && has_floor && plan.concurrency > 1) {
        report.add_rate_target(rows[i].name,
                               "sessions c" + std::to_string(plan.concurrency) + ": sessions/s " +
                                   rows[i].name + " / " + floor_label,
                               *m.rate_target);
      }
    }
  }
  co_return Status();
}

// One TLS row: a method, with or without session resumption, and what its
// p50 is held to (nullopt: no target; "" reference: floor/tls).
struct TlsRowSpec {
  const char* method;
  bool resume;
  std::optional<double> target;
  const char* reference;
  // Against TlsServers::cold (labelled "-cold"), when the run has one.
  bool cold = false;
};

// Rows for methods the run has no client for (not registered, not selected)
// are left out; the token and jwt rows appear once their mechanisms are
// registered.
constexpr TlsRowSpec kTlsRows[] = {
    {"simple", false, kTlsSessionTarget, ""},
    {"kerberos", false, std::nullopt, ""},
    {"kerberos-sasl", false, std::nullopt, ""},
    {"token", false, kTokenTlsTarget, "simple+tls/tcp"},
    {"token-digest", false, std::nullopt, ""},
    {"token-scram", false, std::nullopt, ""},
    // The same access token every session, as a reconnecting client sends
    // until it nears its exp: the server's verified-token cache answers.
    {"jwt", false, kJwtTlsTarget, "simple+tls/tcp"},
    // The same, each session's token checked afresh (the server's cache
    // off): what a token the server has not seen costs, as a whole session.
    {"jwt", false, std::nullopt, "", true},
    // The one row with caching across sessions: the client keeps its TLS
    // session tickets and resumes (labelled "-resume").
    {"simple", true, kTlsResumeTarget, "simple+tls/tcp"},
};

std::string row_name(const TlsRowSpec& spec) {
  return std::string(spec.method) + (spec.cold ? "-cold" : "") +
         (spec.resume ? "+tls-resume" : "+tls") + "/tcp";
}

// The TLS rows, measured as one group.
asio::awaitable<Status> run_tls_sessions(asio::any_io_executor ex, const BenchPlan& plan,
                                         const Mechanisms& mechanisms,
                                         const std::function<long()>& kdc_events, Report& report) {
  const TlsServers& tls = *plan.tls;
  auto full = tls_client_context(tls.ca_file, false);
  auto resuming = tls_client_context(tls.ca_file, true);
  if (!full.ok()) co_return full.status();
  if (!resuming.ok()) co_return resuming.status();

  std::vector<const TlsRowSpec*> rows;
  for (const auto& spec : kTlsRows) {
    if (mechanisms.contains(spec.method) && (!spec.cold || tls.cold)) rows.push_back(&spec);
  }
  if (rows.empty()) co_return Status();

  // The Kerberos rows count the KDC's requests, as on plaintext.
  auto counts_kdc = [&](const TlsRowSpec& spec) {
    const MethodPlan* m = plan.method(spec.method);
    return m != nullptr && m->kerberos;
  };
  std::optional<TlsFloorClient> floor;
  std::optional<Measured> floor_sessions;
  if (tls.floor) {
    floor.emplace(*tls.floor, *full);
    floor_sessions = Measured{[&]() { return floor->session(ex); }, nullptr, {}, "floor/tls",
                              [&](asio::any_io_executor e) { return floor->session(e); }};
  }
  std::vector<SessionRow> sessions;
  for (const TlsRowSpec* spec : rows) {
    ClientOptions o = row_client(spec->cold ? tls.cold->authrpc : tls.authrpc, mechanisms.at(spec->method),
                                 plan.client_metrics());
    o.tls = spec->resume ? *resuming : *full;
    sessions.push_back({row_name(*spec), spec->method, std::move(o), counts_kdc(*spec) ? kdc_events : nullptr,
                        spec->cold ? tls.cold->server_connections : plan.server_connections});
  }
  auto measured =
      co_await run_session_group(ex, plan, "sessions tls", "tcp", std::move(floor_sessions), sessions);
  if (!measured.ok()) co_return measured.status();
  for (Row& row : *measured) row.tls = true;
  if (floor) report.add(measured->front());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    Row& row = (*measured)[i + floor.has_value()];
    row.resumed = rows[i]->resume;
    row.kerberos = counts_kdc(*rows[i]);
    row.metrics = plan.client_metrics();
    report.add(row);
    if (rows[i]->target) report.add_target(row.name, *rows[i]->target, rows[i]->reference);
  }
  co_return Status();
}

}  // namespace

Result<std::shared_ptr<authrpc::security::TlsClientContext>> tls_client_context(
    const std::string& ca_file, bool resume) {
  authrpc::security::TlsClientOptions o;
  o.ca_file = ca_file;
  o.session_resumption = resume;
  auto ctx = authrpc::security::TlsClientContext::create(o);
  if (!ctx.ok()) return Status(ctx.code(), "TLS client: " + ctx.status().message);
  return ctx;
}

Result<std::unique_ptr<ThrowawayCerts>> ThrowawayCerts::make() {
  char tmpl[] = "/tmp/minibench-tls-XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) {
    return Status(std::error_code(errno, std::system_category()), "mkdtemp");
  }
  std::unique_ptr<ThrowawayCerts> certs(new ThrowawayCerts(tmpl));
  const std::string command =
      std::string("bash '") + MINIBENCH_CERTS_SCRIPT + "' '" + certs->dir_ + "' >/dev/null 2>&1";
  if (std::system(command.c_str()) != 0) {
    return Status(authrpc::Errc::kUnavailable, "scripts/certs.sh failed (is openssl installed?)");
  }
  return certs;
}

ThrowawayCerts::~ThrowawayCerts() {
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);
}

asio::awaitable<Status> run_sessions(asio::any_io_executor ex, const BenchPlan& plan,
                                     Report& report) {
  const auto registry = authrpc::MechanismRegistry::with_builtins();
  Mechanisms mechanisms;
  for (const auto& m : plan.methods) {
    auto mechanism = registry.make_client(m.name, m.client_options);
    if (!mechanism.ok() && m.optional) {
      std::fprintf(stderr, "minibench: the %s rows are skipped: %s client: %s\n", m.name.c_str(),
                   m.name.c_str(), mechanism.status().to_string().c_str());
      continue;
    }
    if (!mechanism.ok()) {
      co_return Status(mechanism.code(), m.name + " client: " + mechanism.status().message);
    }
    mechanisms[m.name] = *mechanism;
  }
  if (plan.external_server) {
    if (Status s = co_await skip_unoffered(ex, plan, mechanisms); !s.ok()) co_return s;
  }
  std::optional<KerberosContext> kerberos;
  if (plan.kerberos) {
    auto made = kerberos_context(*plan.kerberos);
    if (!made.ok()) co_return made.status();
    kerberos = std::move(*made);
  }

  for (const auto& target : plan.transports) {
    if (!plan.plaintext) break;
    for (const FloorKind kind : {FloorKind::kBare, FloorKind::kGss}) {
      if (Status s = co_await run_floor_group(ex, plan, target, kind, mechanisms,
                                              kerberos ? &*kerberos : nullptr, report);
          !s.ok()) {
        co_return s;
      }
    }
  }
  if (plan.tls) {
    const std::function<long()> kdc_events = kerberos ? kerberos->events() : nullptr;
    if (Status s = co_await run_tls_sessions(ex, plan, mechanisms, kdc_events, report); !s.ok()) {
      co_return s;
    }
  }
  const bool tcp = std::any_of(plan.transports.begin(), plan.transports.end(),
                               [](const TransportServers& t) { return t.transport == "tcp"; });
  if (tcp && mechanisms.contains("kerberos") && plan.method("kerberos-sasl") != nullptr) {
    report.add_target("kerberos/tcp", kKerberosVsSaslTarget, "kerberos-sasl/tcp");
  }
  const bool unix_socket = std::any_of(plan.transports.begin(), plan.transports.end(),
                                       [](const TransportServers& t) { return t.transport == "unix"; });
  if (unix_socket && mechanisms.contains("token") && mechanisms.contains("simple")) {
    report.add_target("token/unix", kTokenVsSimpleTarget, "simple/unix");
  }
  co_return Status();
}

}  // namespace minibench
