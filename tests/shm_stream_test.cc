// Streaming calls over the shared-memory data plane (rpc/shm_stream.h,
// docs/SHM.md "Integration"): a real Server and Client on an abstract Unix
// socket. Byte-exact get and put through the ring (SHA-256 on both ends,
// in-place slots and messages spanning slots), fallback to the socket when
// either side disables shared memory, refusal for a peer running as another
// uid (a forked child that setuid()s to nobody), a peer process vanishing
// mid-stream on either side, and a slow consumer bounding the writer by the
// ring. streaming_test runs its whole suite over shm as well ("shm").
#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <pwd.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <asio/co_spawn.hpp>
#include <asio/redirect_error.hpp>
#include <asio/steady_timer.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/use_future.hpp>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "auth/simple.h"
#include "client/client.h"
#include "client/client_runtime.h"
#include "rpc/log.h"
#include "rpc/shm_errors.h"
#include "server/server.h"
#include "server/service.h"

namespace authrpc {
namespace {

using namespace std::chrono_literals;

char PatternByte(std::uint64_t seed, std::uint64_t i) {
  std::uint64_t x = i * 0x9E3779B97F4A7C15ull + seed;
  x ^= x >> 29;
  return static_cast<char>(x * 0xBF58476D1CE4E5B9ull >> 56);
}
void Pattern(std::uint64_t seed, std::uint64_t offset, char* out, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) out[i] = PatternByte(seed, offset + i);
}

std::string Sha256Hex(EVP_MD_CTX* ctx) {
  unsigned char digest[32];
  unsigned int len = 0;
  EVP_DigestFinal_ex(ctx, digest, &len);
  std::string out;
  char buf[3];
  for (unsigned i = 0; i < len; ++i) {
    std::snprintf(buf, sizeof buf, "%02x", digest[i]);
    out += buf;
  }
  return out;
}
struct Sha256 {
  Sha256() : ctx(EVP_MD_CTX_new()) { EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr); }
  ~Sha256() { EVP_MD_CTX_free(ctx); }
  void Update(std::string_view b) { EVP_DigestUpdate(ctx, b.data(), b.size()); }
  std::string Hex() { return Sha256Hex(ctx); }
  EVP_MD_CTX* ctx;
};

asio::awaitable<void> Sleep(std::chrono::milliseconds d) {
  asio::steady_timer timer(co_await asio::this_coro::executor, d);
  std::error_code ec;
  co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
}

// What the handlers saw.
struct Seen {
  std::atomic<std::uint64_t> written{0};  // get: messages committed so far
  std::atomic<bool> put_over_shm{false};
  std::atomic<bool> get_over_shm{false};
  std::mutex mu;
  Status get_end;  // get: the status the handler ended with
  std::promise<void> get_done;
  bool get_done_set = false;
};

// get "<total> <batch> <seed>": pattern bytes, filled in place in the slot
// the stream hands out (acquire); returns the SHA-256.
// put: reads every message in place; returns "<bytes> <sha256>".
void AddService(Server& server, std::shared_ptr<Seen> seen) {
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
  ASSERT_TRUE(server.add_service(std::move(bulk)).ok());
}

std::string UniqueSocket(const char* what) {
  static std::atomic<int> n{0};
  return "unix:@authrpc-shm-stream-" + std::string(what) + "-" + std::to_string(::getpid()) + "-" +
         std::to_string(n++);
}

std::unique_ptr<Server> StartServer(const std::string& uri, bool shm, std::shared_ptr<Seen> seen,
                                    std::uint32_t slot_count = 16) {
  ServerOptions o;
  o.endpoints = {*Endpoint::parse(uri)};
  o.mechanisms = {std::make_shared<SimpleServerMechanism>()};
  o.io_threads = 1;
  o.stop_grace = 1s;
  o.log = null_log_sink();
  o.shm.enabled = shm;
  o.shm.ring.slot_count = slot_count;
  auto server = std::make_unique<Server>(std::move(o));
  AddService(*server, seen);
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
  auto seen = std::make_shared<Seen>();
  auto server = StartServer(UniqueSocket("get"), true, seen);
  ClientRuntime runtime(1);
  auto client = Client::connect(runtime, ClientFor(server->bound_endpoints().front(), true));
  ASSERT_TRUE(client.ok()) << client.status().to_string();
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
    RunOn(**client, [&]() -> asio::awaitable<void> {
      GetOutcome g = co_await DoGet(**client, c.total, c.batch, c.total ^ c.batch);
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
  EXPECT_TRUE(seen->get_over_shm.load());
  server->stop();
}

TEST(ShmStreamTest, PutOverShmIsByteExact) {
  auto seen = std::make_shared<Seen>();
  auto server = StartServer(UniqueSocket("put"), true, seen);
  ClientRuntime runtime(1);
  auto client = Client::connect(runtime, ClientFor(server->bound_endpoints().front(), true));
  ASSERT_TRUE(client.ok()) << client.status().to_string();
  RunOn(**client, [&]() -> asio::awaitable<void> {
    auto stream = co_await (*client)->async_open_stream("bulk", "put", "");
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
  EXPECT_TRUE(seen->put_over_shm.load());
  server->stop();
}

TEST(ShmStreamTest, ServerFailingAPutStopsTheWriterWithItsStatus) {
  auto seen = std::make_shared<Seen>();
  auto server = StartServer(UniqueSocket("put-fail"), true, seen, 4);
  ClientRuntime runtime(1);
  auto client = Client::connect(runtime, ClientFor(server->bound_endpoints().front(), true));
  ASSERT_TRUE(client.ok()) << client.status().to_string();
  RunOn(**client, [&]() -> asio::awaitable<void> {
    auto stream = co_await (*client)->async_open_stream("bulk", "put_fail", "");
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
  RunOn(**client, [&]() -> asio::awaitable<void> {
    GetOutcome g = co_await DoGet(**client, 1 << 20, 128 << 10, 8);
    EXPECT_TRUE(g.final.ok());
    EXPECT_TRUE(g.exact);
    EXPECT_TRUE(g.over_shm);
  });
  server->stop();
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
    auto seen = std::make_shared<Seen>();
    auto server = StartServer(UniqueSocket(c.name), c.server_shm, seen);
    ClientRuntime runtime(1);
    auto client = Client::connect(runtime, ClientFor(server->bound_endpoints().front(), c.client_shm));
    ASSERT_TRUE(client.ok()) << client.status().to_string();
    RunOn(**client, [&]() -> asio::awaitable<void> {
      GetOutcome g = co_await DoGet(**client, 2 << 20, 128 << 10, 11);
      EXPECT_TRUE(g.read_status.ok()) << g.read_status.to_string();
      EXPECT_EQ(g.bytes, 2u << 20);
      EXPECT_TRUE(g.exact);
      EXPECT_TRUE(g.final.ok());
      EXPECT_EQ(g.over_shm, c.expect_shm);
    });
    EXPECT_EQ(seen->get_over_shm.load(), c.expect_shm);
    client->reset();
    server->stop();
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
  SendEndpoint(pipe, server->bound_endpoints().front());
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
  SendEndpoint(pipe, server->bound_endpoints().front());
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
  auto client = Client::connect(runtime, ClientFor(server->bound_endpoints().front(), true));
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
  int pipe_to_parent[2];
  ASSERT_EQ(::pipe(pipe_to_parent), 0);
  // The child runs the server and tells us its endpoint; we kill it mid-get.
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::close(pipe_to_parent[0]);
    auto seen = std::make_shared<Seen>();
    auto server = StartServer(UniqueSocket("server-vanish"), true, seen);
    const std::string s = server->bound_endpoints().front().to_string();
    if (::write(pipe_to_parent[1], s.data(), s.size()) != static_cast<ssize_t>(s.size())) ::_exit(1);
    ::close(pipe_to_parent[1]);
    for (;;) ::pause();
  }
  ::close(pipe_to_parent[1]);
  char buf[256] = {};
  std::size_t got = 0;
  for (ssize_t n; (n = ::read(pipe_to_parent[0], buf + got, sizeof buf - 1 - got)) > 0;) got += n;
  ::close(pipe_to_parent[0]);
  auto endpoint = Endpoint::parse(std::string(buf, got));
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
  auto seen = std::make_shared<Seen>();
  constexpr std::uint32_t kSlots = 4;
  auto server = StartServer(UniqueSocket("slow"), true, seen, kSlots);
  ClientRuntime runtime(1);
  auto client = Client::connect(runtime, ClientFor(server->bound_endpoints().front(), true));
  ASSERT_TRUE(client.ok()) << client.status().to_string();
  std::uint64_t max_ahead = 0;
  RunOn(**client, [&]() -> asio::awaitable<void> {
    GetOutcome g = co_await DoGet(**client, 64 * (128 << 10), 128 << 10, 2,
                                  [&](std::uint64_t read) -> asio::awaitable<void> {
                                    if (read < 12) co_await Sleep(20ms);  // the writer runs ahead
                                    const std::uint64_t written = seen->written.load();
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
  server->stop();
}

}  // namespace
}  // namespace authrpc
