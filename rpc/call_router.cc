#include "authrpc/rpc/call_router.h"

#include <asio/post.hpp>
#include <asio/use_awaitable.hpp>
#include <cstring>
#include <string>

#include "authrpc/rpc/call_stream.h"
#include "authrpc/rpc/frame_channel.h"
#include "authrpc/rpc/messages.h"
#include "authrpc/rpc/shm_link.h"

namespace authrpc {

using wire::FrameType;

void CallRouter::add(std::shared_ptr<CallStream> stream) {
  const std::uint32_t call_id = stream->call_id();
  streams_[call_id] = std::move(stream);
}

std::shared_ptr<CallStream> CallRouter::take(std::uint32_t call_id) {
  const auto it = streams_.find(call_id);
  if (it == streams_.end()) return nullptr;
  auto stream = std::move(it->second);
  streams_.erase(it);
  return stream;
}

void CallRouter::remove(const std::shared_ptr<CallStream>& stream) {
  const auto it = streams_.find(stream->call_id());
  if (it != streams_.end() && it->second == stream) streams_.erase(it);
}

void CallRouter::fail_all(const Status& why) {
  if (streams_.empty()) return;
  // Out of the table first: a stream's failure may run code that looks here.
  auto streams = std::move(streams_);
  streams_.clear();
  for (auto& [id, stream] : streams) stream->fail(why);
}

void CallRouter::fail_after(std::uint32_t last_call_id, const Status& why) {
  for (auto it = streams_.begin(); it != streams_.end();) {
    if (it->first > last_call_id) {
      it->second->fail(why);
      it = streams_.erase(it);
    } else {
      ++it;
    }
  }
}

asio::awaitable<Status> CallRouter::on_data(FrameChannel& channel, const Frame& frame) {
  const auto it = streams_.find(frame.header.call_id);
  // A stream that has ended (or never was) drops its late messages.
  std::shared_ptr<CallStream> stream = it == streams_.end() ? nullptr : it->second;
  // A message after the peer's own END_STREAM, on a call still running: the
  // peer broke its promise, and dropping the message silently would lose
  // data it believes it sent (stream_bad_input_test,
  // FramesAfterEndStreamOnARunningCall...). (A client's streams leave the
  // table when their input ends, so this is the server's case.)
  if (stream && !stream->failed() && stream->finished()) {
    co_return Status(Errc::kProtocolError,
                     "DATA after END_STREAM on call " + std::to_string(frame.header.call_id));
  }
  if (!frame.body_pending) {
    if (!stream) co_return Status();
    Payload message = stream->receive_buffer(frame.body.size());
    if (!frame.body.empty()) std::memcpy(message.mutable_data(), frame.body.data(), frame.body.size());
    co_return stream->on_data(std::move(message));
  }
  if (!stream) co_return co_await channel.skip_body();
  Payload message = stream->receive_buffer(frame.header.body_size());
  if (Status s = co_await channel.read_body(message.mutable_data()); !s.ok()) co_return s;
  Status s = stream->on_data(std::move(message));
  // Let the consumer take the message while it is still in the cache, rather
  // than read on while more input waits and queue up to a window.
  if (s.ok()) co_await asio::post(channel.byte_stream().executor(), asio::use_awaitable);
  co_return s;
}

Status CallRouter::on_window_update(const Frame& frame) {
  auto increment = wire::parse_window_update(frame.body);
  if (!increment.ok()) return increment.status();
  const auto it = streams_.find(frame.header.call_id);
  if (it == streams_.end()) return Status();
  return it->second->on_window_update(*increment);
}

Status CallRouter::on_end_stream(const Frame& frame) {
  const std::uint32_t call_id = frame.header.call_id;
  if (!frame.body.empty()) return Status(Errc::kProtocolError, "END_STREAM with a body");
  const auto it = streams_.find(call_id);
  if (it == streams_.end()) return Status();  // ended (or never was): dropped
  // A second END_STREAM on a call still running is a protocol error, like
  // DATA after it (stream_bad_input_test, FramesAfterEndStreamOnARunningCall...).
  if (!it->second->failed() && it->second->finished()) {
    return Status(Errc::kProtocolError, "a second END_STREAM on call " + std::to_string(call_id));
  }
  it->second->end_input(Status());
  return Status();
}

Status CallRouter::on_shm_ring(const std::shared_ptr<ShmLink>& link, FrameChannel& channel,
                               const Frame& frame) {
  auto ring = take_shm_ring(*link, channel, frame);
  if (!ring.ok()) return ring.status();
  const auto it = streams_.find(frame.header.call_id);
  if (it == streams_.end()) return Status();  // ended: dropping the ring tells the writer
  // A copy: the stream's failure hook may take it out of the table.
  const std::shared_ptr<CallStream> stream = it->second;
  if (Status s = stream->attach_shm_ring(link, std::move(*ring)); !s.ok()) {
    stream->fail_locally(std::move(s));
  }
  return Status();
}

Status CallRouter::on_cancel(const Frame& frame, const Status& why) {
  // The body is checked before the id, as for every call frame: a malformed
  // frame is an error whether or not its call is open (PROTOCOL.md section 3).
  if (!frame.body.empty()) return Status(Errc::kProtocolError, "CANCEL with a body");
  if (auto stream = take(frame.header.call_id)) stream->fail(why);
  return Status();
}

bool CallRouter::on_response(std::uint32_t call_id, const wire::ResponseHeader& header,
                             std::string_view payload) {
  auto stream = take(call_id);
  if (!stream) return false;
  const Status status = header.status == 0 ? Status()
                                           : Status(errc_from_wire(header.status),
                                                    std::string(header.error_message));
  stream->final_message().assign(payload);
  stream->end_output(status.ok() ? Status(Errc::kFailedPrecondition,
                                          "the server has ended the call")
                                 : status);
  stream->end_input(status);
  return true;
}

bool CallRouter::is_call_frame(FrameType type) noexcept {
  switch (type) {
    case FrameType::kCancel:
    case FrameType::kData:
    case FrameType::kWindowUpdate:
    case FrameType::kEndStream:
    case FrameType::kShmRing:
      return true;
    default:
      return false;
  }
}

}  // namespace authrpc
