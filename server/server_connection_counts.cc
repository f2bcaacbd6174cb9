#include "authrpc/server/server_connection_counts.h"

#include "authrpc/rpc/frame_channel.h"

namespace authrpc {

void ServerConnectionCounts::fold_bytes(const FrameChannel& channel) noexcept {
  if (!metrics_) return;
  const std::uint64_t received = channel.bytes_received();
  const std::uint64_t sent = channel.bytes_sent();
  metrics_->bytes(transport_, received - counted_received_, sent - counted_sent_);
  counted_received_ = received;
  counted_sent_ = sent;
}

void ServerConnectionCounts::closed(const FrameChannel& channel) noexcept {
  if (!metrics_) return;
  fold_bytes(channel);
  metrics_->closed(transport_, close_reason_);
}

}  // namespace authrpc
