#include "authrpc/rpc/shm_stream_plane.h"

#include <asio/dispatch.hpp>
#include <asio/post.hpp>
#include <asio/redirect_error.hpp>
#include <asio/use_awaitable.hpp>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "authrpc/rpc/wire.h"

namespace authrpc {

namespace {

constexpr std::size_t kRingBodySize = 16;  // u32 slot_size · u32 slot_count · u64 region_size

std::string ring_frame(std::uint32_t call_id, const ShmRing& ring) {
  std::string out(wire::kFrameHeaderSize, '\0');
  wire::write_frame_header(reinterpret_cast<std::uint8_t*>(out.data()), wire::FrameType::kShmRing,
                           call_id, kRingBodySize);
  wire::Writer w(out);
  w.u32(ring.slot_size());
  w.u32(ring.slot_count());
  w.u32(static_cast<std::uint32_t>(ring.region_size() >> 32));
  w.u32(static_cast<std::uint32_t>(ring.region_size()));
  return out;
}

// Sends `bytes` on the Unix socket with `fds` on the first byte. Blocks
// (poll) only if the socket's buffer is full after the first byte left.
Status send_with_fds(int socket, std::string_view bytes, const int* fds, std::size_t count) {
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 4)] = {};
  std::size_t sent = 0;
  while (sent < bytes.size()) {
    iovec iov{const_cast<char*>(bytes.data() + sent), bytes.size() - sent};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    if (sent == 0) {
      msg.msg_control = control;
      msg.msg_controllen = CMSG_SPACE(sizeof(int) * count);
      cmsghdr* c = CMSG_FIRSTHDR(&msg);
      c->cmsg_level = SOL_SOCKET;
      c->cmsg_type = SCM_RIGHTS;
      c->cmsg_len = CMSG_LEN(sizeof(int) * count);
      std::memcpy(CMSG_DATA(c), fds, sizeof(int) * count);
    }
    const ssize_t n = ::sendmsg(socket, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n > 0) {
      sent += static_cast<std::size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (sent == 0) return Status(asio::error::would_block, "sendmsg");
      pollfd p{socket, POLLOUT, 0};
      ::poll(&p, 1, 1000);
      continue;
    }
    return Status(std::error_code(errno, std::system_category()), "sendmsg (shared-memory ring)");
  }
  return Status();
}

}  // namespace

ShmStreamPlane::ShmStreamPlane(std::shared_ptr<ShmLink> link, std::shared_ptr<FrameChannel> channel,
                               std::uint32_t call_id)
    : link_(std::move(link)),
      channel_(std::move(channel)),
      executor_(channel_->byte_stream().executor()),
      call_id_(call_id),
      pool_(std::make_shared<BufferPool>(1u << 20)) {}

ShmStreamPlane::~ShmStreamPlane() {
  if (deadline_) deadline_->cancel();
}

void ShmStreamPlane::arm_deadline(std::chrono::steady_clock::time_point deadline,
                                  std::function<void()> expired) {
  if (deadline == std::chrono::steady_clock::time_point::max() || deadline_) return;
  deadline_.emplace(executor_);
  deadline_->expires_at(deadline);
  deadline_->async_wait([expired = std::move(expired)](std::error_code ec) {
    if (!ec) expired();
  });
}

Status send_shm_ring(int socket, std::uint32_t call_id, ShmRing& ring) {
  auto fds = ring.take_peer_fds();
  if (!fds.ok()) return fds.status();
  const int list[4] = {fds->memfd.get(), fds->data_ready.get(), fds->space_ready.get(),
                       fds->liveness.get()};
  return send_with_fds(socket, ring_frame(call_id, ring), list, 4);
}

Status ShmStreamPlane::send_ring(ShmRing& ring) {
  return send_shm_ring(channel_->byte_stream().native_unix_handle(), call_id_, ring);
}

asio::awaitable<bool> ShmStreamPlane::ready_to_write() {
  if (write_decided_) co_return writer_.has_value();
  write_decided_ = true;
  if (!link_ || !link_->active() || writer_closed_ || channel_->closed()) co_return false;
  auto ring = ShmRing::create(link_->options().ring);
  if (!ring.ok()) co_return false;  // unavailable here: the socket it is
  // The ring's frame (with the descriptors) must not land inside bytes the
  // channel is writing: send it when the channel has nothing pending, in
  // one step of this executor.
  for (;;) {
    co_await channel_->wait_pending_below(0);
    // The stream's sending side may have ended while we waited (finish(),
    // cancel, the handler's return): its final frame is out, so a ring
    // handed over now would come after it — the peer drops it and the
    // message committed into it is lost while write() says OK. Go to the
    // socket path instead, which fails the write with the stream's status
    // (shm_stream_plane_test, WriteRacingFinishOnTheFirstShmWriteIsNeverLost).
    if (writer_closed_ || channel_->closed()) co_return false;
    Status s = send_ring(*ring);
    if (s.ok()) break;
    if (s.code != asio::error::would_block) {
      channel_->close();  // a failed write on the socket: the connection is gone
      co_return false;
    }
    asio::steady_timer pause(executor_, std::chrono::milliseconds(1));
    std::error_code ec;
    co_await pause.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    if (writer_closed_) co_return false;
  }
  auto writer = ShmWriter::open(executor_, std::move(*ring));
  if (!writer.ok()) {
    // The peer has the ring already; it will see us gone (liveness), and
    // the stream cannot go on.
    channel_->close();
    co_return false;
  }
  writer_.emplace(std::move(*writer));
  co_return true;
}

asio::awaitable<void> ShmStreamPlane::take_turn() {
  // A ring with room (or with messages) never suspends its writer (or
  // reader): a loop over it would keep the IO thread from everything else
  // posted there — the connection's reader, a server's GOAWAY and close —
  // for as long as the peer keeps up. So every kTurn operations it yields.
  constexpr unsigned kTurn = 16;
  if (++operations_ < kTurn) co_return;
  operations_ = 0;
  co_await asio::post(executor_, asio::use_awaitable);
}

asio::awaitable<Status> ShmStreamPlane::write(std::string_view message) {
  co_await take_turn();
  const std::uint32_t total = static_cast<std::uint32_t>(message.size());
  std::size_t at = 0;
  do {
    auto slot = co_await writer_->acquire();
    if (!slot.ok()) co_return slot.status();
    if (lent_ != nullptr) lent_ = nullptr;  // the lent Payload's slot is reused here
    const std::size_t n = std::min(message.size() - at, slot->size());
    if (n > 0) std::memcpy(slot->data(), message.data() + at, n);
    if (Status s = writer_->commit(n, total); !s.ok()) co_return s;
    at += n;
  } while (at < message.size());
  co_return Status();
}

asio::awaitable<Status> ShmStreamPlane::write(Payload message) {
  if (lent_ != nullptr && message.data() == lent_) {
    co_await take_turn();
    lent_ = nullptr;
    co_return writer_->commit(message.size(), static_cast<std::uint32_t>(message.size()));
  }
  co_return co_await write(message.view());
}

asio::awaitable<Result<Payload>> ShmStreamPlane::acquire(std::size_t size) {
  if (size > writer_->slot_size() || lent_ != nullptr) co_return pool_->take(size);
  auto slot = co_await writer_->acquire();
  if (!slot.ok()) co_return slot.status();
  lent_ = reinterpret_cast<char*>(slot->data());
  co_return Payload(lent_, size, size, shared_from_this());
}

void ShmStreamPlane::close_writer(const Status& why) {
  writer_closed_ = true;  // also before the ring exists: ready_to_write() must not make one
  if (!writer_) return;
  writer_->close();
  writer_->cancel(why);
}

Status ShmStreamPlane::attach_reader(ShmRing ring) {
  if (reader_) return Status(Errc::kProtocolError, "a second SHM_RING for one stream");
  auto reader = ShmReader::open(executor_, std::move(ring));
  if (!reader.ok()) return reader.status();
  reader_.emplace(std::move(*reader));
  return Status();
}

asio::awaitable<Result<std::optional<Payload>>> ShmStreamPlane::read(std::size_t max_message) {
  co_await take_turn();
  auto slot = co_await reader_->next();
  if (!slot.ok()) {
    if (slot.status().code == ShmErrc::kEndOfRing) {
      reader_ended_ = true;
      co_return std::optional<Payload>();
    }
    co_return slot.status();
  }
  char* data = const_cast<char*>(reinterpret_cast<const char*>(slot->data.data()));
  const std::size_t length = slot->data.size();
  const std::size_t total = slot->tag;
  if (total == length) {
    held_.push_back({data, false});
    co_return std::optional<Payload>(Payload(data, length, length, shared_from_this()));
  }
  if (total < length || total > max_message || length != reader_->slot_size()) {
    co_return Status(ShmErrc::kCorrupted, "shared-memory message of " + std::to_string(total) +
                                              " bytes in a slot of " + std::to_string(length));
  }
  // A message larger than a slot: assembled from consecutive full slots.
  Payload whole = pool_->take(total);
  std::memcpy(whole.mutable_data(), data, length);
  held_.push_back({data, true});
  drain_released();
  std::size_t got = length;
  while (got < total) {
    auto next = co_await reader_->next();
    if (!next.ok()) {
      if (next.status().code == ShmErrc::kEndOfRing) {
        // The writer stopped inside a message: its side of the call failed
        // or was cancelled while it wrote. The part is dropped; the socket
        // says how the call ended (CallStream::read).
        reader_ended_ = true;
        truncated_ = true;
        co_return std::optional<Payload>();
      }
      co_return next.status();
    }
    const std::size_t n = next->data.size();
    if (n > total - got || next->tag != total) {
      co_return Status(ShmErrc::kCorrupted, "shared-memory message continues inconsistently");
    }
    std::memcpy(whole.mutable_data() + got, next->data.data(), n);
    got += n;
    held_.push_back({reinterpret_cast<const char*>(next->data.data()), true});
    drain_released();
  }
  co_return std::optional<Payload>(std::move(whole));
}

void ShmStreamPlane::peer_finished() {
  // A writer that ends its direction closes the ring first, and the reader
  // sees that close. One that does not (another implementation, a writer
  // that broke between its commits and its final frame) would otherwise
  // leave read() waiting for good: once its final frame has arrived the
  // connection forgets the call, so nothing else would wake the ring. The
  // frame was sent after the writer's last commit, so everything the peer
  // wrote is in the ring by now: deliver it, then end (docs/SHM.md, "How a
  // call's end reaches the ring's reader").
  if (reader_) reader_->writer_finished();
}

void ShmStreamPlane::fail(const Status& why) {
  // Closed, not only cancelled: the peer's reader then ends the ring at
  // once and takes the call's outcome from the socket (CANCEL, RESPONSE,
  // the connection's end), which this side sends or causes. A ring only
  // cancelled went away with a stream dropped right after failing, before
  // its CANCEL left, and the peer saw kPeerGone (CONNECTION_CLOSED) on a
  // connection that was fine.
  close_writer(why);
  if (reader_) {
    reader_->close();
    reader_->cancel(why);
  }
  if (deadline_) deadline_->cancel();
}

void ShmStreamPlane::release(char* data, std::size_t) noexcept {
  asio::dispatch(executor_, [self = shared_from_this(), data] { self->released(data); });
}

void ShmStreamPlane::released(char* data) noexcept {
  if (data == lent_) {
    lent_ = nullptr;  // not committed: the slot stays acquired for the next write
    return;
  }
  for (auto& h : held_) {
    if (h.data == data && !h.done) {
      h.done = true;
      break;
    }
  }
  drain_released();
}

void ShmStreamPlane::drain_released() {
  while (!held_.empty() && held_.front().done) {
    held_.pop_front();
    if (reader_) reader_->release();
  }
}

}  // namespace authrpc
