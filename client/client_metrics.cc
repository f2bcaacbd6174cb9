#include "authrpc/client/client_metrics.h"

namespace authrpc {
namespace {
constexpr std::string_view kTransportNames[] = {"tcp", "unix", "tls"};
}

ClientMetrics::Transport ClientMetrics::transport_of(Endpoint::Scheme scheme) noexcept {
  switch (scheme) {
    case Endpoint::Scheme::kUnix: return kUnix;
    case Endpoint::Scheme::kTls: return kTls;
    default: return kTcp;
  }
}

ClientMetrics::ClientMetrics(MetricsRegistry& registry) : registry_(registry) {
  for (std::size_t t = 0; t < kTransports; ++t) {
    open_[t] = &registry.gauge("authrpc_client_connections_open",
                               "Authenticated client connections open now, by transport.",
                               {{"transport", std::string(kTransportNames[t])}});
  }
  call_duration_ = &registry.histogram("authrpc_client_call_duration_seconds",
                                       "Time from sending a call to its answer.");
}

Histogram& ClientMetrics::negotiation_histogram(std::string_view mechanism) {
  for (auto& e : mechanisms_) {
    if (!e.ready.load(std::memory_order_acquire)) break;
    if (e.name == mechanism) return *e.duration;
  }
  std::lock_guard lock(add_mu_);
  for (auto& e : mechanisms_) {
    if (e.ready.load(std::memory_order_acquire)) {
      if (e.name == mechanism) return *e.duration;
      continue;
    }
    e.name = std::string(mechanism);
    e.duration = &registry_.histogram("authrpc_client_negotiation_duration_seconds",
                                      "Time from connecting to authenticated, by mechanism.",
                                      {{"mechanism", e.name}});
    e.ready.store(true, std::memory_order_release);
    return *e.duration;
  }
  // More mechanisms than a process uses: no table entry, a lookup.
  return registry_.histogram("authrpc_client_negotiation_duration_seconds",
                             "Time from connecting to authenticated, by mechanism.",
                             {{"mechanism", std::string(mechanism)}});
}

void ClientMetrics::connected(Transport t, std::uint16_t wire_code, std::string_view mechanism,
                              std::chrono::nanoseconds took) {
  connections_[t][code_slot(wire_code)]
      .get(registry_, "authrpc_client_connections_total",
           "Connect and negotiation attempts, by transport and outcome.",
           [&] {
             return MetricLabels{{"transport", std::string(kTransportNames[t])},
                                 {"outcome", code_label(wire_code)}};
           })
      .inc();
  if (wire_code != 0) return;
  open_[t]->add();
  negotiation_histogram(mechanism).observe(took);
}

}  // namespace authrpc
