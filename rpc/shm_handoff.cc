// SO_PEERCRED checks and the SCM_RIGHTS handoff message of a shared-memory
// ring. Sender and receiver are small step machines over a non-blocking
// socket (MSG_DONTWAIT), driven either by Asio waits or by poll().
#include "authrpc/rpc/shm_handoff.h"

#include <asio/redirect_error.hpp>
#include <asio/use_awaitable.hpp>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

namespace authrpc {
namespace {

// The handoff message: 32 bytes, native byte order (one host).
constexpr std::uint32_t kHandoffMagic = 0x4d485341;  // "ASHM"
constexpr std::uint16_t kHandoffVersion = 1;
constexpr std::uint16_t kHandoffFds = 4;  // memfd, data_ready, space_ready, liveness
constexpr std::size_t kHandoffSize = 32;
constexpr std::size_t kMaxFdsAccepted = 8;  // room to notice (and close) extra descriptors

struct HandoffMessage {
  std::uint32_t magic;
  std::uint16_t version;
  std::uint16_t fd_count;
  std::uint32_t slot_size;
  std::uint32_t slot_count;
  std::uint64_t region_size;
  std::uint64_t reserved;
};
static_assert(sizeof(HandoffMessage) == kHandoffSize);

std::error_code last_errno() { return {errno, std::system_category()}; }

bool would_block(std::error_code ec) {
  return ec == std::errc::resource_unavailable_try_again || ec == std::errc::operation_would_block;
}

class Sender {
 public:
  Sender(const ShmRing& ring, ShmRingFds fds) : fds_(std::move(fds)) {
    const HandoffMessage m{kHandoffMagic, kHandoffVersion, kHandoffFds, ring.slot_size(),
                           ring.slot_count(), ring.region_size(), 0};
    std::memcpy(bytes_.data(), &m, sizeof m);
  }

  // Sends what the socket takes; would_block when it takes no more.
  std::error_code step(int fd) {
    while (sent_ < kHandoffSize) {
      ssize_t n;
      if (sent_ == 0) {
        // The descriptors ride on the first byte.
        iovec iov{bytes_.data(), kHandoffSize};
        alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kHandoffFds)] = {};
        msghdr mh{};
        mh.msg_iov = &iov;
        mh.msg_iovlen = 1;
        mh.msg_control = control;
        mh.msg_controllen = sizeof control;
        cmsghdr* c = CMSG_FIRSTHDR(&mh);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int) * kHandoffFds);
        const int fds[kHandoffFds] = {fds_.memfd.get(), fds_.data_ready.get(), fds_.space_ready.get(),
                                      fds_.liveness.get()};
        std::memcpy(CMSG_DATA(c), fds, sizeof fds);
        n = ::sendmsg(fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
      } else {
        n = ::send(fd, bytes_.data() + sent_, kHandoffSize - sent_, MSG_DONTWAIT | MSG_NOSIGNAL);
      }
      if (n < 0) {
        if (errno == EINTR) continue;
        return last_errno();
      }
      sent_ += static_cast<std::size_t>(n);
    }
    return {};
  }

 private:
  ShmRingFds fds_;  // our copies of the peer's descriptors, closed once sent
  std::array<unsigned char, kHandoffSize> bytes_{};
  std::size_t sent_ = 0;
};

class Receiver {
 public:
  // Reads up to the end of the message, never beyond; would_block when the
  // rest has not arrived yet.
  Status step(int fd) {
    while (got_ < kHandoffSize) {
      iovec iov{bytes_.data() + got_, kHandoffSize - got_};
      alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFdsAccepted)];
      msghdr mh{};
      mh.msg_iov = &iov;
      mh.msg_iovlen = 1;
      mh.msg_control = control;
      mh.msg_controllen = sizeof control;
      const ssize_t n = ::recvmsg(fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
      if (n < 0) {
        if (errno == EINTR) continue;
        return Status(last_errno(), "receiving the shm handoff");
      }
      // Own every descriptor that arrived before judging anything, so that
      // none leaks whatever happens next.
      for (cmsghdr* c = CMSG_FIRSTHDR(&mh); c != nullptr; c = CMSG_NXTHDR(&mh, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
        const std::size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (std::size_t i = 0; i < count; ++i) {
          int received;
          std::memcpy(&received, CMSG_DATA(c) + i * sizeof(int), sizeof received);
          fds_.emplace_back(received);
        }
        if (got_ != 0) misplaced_fds_ = true;
      }
      if (mh.msg_flags & MSG_CTRUNC) truncated_ = true;
      if (n == 0) return Status(Errc::kConnectionClosed, "peer closed the socket during the shm handoff");
      got_ += static_cast<std::size_t>(n);
    }
    return Status();
  }

  Result<ShmRing> finish(const ShmAttachLimits& limits) {
    HandoffMessage m;
    std::memcpy(&m, bytes_.data(), sizeof m);
    if (m.magic != kHandoffMagic || m.version != kHandoffVersion || m.fd_count != kHandoffFds) {
      return Status(ShmErrc::kBadHandoff, "not an shm handoff message");
    }
    if (truncated_ || misplaced_fds_ || fds_.size() != kHandoffFds) {
      return Status(ShmErrc::kBadHandoff,
                    "shm handoff carried " + std::to_string(fds_.size()) + " descriptors, expected 4");
    }
    ShmRingFds fds;
    fds.memfd = std::move(fds_[0]);
    fds.data_ready = std::move(fds_[1]);
    fds.space_ready = std::move(fds_[2]);
    fds.liveness = std::move(fds_[3]);
    auto ring = ShmRing::attach(std::move(fds), limits);
    if (!ring.ok()) return ring;
    if (ring->slot_size() != m.slot_size || ring->slot_count() != m.slot_count ||
        ring->region_size() != m.region_size) {
      return Status(ShmErrc::kBadGeometry, "shm handoff geometry differs from the region's header");
    }
    return ring;
  }

 private:
  std::array<unsigned char, kHandoffSize> bytes_{};
  std::size_t got_ = 0;
  std::vector<UniqueFd> fds_;
  bool truncated_ = false;
  bool misplaced_fds_ = false;
};

Status wait_ready(int fd, short events) {
  pollfd p{fd, events, 0};
  for (;;) {
    const int r = ::poll(&p, 1, -1);
    if (r > 0) return Status();
    if (r < 0 && errno != EINTR) return Status(last_errno(), "poll");
  }
}

Result<ShmRingFds> prepare_send(int unix_socket, ShmRing& ring, const ShmPeerPolicy& policy) {
  if (Status s = check_shm_peer(unix_socket, policy); !s.ok()) return s;
  return ring.take_peer_fds();
}

}  // namespace

Result<PeerCredentials> peer_credentials(int unix_socket) {
  int domain = 0;
  socklen_t len = sizeof domain;
  if (::getsockopt(unix_socket, SOL_SOCKET, SO_DOMAIN, &domain, &len) != 0 || domain != AF_UNIX) {
    return Status(ShmErrc::kUnsupported, "not a Unix-domain socket");
  }
  ucred cred{};
  len = sizeof cred;
  if (::getsockopt(unix_socket, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
    return Status(ShmErrc::kUnsupported, std::string("SO_PEERCRED: ") + std::strerror(errno));
  }
  return PeerCredentials{cred.pid, cred.uid, cred.gid};
}

Status check_shm_peer(int unix_socket, const ShmPeerPolicy& policy) {
  auto cred = peer_credentials(unix_socket);
  if (!cred.ok()) return cred.status();
  const uid_t allowed = policy.uid.value_or(::geteuid());
  if (cred->uid != allowed) {
    return Status(ShmErrc::kPeerRefused, "shared memory refused: peer uid " + std::to_string(cred->uid) +
                                             " is not " + std::to_string(allowed));
  }
  return Status();
}

Status send_shm_ring_blocking(int unix_socket, ShmRing& ring, const ShmPeerPolicy& policy) {
  auto fds = prepare_send(unix_socket, ring, policy);
  if (!fds.ok()) return fds.status();
  Sender sender(ring, std::move(*fds));
  for (;;) {
    const std::error_code ec = sender.step(unix_socket);
    if (!ec) return Status();
    if (!would_block(ec)) return Status(ec, "sending the shm handoff");
    if (Status s = wait_ready(unix_socket, POLLOUT); !s.ok()) return s;
  }
}

Result<ShmRing> receive_shm_ring_blocking(int unix_socket, const ShmPeerPolicy& policy,
                                          const ShmAttachLimits& limits) {
  if (Status s = check_shm_peer(unix_socket, policy); !s.ok()) return s;
  Receiver receiver;
  for (;;) {
    Status s = receiver.step(unix_socket);
    if (s.ok()) return receiver.finish(limits);
    if (!would_block(s.code)) return s;
    if (s = wait_ready(unix_socket, POLLIN); !s.ok()) return s;
  }
}

asio::awaitable<Status> send_shm_ring(asio::local::stream_protocol::socket& socket, ShmRing& ring,
                                      const ShmPeerPolicy& policy) {
  auto fds = prepare_send(socket.native_handle(), ring, policy);
  if (!fds.ok()) co_return fds.status();
  Sender sender(ring, std::move(*fds));
  for (;;) {
    const std::error_code ec = sender.step(socket.native_handle());
    if (!ec) co_return Status();
    if (!would_block(ec)) co_return Status(ec, "sending the shm handoff");
    std::error_code wait_ec;
    co_await socket.async_wait(asio::socket_base::wait_write,
                               asio::redirect_error(asio::use_awaitable, wait_ec));
    if (wait_ec) co_return Status(wait_ec, "waiting to send the shm handoff");
  }
}

asio::awaitable<Result<ShmRing>> receive_shm_ring(asio::local::stream_protocol::socket& socket,
                                                  const ShmPeerPolicy& policy,
                                                  const ShmAttachLimits& limits) {
  if (Status s = check_shm_peer(socket.native_handle(), policy); !s.ok()) co_return s;
  Receiver receiver;
  for (;;) {
    Status s = receiver.step(socket.native_handle());
    if (s.ok()) co_return receiver.finish(limits);
    if (!would_block(s.code)) co_return s;
    std::error_code wait_ec;
    co_await socket.async_wait(asio::socket_base::wait_read,
                               asio::redirect_error(asio::use_awaitable, wait_ec));
    if (wait_ec) co_return Status(wait_ec, "waiting for the shm handoff");
  }
}

}  // namespace authrpc
