// Internal: RunningCalls, the calls of one connection whose handlers run off
// the inline path (async, blocking and streaming calls): how many are in
// flight, the cancel flag of each under its id until it answers or is
// cancelled, and the highest call id the connection has taken (GOAWAY's
// last id).
//
// Owned by its ServerConnection and used only on the connection's thread
// (handle_request, handle_stream_request, dispatch, finish_call,
// handle_cancel, go_away, on_tick); a handler keeps its own flag. uses(),
// saw() and last_id() are inline: every REQUEST asks them.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <unordered_map>

namespace authrpc {

class RunningCalls {
 public:
  using Flag = std::shared_ptr<std::atomic<bool>>;

  // A call under `id` is running (not yet answered nor cancelled).
  bool uses(std::uint32_t id) const { return !flags_.empty() && flags_.contains(id); }
  // A call came under `id`.
  void saw(std::uint32_t id) noexcept { last_id_ = std::max(last_id_, id); }
  std::uint32_t last_id() const noexcept { return last_id_; }
  std::size_t in_flight() const noexcept { return in_flight_; }

  // The call under `id` starts; its handler watches the flag returned.
  Flag start(std::uint32_t id);
  // The call under `id` whose flag is `flag` has returned. The id's entry is
  // this call's only if it was not cancelled: a cancelled call left the
  // table (cancel), and the id may run a new call now, which this one must
  // not remove.
  void finish(std::uint32_t id, const std::atomic<bool>* flag);
  // The client cancelled the call under `id` (if one runs): its flag is set
  // and the id is free at once.
  void cancel(std::uint32_t id);
  // The connection ends: every running call's flag is set.
  void cancel_all() noexcept;

 private:
  std::unordered_map<std::uint32_t, Flag> flags_;
  std::uint32_t in_flight_ = 0;  // calls whose handlers run: never near 2^32
  std::uint32_t last_id_ = 0;
};

}  // namespace authrpc
