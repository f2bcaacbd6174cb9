// ClientStreams: a client connection's streaming calls — whether the server
// takes them (its AUTH_SUCCESS features), the CallRouter their frames go
// through, and the shared-memory link (unix:// only) their messages may use.
// A value member of Client::Connection: run() starts it once authenticated
// and routes the streams' frames through it, open_stream() opens streams,
// cancel_stream() and fail() end them. router() is inline: the reader uses
// it per frame.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string_view>

#include "authrpc/base/result.h"
#include "authrpc/client/client_stream.h"
#include "authrpc/rpc/call_router.h"
#include "authrpc/rpc/shm_options.h"

namespace authrpc {

class CallStream;
class FrameChannel;
class ShmLink;
struct ClientOptions;
struct Frame;

class ClientStreams {
 public:
  // AUTH_SUCCESS named the server's `features`: offers shared memory on
  // `channel` when the server takes it.
  void start(std::uint32_t features, FrameChannel& channel, const ShmOptions& shm);
  // The server takes streaming calls.
  bool supported() const noexcept;
  // The shared-memory link while the server has not answered its offer
  // (null otherwise): a stream opened before the answer would not know
  // whether its messages may use it.
  std::shared_ptr<ShmLink> unanswered_link() const;
  // Queues the STREAM_REQUEST of call `id` on `channel`, writes it, and
  // returns the stream, whose failure on this side cancels it through
  // `owner`.
  Result<std::shared_ptr<CallStream>> open(const std::shared_ptr<FrameChannel>& channel,
                                           std::uint32_t id, std::string_view service,
                                           std::string_view method, std::string_view request,
                                           const StreamOptions& stream_options,
                                           const ClientOptions& options,
                                           std::weak_ptr<ClientStreamOwner> owner);

  CallRouter& router() noexcept { return router_; }
  // SHM_ACCEPT and SHM_RING from the server; an error is its breach of the
  // protocol.
  Status on_shm_accept(const Frame& frame);
  Status on_shm_ring(FrameChannel& channel, const Frame& frame);
  // The connection ended: every stream fails with `why`.
  void fail_all(const Status& why);

 private:
  CallRouter router_;
  std::shared_ptr<ShmLink> shm_;  // offered or active
  std::uint32_t features_ = 0;
};

}  // namespace authrpc
