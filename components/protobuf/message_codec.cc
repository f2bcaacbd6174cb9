#include "authrpc/components/protobuf/message_codec.h"

#include <cstdint>
#include <limits>

#include "authrpc/server/service.h"

namespace authrpc::proto {

namespace {

// ParseFromArray() would log a message lacking a proto2 required field to
// stderr, outside the server's log, for every such request: the partial
// parse and IsInitialized() refuse it the same way without.
Status parse_as(std::string_view bytes, google::protobuf::MessageLite& message, Errc failure,
                std::string_view what) {
  if (bytes.size() <= static_cast<std::size_t>(std::numeric_limits<int>::max()) &&
      message.ParsePartialFromArray(bytes.data(), static_cast<int>(bytes.size())) && message.IsInitialized()) {
    return {};
  }
  return Status(failure, std::string(what) + " is not a valid " + message.GetTypeName() +
                             " (protobuf encoding of " + std::to_string(bytes.size()) + " bytes)");
}

}  // namespace

Status parse_request(std::string_view bytes, google::protobuf::MessageLite& request) {
  return parse_as(bytes, request, Errc::kInvalidArgument, "the request");
}

Status parse_response(std::string_view bytes, google::protobuf::MessageLite& response) {
  return parse_as(bytes, response, Errc::kDataLoss, "the response");
}

std::string serialize(const google::protobuf::MessageLite& message) {
  std::string bytes;
  message.SerializePartialToString(&bytes);
  return bytes;
}

void encode_into(const google::protobuf::MessageLite& message, ResponseBuffer& out) {
  const std::size_t size = message.ByteSizeLong();
  message.SerializeWithCachedSizesToArray(reinterpret_cast<std::uint8_t*>(out.reserve(size)));
}

Encoding::Encoding(const google::protobuf::MessageLite& message) : size_(message.ByteSizeLong()) {
  char* out = in_place_;
  if (size_ > kInPlace) {
    large_.reset(new char[size_]);
    out = large_.get();
  }
  message.SerializeWithCachedSizesToArray(reinterpret_cast<std::uint8_t*>(out));
  data_ = out;
}

asio::awaitable<Status> write_message(StreamHalf& stream, const google::protobuf::MessageLite& message) {
  const std::size_t size = message.ByteSizeLong();
  Payload payload = stream.allocate(size);
  message.SerializeWithCachedSizesToArray(reinterpret_cast<std::uint8_t*>(payload.mutable_data()));
  co_return co_await stream.write(std::move(payload));
}

asio::awaitable<Result<bool>> read_message(StreamHalf& stream, google::protobuf::MessageLite& message,
                                           bool peer_is_client) {
  auto next = co_await stream.read();
  if (!next.ok()) co_return next.status();
  if (!next->has_value()) co_return false;
  const std::string_view bytes = (*next)->view();
  Status parsed = peer_is_client ? parse_as(bytes, message, Errc::kInvalidArgument, "a streamed request")
                                 : parse_as(bytes, message, Errc::kDataLoss, "a streamed response");
  if (!parsed.ok()) co_return parsed;
  co_return true;
}

}  // namespace authrpc::proto
