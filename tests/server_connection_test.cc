// ServerConnection's parking (docs/DESIGN.md, "Idle connections
// park"): an authenticated connection quiet a while ends its coroutines and
// waits on its socket; woken by input it serves again, and stop(), the idle
// timeout and keepalives treat it as any other connection. Over tcp, unix
// and TLS (whose stream may hold decrypted bytes the socket wait cannot see).
#include <gtest/gtest.h>

#include <asio/co_spawn.hpp>
#include <asio/steady_timer.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/use_future.hpp>
#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <thread>
#include <string>
#include <vector>

#include "authrpc/client/client_runtime.h"
#include "authrpc/client/client_stream.h"
#include "tests/testing/test_server.h"
#include "tests/testing/test_support.h"

namespace authrpc {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// The sweeper ticks every quarter of the shortest timeout: 600 ms gives
// 150 ms ticks, so a connection quiet for 100 ms parks within ~250 ms.
constexpr auto kNegotiationTimeout = 600ms;

// "echo": answers each message with itself until the client finishes.
Service EchoStreams() {
  Service s("streams");
  s.add_stream("echo", [](CallContext&, ServerStream& stream) -> asio::awaitable<Result<std::string>> {
    for (;;) {
      auto m = co_await stream.read();
      if (!m.ok()) co_return m.status();
      if (!*m) co_return std::string("done");
      if (Status w = co_await stream.write((*m)->view()); !w.ok()) co_return w;
    }
  });
  return s;
}

// "hold": an async call that answers once it is cancelled (its
// connection closed), counting those that have begun in `*begun`.
Service Hold(std::shared_ptr<std::atomic<int>> begun) {
  Service s("hold");
  s.add_async("until_cancelled", [begun](CallContext& ctx,
                                         std::string) -> asio::awaitable<Result<std::string>> {
    ++*begun;
    asio::steady_timer t(co_await asio::this_coro::executor);
    while (!ctx.cancelled()) {
      t.expires_after(2ms);
      co_await t.async_wait(asio::use_awaitable);
    }
    co_return std::string("cancelled");
  });
  return s;
}

class ServerConnectionTest : public ::testing::TestWithParam<std::string> {
 protected:
  void Start(std::chrono::milliseconds idle_timeout = 0ms,
             std::chrono::milliseconds stop_grace = 1000ms) {
    server_ = std::make_unique<testing::TestServer>();
    if (GetParam() == "tls") {
      server_->tls();
    } else {
      server_->endpoint(GetParam() + ":");
    }
    server_->service(EchoStreams()).service(Hold(holding_)).options([=](ServerOptions& o) {
      o.negotiation_timeout = kNegotiationTimeout;
      o.idle_timeout = idle_timeout;
      o.stop_grace = stop_grace;
    });
    ASSERT_OK(server_->start());
  }

  std::unique_ptr<Client> Connect(std::chrono::milliseconds keepalive = 0ms) {
    auto c = server_->client().simple().options([&](ClientOptions& o) {
      o.keepalive = keepalive;
    }).connect();
    EXPECT_TRUE(c.ok()) << c.status().to_string();
    return c.ok() ? std::move(*c) : nullptr;
  }

  bool Parked(std::uint64_t n, Clock::duration within = 5s) {
    return testing::Eventually([&] { return server_->stats().connections_parked == n; }, within);
  }

  std::unique_ptr<testing::TestServer> server_;
  std::shared_ptr<std::atomic<int>> holding_ = std::make_shared<std::atomic<int>>(0);
};

TEST_P(ServerConnectionTest, AParkedConnectionAnswersCallsWhenWoken) {
  ASSERT_NO_FATAL_FAILURE(Start());
  auto client = Connect();
  ASSERT_TRUE(client);
  // One small call; calls larger than the 256-byte inline read buffer (a
  // TLS record then holds more than the first read takes); eight pipelined
  // calls, which arrive together and wake the connection once.
  struct Case {
    std::size_t size;
    int pipelined;
  };
  for (const Case c : {Case{1, 1}, Case{2000, 1}, Case{300, 8}, Case{70000, 3}}) {
    SCOPED_TRACE(std::to_string(c.pipelined) + " x " + std::to_string(c.size) + " bytes");
    ASSERT_TRUE(Parked(1)) << "a quiet authenticated connection did not park";
    std::vector<std::future<Result<std::string>>> calls;
    std::vector<std::string> sent;
    for (int i = 0; i < c.pipelined; ++i) {
      sent.push_back(std::string(c.size, static_cast<char>('a' + i)));
      calls.push_back(client->call_future("sys", "echo", sent.back()));
    }
    for (int i = 0; i < c.pipelined; ++i) {
      ASSERT_EQ(calls[i].wait_for(10s), std::future_status::ready);
      auto reply = calls[i].get();
      ASSERT_TRUE(reply.ok()) << testing::Describe(reply);
      EXPECT_EQ(*reply, sent[i]);
    }
  }
  EXPECT_TRUE(Parked(1)) << "did not park again after its calls";
  EXPECT_EQ(server_->stats().connections_active, 1u);
}

TEST_P(ServerConnectionTest, StopClosesParkedConnectionsPromptly) {
  // With a grace period (GOAWAY, then the client sees end of stream) and
  // without one (closed at once).
  for (const auto grace : {3000ms, 0ms}) {
    SCOPED_TRACE("stop_grace " + std::to_string(grace.count()) + " ms");
    ASSERT_NO_FATAL_FAILURE(Start(0ms, grace));
    auto a = Connect();
    auto b = Connect();
    ASSERT_TRUE(a && b);
    ASSERT_TRUE(Parked(2));
    const auto started = Clock::now();
    server_->server().stop();
    EXPECT_LT(Clock::now() - started, 1500ms) << "stop() waited for parked connections";
    EXPECT_EQ(server_->stats().connections_parked, 0u);
    EXPECT_EQ(server_->stats().connections_active, 0u);
    EXPECT_TRUE(testing::Eventually([&] { return !a->connection_status().ok(); }));
    EXPECT_FALSE(b->call("sys", "echo", "x").ok());
  }
}

TEST_P(ServerConnectionTest, ACallThatOutlivesItsConnectionDuringStopLeavesNoTrace) {
  // During stop()'s grace period a client told GOAWAY leaves with a call in
  // flight: its connection ends (its coroutines return), then the call's
  // handler, cancelled, returns. The connection must not rejoin the
  // reactor's list then: it would be freed while linked, and stop()'s last
  // walk (after the grace period, which b's call keeps running) would read
  // freed memory (ASan: heap-use-after-free in ReactorConnections).
  ASSERT_NO_FATAL_FAILURE(Start(0ms, 1500ms));
  auto a = Connect();
  auto b = Connect();
  ASSERT_TRUE(a && b);
  auto a_call = a->call_future("hold", "until_cancelled", "");
  auto b_call = b->call_future("hold", "until_cancelled", "");
  ASSERT_TRUE(testing::Eventually([&] { return *holding_ == 2; }));
  std::thread stopper([&] { server_->server().stop(); });
  // GOAWAY has reached a once a new call is refused with it.
  const bool told = testing::Eventually([&] {
    auto r = a->call("sys", "echo", "x");
    return !r.ok() && r.status().code == Errc::kUnavailable;
  });
  a.reset();  // a leaves; its call's handler returns after its connection ended
  stopper.join();
  ASSERT_TRUE(told) << "GOAWAY never reached the client";
  EXPECT_EQ(server_->stats().connections_active, 0u);
  ASSERT_EQ(b_call.wait_for(5s), std::future_status::ready);
  EXPECT_FALSE(b_call.get().ok()) << "b's call was cut by stop() after the grace period";
  ASSERT_EQ(a_call.wait_for(5s), std::future_status::ready);
}

TEST_P(ServerConnectionTest, TheIdleTimeoutClosesAParkedConnection) {
  ASSERT_NO_FATAL_FAILURE(Start(800ms));
  auto client = Connect();
  ASSERT_TRUE(client);
  ASSERT_TRUE(Parked(1));
  ASSERT_TRUE(testing::Eventually([&] { return !client->connection_status().ok(); }, 5s));
  EXPECT_EQ(client->connection_status().code, Errc::kIdleTimeout)
      << client->connection_status().to_string();
  EXPECT_TRUE(testing::Eventually([&] { return server_->stats().connections_active == 0; }));
  EXPECT_EQ(server_->stats().connections_parked, 0u);
}

TEST_P(ServerConnectionTest, KeepalivesKeepAParkedConnectionOpenAndParked) {
  // PINGs every 300 ms, at most 600 ms apart, against a 1 s idle timeout:
  // each wakes the parked connection, is answered (so it is not closed as
  // idle) and the connection parks again at once, not a sweeper tick later.
  ASSERT_NO_FATAL_FAILURE(Start(1000ms));
  auto client = Connect(300ms);
  ASSERT_TRUE(client);
  ASSERT_TRUE(Parked(1));
  int samples = 0, parked = 0;
  const auto until = Clock::now() + 2500ms;
  while (Clock::now() < until) {
    ++samples;
    parked += server_->stats().connections_parked == 1 ? 1 : 0;
    std::this_thread::sleep_for(5ms);
  }
  // Nearly always; half leaves room for a loaded machine.
  EXPECT_GE(parked * 2, samples) << "parked in " << parked << " of " << samples << " samples";
  ASSERT_TRUE(client->connection_status().ok()) << client->connection_status().to_string();
  auto reply = client->call("sys", "echo", "still here");
  ASSERT_TRUE(reply.ok()) << testing::Describe(reply);
  EXPECT_EQ(*reply, "still here");
}

TEST_P(ServerConnectionTest, AnOpenStreamKeepsItsConnectionServing) {
  ASSERT_NO_FATAL_FAILURE(Start());
  ClientRuntime runtime(1);
  auto opened = Client::connect(runtime, server_->client().simple().build());
  ASSERT_TRUE(opened.ok()) << opened.status().to_string();
  Client& client = **opened;
  auto run = [&](std::function<asio::awaitable<void>()> body) {
    auto done = asio::co_spawn(client.executor(), std::move(body), asio::use_future);
    ASSERT_EQ(done.wait_for(20s), std::future_status::ready);
    done.get();
  };
  std::unique_ptr<ClientStream> stream;
  run([&]() -> asio::awaitable<void> {
    auto s = co_await client.async_open_stream("streams", "echo", "");
    EXPECT_TRUE(s.ok()) << s.status().to_string();
    if (s.ok()) stream = std::move(*s);
  });
  ASSERT_TRUE(stream);
  // Quiet for several ticks with the stream open: not parked.
  std::this_thread::sleep_for(700ms);
  EXPECT_EQ(server_->stats().connections_parked, 0u);
  run([&]() -> asio::awaitable<void> {
    const Status written = co_await stream->write("ping");
    EXPECT_TRUE(written.ok()) << written.to_string();
    auto m = co_await stream->read();
    EXPECT_TRUE(m.ok() && *m && (*m)->view() == "ping");
    auto end = co_await stream->finish();
    EXPECT_TRUE(end.ok() && *end == "done") << testing::Describe(end);
  });
  stream.reset();
  EXPECT_TRUE(Parked(1)) << "did not park once its stream had ended";
  auto reply = client.call("sys", "echo", "after");
  EXPECT_TRUE(reply.ok()) << testing::Describe(reply);
}

INSTANTIATE_TEST_SUITE_P(Transports, ServerConnectionTest, ::testing::Values("tcp", "unix", "tls"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace authrpc
