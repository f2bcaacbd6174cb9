#include "authrpc/rpc/shm_link.h"

#include <asio/redirect_error.hpp>
#include <asio/use_awaitable.hpp>

#include "authrpc/rpc/wire.h"

namespace authrpc {

std::shared_ptr<ShmLink> ShmLink::offer(FrameChannel& channel, const ShmOptions& options) {
  if (!options.enabled) return nullptr;
  const int fd = channel.byte_stream().native_unix_handle();
  if (fd < 0) return nullptr;
  if (!check_shm_peer(fd, options.peer).ok()) return nullptr;
  // The server's answer and its rings may carry descriptors from now on.
  channel.byte_stream().expect_descriptors();
  std::string& out = channel.out();
  const std::size_t at = out.size();
  out.resize(at + wire::kFrameHeaderSize);
  wire::write_frame_header(reinterpret_cast<std::uint8_t*>(out.data() + at),
                           wire::FrameType::kShmHello, 0, 0);
  return std::make_shared<ShmLink>(options, channel.byte_stream().executor(), State::kOffered);
}

std::shared_ptr<ShmLink> ShmLink::answer(FrameChannel& channel, const ShmOptions& options,
                                         Status* why) {
  Status status;
  const int fd = channel.byte_stream().native_unix_handle();
  if (!options.enabled) {
    status = Status(ShmErrc::kUnsupported, "shared memory is disabled on the server");
  } else if (fd < 0) {
    status = Status(ShmErrc::kUnsupported, "shared memory needs a Unix socket");
  } else {
    status = check_shm_peer(fd, options.peer);
  }
  std::string& out = channel.out();
  const std::size_t at = out.size();
  out.resize(at + wire::kFrameHeaderSize);
  wire::write_frame_header(reinterpret_cast<std::uint8_t*>(out.data() + at),
                           wire::FrameType::kShmAccept, 0, 8);
  wire::Writer w(out);
  w.u32(status.ok() ? 0u : static_cast<std::uint32_t>(to_wire_errc(status.code)));
  w.u32(0);
  if (why) *why = status;
  if (!status.ok()) return nullptr;
  // The client's rings may carry descriptors once it reads this answer.
  channel.byte_stream().expect_descriptors();
  return std::make_shared<ShmLink>(options, channel.byte_stream().executor(), State::kActive);
}

Status ShmLink::on_accept(std::string_view body) {
  wire::Reader r(body);
  const std::uint32_t status = r.u32();
  r.u32();
  if (!r.ok() || !r.at_end()) return Status(Errc::kProtocolError, "malformed SHM_ACCEPT");
  if (state_ != State::kOffered) return Status(Errc::kProtocolError, "unexpected SHM_ACCEPT");
  if (status == 0) {
    state_ = State::kActive;
  } else {
    state_ = State::kRefused;
    refusal_ = Status(errc_from_wire(static_cast<std::uint16_t>(status)), "the server refused shared memory");
  }
  answered_.cancel();
  return Status();
}

asio::awaitable<void> ShmLink::wait_answer() {
  while (state_ == State::kOffered) {
    answered_.expires_at(asio::steady_timer::time_point::max());
    std::error_code ec;
    co_await answered_.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    if (ec != asio::error::operation_aborted) break;
    if (state_ == State::kOffered) break;  // cancel_wait(): the connection ended
  }
}

std::vector<UniqueFd> ShmLink::take_ring_fds(FrameChannel& channel) {
  for (auto& fd : channel.byte_stream().take_received_fds()) fds_.push_back(std::move(fd));
  std::vector<UniqueFd> ring;
  while (ring.size() < 4 && !fds_.empty()) {
    ring.push_back(std::move(fds_.front()));
    fds_.pop_front();
  }
  return ring;
}

Result<ShmRing> take_shm_ring(ShmLink& link, FrameChannel& channel, const Frame& frame) {
  auto fds = link.take_ring_fds(channel);
  wire::Reader r(frame.body);
  const std::uint32_t slot_size = r.u32();
  const std::uint32_t slot_count = r.u32();
  const std::uint64_t region_high = r.u32();
  const std::uint64_t region_size = (region_high << 32) | r.u32();
  if (!r.ok() || !r.at_end() || frame.body_pending) {
    return Status(Errc::kProtocolError, "malformed SHM_RING");
  }
  if (fds.size() != 4) {
    return Status(ShmErrc::kBadHandoff, "SHM_RING without its four descriptors");
  }
  ShmRingFds ring_fds{std::move(fds[0]), std::move(fds[1]), std::move(fds[2]), std::move(fds[3])};
  auto ring = ShmRing::attach(std::move(ring_fds), link.options().limits);
  if (!ring.ok()) return ring.status();
  if (ring->slot_size() != slot_size || ring->slot_count() != slot_count ||
      ring->region_size() != region_size) {
    return Status(ShmErrc::kBadGeometry, "SHM_RING geometry differs from the ring's header");
  }
  return ring;
}

}  // namespace authrpc
