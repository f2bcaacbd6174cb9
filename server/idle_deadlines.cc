#include "authrpc/server/idle_deadlines.h"

#include "authrpc/server/server_impl.h"

namespace authrpc {

IdleDeadlines::Action IdleDeadlines::decide(ConnectionPhase phase, Clock::time_point now,
                                            std::size_t in_flight, bool streams_open,
                                            std::chrono::milliseconds idle_timeout) const noexcept {
  switch (phase) {
    case ConnectionPhase::kNegotiating:
      return now < deadline_ ? Action::kNone : Action::kNegotiationTimeout;
    case ConnectionPhase::kServing:
    case ConnectionPhase::kGoingAway:
      if (idle_timeout.count() != 0 && in_flight == 0 && now >= last_activity_ + idle_timeout) {
        return Action::kIdleTimeout;
      }
      if (in_flight > 0 || now - last_activity_ < kReleaseBuffersAfter) return Action::kNone;
      return phase == ConnectionPhase::kServing && !streams_open ? Action::kPark
                                                                 : Action::kReleaseBuffers;
    case ConnectionPhase::kLingering:
      return now < deadline_ ? Action::kNone : Action::kLingerOver;
  }
  return Action::kNone;
}

}  // namespace authrpc
