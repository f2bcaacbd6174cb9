// The protobuf payload codec: how a typed service's messages become the
// bytes authrpc carries and back (docs/PROTOBUF.md, "Wire mapping"). A
// payload is a message's binary encoding, nothing more. Called by the
// typed adapters (service_binding.h, stub_calls.h) that generated code uses.
#pragma once

#include <asio/awaitable.hpp>
#include <google/protobuf/message_lite.h>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "authrpc/base/result.h"
#include "authrpc/rpc/stream_half.h"

namespace authrpc {
class ResponseBuffer;  // authrpc/server/service.h
}

namespace authrpc::proto {

// Parses a request the server received: INVALID_ARGUMENT, naming the
// message type, if `bytes` is not an encoding of it (never INTERNAL: the
// caller sent it).
Status parse_request(std::string_view bytes, google::protobuf::MessageLite& request);

// Parses a response the client received: DATA_LOSS if it is not an
// encoding of the expected type (the server answered with another schema).
Status parse_response(std::string_view bytes, google::protobuf::MessageLite& response);

// The message's encoding. Fields a proto2 message requires and lacks are
// left out, as any encoder may; the receiver's parse refuses them.
std::string serialize(const google::protobuf::MessageLite& message);

// Encodes `message` into the bytes `out` reserves for it (a unary
// response, encoded where the server sends it).
void encode_into(const google::protobuf::MessageLite& message, ResponseBuffer& out);

// A message's encoding held in place when it is small, as most requests
// are: encoding a request costs no allocation. Neither copied nor moved
// (view() points into it).
class Encoding {
 public:
  explicit Encoding(const google::protobuf::MessageLite& message);
  Encoding(const Encoding&) = delete;
  Encoding& operator=(const Encoding&) = delete;

  std::string_view view() const noexcept { return {data_, size_}; }

 private:
  static constexpr std::size_t kInPlace = 240;
  char in_place_[kInPlace];
  std::unique_ptr<char[]> large_;
  const char* data_;
  std::size_t size_;
};

// Sends `message` as one message of a streaming call, encoded straight into
// the buffer the call sends (no copy of the encoding).
asio::awaitable<Status> write_message(StreamHalf& stream, const google::protobuf::MessageLite& message);

// Reads the peer's next message of a streaming call into `message`: true,
// false once the peer has ended its messages, or the call's status. A
// message that does not parse is INVALID_ARGUMENT on the server
// (`peer_is_client`) and DATA_LOSS on the client, as for unary payloads.
asio::awaitable<Result<bool>> read_message(StreamHalf& stream, google::protobuf::MessageLite& message,
                                           bool peer_is_client);

// read_message() into a new Message: nullopt at the end.
template <typename Message>
asio::awaitable<Result<std::optional<Message>>> read_next(StreamHalf& stream, bool peer_is_client) {
  Message message;
  auto more = co_await read_message(stream, message, peer_is_client);
  if (!more.ok()) co_return more.status();
  if (!*more) co_return std::optional<Message>();
  co_return std::optional<Message>(std::move(message));
}

}  // namespace authrpc::proto
