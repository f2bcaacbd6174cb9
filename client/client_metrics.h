// Internal: the cells a client counts in (docs/OPERATIONS.md, "Client"),
// made once per registry (MetricsRegistry::extension) so that a new
// connection finds them with one atomic load: connecting clients take no
// lock and do no lookup. Mechanism names are learned as sessions succeed and
// kept in a small table read without a lock.
//
// Used by Client::Connection on its executor; thread-safe.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <string_view>

#include "authrpc/base/metrics.h"
#include "authrpc/rpc/endpoint.h"

namespace authrpc {

class ClientMetrics {
 public:
  enum Transport { kTcp, kUnix, kTls, kTransports };
  static Transport transport_of(Endpoint::Scheme scheme) noexcept;

  explicit ClientMetrics(MetricsRegistry& registry);

  // A connect + negotiation attempt ended with `wire_code` (0: authenticated,
  // after `took`, with `mechanism`).
  void connected(Transport t, std::uint16_t wire_code, std::string_view mechanism,
                 std::chrono::nanoseconds took);
  void closed(Transport t) noexcept { open_[t]->sub(); }
  void call(std::uint16_t wire_code, std::chrono::nanoseconds took) {
    calls_[code_slot(wire_code)]
        .get(registry_, "authrpc_client_calls_total", "Calls finished, by status code.",
             [&] { return MetricLabels{{"code", code_label(wire_code)}}; })
        .inc();
    call_duration_->observe(took);
  }

 private:
  Histogram& negotiation_histogram(std::string_view mechanism);

  struct MechanismEntry {
    std::atomic<bool> ready{false};
    std::string name;  // written once, before ready
    Histogram* duration = nullptr;
  };

  MetricsRegistry& registry_;
  std::array<std::array<LazyCounter, kCodeSlots>, kTransports> connections_;
  std::array<Gauge*, kTransports> open_{};
  std::array<LazyCounter, kCodeSlots> calls_;
  Histogram* call_duration_;
  std::array<MechanismEntry, 16> mechanisms_;
  std::mutex add_mu_;  // serializes adding a mechanism entry (rare)
};

}  // namespace authrpc
