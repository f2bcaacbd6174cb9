// Internal: MemoryShare, what one connection holds for its peer — output
// not yet sent, and the unread input of its streaming calls — against its
// own limits (ServerOptions::max_pending_output,
// max_stream_bytes_per_connection) and against the server's total
// (max_buffered_bytes), in which it keeps its share of
// Server::Impl::buffered_bytes up to date.
//
// Owned by its ServerConnection and used only on the connection's thread:
// serve asks it after each batch (may_be_over inline, then over and
// wait_under), the channel's drain and the stream input report changes
// (account), handle_stream_request takes the stream input, and the
// connection's end releases its share (release).
#pragma once

#include <asio/any_io_executor.hpp>
#include <asio/awaitable.hpp>
#include <cstddef>
#include <functional>
#include <memory>

#include "authrpc/rpc/frame_channel.h"
#include "authrpc/server/server_impl.h"

namespace authrpc {

class StreamInputBudget;

class MemoryShare {
 public:
  // Under the server's budget a connection may keep this much before it
  // stops reading (wait_under).
  static constexpr std::size_t kBudgetShare = 1 << 20;

  MemoryShare() = default;
  MemoryShare(const MemoryShare&) = delete;
  MemoryShare& operator=(const MemoryShare&) = delete;
  ~MemoryShare();  // the stream input, if any, stops reporting to its owner

  // Whether over() may be true: most batches leave nothing held.
  bool may_be_over(const FrameChannel& channel) const noexcept {
    return channel.pending_bytes() > 0 || stream_input_ != nullptr;
  }
  // Whether wait_under() has to wait (accounts first).
  bool over(Server::Impl& server, const FrameChannel& channel);
  // Waits, reading nothing, while the connection is over one of its limits.
  asio::awaitable<void> wait_under(Server::Impl& server, FrameChannel& channel);
  // Adds the change of what the connection holds to the server's total.
  void account(Server::Impl& server, const FrameChannel& channel);
  // The connection ends: its share leaves the server's total for good, and
  // its streams' input is closed.
  void release(Server::Impl& server);

  // The unread input of its streaming calls, made with the first one on
  // `executor`; `on_change` is called as it moves (with account, typically).
  const std::shared_ptr<StreamInputBudget>& stream_input(
      const asio::any_io_executor& executor, std::function<void(std::size_t held)> on_change);

 private:
  std::size_t held(const FrameChannel& channel) const noexcept;

  std::shared_ptr<StreamInputBudget> stream_input_;
  std::size_t reported_ = 0;  // its share in Server::Impl::buffered_bytes
  bool released_ = false;
};

}  // namespace authrpc
