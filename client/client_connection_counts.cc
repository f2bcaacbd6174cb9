#include "authrpc/client/client_connection_counts.h"

#include "authrpc/client/client.h"

namespace authrpc {

ClientConnectionCounts::Clock::time_point ClientConnectionCounts::start(
    const ClientOptions& options) {
  started_ = Clock::now();
  if (options.metrics) {
    metrics_ = &options.metrics->extension<ClientMetrics>();
    transport_ = ClientMetrics::transport_of(options.endpoint.scheme);
  }
  return started_;
}

void ClientConnectionCounts::failed(const Status& why) {
  if (!metrics_) return;
  metrics_->connected(transport_, static_cast<std::uint16_t>(to_wire_errc(why.code)), {}, {});
}

void ClientConnectionCounts::connected(std::string_view mechanism) {
  if (!metrics_) return;
  metrics_->connected(transport_, 0, mechanism, Clock::now() - started_);
  counted_open_ = true;
}

void ClientConnectionCounts::closed() {
  if (!counted_open_) return;
  counted_open_ = false;
  metrics_->closed(transport_);
}

}  // namespace authrpc
