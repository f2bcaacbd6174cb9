// The client half of a typed service: the calls generated stubs make
// through a Channel (channel.h), and the typed handles on streaming calls
// (docs/PROTOBUF.md, "Generated API"). A request is encoded, the call made
// as any other, the response parsed: one that does not parse is DATA_LOSS,
// an error of the server reaches the caller with its code and message.
#pragma once

#include <asio/awaitable.hpp>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "authrpc/components/protobuf/channel.h"
#include "authrpc/components/protobuf/message_codec.h"

namespace authrpc::proto {

// The response parsed where the Result holds it (no move of the message).
template <typename Response>
Result<Response> to_response(const Result<std::string>& bytes) {
  if (!bytes.ok()) return bytes.status();
  Result<Response> response(std::in_place);
  if (Status s = parse_response(*bytes, *response); !s.ok()) return s;
  return response;
}

template <typename Response>
Result<Response> call(Channel& channel, std::string_view service, std::string_view method,
                      const google::protobuf::MessageLite& request, const CallOptions& options) {
  const Encoding bytes(request);
  return to_response<Response>(channel.call(service, method, bytes.view(), options));
}

// Must be awaited on the channel's executor. The response is parsed where the
// client received it.
template <typename Response>
asio::awaitable<Result<Response>> async_call(Channel& channel, std::string_view service, std::string_view method,
                                             const google::protobuf::MessageLite& request, CallOptions options) {
  const Encoding bytes(request);
  Result<Response> response(std::in_place);
  const ResponseDecoder parse = [&response](std::string_view payload) { return parse_response(payload, *response); };
  if (Status s = co_await channel.async_call(service, method, bytes.view(), parse, options); !s.ok()) co_return s;
  co_return std::move(response);
}

// Runs the call on the channel's executor; the future holds its outcome.
// The call keeps the channel alive (a stub may be gone before it runs).
template <typename Response>
std::future<Result<Response>> call_future(std::shared_ptr<Channel> channel, std::string_view service,
                                          std::string_view method, const google::protobuf::MessageLite& request,
                                          CallOptions options) {
  auto promise = std::make_shared<std::promise<Result<Response>>>();
  auto future = promise->get_future();
  Channel& to = *channel;
  to.spawn_call(service, method, serialize(request), std::move(options),
                [promise, keep = std::move(channel)](Result<std::string> bytes) {
                  promise->set_value(to_response<Response>(bytes));
                });
  return future;
}

// The server's messages of a server-streaming call.
template <typename Response>
class ClientReader {
 public:
  explicit ClientReader(std::unique_ptr<ClientStream> stream) : stream_(std::move(stream)) {}

  // The next message; nullopt once the server has finished the call
  // successfully; DATA_LOSS for one that does not parse, or the call's
  // status (the server's error, kCancelled, kDeadlineExceeded...).
  asio::awaitable<Result<std::optional<Response>>> read() {
    return read_next<Response>(*stream_, /*peer_is_client=*/false);
  }
  asio::awaitable<Result<bool>> read(Response& response) {
    response.Clear();
    return read_message(*stream_, response, /*peer_is_client=*/false);
  }
  // The call's outcome; messages not read yet are dropped.
  asio::awaitable<Status> finish() {
    auto final_message = co_await stream_->finish();
    co_return final_message.status();
  }
  void cancel() { stream_->cancel(); }
  ClientStream& stream() noexcept { return *stream_; }

 private:
  std::unique_ptr<ClientStream> stream_;
};

// The client's messages of a client-streaming call, and its one response.
template <typename Request, typename Response>
class ClientWriter {
 public:
  explicit ClientWriter(std::unique_ptr<ClientStream> stream) : stream_(std::move(stream)) {}

  // Waits while the server's window is full; the call's status once the
  // server has ended it.
  asio::awaitable<Status> write(const Request& request) { return write_message(*stream_, request); }
  // Ends the client's messages and returns the server's response.
  asio::awaitable<Result<Response>> finish() { co_return to_response<Response>(co_await stream_->finish()); }
  void cancel() { stream_->cancel(); }
  ClientStream& stream() noexcept { return *stream_; }

 private:
  std::unique_ptr<ClientStream> stream_;
};

// Both directions of a bidirectional call: write() and read() may be used
// at once (from two coroutines on the channel's executor); finish() ends
// the client's messages, drops the server's not read yet, and returns the
// call's outcome.
template <typename Request, typename Response>
class ClientReaderWriter : public ClientReader<Response> {
 public:
  explicit ClientReaderWriter(std::unique_ptr<ClientStream> stream) : ClientReader<Response>(std::move(stream)) {}

  asio::awaitable<Status> write(const Request& request) { return write_message(this->stream(), request); }
  // Ends the client's messages; the server's go on until it finishes.
  void end_writes() { this->stream().end_writes(); }
};

// Opens a server-streaming call with `request` as its opening message.
template <typename Response>
asio::awaitable<Result<ClientReader<Response>>> open_server_stream(Channel& channel, std::string_view service,
                                                                   std::string_view method,
                                                                   const google::protobuf::MessageLite& request,
                                                                   CallOptions options) {
  const Encoding bytes(request);
  auto stream = co_await channel.open_stream(service, method, bytes.view(), options);
  if (!stream.ok()) co_return stream.status();
  co_return ClientReader<Response>(std::move(*stream));
}

// Opens a client-streaming (Reader: ClientWriter<...>) or bidirectional
// (ClientReaderWriter<...>) call: its opening message is empty.
template <typename Handle>
asio::awaitable<Result<Handle>> open_stream(Channel& channel, std::string_view service, std::string_view method,
                                            CallOptions options) {
  auto stream = co_await channel.open_stream(service, method, {}, options);
  if (!stream.ok()) co_return stream.status();
  co_return Handle(std::move(*stream));
}

}  // namespace authrpc::proto
