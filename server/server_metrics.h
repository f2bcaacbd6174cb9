// Internal: the cells a Server counts in (docs/OPERATIONS.md lists them),
// resolved from ServerOptions::metrics once when the server starts, so that
// the accept, session and call paths only add to atomics they already hold:
// no registry lookup, no lock, no allocation. Children whose label values
// are only known late (a mechanism's failure code, a method's status code)
// are resolved on first use and then kept in a slot.
//
// Owned by Server::Impl (null when metrics are off); used on the reactor
// threads and the blocking pool.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "authrpc/base/metrics.h"
#include "authrpc/base/status.h"
#include "authrpc/rpc/endpoint.h"
#include "authrpc/server/service.h"

namespace authrpc {

struct ServerOptions;

class ServerMetrics {
 public:
  enum Transport { kTcp, kUnix, kTls, kTransports };
  // Why a connection ended (the `reason` of connections_closed_total).
  enum class Close {
    kPeerClosed,
    kIdleTimeout,
    kNegotiationFailed,
    kNegotiationTimeout,
    kProtocolError,
    kShed,
    kCredentialsExpired,
    kServerStopping,
    kRefused,  // SERVER_BUSY at accept
    kCount
  };
  // Why authorization said no (authorization_denials_total's `reason`).
  enum class Denial { kPrincipalMapping, kProxy, kCallAcl, kAdmin, kCount };

  // One registered method's cells.
  struct Method {
    std::string service, method;
    std::array<LazyCounter, kCodeSlots> calls;
    Histogram* queue = nullptr;
    Histogram* processing = nullptr;
  };

  ServerMetrics(std::shared_ptr<MetricsRegistry> registry, const ServerOptions& options,
                const std::map<std::string, Service, std::less<>>& services);
  ~ServerMetrics();
  ServerMetrics(const ServerMetrics&) = delete;
  ServerMetrics& operator=(const ServerMetrics&) = delete;

  MetricsRegistry& registry() { return *registry_; }
  static Transport transport_of(Endpoint::Scheme scheme) noexcept;
  static std::string_view transport_name(Transport t) noexcept;

  void accepted(Transport t) noexcept {
    per_transport_[t].accepted->inc();
    per_transport_[t].open->add();
  }
  void refused_max_connections() noexcept { refused_max_connections_->inc(); }
  void refused_out_of_descriptors() noexcept { refused_out_of_descriptors_->inc(); }
  void refused_per_address() noexcept { refused_per_address_->inc(); }
  void refused_per_user() noexcept { refused_per_user_->inc(); }
  void shed(bool per_address) noexcept { (per_address ? shed_per_address_ : shed_total_)->inc(); }
  void closed(Transport t, Close why) noexcept {
    per_transport_[t].open->sub();
    per_transport_[t].closed[static_cast<std::size_t>(why)]->inc();
  }
  void bytes(Transport t, std::uint64_t received, std::uint64_t sent) noexcept {
    if (received) per_transport_[t].received->inc(received);
    if (sent) per_transport_[t].sent->inc(sent);
  }

  // A finished negotiation. `mechanism`: index into ServerOptions::mechanisms,
  // or -1 when the client named none of them.
  void negotiated(int mechanism, std::uint16_t wire_code, std::chrono::nanoseconds took);
  // A mechanism's own failure (a code of a category other than authrpc's,
  // e.g. Kerberos' KDC_UNAVAILABLE): mechanism_errors_total{mechanism,reason}.
  void mechanism_error(int mechanism, const std::error_code& code);
  void tls_handshake_ok(bool resumed) noexcept { (resumed ? tls_resumed_ : tls_full_)->inc(); }
  void tls_handshake_failed(const std::error_code& why);

  // The method's cells (`method` from Server::Impl::find_method), or the
  // "unknown" ones for null.
  Method& method(const Service::Method* method) noexcept;
  // Inlined into the connection's respond() whatever the inliner's budget
  // for that file: it runs on every call.
  [[gnu::always_inline]] void call(Method& m, std::uint16_t wire_code) {
    m.calls[code_slot(wire_code)]
        .get(*registry_, "authrpc_server_calls_total", "Calls answered, by method and status code.",
             [&] {
               return MetricLabels{
                   {"service", m.service}, {"method", m.method}, {"code", code_label(wire_code)}};
             })
        .inc();
  }

  Gauge& calls_in_flight() noexcept { return *in_flight_; }
  Gauge& blocking_queue_length() noexcept { return *blocking_queue_; }
  Gauge& streams_open() noexcept { return *streams_open_; }
  Gauge& shm_connections_open() noexcept { return *shm_connections_open_; }
  void denied(Denial why) noexcept { denials_[static_cast<std::size_t>(why)]->inc(); }
  void proxy_session() noexcept { proxy_sessions_->inc(); }

 private:
  // The constructor's steps, one per group of metrics.
  void add_connection_cells(MetricsRegistry& r);  // per transport, refusals, shedding
  void add_session_cells(MetricsRegistry& r, const ServerOptions& options);  // per mechanism
  void add_call_cells(MetricsRegistry& r,
                      const std::map<std::string, Service, std::less<>>& services);
  void add_authz_and_tls_cells(MetricsRegistry& r);

  struct PerTransport {
    Counter* accepted;
    Gauge* open;
    Counter* received;
    Counter* sent;
    std::array<Counter*, static_cast<std::size_t>(Close::kCount)> closed;
  };
  struct PerMechanism {
    std::string name;
    std::array<LazyCounter, kCodeSlots> outcomes;
    Histogram* duration = nullptr;
  };

  std::shared_ptr<MetricsRegistry> registry_;
  std::array<PerTransport, kTransports> per_transport_{};
  Counter* refused_max_connections_;
  Counter* refused_out_of_descriptors_;
  Counter* refused_per_address_;
  Counter* refused_per_user_;
  Counter* shed_total_;
  Counter* shed_per_address_;
  std::vector<std::unique_ptr<PerMechanism>> mechanisms_;  // last: "none"
  std::unordered_map<const Service::Method*, std::unique_ptr<Method>> methods_;
  Method unknown_method_;
  Gauge* in_flight_;
  Gauge* blocking_queue_;
  Gauge* streams_open_;
  Gauge* shm_connections_open_;
  std::array<Counter*, static_cast<std::size_t>(Denial::kCount)> denials_{};
  Counter* proxy_sessions_;
  Counter* tls_full_;
  Counter* tls_resumed_;
};

}  // namespace authrpc
