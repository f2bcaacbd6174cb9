#include "minibench/tls_sessions.h"

#include "minibench/iterations.h"

#include <asio/post.hpp>
#include <asio/use_awaitable.hpp>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>

#include "authrpc/client/client.h"
#include "minibench/schedule.h"
#include "minibench/tls_floor.h"
#include "authrpc/security/tls_context.h"

namespace minibench {
namespace {

using authrpc::Client;
using authrpc::ClientOptions;
using authrpc::Result;
using authrpc::Status;

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

asio::awaitable<Status> run_tls_sessions(
    asio::any_io_executor ex, const BenchPlan& plan,
    const std::map<std::string, std::shared_ptr<authrpc::ClientMechanism>>& mechanisms,
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
    ClientOptions o;
    o.endpoint = spec->cold ? tls.cold->authrpc : tls.authrpc;
    o.tls = spec->resume ? *resuming : *full;
    o.mechanisms = {mechanisms.at(spec->method)};
    o.wait_for_authentication = false;
    if (!plan.client_metrics()) o.metrics = nullptr;
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

}  // namespace minibench
