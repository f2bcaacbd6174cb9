#include "authrpc/server/server_metrics.h"

#include <cctype>

#include "authrpc/server/server.h"

namespace authrpc {

namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

constexpr std::string_view kTransportNames[] = {"tcp", "unix", "tls"};
constexpr std::string_view kCloseNames[] = {
    "peer_closed",   "idle_timeout", "negotiation_failed",  "negotiation_timeout", "protocol_error",
    "shed",          "credentials_expired", "server_stopping", "refused"};
static_assert(std::size(kCloseNames) == static_cast<std::size_t>(ServerMetrics::Close::kCount));
constexpr std::string_view kDenialNames[] = {"principal_mapping", "proxy", "call_acl", "admin"};
static_assert(std::size(kDenialNames) == static_cast<std::size_t>(ServerMetrics::Denial::kCount));

}  // namespace

ServerMetrics::ServerMetrics(std::shared_ptr<MetricsRegistry> registry,
                             const ServerOptions& options,
                             const std::map<std::string, Service, std::less<>>& services)
    : registry_(std::move(registry)) {
  // In this order, the order of the metrics' families in /metrics.
  add_connection_cells(*registry_);
  add_session_cells(*registry_, options);
  add_call_cells(*registry_, services);
  add_authz_and_tls_cells(*registry_);
}

void ServerMetrics::add_connection_cells(MetricsRegistry& r) {
  for (std::size_t t = 0; t < kTransports; ++t) {
    const MetricLabels transport{{"transport", std::string(kTransportNames[t])}};
    auto& p = per_transport_[t];
    p.accepted = &r.counter("authrpc_server_connections_accepted_total",
                            "Connections accepted, by transport.", transport);
    p.open = &r.gauge("authrpc_server_connections_open", "Connections open now, by transport.",
                      transport);
    p.received = &r.counter("authrpc_server_received_bytes_total",
                            "Bytes received on connections, by transport.", transport);
    p.sent = &r.counter("authrpc_server_sent_bytes_total",
                        "Bytes sent on connections, by transport.", transport);
    for (std::size_t c = 0; c < p.closed.size(); ++c) {
      p.closed[c] = &r.counter("authrpc_server_connections_closed_total",
                               "Connections closed, by transport and reason.",
                               {{"transport", std::string(kTransportNames[t])},
                                {"reason", std::string(kCloseNames[c])}});
    }
  }
  const char* refused_help =
      "Connections answered SERVER_BUSY at accept (per_user: at authentication), by reason.";
  refused_max_connections_ = &r.counter("authrpc_server_connections_refused_total", refused_help,
                                        {{"reason", "max_connections"}});
  refused_out_of_descriptors_ = &r.counter("authrpc_server_connections_refused_total",
                                           refused_help, {{"reason", "out_of_descriptors"}});
  refused_per_address_ = &r.counter("authrpc_server_connections_refused_total", refused_help,
                                    {{"reason", "max_connections_per_address"}});
  refused_per_user_ = &r.counter("authrpc_server_connections_refused_total", refused_help,
                                 {{"reason", "max_connections_per_user"}});
  const char* shed_help =
      "Unauthenticated connections closed to make room for a newer one, by the limit reached.";
  shed_total_ = &r.counter("authrpc_server_connections_shed_total", shed_help, {{"limit", "total"}});
  shed_per_address_ =
      &r.counter("authrpc_server_connections_shed_total", shed_help, {{"limit", "per_address"}});
}

void ServerMetrics::add_session_cells(MetricsRegistry& r, const ServerOptions& options) {
  auto add_mechanism = [&](std::string name) {
    auto m = std::make_unique<PerMechanism>();
    m->duration = &r.histogram("authrpc_server_negotiation_duration_seconds",
                               "Time from accept to AUTH_SUCCESS of successful negotiations.",
                               {{"mechanism", name}});
    m->name = std::move(name);
    mechanisms_.push_back(std::move(m));
  };
  for (const auto& m : options.mechanisms) add_mechanism(std::string(m->name()));
  add_mechanism("none");
  // The success rows exist from the start, so that a rate() over them is
  // defined before the first session.
  for (auto& m : mechanisms_) {
    if (m->name == "none") continue;
    m->outcomes[0].get(r, "authrpc_server_negotiations_total",
                       "Finished negotiations, by mechanism and outcome (ok or the failure code).",
                       [&] { return MetricLabels{{"mechanism", m->name}, {"outcome", "ok"}}; });
  }
}

void ServerMetrics::add_call_cells(MetricsRegistry& r,
                                   const std::map<std::string, Service, std::less<>>& services) {
  auto make_method = [&](std::string service, std::string method) {
    auto m = std::make_unique<Method>();
    const MetricLabels labels{{"service", service}, {"method", method}};
    m->queue = &r.histogram("authrpc_server_call_queue_seconds",
                            "Time blocking calls waited for the blocking pool.", labels);
    m->processing = &r.histogram("authrpc_server_call_processing_seconds",
                                 "Time from a call's admission to its response being queued.",
                                 labels);
    m->service = std::move(service);
    m->method = std::move(method);
    return m;
  };
  for (const auto& [service_name, service] : services) {
    for (const auto& [method_name, method] : service.methods()) {
      methods_.emplace(&method, make_method(service_name, method_name));
    }
  }
  {
    auto unknown = make_method("unknown", "unknown");
    unknown_method_.service = unknown->service;
    unknown_method_.method = unknown->method;
    unknown_method_.queue = unknown->queue;
    unknown_method_.processing = unknown->processing;
  }

  in_flight_ = &r.gauge("authrpc_server_calls_in_flight",
                        "Asynchronous, blocking and streaming calls being handled.");
  blocking_queue_ = &r.gauge("authrpc_server_blocking_queue_length",
                             "Calls waiting for a thread of the blocking pool.");
  streams_open_ = &r.gauge("authrpc_server_streams_open", "Streaming calls open.");
  shm_connections_open_ = &r.gauge("authrpc_server_shm_connections_open",
                                   "Connections whose streams use shared-memory rings.");
}

void ServerMetrics::add_authz_and_tls_cells(MetricsRegistry& r) {
  for (std::size_t d = 0; d < denials_.size(); ++d) {
    denials_[d] = &r.counter("authrpc_server_authorization_denials_total",
                             "Sessions and calls refused by authorization, by reason.",
                             {{"reason", std::string(kDenialNames[d])}});
  }
  proxy_sessions_ = &r.counter("authrpc_server_proxy_sessions_total",
                               "Sessions acting as another user (proxy user, doAs).");
  const char* tls_help = "Server TLS handshakes, by outcome and whether the session was resumed.";
  tls_full_ = &r.counter("authrpc_server_tls_handshakes_total", tls_help,
                         {{"outcome", "ok"}, {"resumed", "no"}});
  tls_resumed_ = &r.counter("authrpc_server_tls_handshakes_total", tls_help,
                            {{"outcome", "ok"}, {"resumed", "yes"}});
}

ServerMetrics::~ServerMetrics() = default;

std::string_view ServerMetrics::transport_name(Transport t) noexcept {
  return kTransportNames[t];
}

ServerMetrics::Transport ServerMetrics::transport_of(Endpoint::Scheme scheme) noexcept {
  switch (scheme) {
    case Endpoint::Scheme::kUnix: return kUnix;
    case Endpoint::Scheme::kTls: return kTls;
    default: return kTcp;
  }
}

void ServerMetrics::negotiated(int mechanism, std::uint16_t wire_code,
                               std::chrono::nanoseconds took) {
  const std::size_t i = mechanism < 0 || static_cast<std::size_t>(mechanism) >= mechanisms_.size()
                            ? mechanisms_.size() - 1
                            : static_cast<std::size_t>(mechanism);
  PerMechanism& m = *mechanisms_[i];
  m.outcomes[code_slot(wire_code)]
      .get(*registry_, "authrpc_server_negotiations_total",
           "Finished negotiations, by mechanism and outcome (ok or the failure code).",
           [&] { return MetricLabels{{"mechanism", m.name}, {"outcome", code_label(wire_code)}}; })
      .inc();
  if (wire_code == 0) m.duration->observe(took);
}

void ServerMetrics::mechanism_error(int mechanism, const std::error_code& code) {
  if (code.category() == authrpc_category()) return;  // the outcome says it all
  const std::size_t i = mechanism < 0 || static_cast<std::size_t>(mechanism) >= mechanisms_.size()
                            ? mechanisms_.size() - 1
                            : static_cast<std::size_t>(mechanism);
  // Only categories with a fixed set of names: never a free-form message.
  const auto* named = dynamic_cast<const NamedErrorCategory*>(&code.category());
  const std::string reason = named ? lower(named->code_name(code.value())) : "other";
  registry_
      ->counter("authrpc_server_mechanism_errors_total",
                "Mechanism failures by their own code (e.g. Kerberos kdc_unavailable).",
                {{"mechanism", mechanisms_[i]->name}, {"reason", reason.empty() ? "other" : reason}})
      .inc();
}

void ServerMetrics::tls_handshake_failed(const std::error_code& why) {
  const auto* named = dynamic_cast<const NamedErrorCategory*>(&why.category());
  std::string reason = named ? lower(named->code_name(why.value())) : "other";
  if (reason.empty()) reason = "other";
  registry_
      ->counter("authrpc_server_tls_handshakes_total",
                "Server TLS handshakes, by outcome and whether the session was resumed.",
                {{"outcome", reason}, {"resumed", "no"}})
      .inc();
}

ServerMetrics::Method& ServerMetrics::method(const Service::Method* method) noexcept {
  if (method == nullptr) return unknown_method_;
  const auto it = methods_.find(method);
  return it == methods_.end() ? unknown_method_ : *it->second;
}

}  // namespace authrpc
