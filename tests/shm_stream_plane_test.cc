// Streaming calls over the shared-memory data plane (rpc/shm_link.h,
// rpc/shm_stream_plane.h, docs/SHM.md "Integration"): a real Server and
// Client on an abstract Unix socket. Byte-exact get and put through the ring (SHA-256 on both ends,
// in-place slots and messages spanning slots), fallback to the socket when
// either side disables shared memory, refusal for a peer running as another
// uid (a forked child that setuid()s to nobody), a peer process vanishing
// mid-stream on either side, a slow consumer bounding the writer by the
// ring, a first write racing the stream's end, and a client's failed ring
// read cancelling the call. streaming_test runs its whole suite over shm as well ("shm").
#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <poll.h>
#include <pwd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <asio/redirect_error.hpp>
#include <asio/steady_timer.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/use_future.hpp>
#include <atomic>
#include <chrono>
#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "authrpc/auth/mechanisms/simple/simple.h"
#include "authrpc/base/log.h"
#include "authrpc/client/client.h"
#include "authrpc/client/client_runtime.h"
#include "authrpc/rpc/messages.h"
#include "authrpc/rpc/shm_errors.h"
#include "authrpc/rpc/shm_ring.h"
#include "authrpc/rpc/shm_stream_plane.h"
#include "authrpc/rpc/wire.h"
#include "authrpc/server/server.h"
#include "authrpc/server/service.h"
#include "tests/testing/child_process.h"
#include "tests/testing/stream_data.h"
#include "tests/testing/test_server.h"

namespace authrpc {
namespace {

using namespace std::chrono_literals;
using testing::Pattern;
using testing::ReadToEnd;
using testing::PatternByte;
using testing::Sha256;
using testing::Sleep;

// What the handlers saw.
struct Seen {
  std::atomic<std::uint64_t> written{0};  // get: messages committed so far
  std::atomic<bool> put_over_shm{false};
  std::atomic<std::uint64_t> put_messages{0};  // put: messages the handler has read
  std::atomic<bool> get_over_shm{false};
  std::mutex mu;
  Status get_end;  // get: the status the handler ended with
  std::promise<void> get_done;
  bool get_done_set = false;
  std::promise<Status> put_end;  // put_until_end: how the handler's reads ended
  // write_racing_return: whether the handler's writer was still waiting
  // when the handler returned, and how its write ended (under mu).
  bool race_waiting = false;
  std::optional<Status> race_write;
};

// get "<total> <batch> <seed>": pattern bytes, filled in place in the slot
// the stream hands out (acquire); returns the SHA-256.
// put: reads every message in place; returns "<bytes> <sha256>".
Service BulkService(std::shared_ptr<Seen> seen) {
  Service bulk("bulk");
  bulk.add_stream("get", [seen](CallContext&, ServerStream& s) -> asio::awaitable<Result<std::string>> {
    unsigned long total = 0, batch = 0, seed = 0;
    std::sscanf(std::string(s.request()).c_str(), "%lu %lu %lu", &total, &batch, &seed);
    Sha256 sha;
    Status end;
    for (std::uint64_t sent = 0; sent < total;) {
      const std::size_t n = std::min<std::uint64_t>(batch, total - sent);
      auto p = co_await s.acquire(n);
      if (!p.ok()) {
        end = p.status();
        break;
      }
      Pattern(seed, sent, p->mutable_data(), n);
      sha.Update(p->view());
      if (Status st = co_await s.write(std::move(*p)); !st.ok()) {
        end = st;
        break;
      }
      seen->get_over_shm = s.shm_writing();
      ++seen->written;
      sent += n;
    }
    {
      std::lock_guard lock(seen->mu);
      seen->get_end = end;
      if (!seen->get_done_set) {
        seen->get_done_set = true;
        seen->get_done.set_value();
      }
    }
    if (!end.ok()) co_return end;
    co_return sha.Hex();
  });
  bulk.add_stream("put", [seen](CallContext&, ServerStream& s) -> asio::awaitable<Result<std::string>> {
    Sha256 sha;
    std::uint64_t bytes = 0;
    for (;;) {
      auto m = co_await s.read();
      if (!m.ok()) co_return m.status();
      if (!*m) break;
      sha.Update((*m)->view());
      bytes += (*m)->size();
      ++seen->put_messages;
    }
    seen->put_over_shm = s.shm_reading();
    co_return std::to_string(bytes) + " " + sha.Hex();
  });
  // Takes one message, then fails the call.
  bulk.add_stream("put_fail", [](CallContext&, ServerStream& s) -> asio::awaitable<Result<std::string>> {
    auto m = co_await s.read();
    if (!m.ok()) co_return m.status();
    co_return Status(Errc::kDataLoss, "disk on fire");
  });
  // "<n> <error|throw>": n messages of 64 KiB filled in place (pattern seed
  // n), then a slot acquired and never committed, then the handler fails:
  // returns kDataLoss or throws.
  bulk.add_stream("fail_holding_slot", [](CallContext&, ServerStream& s) -> asio::awaitable<Result<std::string>> {
    unsigned long n = 0;
    char mode[16] = {};
    std::sscanf(std::string(s.request()).c_str(), "%lu %15s", &n, mode);
    constexpr std::size_t kSize = 64 << 10;
    for (std::uint64_t i = 0; i < n; ++i) {
      auto p = co_await s.acquire(kSize);
      if (!p.ok()) co_return p.status();
      Pattern(n, i * kSize, p->mutable_data(), kSize);
      if (Status st = co_await s.write(std::move(*p)); !st.ok()) co_return st;
    }
    auto held = co_await s.acquire(kSize);
    if (!held.ok()) co_return held.status();
    std::memset(held->mutable_data(), 'x', kSize);
    if (std::string_view(mode) == "throw") throw std::runtime_error("disk on fire");
    co_return Status(Errc::kDataLoss, "disk on fire");
  });
  // Reads until the end or a failure and reports which (Seen::put_end).
  bulk.add_stream("put_until_end", [seen](CallContext&, ServerStream& s) -> asio::awaitable<Result<std::string>> {
    const Status end = (co_await ReadToEnd(s)).end;
    seen->put_end.set_value(end);
    if (!end.ok()) co_return end;
    co_return std::string("ended");
  });
  // Starts a writer of one message beside the handler, which returns at
  // once (the ServerStream copy keeps the call's stream alive).
  bulk.add_stream("write_racing_return", [seen](CallContext&, ServerStream& s) -> asio::awaitable<Result<std::string>> {
    auto ex = co_await asio::this_coro::executor;
    auto done = std::make_shared<bool>(false);
    asio::co_spawn(ex, [copy = s, seen, done]() mutable -> asio::awaitable<void> {
      Status st = co_await copy.write(std::string_view("hello from the handler"));
      *done = true;
      std::lock_guard lock(seen->mu);
      seen->race_write = st;
    }, asio::detached);
    co_await asio::post(ex, asio::use_awaitable);
    co_await asio::post(ex, asio::use_awaitable);
    {
      std::lock_guard lock(seen->mu);
      seen->race_waiting = !*done;
    }
    co_return std::string("returned");
  });
  return bulk;
}

std::string UniqueSocket(const char* what) {
  static std::atomic<int> n{0};
  return "unix:@authrpc-shm-stream-" + std::string(what) + "-" + std::to_string(::getpid()) + "-" +
         std::to_string(n++);
}

std::unique_ptr<testing::TestServer> StartServer(const std::string& uri, bool shm,
                                                 std::shared_ptr<Seen> seen,
                                                 std::uint32_t slot_count = 16) {
  auto server = std::make_unique<testing::TestServer>();
  server->endpoint(uri).service(BulkService(std::move(seen))).options([shm, slot_count](ServerOptions& o) {
    o.shm.enabled = shm;
    o.shm.ring.slot_count = slot_count;
  });
  const Status s = server->start();
  EXPECT_TRUE(s.ok()) << s.to_string();
  return server;
}

ClientOptions ClientFor(const Endpoint& endpoint, bool shm) {
  ClientOptions o;
  o.endpoint = endpoint;
  o.mechanisms = {std::make_shared<SimpleClientMechanism>("alice")};
  o.connect_timeout = 5s;
  o.shm.enabled = shm;
  return o;
}

// A server on a fresh abstract socket (BulkService, recording into `seen`)
// and a client of it; shared memory on both sides unless turned off.
struct ShmCall {
  explicit ShmCall(const char* what, bool server_shm = true, bool client_shm = true,
                   std::uint32_t slot_count = 16)
      : server(StartServer(UniqueSocket(what), server_shm, seen, slot_count)),
        client(Client::connect(runtime, ClientFor(server->endpoints().front(), client_shm))) {}

  std::shared_ptr<Seen> seen = std::make_shared<Seen>();
  std::unique_ptr<testing::TestServer> server;
  ClientRuntime runtime{1};
  Result<std::unique_ptr<Client>> client;
};

template <typename F>
void RunOn(Client& client, F body) {
  auto done = asio::co_spawn(client.executor(), std::function<asio::awaitable<void>()>(body),
                             asio::use_future);
  ASSERT_EQ(done.wait_for(60s), std::future_status::ready);
  done.get();
}

struct GetOutcome {
  std::uint64_t bytes = 0;
  bool exact = true;
  bool over_shm = false;
  Status read_status;
  std::string sha_hex;
  Result<std::string> final = Status(Errc::kInternal, "not finished");
};

// Reads a whole get and checks each byte; `per_message` runs before each read.
asio::awaitable<GetOutcome> DoGet(Client& client, std::uint64_t total, std::size_t batch,
                                  std::uint64_t seed,
                                  std::function<asio::awaitable<void>(std::uint64_t)> per_message = {}) {
  GetOutcome out;
  auto stream = co_await client.async_open_stream(
      "bulk", "get", std::to_string(total) + " " + std::to_string(batch) + " " + std::to_string(seed));
  if (!stream.ok()) {
    out.read_status = stream.status();
    co_return out;
  }
  Sha256 sha;
  std::uint64_t messages = 0;
  for (;;) {
    if (per_message) co_await per_message(messages);
    auto m = co_await (*stream)->read();
    if (!m.ok()) {
      out.read_status = m.status();
      co_return out;
    }
    if (!*m) break;
    const Payload& p = **m;
    for (std::size_t i = 0; i < p.size() && out.exact; ++i) {
      out.exact = p.data()[i] == PatternByte(seed, out.bytes + i);
    }
    sha.Update(p.view());
    out.bytes += p.size();
    ++messages;
    out.over_shm = (*stream)->shm_reading();
  }
  out.sha_hex = sha.Hex();
  out.final = co_await (*stream)->finish();
  co_return out;
}

TEST(ShmStreamTest, GetOverShmIsByteExact) {
  ShmCall t("get");
  ASSERT_TRUE(t.client.ok()) << t.client.status().to_string();
  struct Case {
    std::uint64_t total;
    std::size_t batch;
  };
  // One slot per message (in place), small messages, messages spanning
  // several slots (assembled by the reader), an odd total, nothing at all.
  const std::vector<Case> cases = {{8 << 20, 128 << 10}, {100'000, 1000}, {3 << 20, 300 << 10},
                                   {1'000'003, 65'536}, {0, 1024}};
  for (const auto& c : cases) {
    SCOPED_TRACE(std::to_string(c.total) + " bytes in " + std::to_string(c.batch));
    RunOn(**t.client, [&]() -> asio::awaitable<void> {
      GetOutcome g = co_await DoGet(**t.client, c.total, c.batch, c.total ^ c.batch);
      EXPECT_TRUE(g.read_status.ok()) << g.read_status.to_string();
      EXPECT_EQ(g.bytes, c.total);
      EXPECT_TRUE(g.exact);
      EXPECT_TRUE(g.final.ok()) << g.final.status().to_string();
      if (g.final.ok()) {
        EXPECT_EQ(*g.final, g.sha_hex);
      }
      if (c.total > 0) {
        EXPECT_TRUE(g.over_shm);
      }
    });
  }
  EXPECT_TRUE(t.seen->get_over_shm.load());
  t.server->stop();
}

TEST(ShmStreamTest, PutOverShmIsByteExact) {
  ShmCall t("put");
  ASSERT_TRUE(t.client.ok()) << t.client.status().to_string();
  RunOn(**t.client, [&]() -> asio::awaitable<void> {
    auto stream = co_await (*t.client)->async_open_stream("bulk", "put", "");
    EXPECT_TRUE(stream.ok()) << stream.status().to_string();
    if (!stream.ok()) co_return;
    Sha256 sha;
    std::uint64_t sent = 0;
    std::string copy_buffer(200 << 10, '\0');
    // In-place slots, copied views of one slot, and views spanning slots.
    for (int i = 0; i < 48; ++i) {
      Status s;
      if (i % 3 == 0) {
        auto p = co_await (*stream)->acquire(128 << 10);
        EXPECT_TRUE(p.ok()) << p.status().to_string();
        if (!p.ok()) co_return;
        Pattern(7, sent, p->mutable_data(), p->size());
        sha.Update(p->view());
        sent += p->size();
        s = co_await (*stream)->write(std::move(*p));
      } else {
        const std::size_t n = i % 3 == 1 ? 4096 + i : copy_buffer.size();
        Pattern(7, sent, copy_buffer.data(), n);
        sha.Update(std::string_view(copy_buffer.data(), n));
        sent += n;
        s = co_await (*stream)->write(std::string_view(copy_buffer.data(), n));
      }
      EXPECT_TRUE(s.ok()) << s.to_string();
    }
    EXPECT_TRUE((*stream)->shm_writing());
    auto final = co_await (*stream)->finish();
    EXPECT_TRUE(final.ok()) << final.status().to_string();
    if (final.ok()) {
      EXPECT_EQ(*final, std::to_string(sent) + " " + sha.Hex());
    }
  });
  EXPECT_TRUE(t.seen->put_over_shm.load());
  t.server->stop();
}

TEST(ShmStreamTest, ServerFailingAPutStopsTheWriterWithItsStatus) {
  ShmCall t("put-fail", true, true, 4);
  ASSERT_TRUE(t.client.ok()) << t.client.status().to_string();
  RunOn(**t.client, [&]() -> asio::awaitable<void> {
    auto stream = co_await (*t.client)->async_open_stream("bulk", "put_fail", "");
    EXPECT_TRUE(stream.ok()) << stream.status().to_string();
    if (!stream.ok()) co_return;
    const std::string batch(128 << 10, 'f');
    Status failed;
    // Far more than the ring holds: the writer must be stopped, not hang.
    for (int i = 0; i < 64 && failed.ok(); ++i) failed = co_await (*stream)->write(batch);
    EXPECT_EQ(failed.code, make_error_code(Errc::kDataLoss)) << failed.to_string();
    auto final = co_await (*stream)->finish();
    EXPECT_EQ(final.status().code, make_error_code(Errc::kDataLoss)) << final.status().to_string();
  });
  // The connection still serves.
  RunOn(**t.client, [&]() -> asio::awaitable<void> {
    GetOutcome g = co_await DoGet(**t.client, 1 << 20, 128 << 10, 8);
    EXPECT_TRUE(g.final.ok());
    EXPECT_TRUE(g.exact);
    EXPECT_TRUE(g.over_shm);
  });
  t.server->stop();
}

TEST(ShmStreamTest, FallsBackToTheSocketWhenEitherSideDisablesShm) {
  struct Case {
    const char* name;
    bool server_shm;
    bool client_shm;
    bool expect_shm;
  };
  const std::vector<Case> cases = {{"both", true, true, true},
                                   {"server_off", false, true, false},
                                   {"client_off", true, false, false},
                                   {"both_off", false, false, false}};
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    ShmCall t(c.name, c.server_shm, c.client_shm);
    ASSERT_TRUE(t.client.ok()) << t.client.status().to_string();
    RunOn(**t.client, [&]() -> asio::awaitable<void> {
      GetOutcome g = co_await DoGet(**t.client, 2 << 20, 128 << 10, 11);
      EXPECT_TRUE(g.read_status.ok()) << g.read_status.to_string();
      EXPECT_EQ(g.bytes, 2u << 20);
      EXPECT_TRUE(g.exact);
      EXPECT_TRUE(g.final.ok());
      EXPECT_EQ(g.over_shm, c.expect_shm);
    });
    EXPECT_EQ(t.seen->get_over_shm.load(), c.expect_shm);
    t.client->reset();
    t.server->stop();
  }
}

// Runs `child` in a forked process (before this test starts any thread)
// and returns its pid; the child gets the server's endpoint on a pipe.
pid_t ForkChild(int& endpoint_pipe, std::function<int(const Endpoint&)> child) {
  int fds[2];
  if (::pipe(fds) != 0) return -1;
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[1]);
    char buf[256] = {};
    std::size_t got = 0;
    while (got < sizeof buf - 1) {
      const ssize_t n = ::read(fds[0], buf + got, sizeof buf - 1 - got);
      if (n <= 0) break;
      got += static_cast<std::size_t>(n);
    }
    auto endpoint = Endpoint::parse(std::string(buf, got));
    ::_exit(endpoint.ok() ? child(*endpoint) : 90);
  }
  ::close(fds[0]);
  endpoint_pipe = fds[1];
  return pid;
}

void SendEndpoint(int pipe, const Endpoint& endpoint) {
  const std::string s = endpoint.to_string();
  ASSERT_EQ(::write(pipe, s.data(), s.size()), static_cast<ssize_t>(s.size()));
  ::close(pipe);
}

int WaitChild(pid_t pid) {
  int status = 0;
  if (::waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

TEST(ShmStreamTest, PeerWithOtherCredentialsIsRefusedAndFallsBack) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to run a client as another uid (nobody)";
  const passwd* nobody = ::getpwnam("nobody");
  if (nobody == nullptr) GTEST_SKIP() << "no user 'nobody' here";
  const uid_t uid = nobody->pw_uid;
  const gid_t gid = nobody->pw_gid;
  int pipe = -1;
  // The child connects as nobody, trusting a server run by root (so that
  // it offers shared memory): the server's policy (same uid) must refuse.
  // Exit codes: 0 ok over the socket, 10+ failures.
  const pid_t pid = ForkChild(pipe, [uid, gid](const Endpoint& endpoint) -> int {
    if (::setgid(gid) != 0 || ::setuid(uid) != 0) return 10;
    ClientRuntime runtime(1);
    ClientOptions o = ClientFor(endpoint, true);
    o.shm.peer.uid = 0;
    auto client = Client::connect(runtime, std::move(o));
    if (!client.ok()) return 11;
    GetOutcome g;
    auto done = asio::co_spawn((*client)->executor(),
                               [&]() -> asio::awaitable<void> { g = co_await DoGet(**client, 1 << 20, 128 << 10, 5); },
                               asio::use_future);
    if (done.wait_for(30s) != std::future_status::ready) return 12;
    if (!g.read_status.ok() || !g.final.ok()) return 13;
    if (g.bytes != (1u << 20) || !g.exact) return 14;
    if (g.over_shm) return 15;
    return 0;
  });
  ASSERT_GT(pid, 0);
  auto seen = std::make_shared<Seen>();
  auto server = StartServer(UniqueSocket("refuse"), true, seen);
  SendEndpoint(pipe, server->endpoints().front());
  EXPECT_EQ(WaitChild(pid), 0) << "10 setuid, 11 connect, 12 hang, 13 failed, 14 bytes, 15 shm used";
  EXPECT_FALSE(seen->get_over_shm.load());
  server->stop();
}

TEST(ShmStreamTest, ClientVanishingMidStreamLeavesTheServerServing) {
  int pipe = -1;
  // The child reads a few messages of a long get over shm, then exits
  // without a word.
  const pid_t pid = ForkChild(pipe, [](const Endpoint& endpoint) -> int {
    ClientRuntime runtime(1);
    auto client = Client::connect(runtime, ClientFor(endpoint, true));
    if (!client.ok()) return 11;
    auto done = asio::co_spawn(
        (*client)->executor(),
        [&]() -> asio::awaitable<int> {
          auto stream = co_await (*client)->async_open_stream("bulk", "get", "1073741824 131072 3");
          if (!stream.ok()) co_return 12;
          for (int i = 0; i < 4; ++i) {
            auto m = co_await (*stream)->read();
            if (!m.ok() || !*m) co_return 13;
          }
          co_return (*stream)->shm_reading() ? 0 : 14;
        },
        asio::use_future);
    if (done.wait_for(30s) != std::future_status::ready) return 15;
    ::_exit(done.get());  // no goodbye: the ring and the socket just go away
  });
  ASSERT_GT(pid, 0);
  auto seen = std::make_shared<Seen>();
  auto server = StartServer(UniqueSocket("vanish"), true, seen, 4);
  SendEndpoint(pipe, server->endpoints().front());
  EXPECT_EQ(WaitChild(pid), 0);
  ASSERT_EQ(seen->get_done.get_future().wait_for(30s), std::future_status::ready);
  {
    std::lock_guard lock(seen->mu);
    // Typed: the ring's peer is gone, or the connection ended first.
    const Status& s = seen->get_end;
    EXPECT_TRUE(s.code == ShmErrc::kPeerGone || s.code == Errc::kCancelled ||
                s.code == Errc::kConnectionClosed)
        << s.to_string();
  }
  // The server goes on serving, over shm.
  ClientRuntime runtime(1);
  auto client = Client::connect(runtime, ClientFor(server->endpoints().front(), true));
  ASSERT_TRUE(client.ok()) << client.status().to_string();
  RunOn(**client, [&]() -> asio::awaitable<void> {
    GetOutcome g = co_await DoGet(**client, 1 << 20, 128 << 10, 9);
    EXPECT_TRUE(g.final.ok());
    EXPECT_EQ(g.bytes, 1u << 20);
    EXPECT_TRUE(g.exact);
    EXPECT_TRUE(g.over_shm);
  });
  server->stop();
}

TEST(ShmStreamTest, ServerVanishingMidStreamIsTyped) {
  // The child runs the server and tells us its endpoint; we kill it mid-get.
  const testing::ToldChild child = testing::ForkTelling([](const auto& tell) -> int {
    auto seen = std::make_shared<Seen>();
    auto server = StartServer(UniqueSocket("server-vanish"), true, seen);
    tell(server->endpoints().front().to_string());
    for (;;) ::pause();
  });
  const pid_t pid = child.pid;
  ASSERT_GT(pid, 0);
  auto endpoint = Endpoint::parse(child.told);
  ASSERT_TRUE(endpoint.ok());
  ClientRuntime runtime(1);
  auto client = Client::connect(runtime, ClientFor(*endpoint, true));
  ASSERT_TRUE(client.ok()) << client.status().to_string();
  RunOn(**client, [&]() -> asio::awaitable<void> {
    GetOutcome g = co_await DoGet(**client, 1ull << 30, 128 << 10, 4,
                                  [pid](std::uint64_t n) -> asio::awaitable<void> {
                                    if (n == 8) ::kill(pid, SIGKILL);
                                    co_return;
                                  });
    EXPECT_TRUE(g.over_shm);
    EXPECT_TRUE(g.exact);
    EXPECT_LT(g.bytes, 1ull << 30);
    const Status& s = g.read_status;
    EXPECT_TRUE(s.code == ShmErrc::kPeerGone || s.code == Errc::kConnectionClosed ||
                s.code == Errc::kCancelled)
        << s.to_string();
  });
  EXPECT_EQ(WaitChild(pid), 128 + SIGKILL);
}

TEST(ShmStreamTest, SlowConsumerIsBoundedByTheRing) {
  constexpr std::uint32_t kSlots = 4;
  ShmCall t("slow", true, true, kSlots);
  ASSERT_TRUE(t.client.ok()) << t.client.status().to_string();
  std::uint64_t max_ahead = 0;
  RunOn(**t.client, [&]() -> asio::awaitable<void> {
    GetOutcome g = co_await DoGet(**t.client, 64 * (128 << 10), 128 << 10, 2,
                                  [&](std::uint64_t read) -> asio::awaitable<void> {
                                    if (read < 12) co_await Sleep(20ms);  // the writer runs ahead
                                    const std::uint64_t written = t.seen->written.load();
                                    max_ahead = std::max(max_ahead, written - std::min(written, read));
                                  });
    EXPECT_TRUE(g.final.ok());
    EXPECT_TRUE(g.exact);
    EXPECT_TRUE(g.over_shm);
  });
  // The writer got ahead (it was not stalled by something else), and never
  // by more than the ring's slots: nothing else buffered the messages.
  EXPECT_GE(max_ahead, kSlots - 1);
  EXPECT_LE(max_ahead, kSlots);
  t.server->stop();
}


// ---------------------------------------------------------------- a peer speaking raw frames
//
// The reference server and client always close a ring's writing side before
// the frame that ends its direction (RESPONSE, END_STREAM). Another
// implementation, or a writer that breaks, may not: these tests play such a
// peer with raw frames on a real Unix socket and a real ring, so that the
// side under test has only the socket to learn that nothing more will come.

// A blocking Unix socket that speaks frames (testing::RawConnection); every
// read is bounded in time.
class RawShmPeer : public testing::RawConnection {
 public:
  explicit RawShmPeer(int fd) : RawConnection(AdoptFd{fd}) {}

  // An abstract Unix socket listening as `name` (without the '@').
  static int Listen(const std::string& name) {
    return OnAbstractName(name, [](int fd, const sockaddr* addr, socklen_t len) {
      return ::bind(fd, addr, len) == 0 && ::listen(fd, 4) == 0;
    });
  }
  static int Connect(const std::string& name) {
    return OnAbstractName(name, [](int fd, const sockaddr* addr, socklen_t len) {
      return ::connect(fd, addr, len) == 0;
    });
  }
  // Accepts one connection on `listener` within `timeout`; -1 if none came.
  static int Accept(int listener, std::chrono::milliseconds timeout) {
    pollfd p{listener, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(timeout.count())) != 1) return -1;
    return ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
  }

  // The next frame of `type`, skipping others (credit, pings); nullopt at
  // the end of the stream, an error, a timeout or a bad header.
  std::optional<testing::RawFrame> ReadUntil(wire::FrameType type, std::chrono::milliseconds timeout = 10s) {
    for (;;) {
      auto f = ReadFrame(timeout);
      if (!f || f->type == type) return f;
    }
  }

  // Plays the server up to a stream: reads the preamble and HELLO, answers
  // AUTH_SUCCESS (simple, alice) and SHM_ACCEPT, reads the STREAM_REQUEST
  // (its id into `id`) and grants a 1 MiB window. "" or what went wrong.
  std::string ServeShmStream(std::uint32_t& id) {
    std::string preamble;
    if (!ReadExact(preamble, wire::kPreambleSize, 10s)) return "no preamble";
    if (!ReadUntil(wire::FrameType::kHello)) return "no HELLO";
    std::string out;
    wire::append_auth_success(out, {wire::kFeatureStreams | wire::kFeatureShm, "", "alice"});
    if (!Send(out)) return "AUTH_SUCCESS not sent";
    if (!ReadUntil(wire::FrameType::kShmHello)) return "no SHM_HELLO";
    out.assign(wire::kFrameHeaderSize, '\0');
    wire::write_frame_header(reinterpret_cast<std::uint8_t*>(out.data()),
                             wire::FrameType::kShmAccept, 0, 8);
    wire::Writer(out).u32(0);
    wire::Writer(out).u32(0);
    if (!Send(out)) return "SHM_ACCEPT not sent";
    auto request = ReadUntil(wire::FrameType::kStreamRequest);
    if (!request) return "no STREAM_REQUEST";
    id = request->call_id;
    out.clear();
    wire::append_window_update(out, id, 1 << 20);
    if (!Send(out)) return "WINDOW_UPDATE not sent";
    return "";
  }

  // Creates a ring, sends SHM_RING for `call_id` with its descriptors, and
  // opens the writing side on `ex` (never run: the liveness watch stays
  // armed, so the ring's end is never seen through it while the writer lives).
  std::optional<ShmWriter> SendRing(std::uint32_t call_id, const asio::any_io_executor& ex) {
    auto ring = ShmRing::create({});
    if (!ring.ok() || !send_shm_ring(fd(), call_id, *ring).ok()) return std::nullopt;
    auto writer = ShmWriter::open(ex, std::move(*ring));
    if (!writer.ok()) return std::nullopt;
    return std::move(*writer);
  }

 private:
  // A new Unix socket on which `use` (bind and listen, or connect) took the
  // abstract address `name`; -1 if that failed.
  template <typename Use>
  static int OnAbstractName(const std::string& name, Use use) {
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path + 1, name.data(), name.size());
    const auto len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
    if (fd >= 0 && !use(fd, reinterpret_cast<const sockaddr*>(&addr), len)) {
      ::close(fd);
      return -1;
    }
    return fd;
  }
};

// Commits `message` as the reference writer does: one slot if it fits,
// else consecutive full slots, each tagged with the whole length. The ring
// must have room (these tests send less than it holds).
bool CommitMessage(ShmWriter& writer, std::string_view message) {
  std::size_t at = 0;
  do {
    auto slot = writer.try_acquire();
    if (!slot.ok()) return false;
    const std::size_t n = std::min(message.size() - at, slot->size());
    if (n > 0) std::memcpy(slot->data(), message.data() + at, n);
    if (!writer.commit(n, static_cast<std::uint32_t>(message.size())).ok()) return false;
    at += n;
  } while (at < message.size());
  return true;
}

// Messages of every shape the ring carries: small, exactly one slot (128 KiB),
// empty, spanning three slots; 8 of the ring's 16 slots in all.
std::vector<std::string> RingMessages(std::uint64_t seed) {
  const std::vector<std::size_t> sizes = {1000, 128 << 10, 5, 0, 300'000, 77'777};
  std::vector<std::string> out;
  std::uint64_t offset = 0;
  for (std::size_t n : sizes) {
    std::string m(n, '\0');
    Pattern(seed, offset, m.data(), n);
    offset += n;
    out.push_back(std::move(m));
  }
  return out;
}

std::string RawSocketName(const char* what) {
  static std::atomic<int> n{0};
  return "authrpc-shm-raw-" + std::string(what) + "-" + std::to_string(::getpid()) + "-" +
         std::to_string(n++);
}

// One call of a real Client against a fake server on the abstract socket
// `name`: `serve` plays the server on its own thread once it has accepted
// the connection and served a stream (its id given), and returns "" or what
// went wrong; `call` is the client's side. `serve` may wait (up to 30 s)
// for the client to be done, keeping its ring and the socket until then:
// `client_done()` is false if the client never was.
using RawServe = std::function<std::string(RawShmPeer& peer, std::uint32_t id,
                                           const std::function<bool()>& client_done)>;
void RunAgainstRawServer(const std::string& name, const RawServe& serve,
                         const std::function<asio::awaitable<void>(Client&)>& call) {
  const int listener = RawShmPeer::Listen(name);
  ASSERT_GE(listener, 0);
  std::promise<void> done;
  auto done_future = done.get_future().share();
  auto server = std::async(std::launch::async, [&]() -> std::string {
    RawShmPeer peer(RawShmPeer::Accept(listener, 10s));
    std::uint32_t id = 0;
    if (std::string failed = peer.ServeShmStream(id); !failed.empty()) return failed;
    return serve(peer, id, [&] { return done_future.wait_for(30s) == std::future_status::ready; });
  });
  ClientRuntime runtime(1);
  auto client = Client::connect(runtime, ClientFor(*Endpoint::parse("unix:@" + name), true));
  EXPECT_TRUE(client.ok()) << client.status().to_string();
  if (client.ok()) RunOn(**client, [&] { return call(**client); });
  done.set_value();
  EXPECT_EQ(server.get(), "");
  if (client.ok()) client->reset();
  ::close(listener);
}

// A server's messages of a get arrive through a ring whose writer never
// closes it; then the RESPONSE ends the call (an error, or success). The
// client must deliver every message committed before the RESPONSE,
// byte-exact, then the RESPONSE's status — not wait for an end mark that
// never comes (until its deadline: the stream's timeout bounds the test).
TEST(ShmStreamTest, RingLeftOpenByTheServerEndsWithTheResponse) {
  struct Case {
    const char* name;
    Errc status;            // kOk: the call succeeds
    bool close_ring;        // a conforming server closes the ring first
    bool read_after_end;    // the client starts reading once everything was sent
    bool cut_message;       // the writer stops after the first slot of a 3-slot message
  };
  const std::vector<Case> cases = {
      {"error_ring_open", Errc::kDataLoss, false, false, false},
      {"error_ring_open_read_late", Errc::kDataLoss, false, true, false},
      {"ok_ring_open", Errc::kOk, false, false, false},
      {"ok_ring_open_read_late", Errc::kOk, false, true, false},
      {"error_ring_closed", Errc::kDataLoss, true, false, false},
      {"ok_ring_closed", Errc::kOk, true, true, false},
      // A message cut short is lost: the call's error, or (if the server
      // claims success) a corrupted stream — never a hang, never half a message.
      {"error_cut_ring_open", Errc::kDataLoss, false, false, true},
      {"error_cut_ring_closed", Errc::kDataLoss, true, true, true},
      {"ok_cut_ring_open", Errc::kOk, false, true, true},
      {"ok_cut_ring_closed", Errc::kOk, true, false, true},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const auto messages = RingMessages(0x5eed);
    std::atomic<bool> all_sent{false};
    // The fake server: negotiates `simple` and shared memory, accepts one
    // stream, writes the messages into a ring and ends the call, keeping
    // the ring's writer and the socket alive until the client is done.
    auto serve = [&](RawShmPeer& peer, std::uint32_t id,
                     const std::function<bool()>& client_done) -> std::string {
      std::string out;
      asio::io_context io;  // the writer's executor; never run
      auto writer = peer.SendRing(id, io.get_executor());
      if (!writer) return "SHM_RING not sent";
      for (const auto& m : messages) {
        if (!CommitMessage(*writer, m)) return "commit failed";
      }
      if (c.cut_message) {
        auto slot = writer->try_acquire();
        if (!slot.ok()) return "no slot for the cut message";
        std::memset(slot->data(), 'c', slot->size());
        if (!writer->commit(slot->size(), 3 * slot->size()).ok()) return "commit failed";
      }
      if (c.close_ring) writer->close();
      out.clear();
      wire::append_response(out, id, static_cast<std::uint16_t>(c.status),
                            c.status == Errc::kOk ? "" : "disk on fire",
                            c.status == Errc::kOk ? "all sent" : "");
      if (!peer.Send(out)) return "RESPONSE not sent";
      all_sent = true;
      // Until the client has its answer: the ring and the socket stay.
      return client_done() ? "" : "client never done";
    };
    RunAgainstRawServer(RawSocketName(c.name), serve, [&](Client& client) -> asio::awaitable<void> {
      StreamOptions options;
      options.timeout = 10s;  // bounds the read that would wait for the ring's end
      const auto start = std::chrono::steady_clock::now();
      auto stream = co_await client.async_open_stream("bulk", "get", "", options);
      EXPECT_TRUE(stream.ok()) << stream.status().to_string();
      if (!stream.ok()) co_return;
      if (c.read_after_end) {
        while (!all_sent && std::chrono::steady_clock::now() - start < 10s) co_await Sleep(2ms);
      }
      std::size_t got = 0;
      Status end;
      bool ended_ok = false;
      for (;;) {
        auto m = co_await (*stream)->read();
        if (!m.ok()) {
          end = m.status();
          break;
        }
        if (!*m) {
          ended_ok = true;
          break;
        }
        EXPECT_LT(got, messages.size());
        if (got < messages.size()) {
          EXPECT_EQ((*m)->size(), messages[got].size()) << "message " << got;
          EXPECT_TRUE((*m)->view() == messages[got]) << "message " << got << " differs";
        }
        ++got;
      }
      EXPECT_EQ(got, messages.size());  // everything committed before the RESPONSE
      EXPECT_TRUE((*stream)->shm_reading());
      if (c.cut_message && c.status == Errc::kOk) {
        EXPECT_FALSE(ended_ok);
        EXPECT_EQ(end.code, ShmErrc::kCorrupted) << end.to_string();
      } else if (c.status == Errc::kOk) {
        EXPECT_TRUE(ended_ok) << end.to_string();
        auto final = co_await (*stream)->finish();
        EXPECT_TRUE(final.ok()) << final.status().to_string();
        if (final.ok()) {
          EXPECT_EQ(*final, "all sent");
        }
      } else {
        EXPECT_FALSE(ended_ok);
        EXPECT_EQ(end.code, make_error_code(c.status)) << end.to_string();
        EXPECT_NE(end.message.find("disk on fire"), std::string::npos) << end.to_string();
      }
      // Well before the stream's deadline: nothing waited for the ring's end.
      EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
    });
  }
}

// A client whose read of the server's ring fails (here a slot whose
// message length is shorter than the slot's: kCorrupted) fails the call and
// closes its own ring; the server must be told (CANCEL) at once, as for a
// deadline — not left waiting on a drained ring until the call's deadline
// or the connection's end. The fake server checks the CANCEL arrives.
TEST(ShmStreamTest, ClientRingReadFailureCancelsTheCall) {
  for (const bool client_writes : {false, true}) {
    SCOPED_TRACE(client_writes ? "the client wrote through its own ring first" : "read only");
    auto serve = [&](RawShmPeer& peer, std::uint32_t id,
                     const std::function<bool()>& client_done) -> std::string {
      if (client_writes && !peer.ReadUntil(wire::FrameType::kShmRing)) return "no SHM_RING";
      asio::io_context io;  // the writer's executor; never run
      auto writer = peer.SendRing(id, io.get_executor());
      if (!writer) return "SHM_RING not sent";
      auto slot = writer->try_acquire();
      if (!slot.ok()) return "no slot";
      std::memset(slot->data(), 'c', 100);
      if (!writer->commit(100, 50).ok()) return "commit failed";  // 100 bytes of a 50-byte message
      const auto sent = std::chrono::steady_clock::now();
      auto cancel = peer.ReadUntil(wire::FrameType::kCancel, 5s);
      std::string result;
      if (!cancel) {
        result = "no CANCEL";
      } else if (cancel->call_id != id) {
        result = "CANCEL for another call";
      } else if (std::chrono::steady_clock::now() - sent > 2s) {
        result = "CANCEL late";
      }
      client_done();
      return result;
    };
    RunAgainstRawServer(RawSocketName("corrupt"), serve, [&](Client& client) -> asio::awaitable<void> {
      StreamOptions options;
      options.timeout = 20s;  // well beyond the CANCEL's bound
      auto stream = co_await client.async_open_stream("bulk", "get", "", options);
      EXPECT_TRUE(stream.ok()) << stream.status().to_string();
      if (!stream.ok()) co_return;
      if (client_writes) {
        Status w = co_await (*stream)->write(std::string_view("from the client"));
        EXPECT_TRUE(w.ok()) << w.to_string();
        EXPECT_TRUE((*stream)->shm_writing());
      }
      auto m = co_await (*stream)->read();
      EXPECT_FALSE(m.ok());
      if (!m.ok()) {
        EXPECT_EQ(m.status().code, ShmErrc::kCorrupted) << m.status().to_string();
      }
      EXPECT_TRUE((*stream)->shm_reading());
      // Dropping the failed stream adds nothing (it is finished).
      stream->reset();
    });
  }
}

// The other direction: a client's put whose ring is never closed, ended by
// END_STREAM. The server's handler must read every message committed before
// it, then the end (and answer with their size and digest), not wait for
// the ring's end mark until the call's deadline.
TEST(ShmStreamTest, RingLeftOpenByTheClientEndsWithEndStream) {
  auto seen = std::make_shared<Seen>();
  const std::string name = RawSocketName("server");
  auto server = StartServer("unix:@" + name, true, seen);
  const auto messages = RingMessages(0xfeed);
  Sha256 sha;
  std::uint64_t bytes = 0;
  for (const auto& m : messages) {
    sha.Update(m);
    bytes += m.size();
  }
  const std::string expected = std::to_string(bytes) + " " + sha.Hex();
  for (const bool read_late : {false, true}) {
    SCOPED_TRACE(read_late ? "END_STREAM once the handler has read them" : "END_STREAM right behind the messages");
    RawShmPeer peer(RawShmPeer::Connect(name));
    ASSERT_TRUE(peer.SendHello("simple", "alice"));
    auto success = peer.ReadUntil(wire::FrameType::kAuthSuccess);
    ASSERT_TRUE(success);
    std::string out(wire::kFrameHeaderSize, '\0');
    wire::write_frame_header(reinterpret_cast<std::uint8_t*>(out.data()), wire::FrameType::kShmHello,
                             0, 0);
    ASSERT_TRUE(peer.Send(out));
    auto accept = peer.ReadUntil(wire::FrameType::kShmAccept);
    ASSERT_TRUE(accept);
    ASSERT_EQ(accept->body.substr(0, 4), std::string(4, '\0'));  // accepted
    out.clear();
    wire::append_stream_request(out, 1, {"bulk", "put", 10'000, 1 << 20}, "");
    ASSERT_TRUE(peer.Send(out));
    ASSERT_TRUE(peer.ReadUntil(wire::FrameType::kWindowUpdate));  // the call runs
    asio::io_context io;  // the writer's executor; never run
    auto writer = peer.SendRing(1, io.get_executor());
    ASSERT_TRUE(writer);
    const auto start = std::chrono::steady_clock::now();
    for (const auto& m : messages) ASSERT_TRUE(CommitMessage(*writer, m));
    // Late: END_STREAM comes once the handler has read every message and
    // waits on the empty ring. Early: it comes right behind the messages,
    // usually before the handler has read them.
    if (read_late) {
      while (seen->put_messages.load() < messages.size() &&
             std::chrono::steady_clock::now() - start < 10s) {
        std::this_thread::sleep_for(1ms);
      }
      EXPECT_EQ(seen->put_messages.load(), messages.size());
    }
    out.clear();
    wire::append_end_stream(out, 1);
    ASSERT_TRUE(peer.Send(out));
    auto response = peer.ReadUntil(wire::FrameType::kResponse, 15s);
    ASSERT_TRUE(response);
    std::string_view payload;
    auto header = wire::parse_response(response->body, payload);
    ASSERT_TRUE(header.ok());
    EXPECT_EQ(header->status, 0) << header->error_message;
    EXPECT_EQ(payload, expected);
    EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
    EXPECT_TRUE(seen->put_over_shm.load());
    seen->put_over_shm = false;
    seen->put_messages = 0;
  }
  server->stop();
}


// A handler that fails while it holds a ring slot it never committed (by
// returning an error, or by throwing): the framework ends its ring before
// the RESPONSE, and the client gets every message the handler wrote,
// byte-exact, then the typed error, well before the stream's deadline.
TEST(ShmStreamTest, HandlerFailingWithASlotInHandIsTyped) {
  ShmCall t("fail-holding");
  ASSERT_TRUE(t.client.ok()) << t.client.status().to_string();
  struct Case {
    const char* mode;
    Errc code;
    const char* message;
  };
  const std::vector<Case> cases = {{"error", Errc::kDataLoss, "disk on fire"},
                                   {"throw", Errc::kInternal, "the handler failed (call "}};
  for (const auto& c : cases) {
    SCOPED_TRACE(c.mode);
    RunOn(**t.client, [&]() -> asio::awaitable<void> {
      constexpr std::uint64_t kMessages = 5;
      constexpr std::size_t kSize = 64 << 10;
      StreamOptions options;
      options.timeout = 10s;
      const auto start = std::chrono::steady_clock::now();
      auto stream = co_await (*t.client)->async_open_stream(
          "bulk", "fail_holding_slot", std::to_string(kMessages) + " " + c.mode, options);
      EXPECT_TRUE(stream.ok()) << stream.status().to_string();
      if (!stream.ok()) co_return;
      std::uint64_t got = 0;
      bool exact = true;
      Status end;
      for (;;) {
        auto m = co_await (*stream)->read();
        if (!m.ok()) {
          end = m.status();
          break;
        }
        if (!*m) break;
        exact = exact && (*m)->size() == kSize;
        for (std::size_t i = 0; i < (*m)->size() && exact; ++i) {
          exact = (*m)->data()[i] == PatternByte(kMessages, got * kSize + i);
        }
        ++got;
      }
      EXPECT_EQ(got, kMessages);
      EXPECT_TRUE(exact);
      EXPECT_TRUE((*stream)->shm_reading());
      EXPECT_EQ(end.code, make_error_code(c.code)) << end.to_string();
      EXPECT_NE(end.message.find(c.message), std::string::npos) << end.to_string();
      EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
    });
  }
  t.server->stop();
}

// The client ends a put whose ring it never closed by cancelling the call
// or dropping its stream: the handler waiting on the ring learns it at once
// (CANCEL, or the ring's writer gone), typed, not at the call's deadline.
TEST(ShmStreamTest, ClientCancellingOrDroppingAPutEndsTheHandlersRead) {
  for (const bool drop : {false, true}) {
    SCOPED_TRACE(drop ? "dropped" : "cancelled");
    ShmCall t("put-cancel");
    ASSERT_TRUE(t.client.ok()) << t.client.status().to_string();
    auto put_end = t.seen->put_end.get_future();
    const auto start = std::chrono::steady_clock::now();
    RunOn(**t.client, [&]() -> asio::awaitable<void> {
      StreamOptions options;
      options.timeout = 20s;
      auto stream = co_await (*t.client)->async_open_stream("bulk", "put_until_end", "", options);
      EXPECT_TRUE(stream.ok()) << stream.status().to_string();
      if (!stream.ok()) co_return;
      const std::string message(100'000, 'p');
      for (int i = 0; i < 3; ++i) {
        Status s = co_await (*stream)->write(message);
        EXPECT_TRUE(s.ok()) << s.to_string();
      }
      EXPECT_TRUE((*stream)->shm_writing());
      if (drop) {
        stream->reset();
      } else {
        (*stream)->cancel();
      }
    });
    ASSERT_EQ(put_end.wait_for(10s), std::future_status::ready);
    const Status end = put_end.get();
    EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
    // Cancelled, as the CANCEL frame says: the client closed its ring when
    // the call failed, so the handler did not see the ring vanish
    // (kPeerGone) when the stream was dropped before that frame arrived.
    EXPECT_EQ(end.code, make_error_code(Errc::kCancelled)) << end.to_string();
    // The connection still serves.
    RunOn(**t.client, [&]() -> asio::awaitable<void> {
      GetOutcome g = co_await DoGet(**t.client, 1 << 20, 128 << 10, 12);
      EXPECT_TRUE(g.final.ok());
      EXPECT_TRUE(g.exact);
    });
    t.server->stop();
  }
}

// Starts an 8 MiB echo call on `client`, from `ex` (megabytes pending on the
// socket, both ways), that sets `done` once it has its answer.
void SpawnBigEcho(const asio::any_io_executor& ex, Client& client, bool& done) {
  asio::co_spawn(ex, [&client, &done]() -> asio::awaitable<void> {
    auto r = co_await client.async_call("sys", "echo", std::string(8 << 20, 'e'));
    EXPECT_TRUE(r.ok()) << r.status().to_string();
    done = true;
  }, asio::detached);
}

// A stream's first shared-memory write waits (in ready_to_write) until the
// socket has nothing pending before it hands its ring over. A finish() or
// cancel() in that wait finds no ring to close; were the write to go on, it
// would send SHM_RING after END_STREAM/CANCEL, commit its message into a
// ring the server drops, and return OK: an acknowledged message lost. The
// write (or acquire) fails with the call's status, or its bytes arrive.
TEST(ShmStreamTest, WriteRacingFinishOnTheFirstShmWriteIsNeverLost) {
  enum class Op { kWriteView, kWritePayload, kAcquire };
  struct Case {
    const char* name;
    Op op;
    bool cancel;  // cancel() instead of finish()
  };
  const std::vector<Case> cases = {
      {"write_view_finish", Op::kWriteView, false},
      {"write_payload_finish", Op::kWritePayload, false},
      {"acquire_finish", Op::kAcquire, false},
      {"write_view_cancel", Op::kWriteView, true},
  };
  ShmCall t("race");
  ASSERT_TRUE(t.client.ok()) << t.client.status().to_string();
  const std::string message = "hello, are you there?";
  Sha256 sha;
  sha.Update(message);
  const std::string delivered = std::to_string(message.size()) + " " + sha.Hex();
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    // The race needs the write to be waiting when finish()/cancel() runs;
    // scheduling may let the socket drain first: then try again.
    int raced = 0;
    for (int attempt = 0; attempt < 20 && raced < 3; ++attempt) {
      RunOn(**t.client, [&]() -> asio::awaitable<void> {
        auto who = co_await (*t.client)->async_call("sys", "whoami", "");  // SHM_ACCEPT is in
        EXPECT_TRUE(who.ok()) << who.status().to_string();
        auto stream = co_await (*t.client)->async_open_stream("bulk", "put", "");
        EXPECT_TRUE(stream.ok()) << stream.status().to_string();
        if (!stream.ok()) co_return;
        auto ex = co_await asio::this_coro::executor;
        // Megabytes pending on the socket: the first ring write must wait.
        bool echo_done = false;
        SpawnBigEcho(ex, **t.client, echo_done);
        co_await asio::post(ex, asio::use_awaitable);  // the echo's bytes are queued
        ClientStream* s = stream->get();
        Status write_status(Errc::kInternal, "not run");
        bool write_done = false;
        asio::co_spawn(ex, [&, s]() -> asio::awaitable<void> {
          if (c.op == Op::kWriteView) {
            write_status = co_await s->write(std::string_view(message));
          } else if (c.op == Op::kWritePayload) {
            Payload p = s->allocate(message.size());
            std::memcpy(p.mutable_data(), message.data(), message.size());
            write_status = co_await s->write(std::move(p));
          } else {
            auto p = co_await s->acquire(message.size());
            if (!p.ok()) {
              write_status = p.status();
            } else {
              std::memcpy(p->mutable_data(), message.data(), message.size());
              write_status = co_await s->write(std::move(*p));
            }
          }
          write_done = true;
        }, asio::detached);
        co_await asio::post(ex, asio::use_awaitable);
        co_await asio::post(ex, asio::use_awaitable);
        const bool racing = !write_done;
        raced += racing ? 1 : 0;
        Result<std::string> final = Status(Errc::kInternal, "not finished");
        if (c.cancel) {
          (*stream)->cancel();
        } else {
          final = co_await (*stream)->finish();
        }
        while (!write_done || !echo_done) co_await Sleep(1ms);
        if (c.cancel) {
          if (racing) {
            EXPECT_EQ(write_status.code, make_error_code(Errc::kCancelled)) << write_status.to_string();
          }
        } else {
          EXPECT_TRUE(final.ok()) << final.status().to_string();
          if (write_status.ok()) {
            // Acknowledged: then the server has it.
            EXPECT_EQ(final.ok() ? *final : "", delivered) << "acknowledged message lost";
          } else {
            EXPECT_EQ(write_status.code, make_error_code(Errc::kFailedPrecondition))
                << write_status.to_string();
            EXPECT_EQ(final.ok() ? final->rfind("0 ", 0) : 1u, 0u) << (final.ok() ? *final : "");
          }
        }
        // No ring was handed over after the call's end.
        if (racing) {
          EXPECT_FALSE((*stream)->shm_writing());
        }
      });
    }
    EXPECT_GT(raced, 0) << "the write never waited for the socket";
  }
  // The server's side: a handler's writer waits to hand its ring over while
  // the handler returns. Its write fails, or its message arrives before the
  // RESPONSE — never OK and dropped with the late ring.
  {
    SCOPED_TRACE("server writer racing the handler's return");
    int raced = 0;
    for (int attempt = 0; attempt < 20 && raced < 3; ++attempt) {
      {
        std::lock_guard lock(t.seen->mu);
        t.seen->race_waiting = false;
        t.seen->race_write.reset();
      }
      std::vector<std::string> got;
      RunOn(**t.client, [&]() -> asio::awaitable<void> {
        auto ex = co_await asio::this_coro::executor;
        // An 8 MiB response pending on the server's socket.
        bool echo_done = false;
        SpawnBigEcho(ex, **t.client, echo_done);
        co_await asio::post(ex, asio::use_awaitable);
        auto stream = co_await (*t.client)->async_open_stream("bulk", "write_racing_return", "");
        EXPECT_TRUE(stream.ok()) << stream.status().to_string();
        if (!stream.ok()) co_return;
        for (;;) {
          auto m = co_await (*stream)->read();
          EXPECT_TRUE(m.ok()) << m.status().to_string();
          if (!m.ok() || !*m) break;
          got.emplace_back((*m)->view());
        }
        auto final = co_await (*stream)->finish();
        EXPECT_TRUE(final.ok()) << final.status().to_string();
        while (!echo_done) co_await Sleep(1ms);
      });
      std::optional<Status> write;
      bool waiting = false;
      for (int i = 0; i < 5000 && !write; ++i) {
        std::this_thread::sleep_for(1ms);
        std::lock_guard lock(t.seen->mu);
        write = t.seen->race_write;
        waiting = t.seen->race_waiting;
      }
      ASSERT_TRUE(write.has_value()) << "the handler's writer never finished";
      raced += waiting ? 1 : 0;
      if (write->ok()) {
        EXPECT_EQ(got, std::vector<std::string>{"hello from the handler"})
            << "acknowledged message lost";
      } else {
        EXPECT_EQ(write->code, make_error_code(Errc::kFailedPrecondition)) << write->to_string();
        EXPECT_TRUE(got.empty());
      }
    }
    EXPECT_GT(raced, 0) << "the handler's writer never waited for the socket";
  }
  // The connection still serves, over shared memory.
  RunOn(**t.client, [&]() -> asio::awaitable<void> {
    GetOutcome g = co_await DoGet(**t.client, 1 << 20, 128 << 10, 13);
    EXPECT_TRUE(g.final.ok()) << g.final.status().to_string();
    EXPECT_TRUE(g.exact);
  });
  t.server->stop();
}

}  // namespace
}  // namespace authrpc
