#include "authrpc/client/client_stream.h"

#include <asio/dispatch.hpp>

#include "authrpc/rpc/call_stream.h"

namespace authrpc {

ClientStream::ClientStream(std::shared_ptr<CallStream> stream,
                           std::shared_ptr<ClientStreamOwner> owner)
    : StreamHalf(std::move(stream)), owner_(std::move(owner)) {}

ClientStream::~ClientStream() {
  asio::dispatch(stream_->executor(), [stream = stream_, owner = owner_] {
    if (stream->finished()) return;
    owner->cancel_stream(stream->call_id());
    stream->fail(Status(Errc::kCancelled, "the client dropped the stream"));
  });
}

void ClientStream::end_writes() {
  if (ended_ || stream_->finished()) return;
  ended_ = true;
  stream_->send_control(wire::FrameType::kEndStream);
  // Nothing may follow END_STREAM: a write() racing with it fails here,
  // typed, instead of reaching the server, which answers DATA after
  // END_STREAM with PROTOCOL_ERROR (docs/PROTOCOL.md section 6).
  stream_->end_output(Status(Errc::kFailedPrecondition, "the client ended its messages"));
}

asio::awaitable<Result<std::string>> ClientStream::finish() {
  end_writes();
  for (;;) {
    auto message = co_await stream_->read();
    if (!message.ok()) co_return message.status();
    if (!message->has_value()) break;
  }
  co_return stream_->final_message();
}

std::uint32_t ClientStream::call_id() const noexcept { return stream_->call_id(); }

void ClientStream::cancel() {
  if (stream_->finished()) return;
  owner_->cancel_stream(stream_->call_id());
  stream_->fail(Status(Errc::kCancelled, "cancelled by the client"));
}

}  // namespace authrpc
