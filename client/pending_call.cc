#include "authrpc/client/pending_call.h"

namespace authrpc {

void PendingCall::finish(Result<std::string> outcome) {
  settle();
  owned_.emplace(std::move(outcome));
  handler_.post();
}

void PendingCall::answer_posted(std::uint16_t status, std::string_view text) {
  if (status == 0) {
    owned_.emplace(std::string(text));
  } else {
    owned_.emplace(Status(errc_from_wire(status), std::string(text)));
  }
  handler_.post();
}

void PendingCall::expired() {
  registered_ = false;
  table_.take(id_);
  handler_.post();
}

}  // namespace authrpc
