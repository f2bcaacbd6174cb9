// ClientConnectionCounts: one connection's rows in ClientMetrics — how its
// connect + negotiation attempt ended, the open gauge while it is
// authenticated, and each of its calls. Without a metrics registry every
// count is skipped. A value member of Client::Connection: open() starts it,
// run() counts the attempt's outcome, fail() the close, call() each call
// (inline: once per call).
#pragma once

#include <chrono>
#include <cstdint>
#include <string_view>

#include "authrpc/base/status.h"
#include "authrpc/client/client_metrics.h"

namespace authrpc {

struct ClientOptions;

class ClientConnectionCounts {
 public:
  using Clock = std::chrono::steady_clock;

  // Connecting starts now; returns the time (the connect deadline's start).
  Clock::time_point start(const ClientOptions& options);
  bool on() const noexcept { return metrics_ != nullptr; }
  // The attempt failed with `why` (before or during negotiation).
  void failed(const Status& why);
  // Authenticated with `mechanism`: counted open until closed().
  void connected(std::string_view mechanism);
  void closed();
  // A call ended with `code` after `took` (only with on()).
  void call(Errc code, Clock::duration took) {
    metrics_->call(static_cast<std::uint16_t>(code), took);
  }

 private:
  ClientMetrics* metrics_ = nullptr;
  ClientMetrics::Transport transport_ = ClientMetrics::kTcp;
  Clock::time_point started_;
  bool counted_open_ = false;
};

}  // namespace authrpc
