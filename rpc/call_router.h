// CallRouter: the streaming calls open on one connection, by call id, and
// the routing of the frames that belong to one of them (DATA, WINDOW_UPDATE,
// END_STREAM, SHM_RING, CANCEL, and the RESPONSE that ends a call) to its
// CallStream. The client connection (client/client_connection.h) and the
// server connection (server/server_connection.h) each own one and hand it
// the frames their reader reads; what differs between the sides stays with
// them: which frames a side may receive at all, whether shared memory was
// negotiated, and what an error costs the connection.
//
// A frame for a call that is not in the table (it ended, was cancelled, or
// never was) is dropped, its body skipped; a malformed frame, or one that
// breaks the call's flow control or order, is an error the connection ends
// with (docs/PROTOCOL.md sections 3 and 6).
//
// Threading: the connection's executor only, like the streams it holds.
#pragma once

#include <asio/awaitable.hpp>
#include <cstdint>
#include <memory>
#include <string_view>
#include <unordered_map>

#include "authrpc/base/result.h"

namespace authrpc {

class CallStream;
class FrameChannel;
class ShmLink;
struct Frame;

namespace wire {
enum class FrameType : std::uint8_t;
struct ResponseHeader;
}

class CallRouter {
 public:
  // --- The table.
  // `stream` runs under its call id from now on (the caller has checked
  // that the id is free).
  void add(std::shared_ptr<CallStream> stream);
  // (Most connections have no stream open: no hash then.)
  bool contains(std::uint32_t call_id) const {
    return !streams_.empty() && streams_.contains(call_id);
  }
  bool empty() const noexcept { return streams_.empty(); }
  std::size_t size() const noexcept { return streams_.size(); }
  // The stream of `call_id` leaves the table (null if there is none).
  std::shared_ptr<CallStream> take(std::uint32_t call_id);
  // A call that ended by itself leaves the table, if it is still the one
  // under its id (the id may carry a newer call by now).
  void remove(const std::shared_ptr<CallStream>& stream);
  // Every stream leaves the table and fails with `why` (the connection ended).
  void fail_all(const Status& why);
  // Streams with ids above `last_call_id` leave and fail with `why` (GOAWAY).
  void fail_after(std::uint32_t last_call_id, const Status& why);

  // --- Frames. Each returns OK, or the error the connection ends with:
  // kProtocolError if the peer broke the protocol; from on_data, any other
  // code if the connection failed inside the frame's body.
  // DATA: the message goes to its stream (a large body is read straight into
  // the stream's buffer, then the reader yields once so that the consumer
  // takes it while it is in the cache). DATA on a running call after the
  // peer's END_STREAM is a protocol error.
  asio::awaitable<Status> on_data(FrameChannel& channel, const Frame& frame);
  Status on_window_update(const Frame& frame);
  // END_STREAM (client to server): the peer has no more messages. A body,
  // or a second one on a running call, is a protocol error.
  Status on_end_stream(const Frame& frame);
  // SHM_RING on a connection whose `link` is active (non-null; the caller
  // checks that and says so in its own words): the ring goes to its stream. A ring that
  // does not attach fails that call alone, as a failure the peer cannot see
  // (CallStream::fail_locally: the client's hook then cancels the call).
  Status on_shm_ring(const std::shared_ptr<ShmLink>& link, FrameChannel& channel,
                     const Frame& frame);
  // CANCEL (client to server): the call's stream leaves and fails with
  // `why`. A body is a protocol error.
  Status on_cancel(const Frame& frame, const Status& why);
  // The RESPONSE that ends a streaming call (server to client): the stream
  // leaves the table; messages queued before it are still read, then the
  // response's status (or the end of the stream, with `payload` as the
  // final message). False if no stream runs under `call_id`.
  bool on_response(std::uint32_t call_id, const wire::ResponseHeader& header,
                   std::string_view payload);

  // The frames that name a call and so must not carry call id 0 (REQUEST and
  // STREAM_REQUEST check their ids themselves; docs/PROTOCOL.md section 10).
  static bool is_call_frame(wire::FrameType type) noexcept;

 private:
  std::unordered_map<std::uint32_t, std::shared_ptr<CallStream>> streams_;
};

}  // namespace authrpc
