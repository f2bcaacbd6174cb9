#include "authrpc/client/pending_authentication.h"

#include "authrpc/rpc/frame_channel.h"

namespace authrpc {

void PendingAuthentication::start(FrameChannel& channel, DeadlineQueue& deadlines,
                                  Clock::time_point deadline, const asio::any_io_executor& ex) {
  channel_ = &channel;
  deadlines.add(*this, deadline, ex);
}

asio::steady_timer& PendingAuthentication::event(const asio::any_io_executor& ex) {
  if (!event_) event_.emplace(ex);
  event_->expires_at(asio::steady_timer::time_point::max());
  return *event_;
}

void PendingAuthentication::wake() {
  if (event_) event_->cancel();
}

void PendingAuthentication::expired() {
  timed_out_ = true;
  channel_->close();
}

}  // namespace authrpc
