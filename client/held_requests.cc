#include "authrpc/client/held_requests.h"

#include <algorithm>

#include "authrpc/rpc/frame_channel.h"
#include "authrpc/rpc/wire.h"

namespace authrpc {

bool HeldRequests::keep(std::string& out, std::size_t start, bool following) {
  const bool too_large = out.size() - start > wire::kMinNegotiationFrameSize;
  if (!following) {
    if (too_large && deferred_ == std::string::npos) deferred_ = start;
    return false;
  }
  held_.append(out, start, std::string::npos);
  if (too_large) {
    out.resize(start);
    deferred_ = sent_;  // where this request starts
    return false;
  }
  sent_ = held_.size();
  return true;
}

bool HeldRequests::send_behind_last(std::string& out) {
  sent_ = std::min(deferred_, held_.size());
  out.append(held_, 0, sent_);
  return sent_ == held_.size();
}

void HeldRequests::release(FrameChannel& channel) {
  if (sent_ < held_.size()) {
    channel.out().append(held_, sent_, std::string::npos);
    channel.flush_now();
  }
  held_.clear();
  held_.shrink_to_fit();
  sent_ = 0;
  deferred_ = std::string::npos;
}

}  // namespace authrpc
