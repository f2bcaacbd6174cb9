// Internal: ServerConnectionCounts, what one connection has counted and not
// yet folded into the server's totals: its calls answered (into
// Server::Impl's calls_ok and calls_failed, once per batch rather than an
// atomic add per call, which IO threads would pass between them), its bytes
// (into ServerMetrics, each tick and at close), the reason it will close
// with, and the clock read that times its inline calls.
//
// Owned by its ServerConnection and used only on the connection's thread
// (respond, dispatch, serve, end_batch, on_tick, count_close). The per-call
// methods are inline.
#pragma once

#include <cstdint>
#include <utility>

#include "authrpc/base/cycle_clock.h"
#include "authrpc/rpc/endpoint.h"
#include "authrpc/server/server_impl.h"
#include "authrpc/server/server_metrics.h"

namespace authrpc {

class FrameChannel;

class ServerConnectionCounts {
 public:
  ServerConnectionCounts(ServerMetrics* metrics, Endpoint::Scheme scheme) noexcept
      : metrics_(metrics), transport_(ServerMetrics::transport_of(scheme)) {}

  ServerMetrics* metrics() const noexcept { return metrics_; }  // null: metrics off
  ServerMetrics::Transport transport() const noexcept { return transport_; }
  void close_with(ServerMetrics::Close reason) noexcept { close_reason_ = reason; }

  // A RESPONSE with `code` (0: OK) was queued.
  void answered(std::uint16_t code) noexcept { ++(code == 0 ? calls_ok_ : calls_failed_); }
  // Folds the calls answered since into the server's counts.
  void fold_calls(Server::Impl& server) noexcept {
    if (calls_ok_ != 0) server.calls_ok += std::exchange(calls_ok_, 0);
    if (calls_failed_ != 0) server.calls_failed += std::exchange(calls_failed_, 0);
  }

  // With metrics, the latest CycleClock read of the frames being handled:
  // when the read that brought them completed (batch_read), then when the
  // last inline call ended (observe_inline).
  void batch_read() noexcept {
    if (metrics_) batch_ticks_ = CycleClock::now();
  }
  // Inline calls of a batch run back to back: one clock read per call, the
  // end of one (or the read that brought the batch) the start of the next,
  // so a call's processing time includes its frame's parsing and admission
  // (a few hundred ns). CycleClock: half the cost of a steady_clock read
  // where it is the TSC.
  void observe_inline(ServerMetrics::Method& cells) noexcept {
    const CycleClock::Ticks ended = CycleClock::now();
    cells.processing->observe(CycleClock::elapsed(batch_ticks_, ended));
    batch_ticks_ = ended;
  }

  // Folds the channel's byte counts since the last fold into the metrics.
  void fold_bytes(const FrameChannel& channel) noexcept;
  // The connection has ended: its bytes and its close reason, with metrics.
  void closed(const FrameChannel& channel) noexcept;

 private:
  ServerMetrics* const metrics_;
  const ServerMetrics::Transport transport_;
  ServerMetrics::Close close_reason_ = ServerMetrics::Close::kPeerClosed;
  std::uint64_t counted_received_ = 0;  // bytes already folded into metrics_
  std::uint64_t counted_sent_ = 0;
  std::uint64_t calls_ok_ = 0;  // answered, not yet folded
  std::uint64_t calls_failed_ = 0;
  CycleClock::Ticks batch_ticks_ = 0;
};

}  // namespace authrpc
