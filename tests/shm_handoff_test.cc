// Handing a ring over a Unix socket (rpc/shm_handoff.h): descriptors passed
// for real over socketpairs and a listening Unix socket, SO_PEERCRED refusal
// of a peer running as another uid, malformed handoff messages, and sockets
// that cannot carry a handoff at all.
#include "authrpc/rpc/shm_handoff.h"

#include <asio/detached.hpp>
#include <asio/local/stream_protocol.hpp>
#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <random>
#include <string>
#include <thread>
#include <vector>

#include "tests/testing/shm_test_util.h"
#include "tests/testing/test_support.h"

namespace authrpc {
namespace {

using namespace shm_test;
using Local = asio::local::stream_protocol;

constexpr uid_t kNobody = 65534;

std::size_t open_fd_count() {
  std::size_t n = 0;
  DIR* d = ::opendir("/proc/self/fd");
  while (dirent* e = ::readdir(d)) n += e->d_name[0] != '.';
  ::closedir(d);
  return n;
}

// A socketpair whose ends close themselves.
struct Pair {
  UniqueFd a, b;
  Pair() {
    int sv[2];
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    a.reset(sv[0]);
    b.reset(sv[1]);
  }
};

// Moves `messages` through a ring between a writer and a reader on two
// threads and compares digests.
void expect_transfer(ShmRing writer_ring, ShmRing reader_ring, std::uint64_t messages) {
  asio::io_context writer_io, reader_io;
  auto writer = ShmWriter::open(writer_io.get_executor(), std::move(writer_ring));
  auto reader = ShmReader::open(reader_io.get_executor(), std::move(reader_ring));
  ASSERT_TRUE(writer.ok() && reader.ok());
  const std::size_t slot = writer->slot_size();
  SequenceDigest sent, received;
  Status ws;
  std::thread t([&] {
    ws = run_to_end(writer_io, write_sequence(*writer, messages,
                                              [&](std::uint64_t seq) { return message_size(seq, slot); },
                                              sent));
  });
  Status rs = run_to_end(reader_io, read_sequence(*reader, received));
  t.join();
  EXPECT_TRUE(ws.ok()) << ws.to_string();
  EXPECT_EQ(rs.code, ShmErrc::kEndOfRing) << rs.to_string();
  EXPECT_EQ(sent.finish(), received.finish());
}

TEST(ShmHandoff, PeerCredentialsOfASocketpair) {
  Pair p;
  auto cred = peer_credentials(p.a.get());
  ASSERT_TRUE(cred.ok()) << cred.status().to_string();
  EXPECT_EQ(cred->uid, ::geteuid());
  EXPECT_EQ(cred->gid, ::getegid());
  EXPECT_EQ(cred->pid, ::getpid());
  EXPECT_TRUE(check_shm_peer(p.a.get(), {}).ok());
  EXPECT_EQ(check_shm_peer(p.a.get(), {.uid = ::geteuid() + 1}).code, ShmErrc::kPeerRefused);
}

// The handoff travels in a byte stream: the receiver takes exactly the
// handoff message and leaves what follows for the protocol after it.
TEST(ShmHandoff, PassesTheRingOverASocketpair) {
  Pair p;
  auto ring = ShmRing::create({64 * 1024, 8});
  ASSERT_TRUE(ring.ok());
  ASSERT_TRUE(send_shm_ring_blocking(p.a.get(), *ring).ok());
  ASSERT_EQ(::write(p.a.get(), "after", 5), 5);
  auto received = receive_shm_ring_blocking(p.b.get());
  ASSERT_TRUE(received.ok()) << received.status().to_string();
  EXPECT_EQ(received->slot_size(), 64u * 1024);
  EXPECT_EQ(received->slot_count(), 8u);
  char rest[8] = {};
  ASSERT_EQ(::read(p.b.get(), rest, sizeof rest), 5);
  EXPECT_EQ(std::string(rest, 5), "after");
  // Either side may write: here the side that received the ring does.
  expect_transfer(std::move(*received), std::move(*ring), 300);
}

TEST(ShmHandoff, PassesTheRingOverAUnixListenerWithCoroutines) {
  asio::io_context io;
  std::string name(1, '\0');  // abstract namespace: nothing to clean up
  name += "authrpc-shm-test-" + std::to_string(::getpid());
  const Local::endpoint ep(name);
  Local::acceptor acceptor(io, ep);
  Local::socket server_side(io), client_side(io);
  SequenceDigest sent, received;
  Status server_status, client_status;
  std::optional<ShmWriter> writer;
  std::optional<ShmReader> reader;
  constexpr std::uint64_t kMessages = 200;
  asio::co_spawn(io, [&]() -> asio::awaitable<void> {
    server_side = co_await acceptor.async_accept(asio::use_awaitable);
    auto ring = ShmRing::create({128 * 1024, 4});
    if (!ring.ok()) { server_status = ring.status(); co_return; }
    server_status = co_await send_shm_ring(server_side, *ring);
    if (!server_status.ok()) co_return;
    auto w = ShmWriter::open(io.get_executor(), std::move(*ring));
    writer.emplace(std::move(*w));
    server_status = co_await write_sequence(
        *writer, kMessages, [](std::uint64_t seq) { return message_size(seq, 128 * 1024); }, sent);
  }, asio::detached);
  asio::co_spawn(io, [&]() -> asio::awaitable<void> {
    co_await client_side.async_connect(ep, asio::use_awaitable);
    auto ring = co_await receive_shm_ring(client_side);
    if (!ring.ok()) { client_status = ring.status(); co_return; }
    auto r = ShmReader::open(io.get_executor(), std::move(*ring));
    reader.emplace(std::move(*r));
    client_status = co_await read_sequence(*reader, received);
  }, asio::detached);
  io.run();
  EXPECT_TRUE(server_status.ok()) << server_status.to_string();
  EXPECT_EQ(client_status.code, ShmErrc::kEndOfRing) << client_status.to_string();
  const auto a = sent.finish();
  EXPECT_EQ(a.messages, kMessages);
  EXPECT_EQ(a, received.finish());
}

// A peer that connected as another uid gets no shared memory: the sender
// refuses with a typed error before sending anything, and the peer's own
// check refuses us just the same. An explicit policy for that uid admits it.
TEST(ShmHandoff, RefusesAPeerWithOtherCredentials) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to run a peer as another uid (nobody)";
  std::string name(1, '\0');
  name += "authrpc-shm-cred-" + std::to_string(::getpid());
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, name.data(), name.size());
  const auto addr_len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + name.size());
  UniqueFd listener(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  ASSERT_EQ(::bind(listener.get(), reinterpret_cast<sockaddr*>(&addr), addr_len), 0);
  ASSERT_EQ(::listen(listener.get(), 4), 0);

  const pid_t pid = fork_child([&]() -> int {
    listener.reset();
    if (::setgroups(0, nullptr) != 0 || ::setgid(kNobody) != 0 || ::setuid(kNobody) != 0) return 10;
    // 1st connection: refused by the server's default policy (its own uid).
    UniqueFd s(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (::connect(s.get(), reinterpret_cast<sockaddr*>(&addr), addr_len) != 0) return 11;
    auto ours = receive_shm_ring_blocking(s.get());  // we refuse root just the same
    if (ours.code() != ShmErrc::kPeerRefused) return 12;
    char byte;
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 4)];
    iovec iov{&byte, 1};
    msghdr mh{};
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    mh.msg_control = control;
    mh.msg_controllen = sizeof control;
    if (::recvmsg(s.get(), &mh, 0) != 0 || mh.msg_controllen != 0) return 13;  // nothing was sent
    // 2nd connection: the server admits uid nobody explicitly, we admit root.
    UniqueFd s2(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (::connect(s2.get(), reinterpret_cast<sockaddr*>(&addr), addr_len) != 0) return 14;
    auto ring = receive_shm_ring_blocking(s2.get(), {.uid = 0});
    if (!ring.ok()) return 15;
    asio::io_context io;
    auto reader = ShmReader::open(io.get_executor(), std::move(*ring));
    if (!reader.ok()) return 16;
    SequenceDigest digest;
    if (run_to_end(io, read_sequence(*reader, digest)).code != ShmErrc::kEndOfRing) return 17;
    return digest.finish().messages == 10 ? 0 : 18;
  });

  UniqueFd conn(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
  ASSERT_TRUE(conn);
  auto cred = peer_credentials(conn.get());
  ASSERT_TRUE(cred.ok());
  EXPECT_EQ(cred->uid, kNobody);
  auto ring = ShmRing::create({4096, 2});
  ASSERT_TRUE(ring.ok());
  Status refused = send_shm_ring_blocking(conn.get(), *ring);
  EXPECT_EQ(refused.code, ShmErrc::kPeerRefused) << refused.to_string();
  EXPECT_EQ(to_wire_errc(refused.code), Errc::kPermissionDenied);
  EXPECT_EQ(retry_advice(refused.code), RetryAdvice::kGiveUp);
  EXPECT_NE(refused.message.find("65534"), std::string::npos) << refused.message;
  conn.reset();

  UniqueFd conn2(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
  ASSERT_TRUE(conn2);
  // The refused ring never left: its peer descriptors are still here to send.
  Status admitted = send_shm_ring_blocking(conn2.get(), *ring, {.uid = kNobody});
  ASSERT_TRUE(admitted.ok()) << admitted.to_string();
  asio::io_context io;
  auto writer = ShmWriter::open(io.get_executor(), std::move(*ring));
  ASSERT_TRUE(writer.ok());
  SequenceDigest digest;
  Status s = run_to_end(io, write_sequence(*writer, 10, [](std::uint64_t) { return 100; }, digest));
  EXPECT_TRUE(s.ok()) << s.to_string();
  EXPECT_EQ(wait_child(pid), 0);
}

// What a broken or hostile sender could put on the socket. Every descriptor
// that arrives is closed again, whatever the outcome.
struct BadHandoff {
  const char* name;
  std::uint32_t magic = 0x4d485341;
  int fd_count = 4;            // how many descriptors to attach
  bool eventfds_only = false;  // attach four eventfds instead of a ring's
  std::uint32_t claimed_slot_count = 4;
  ShmErrc expected = ShmErrc::kBadHandoff;
};

const BadHandoff kBadHandoffs[] = {
    {.name = "no_descriptors", .fd_count = 0},
    {.name = "too_few_descriptors", .fd_count = 2},
    {.name = "too_many_descriptors", .fd_count = 6},
    {.name = "wrong_magic", .magic = 0x12345678},
    {.name = "wrong_kind_of_descriptors", .eventfds_only = true},
    {.name = "geometry_differs_from_header", .claimed_slot_count = 8, .expected = ShmErrc::kBadGeometry},
};

class ShmHandoffMalformed : public ::testing::TestWithParam<BadHandoff> {};

TEST_P(ShmHandoffMalformed, IsRefusedWithoutLeakingDescriptors) {
  const BadHandoff& c = GetParam();
  const std::size_t fds_before = open_fd_count();
  {
    Pair p;
    auto ring = ShmRing::create({4096, 4});
    ASSERT_TRUE(ring.ok());
    auto peer = ring->take_peer_fds();
    ASSERT_TRUE(peer.ok());
    std::vector<UniqueFd> extra;
    std::vector<int> fds = {peer->memfd.get(), peer->data_ready.get(), peer->space_ready.get(),
                            peer->liveness.get()};
    if (c.eventfds_only) {
      fds.clear();
      for (int i = 0; i < 4; ++i) fds.push_back(extra.emplace_back(::eventfd(0, EFD_CLOEXEC)).get());
    }
    while (static_cast<int>(fds.size()) < c.fd_count) {
      fds.push_back(extra.emplace_back(::eventfd(0, EFD_CLOEXEC)).get());
    }
    fds.resize(static_cast<std::size_t>(c.fd_count));

    unsigned char msg[32] = {};
    const std::uint16_t version = 1, count = 4;
    const std::uint32_t slot_size = 4096;
    const std::uint64_t region = ring->region_size();
    std::memcpy(msg, &c.magic, 4);
    std::memcpy(msg + 4, &version, 2);
    std::memcpy(msg + 6, &count, 2);
    std::memcpy(msg + 8, &slot_size, 4);
    std::memcpy(msg + 12, &c.claimed_slot_count, 4);
    std::memcpy(msg + 16, &region, 8);
    ASSERT_EQ(testing::SendWithRights(p.a.get(), msg, sizeof msg, fds), 32);
    auto received = receive_shm_ring_blocking(p.b.get());
    ASSERT_FALSE(received.ok());
    EXPECT_EQ(received.code(), c.expected) << received.status().to_string();
    EXPECT_EQ(to_wire_errc(received.code()), Errc::kProtocolError);
  }
  EXPECT_EQ(open_fd_count(), fds_before);
}

INSTANTIATE_TEST_SUITE_P(Cases, ShmHandoffMalformed, ::testing::ValuesIn(kBadHandoffs),
                         [](const auto& p) { return std::string(p.param.name); });

TEST(ShmHandoff, PeerClosingMidHandoffIsAnError) {
  Pair p;
  ASSERT_EQ(::write(p.a.get(), "ASHM", 4), 4);
  p.a.reset();
  auto received = receive_shm_ring_blocking(p.b.get());
  EXPECT_EQ(received.code(), Errc::kConnectionClosed) << received.status().to_string();
}

// Only a Unix socket can carry descriptors and report its peer: anything
// else is kUnsupported, and the caller stays on the socket it has.
TEST(ShmHandoff, RefusesSocketsThatCannotCarryIt) {
  int pipe_fds[2];
  ASSERT_EQ(::pipe2(pipe_fds, O_CLOEXEC), 0);
  UniqueFd r(pipe_fds[0]), w(pipe_fds[1]);
  UniqueFd tcp(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  auto ring = ShmRing::create({4096, 2});
  ASSERT_TRUE(ring.ok());
  for (int fd : {r.get(), tcp.get()}) {
    EXPECT_EQ(peer_credentials(fd).code(), ShmErrc::kUnsupported);
    Status s = send_shm_ring_blocking(fd, *ring);
    EXPECT_EQ(s.code, ShmErrc::kUnsupported) << s.to_string();
    EXPECT_EQ(to_wire_errc(s.code), Errc::kUnimplemented);
    EXPECT_EQ(receive_shm_ring_blocking(fd).code(), ShmErrc::kUnsupported);
  }
}

}  // namespace
}  // namespace authrpc
