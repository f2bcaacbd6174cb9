// InlineResponse: the response of an inline EncodingHandler
// (Service::add_encoding), encoded straight into the connection's output
// after room for the RESPONSE frame's head, which seal() fills once the
// call has succeeded; discard() takes it all back for an error answer
// instead. Made and used by ServerConnection's inline dispatch, on the
// connection's thread, with no other write to the output in between.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "authrpc/rpc/messages.h"
#include "authrpc/server/service.h"

namespace authrpc {

class InlineResponse final : public ResponseBuffer {
 public:
  explicit InlineResponse(std::string& out) : out_(out), start_(out.size()) {
    out_.resize(payload_start());
  }
  InlineResponse(const InlineResponse&) = delete;
  InlineResponse& operator=(const InlineResponse&) = delete;

  char* reserve(std::size_t size) override {
    out_.resize(payload_start() + size);
    return out_.data() + payload_start();
  }
  // The frame is complete: a RESPONSE with status 0 to `call_id`.
  void seal(std::uint32_t call_id) noexcept {
    wire::write_ok_response_head(out_.data() + start_, call_id, out_.size() - payload_start());
  }
  void discard() { out_.resize(start_); }

 private:
  std::size_t payload_start() const noexcept { return start_ + wire::kOkResponseHeadSize; }

  std::string& out_;
  std::size_t start_;
};

}  // namespace authrpc
