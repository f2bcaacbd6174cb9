#include "authrpc/server/memory_share.h"

#include "authrpc/rpc/stream_input_budget.h"

namespace authrpc {

MemoryShare::~MemoryShare() {
  // The budget may outlive the connection (a stream handle holds it).
  if (stream_input_) stream_input_->set_observer(nullptr);
}

std::size_t MemoryShare::held(const FrameChannel& channel) const noexcept {
  return channel.pending_bytes() + (stream_input_ ? stream_input_->held() : 0);
}

void MemoryShare::account(Server::Impl& server, const FrameChannel& channel) {
  if (released_) return;
  const std::size_t now = held(channel);
  // In steps of a mebibyte (and back to zero): the total is shared by every
  // IO thread, and a connection's share changes with each frame.
  const std::size_t moved = now > reported_ ? now - reported_ : reported_ - now;
  if (moved < StreamInputBudget::kReportStep && (now != 0 || reported_ == 0)) return;
  server.buffered_bytes.fetch_add(
      static_cast<std::int64_t>(now) - static_cast<std::int64_t>(reported_),
      std::memory_order_relaxed);
  reported_ = now;
}

bool MemoryShare::over(Server::Impl& server, const FrameChannel& channel) {
  const ServerOptions& o = server.options;
  account(server, channel);
  return channel.pending_bytes() > o.max_pending_output ||
         (stream_input_ && stream_input_->held() > o.max_stream_bytes_per_connection) ||
         (reported_ > kBudgetShare && server.buffered_bytes.load(std::memory_order_relaxed) >
                                          static_cast<std::int64_t>(o.max_buffered_bytes));
}

asio::awaitable<void> MemoryShare::wait_under(Server::Impl& server, FrameChannel& channel) {
  const ServerOptions& o = server.options;
  if (channel.pending_bytes() > o.max_pending_output) {
    co_await channel.wait_pending_below(o.max_pending_output / 2);
  }
  if (stream_input_ && stream_input_->held() > o.max_stream_bytes_per_connection) {
    co_await stream_input_->wait_at_most(o.max_stream_bytes_per_connection / 2);
  }
  // The server holds more than it allows in all: a connection holding a
  // share of it reads nothing more until its share has drained, so that
  // peers that do not read cannot add up to more than the budget and a
  // frame each.
  if (reported_ > kBudgetShare && server.buffered_bytes.load(std::memory_order_relaxed) >
                                      static_cast<std::int64_t>(o.max_buffered_bytes)) {
    ++server.reads_paused_for_memory;
    co_await channel.wait_pending_below(kBudgetShare / 2);
    if (stream_input_) co_await stream_input_->wait_at_most(kBudgetShare / 2);
  }
  account(server, channel);
}

void MemoryShare::release(Server::Impl& server) {
  if (!released_) {
    released_ = true;
    server.buffered_bytes.fetch_sub(static_cast<std::int64_t>(reported_),
                                    std::memory_order_relaxed);
    reported_ = 0;
  }
  if (stream_input_) stream_input_->close();
}

const std::shared_ptr<StreamInputBudget>& MemoryShare::stream_input(
    const asio::any_io_executor& executor, std::function<void(std::size_t held)> on_change) {
  if (!stream_input_) {
    stream_input_ = std::make_shared<StreamInputBudget>(executor);
    stream_input_->set_observer(std::move(on_change));
  }
  return stream_input_;
}

}  // namespace authrpc
