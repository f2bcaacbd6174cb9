#include "authrpc/rpc/stream_input_budget.h"

#include <asio/redirect_error.hpp>
#include <asio/use_awaitable.hpp>
#include <algorithm>

namespace authrpc {

void StreamInputBudget::release(std::size_t bytes) {
  held_ -= std::min(bytes, held_);
  if (held_ == 0 ? reported_ != 0 : held_ + kReportStep <= reported_) report();
  if (waiting_ && held_ <= wake_at_) event_.cancel();
}

asio::awaitable<void> StreamInputBudget::wait_at_most(std::size_t limit) {
  while (held_ > limit && !closed_) {
    wake_at_ = limit;
    waiting_ = true;
    event_.expires_at(asio::steady_timer::time_point::max());
    std::error_code ec;
    co_await event_.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    waiting_ = false;
  }
}

void StreamInputBudget::close() {
  closed_ = true;
  event_.cancel();
}

void StreamInputBudget::report() {
  reported_ = held_;
  if (observer_) observer_(held_);
}

}  // namespace authrpc
