#include "authrpc/server/running_calls.h"

namespace authrpc {

RunningCalls::Flag RunningCalls::start(std::uint32_t id) {
  ++in_flight_;
  auto flag = std::make_shared<std::atomic<bool>>(false);
  flags_[id] = flag;
  return flag;
}

void RunningCalls::finish(std::uint32_t id, const std::atomic<bool>* flag) {
  --in_flight_;
  const auto it = flags_.find(id);
  if (it != flags_.end() && it->second.get() == flag) flags_.erase(it);
}

void RunningCalls::cancel(std::uint32_t id) {
  const auto it = flags_.find(id);
  if (it == flags_.end()) return;  // finished already, or never existed
  it->second->store(true);
  flags_.erase(it);
}

void RunningCalls::cancel_all() noexcept {
  for (auto& [id, flag] : flags_) flag->store(true);
}

}  // namespace authrpc
