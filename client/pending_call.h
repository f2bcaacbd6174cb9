// PendingCall: one unary call waiting for its response. Lives in the frame
// of Client::Connection::call(), found by call id in the connection's
// CallIdTable and queued in the context's DeadlineQueue — always, even
// without a deadline (time_point::max() costs a tail insert and arms
// nothing), so that a context shutting down with calls waiting lets go of
// their handlers. Completed exactly once: finish() (failure), answer()
// (response) or expired() (deadline) completes the parked handler. The
// connection's reader answers it; fail and GOAWAY finish it.
//
// On the connection's executor only. The per-call methods are inline: the
// connection's call() and reader use them on every call.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "authrpc/base/result.h"
#include "authrpc/client/call_id_table.h"
#include "authrpc/rpc/deadline_queue.h"
#include "authrpc/rpc/parked_handler.h"

namespace authrpc {

class PendingCall final : public DeadlineQueue::Entry {
 public:
  using Clock = std::chrono::steady_clock;

  // Registers under `id` in `table`; leaves it when done or destroyed.
  PendingCall(CallIdTable<PendingCall>& table, std::uint32_t id) : table_(table), id_(id) {
    table_.insert(id, this);
  }
  ~PendingCall() override {
    cancel();
    if (registered_) table_.take(id_);
  }
  // co_await: the caller waits here until completed.
  auto wait() { return wait_in(handler_); }
  // The caller has been taken out of the table already. The waiting call
  // resumes through its executor.
  void finish(Result<std::string> outcome);
  // The RESPONSE (wire `status`; `text`: the payload, or the error
  // message), read at `read_at`. A caller waiting on `current` (the
  // reader's executor) resumes inside this call — it sees its response
  // without another turn of the event loop (which would first poll the
  // reactor), and builds its result once, straight from the reader's
  // buffer (take_result) rather than through a chain of moves; any other
  // caller gets a copy, posted.
  void answer(std::uint16_t status, std::string_view text, Clock::time_point read_at,
              const asio::any_io_executor& current) {
    settle();
    status_ = status;
    read_at_ = read_at;
    if (handler_.runs_here(current)) {
      in_place_ = true;
      text_ = text;
      handler_.resume_here();  // `*this` may be gone after this
      return;
    }
    answer_posted(status, text);
  }
  // The call's outcome, once done; once.
  Result<std::string> take_result() {
    if (!in_place_) return std::move(*owned_);
    if (status_ == 0) return Result<std::string>(std::in_place, text_);
    return Status(errc_from_wire(status_), std::string(text_));
  }
  // A successful outcome's payload read by `decode`, once done; once: its
  // Status, or the error the server answered with.
  Status decode_result(const std::function<Status(std::string_view)>& decode) {
    if (!in_place_) return owned_->ok() ? decode(**owned_) : owned_->status();
    if (status_ == 0) return decode(text_);
    return Status(errc_from_wire(status_), std::string(text_));
  }
  // The outcome's wire code (metrics), once done.
  Errc code() const {
    if (in_place_) {
      return status_ == 0 ? Errc::kOk : to_wire_errc(make_error_code(errc_from_wire(status_)));
    }
    return owned_->ok() ? Errc::kOk : to_wire_errc(owned_->code());
  }
  // When the response was read, for one answered in place; else now.
  Clock::time_point answered_at() const { return in_place_ ? read_at_ : Clock::now(); }

  bool done = false;

 private:
  void settle() {
    registered_ = false;
    done = true;
    cancel();  // off the deadline queue
  }
  // A caller on another executor: a copy of the outcome, posted.
  void answer_posted(std::uint16_t status, std::string_view text);
  void expired() override;  // the deadline passed: `done` stays false
  void abandoned() noexcept override { handler_.reset(); }

  CallIdTable<PendingCall>& table_;
  std::uint32_t id_;
  bool registered_ = true;
  // Answered in place: `text_` views the reader's buffer, valid while
  // the caller runs inside answer(). Otherwise the outcome is `owned_`.
  bool in_place_ = false;
  std::uint16_t status_ = 0;
  std::string_view text_;
  Clock::time_point read_at_;
  std::optional<Result<std::string>> owned_;
  ParkedHandler handler_;
};

}  // namespace authrpc
