#include "authrpc/rpc/deadline_queue.h"

#include <asio/error.hpp>
#include <asio/execution/context.hpp>
#include <asio/query.hpp>
#include <asio/require.hpp>
#include <type_traits>
#include <utility>

namespace authrpc {
namespace {

// The io_context behind `ex`, if that is what it is.
asio::io_context* io_context_of(const asio::any_io_executor& ex) {
  using Plain = asio::io_context::executor_type;
  using Tracked = std::decay_t<decltype(asio::require(std::declval<Plain>(),
                                                      asio::execution::outstanding_work.tracked))>;
  if (const auto* e = ex.target<Plain>()) return &e->context();
  if (const auto* e = ex.target<Tracked>()) return &e->context();
  return nullptr;
}

}  // namespace

void DeadlineQueue::Entry::cancel() noexcept {
  if (queue_ != nullptr) queue_->unlink(*this);
}

DeadlineQueue::DeadlineQueue(asio::execution_context& context)
    : asio::execution_context::service(context) {}

DeadlineQueue::~DeadlineQueue() { shutdown(); }

DeadlineQueue& DeadlineQueue::of(const asio::any_io_executor& ex) {
  return asio::use_service<DeadlineQueue>(asio::query(ex, asio::execution::context));
}

void DeadlineQueue::add(Entry& entry, Clock::time_point deadline, const asio::any_io_executor& ex) {
  entry.cancel();
  if (shut_down_) return;  // the context is going away: nothing will run
  entry.deadline_ = deadline;
  entry.queue_ = this;
  Lane& lane = lane_for(deadline);
  entry.lane_ = static_cast<std::uint8_t>(&lane - lanes_.data());
  // At the back, but for the rare deadline sorted into a lane ending later.
  Entry* after = lane.tail;
  while (after != nullptr && after->deadline_ > deadline) after = after->prev_;
  entry.prev_ = after;
  entry.next_ = after != nullptr ? after->next_ : lane.head;
  (entry.next_ != nullptr ? entry.next_->prev_ : lane.tail) = &entry;
  (after != nullptr ? after->next_ : lane.head) = &entry;
  ++lane.size;

  if (!timer_) {
    timer_.emplace(ex);
    io_ = io_context_of(ex);
  }
  // A timer armed for later than this deadline must be brought forward; one
  // armed earlier fires, finds nothing due, and re-arms for the earliest.
  if (deadline < armed_for_) arm(deadline);
}

DeadlineQueue::Lane& DeadlineQueue::lane_for(Clock::time_point deadline) noexcept {
  Lane* fits = nullptr;  // ending latest at or before `deadline`
  Lane* empty = nullptr;
  Lane* shortest = nullptr;
  for (std::size_t i = 0; i < lanes_used_; ++i) {
    Lane& lane = lanes_[i];
    if (lane.tail == nullptr) {
      if (empty == nullptr) empty = &lane;
    } else if (lane.tail->deadline_ <= deadline &&
               (fits == nullptr || lane.tail->deadline_ > fits->tail->deadline_)) {
      fits = &lane;
    }
    if (shortest == nullptr || lane.size < shortest->size) shortest = &lane;
  }
  if (fits != nullptr) return *fits;
  if (empty != nullptr) return *empty;
  if (lanes_used_ < kLanes) return lanes_[lanes_used_++];
  return *shortest;
}

void DeadlineQueue::unlink(Entry& entry) noexcept {
  Lane& lane = lanes_[entry.lane_];
  (entry.prev_ != nullptr ? entry.prev_->next_ : lane.head) = entry.next_;
  (entry.next_ != nullptr ? entry.next_->prev_ : lane.tail) = entry.prev_;
  --lane.size;
  entry.prev_ = entry.next_ = nullptr;
  entry.queue_ = nullptr;
  // The timer stays armed: it is cheaper to let it fire once for nothing
  // than to cancel it for every entry removed.
}

DeadlineQueue::Entry* DeadlineQueue::earliest() const noexcept {
  Entry* first = nullptr;
  for (std::size_t i = 0; i < lanes_used_; ++i) {
    Entry* head = lanes_[i].head;
    if (head != nullptr && (first == nullptr || head->deadline_ < first->deadline_)) first = head;
  }
  return first;
}

void DeadlineQueue::arm(Clock::time_point when) {
  armed_for_ = when;
  timer_->expires_at(when);  // cancels a wait in progress (its handler sees aborted)
  // A pending wait must not keep run() going once nothing else is left to do
  // (a program whose last session ended would otherwise wait for the timer),
  // so the wait gives back the work it takes — but only from inside one of
  // the context's handlers, where that handler's own work keeps the count
  // above zero (reaching zero would stop the context).
  const bool untracked = io_ != nullptr && io_->get_executor().running_in_this_thread();
  timer_->async_wait([this, untracked](std::error_code ec) {
    if (untracked) io_->get_executor().on_work_started();  // the context ends this handler's work
    if (ec != asio::error::operation_aborted) on_timer();
  });
  if (untracked) io_->get_executor().on_work_finished();
}

void DeadlineQueue::on_timer() {
  armed_for_ = Clock::time_point::max();
  const auto now = Clock::now();
  for (Entry* due = earliest(); due != nullptr && due->deadline_ <= now; due = earliest()) {
    unlink(*due);
    due->expired();  // may add or cancel entries
  }
  if (Entry* next = earliest(); next != nullptr && next->deadline_ < armed_for_) arm(next->deadline_);
}

void DeadlineQueue::shutdown() {
  shut_down_ = true;
  while (Entry* first = earliest()) {
    Entry& entry = *first;
    unlink(entry);
    entry.abandoned();  // may destroy entries further on, which unlink themselves
  }
  // The timer belongs to a service of the same context that may be destroyed
  // before this one: let go of it while every service is still there.
  timer_.reset();
}

}  // namespace authrpc
