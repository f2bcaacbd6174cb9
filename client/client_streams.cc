#include "authrpc/client/client_streams.h"

#include "authrpc/client/client.h"
#include "authrpc/rpc/call_stream.h"
#include "authrpc/rpc/frame_channel.h"
#include "authrpc/rpc/messages.h"
#include "authrpc/rpc/shm_link.h"

namespace authrpc {

using Clock = std::chrono::steady_clock;

void ClientStreams::start(std::uint32_t features, FrameChannel& channel, const ShmOptions& shm) {
  features_ = features;
  if ((features & wire::kFeatureStreams) && (features & wire::kFeatureShm)) {
    shm_ = ShmLink::offer(channel, shm);
    if (shm_) channel.schedule_flush();
  }
}

bool ClientStreams::supported() const noexcept { return features_ & wire::kFeatureStreams; }

std::shared_ptr<ShmLink> ClientStreams::unanswered_link() const {
  return shm_ && shm_->state() == ShmLink::State::kOffered ? shm_ : nullptr;
}

Result<std::shared_ptr<CallStream>> ClientStreams::open(
    const std::shared_ptr<FrameChannel>& channel, std::uint32_t id, std::string_view service,
    std::string_view method, std::string_view request, const StreamOptions& stream_options,
    const ClientOptions& options, std::weak_ptr<ClientStreamOwner> owner) {
  const auto timeout = stream_options.timeout.count() > 0 ? stream_options.timeout
                                                          : options.default_call_timeout;
  const auto deadline = timeout.count() > 0 ? Clock::now() + timeout : Clock::time_point::max();
  const std::uint32_t window =
      stream_options.window != 0 ? stream_options.window : kDefaultStreamWindow;
  std::string& out = channel->out();
  const std::size_t start = out.size();
  wire::append_stream_request(
      out, id, {service, method, static_cast<std::uint32_t>(timeout.count()), window}, request);
  if (out.size() - start > options.max_frame_size) {
    out.resize(start);
    return Status(Errc::kFrameTooLarge, "request of " + std::to_string(request.size()) +
                                            " bytes exceeds the frame limit");
  }
  channel->set_direct_data_threshold(kDirectDataThreshold);
  auto stream = std::make_shared<CallStream>(channel, id, window, 0, deadline);
  if (shm_) stream->set_shm(shm_);
  stream->set_on_local_failure([owner = std::move(owner), id](const Status&) {
    if (auto self = owner.lock()) self->cancel_stream(id);
  });
  router_.add(stream);
  channel->flush_now();
  return stream;
}

Status ClientStreams::on_shm_accept(const Frame& frame) {
  if (!shm_) return Status(Errc::kProtocolError, "SHM_ACCEPT without SHM_HELLO");
  return shm_->on_accept(frame.body);
}

Status ClientStreams::on_shm_ring(FrameChannel& channel, const Frame& frame) {
  if (!shm_ || !shm_->active()) {
    return Status(Errc::kProtocolError, "SHM_RING without shared memory");
  }
  return router_.on_shm_ring(shm_, channel, frame);
}

void ClientStreams::fail_all(const Status& why) {
  router_.fail_all(why);
  if (shm_) shm_->cancel_wait();
}

}  // namespace authrpc
