// Integration tests: a real Server and real Clients talking over loopback TCP
// and abstract Unix sockets. Every test runs once per transport.
#include <gmock/gmock.h>
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <asio/co_spawn.hpp>
#include <asio/post.hpp>
#include <asio/redirect_error.hpp>
#include <asio/steady_timer.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/use_future.hpp>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <filesystem>
#include <future>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "authrpc/auth/mechanisms/simple/simple.h"
#include "authrpc/base/log.h"
#include "authrpc/base/status.h"
#include "authrpc/client/client.h"
#include "authrpc/client/client_runtime.h"
#include "authrpc/rpc/endpoint.h"
#include "authrpc/server/server.h"
#include "authrpc/server/service.h"
#include "tests/testing/test_server.h"
#include "tests/testing/test_support.h"
#include "tests/testing/scoped_temp_dir.h"

namespace authrpc {

namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using testing::Describe;
using testing::Eventually;
using testing::Latch;
using testing::StopAndDestroy;
using ::testing::HasSubstr;
using ::testing::StartsWith;

using testing::Code;

// What the test service's handlers report back to the tests.
struct TestState {
  std::mutex mu;
  std::vector<std::string> completion_order;  // tags of finished "sleep" calls
  std::atomic<int> cancelled_sleeps{0};       // "sleep" calls that saw ctx.cancelled()
  Latch slow_started;                         // "slow" has begun
  // These handlers have begun (at least one call of each): what a test waits
  // for before it acts on a call in flight, instead of sleeping.
  Latch sleep_started;
  Latch stubborn_started;
  Latch blocking_sleep_started;
};

// Sleeps `total` in short steps so that a cancelled call (CANCEL frame, or a
// connection closed by the server) stops early. False if it was cancelled.
asio::awaitable<bool> InterruptibleSleep(CallContext& ctx, std::chrono::milliseconds total) {
  asio::steady_timer timer(co_await asio::this_coro::executor);
  const auto until = Clock::now() + total;
  for (;;) {
    if (ctx.cancelled()) co_return false;
    const auto now = Clock::now();
    if (now >= until) co_return true;
    timer.expires_after(std::min<Clock::duration>(until - now, 5ms));
    std::error_code ec;
    co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
}

std::string Upper(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

// "<milliseconds> <tag>" → {milliseconds, tag}.
std::pair<std::chrono::milliseconds, std::string> ParseSleepRequest(const std::string& request) {
  const auto space = request.find(' ');
  const long ms = std::stol(request.substr(0, space));
  return {std::chrono::milliseconds(ms),
          space == std::string::npos ? std::string() : request.substr(space + 1)};
}

Service MakeTestService(std::shared_ptr<TestState> state) {
  Service s("test");
  s.add("upper", [](CallContext&, std::string_view request) -> Result<std::string> {
    return Upper(request);
  });
  s.add("repeat", [](CallContext&, std::string_view request) -> Result<std::string> {
    return std::string(static_cast<std::size_t>(std::stoul(std::string(request))), 'r');
  });
  // Sleeps in one wait, paying no attention to cancellation.
  s.add_async("stubborn", [state](CallContext&,
                                  std::string request) -> asio::awaitable<Result<std::string>> {
    state->stubborn_started.CountDown();
    asio::steady_timer timer(co_await asio::this_coro::executor,
                             std::chrono::milliseconds(std::stol(request)));
    std::error_code ec;
    co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    co_return std::string("done");
  });
  s.add("plain", [](CallContext&, std::string_view) -> Result<std::string> {
    return std::string("definitely { not json");
  });
  s.add("context", [](CallContext& ctx, std::string_view) -> Result<std::string> {
    nlohmann::json j = {{"user", ctx.identity().user},
                        {"service", ctx.service()},
                        {"method", ctx.method()},
                        {"call_id", ctx.call_id()},
                        {"has_deadline", ctx.deadline() != CallContext::Clock::time_point::max()}};
    return j.dump();
  });
  s.add_async("sleep", [state](CallContext& ctx,
                               std::string request) -> asio::awaitable<Result<std::string>> {
    const auto [delay, tag] = ParseSleepRequest(request);
    state->sleep_started.CountDown();
    if (!co_await InterruptibleSleep(ctx, delay)) {
      ++state->cancelled_sleeps;
      co_return Status(Errc::kCancelled, "sleep cancelled");
    }
    {
      std::lock_guard lock(state->mu);
      state->completion_order.push_back(tag);
    }
    co_return tag;
  });
  s.add_async("slow", [state](CallContext& ctx,
                              std::string) -> asio::awaitable<Result<std::string>> {
    state->slow_started.CountDown();
    if (!co_await InterruptibleSleep(ctx, 300ms)) co_return Status(Errc::kCancelled, "cut short");
    co_return std::string("finished");
  });
  s.add_blocking("blocking_upper", [](CallContext&, std::string_view request) -> Result<std::string> {
    std::this_thread::sleep_for(20ms);
    return Upper(request);
  });
  s.add_blocking("blocking_sleep", [state](CallContext&, std::string_view request) -> Result<std::string> {
    state->blocking_sleep_started.CountDown();
    std::this_thread::sleep_for(std::chrono::milliseconds(std::stol(std::string(request))));
    return std::string("slept");
  });
  s.add("fail", [](CallContext&, std::string_view) -> Result<std::string> {
    return Status(Errc::kPermissionDenied, "alice may not do this");
  });
  s.add_async("fail_async",
              [](CallContext&, std::string) -> asio::awaitable<Result<std::string>> {
                co_return Status(Errc::kFailedPrecondition, "not now, async");
              });
  s.add_blocking("fail_blocking", [](CallContext&, std::string_view) -> Result<std::string> {
    return Status(Errc::kResourceExhausted, "the pool is tired");
  });
  s.add("throw", [](CallContext&, std::string_view) -> Result<std::string> {
    throw std::runtime_error("boom inline");
  });
  s.add_async("throw_async", [](CallContext&, std::string) -> asio::awaitable<Result<std::string>> {
    throw std::runtime_error("boom async");
    co_return std::string("unreachable");
  });
  s.add_blocking("throw_blocking", [](CallContext&, std::string_view) -> Result<std::string> {
    throw std::runtime_error("boom blocking");
  });
  s.add_json("add", [](CallContext&, const nlohmann::json& request) -> Result<nlohmann::json> {
    if (!request.is_object() || !request.contains("a") || !request.contains("b") ||
        !request["a"].is_number() || !request["b"].is_number()) {
      return Status(Errc::kInvalidArgument, "a and b must be numbers");
    }
    return nlohmann::json{{"sum", request["a"].get<double>() + request["b"].get<double>()}};
  });
  s.add_json(
      "add_blocking",
      [](CallContext& ctx, const nlohmann::json& request) -> Result<nlohmann::json> {
        return nlohmann::json{{"sum", request.at("a").get<int>() + request.at("b").get<int>()},
                              {"user", ctx.identity().user}};
      },
      Execution::kBlocking);
  return s;
}

// A client mechanism the server does not enable; used to exercise fallback.
class FakeClientMechanism final : public ClientMechanism {
 public:
  std::string_view name() const noexcept override { return "fake"; }
  std::unique_ptr<ClientAuthSession> start(const ChannelInfo&) override {
    class Session final : public ClientAuthSession {
     public:
      asio::awaitable<ClientStep> initial() override {
        co_return ClientStep::send("fake-token", true);
      }
      asio::awaitable<ClientStep> challenge(std::string_view) override {
        co_return ClientStep::failure({Errc::kProtocolError, "fake: no challenges"});
      }
      asio::awaitable<Status> complete(std::string_view) override { co_return Status(); }
    };
    return std::make_unique<Session>();
  }
};

using Kind = testing::SocketKind;
Endpoint FreshEndpoint(Kind kind) { return testing::FreshEndpoint(kind, "authrpc-server-test"); }

ServerOptions DefaultServerOptions(Endpoint endpoint) {
  ServerOptions o;
  o.endpoints = {std::move(endpoint)};
  o.mechanisms = {std::make_shared<SimpleServerMechanism>()};
  o.io_threads = 2;
  o.blocking_threads = 4;
  o.negotiation_timeout = 5s;
  o.idle_timeout = 60s;
  o.stop_grace = 5s;
  o.log = null_log_sink();
  return o;
}

class ServerTest : public ::testing::TestWithParam<Kind> {
 protected:
  void SetUp() override { ASSERT_NO_FATAL_FAILURE(StartServer()); }

  void TearDown() override { test_server_.reset(); }

  // (Re)starts the server on a fresh endpoint, with `tweak` applied to the
  // default options.
  void StartServer(const std::function<void(ServerOptions&)>& tweak = {}) {
    if (test_server_) ASSERT_TRUE(test_server_->stop());
    test_server_ = std::make_unique<testing::TestServer>();
    // DefaultServerOptions(), built by the builder.
    test_server_->endpoint(FreshEndpoint(GetParam())).io_threads(2).blocking_threads(4);
    test_server_->service(MakeTestService(state_)).options([tweak](ServerOptions& o) {
      o.idle_timeout = 60s;
      o.stop_grace = 5s;
      if (tweak) tweak(o);
    });
    const Status started = test_server_->start();
    ASSERT_TRUE(started.ok()) << started.to_string();
    server_ = &test_server_->server();
    const auto bound = server_->bound_endpoints();
    ASSERT_EQ(bound.size(), 1u);
    endpoint_ = bound.front();
    if (GetParam() == Kind::kTcp) {
      ASSERT_EQ(endpoint_.scheme, Endpoint::Scheme::kTcp);
      ASSERT_NE(endpoint_.port, 0) << "port 0 must be resolved to the bound port";
    } else {
      ASSERT_EQ(endpoint_.scheme, Endpoint::Scheme::kUnix);
    }
  }

  ClientOptions OptionsFor(const std::string& user = "alice") const {
    ClientOptions o;
    o.endpoint = endpoint_;
    o.mechanisms = {std::make_shared<SimpleClientMechanism>(user)};
    o.connect_timeout = 5s;
    return o;
  }

  std::unique_ptr<Client> MustConnect(const std::string& user = "alice") {
    return MustConnect(OptionsFor(user));
  }

  std::unique_ptr<Client> MustConnect(ClientOptions options) {
    auto client = Client::connect(std::move(options));
    EXPECT_TRUE(client.ok()) << Describe(client);
    return client.ok() ? std::move(*client) : nullptr;
  }

  // Connects as alice (into `client`) and calls test.`method` with `request`
  // (into `call`), then waits until its handler has begun (`started`).
  void StartCall(const char* method, const char* request, Latch& started,
                 std::unique_ptr<Client>& client, std::future<Result<std::string>>& call) {
    client = MustConnect();
    ASSERT_NE(client, nullptr);
    call = client->call_future("test", method, request);
    ASSERT_TRUE(started.WaitFor(5s)) << "the " << method << " handler never started";
  }

  // Restarts the server with `stop_grace`, calls test.`method` with `request`,
  // and once its handler has begun (`started`) stops the server: stop() must
  // return within `within`, and the call fail with its connection.
  void StopDuringCall(std::chrono::milliseconds stop_grace, const char* method,
                      const char* request, Latch& started, Clock::duration within) {
    ASSERT_NO_FATAL_FAILURE(
        StartServer([stop_grace](ServerOptions& o) { o.stop_grace = stop_grace; }));
    std::unique_ptr<Client> client;
    std::future<Result<std::string>> call;
    ASSERT_NO_FATAL_FAILURE(StartCall(method, request, started, client, call));
    const auto start = Clock::now();
    server_->stop();
    const auto took = Clock::now() - start;
    EXPECT_LT(took, within) << "stop() took far longer than stop_grace ("
                            << stop_grace.count() << " ms)";
    ASSERT_EQ(call.wait_for(3s), std::future_status::ready);
    EXPECT_FALSE(call.get().ok()) << "the connection was closed: the call cannot succeed";
  }

  // sys.whoami's JSON reply on `client` (null, and a test failure, if the
  // call fails).
  static nlohmann::json Whoami(Client& client) {
    auto reply = client.call_json("sys", "whoami", nullptr);
    EXPECT_TRUE(reply.ok()) << Describe(reply);
    return reply.ok() ? std::move(*reply) : nlohmann::json();
  }

  std::shared_ptr<TestState> state_ = std::make_shared<TestState>();
  std::unique_ptr<testing::TestServer> test_server_;
  Server* server_ = nullptr;  // test_server_'s, for the tests of Server's own methods
  Endpoint endpoint_;
};

INSTANTIATE_TEST_SUITE_P(Transports, ServerTest, ::testing::Values(Kind::kTcp, Kind::kUnix),
                         testing::SocketKindName);

// --- identity and built-ins -------------------------------------------------

TEST_P(ServerTest, WhoamiReturnsTheAuthenticatedIdentityAsJson) {
  auto client = MustConnect("alice");
  ASSERT_NE(client, nullptr);
  EXPECT_EQ(client->mechanism(), "simple");
  EXPECT_EQ(client->authenticated_user(), "alice");
  EXPECT_TRUE(client->connection_status().ok());

  auto reply = client->call("sys", "whoami", "");
  ASSERT_TRUE(reply.ok()) << Describe(reply);
  const auto identity = nlohmann::json::parse(*reply, nullptr, false);
  ASSERT_FALSE(identity.is_discarded()) << *reply;
  EXPECT_EQ(identity.value("user", ""), "alice");
  EXPECT_EQ(identity.value("mechanism", ""), "simple");
  ASSERT_TRUE(identity.contains("peer") && identity["peer"].is_string()) << *reply;
  const std::string peer = identity["peer"];
  if (GetParam() == Kind::kTcp) {
    EXPECT_THAT(peer, StartsWith("127.0.0.1:"));
  } else {
    EXPECT_THAT(peer, StartsWith("unix"));
  }
}

TEST_P(ServerTest, EachConnectionIsAuthenticatedAsItsOwnUser) {
  auto alice = MustConnect("alice");
  auto bob = MustConnect("bob");
  ASSERT_NE(alice, nullptr);
  ASSERT_NE(bob, nullptr);
  EXPECT_EQ(Whoami(*alice)["user"], "alice");
  EXPECT_EQ(Whoami(*bob)["user"], "bob");
}

TEST_P(ServerTest, EchoReturnsTheRequestBytesUnchanged) {
  auto client = MustConnect();
  ASSERT_NE(client, nullptr);
  for (const std::string& payload :
       {std::string(), std::string("hello"), std::string("\0bin\xff\x01", 6),
        std::string(200 * 1024, 'z')}) {
    auto reply = client->call("sys", "echo", payload);
    ASSERT_TRUE(reply.ok()) << Describe(reply);
    EXPECT_EQ(*reply, payload);
  }
}

// --- handler kinds ----------------------------------------------------------

TEST_P(ServerTest, InlineAsyncAndBlockingHandlersAllAnswer) {
  auto client = MustConnect();
  ASSERT_NE(client, nullptr);
  auto inline_reply = client->call("test", "upper", "abc");
  ASSERT_TRUE(inline_reply.ok()) << Describe(inline_reply);
  EXPECT_EQ(*inline_reply, "ABC");

  auto async_reply = client->call("test", "sleep", "20 tagged");
  ASSERT_TRUE(async_reply.ok()) << Describe(async_reply);
  EXPECT_EQ(*async_reply, "tagged");

  auto blocking_reply = client->call("test", "blocking_upper", "xyz");
  ASSERT_TRUE(blocking_reply.ok()) << Describe(blocking_reply);
  EXPECT_EQ(*blocking_reply, "XYZ");
}

TEST_P(ServerTest, HandlersSeeTheirCallContext) {
  auto client = MustConnect("carol");
  ASSERT_NE(client, nullptr);
  auto no_deadline = client->call_json("test", "context", nullptr);
  ASSERT_TRUE(no_deadline.ok()) << Describe(no_deadline);
  EXPECT_EQ((*no_deadline)["user"], "carol");
  EXPECT_EQ((*no_deadline)["service"], "test");
  EXPECT_EQ((*no_deadline)["method"], "context");
  EXPECT_GT((*no_deadline)["call_id"].get<std::uint32_t>(), 0u);
  EXPECT_EQ((*no_deadline)["has_deadline"], false);

  CallOptions with_timeout;
  with_timeout.timeout = 5s;
  auto with_deadline = client->call_json("test", "context", nullptr, with_timeout);
  ASSERT_TRUE(with_deadline.ok()) << Describe(with_deadline);
  EXPECT_EQ((*with_deadline)["has_deadline"], true);
  EXPECT_NE((*with_deadline)["call_id"], (*no_deadline)["call_id"]);
}

TEST_P(ServerTest, ABlockingHandlerDoesNotHoldUpOtherCallsOnTheConnection) {
  std::unique_ptr<Client> client;
  std::future<Result<std::string>> slow;
  // Once the pool runs the handler, make an inline call.
  ASSERT_NO_FATAL_FAILURE(
      StartCall("blocking_sleep", "400", state_->blocking_sleep_started, client, slow));
  const auto start = Clock::now();
  auto quick = client->call("sys", "echo", "ping");
  const auto quick_took = Clock::now() - start;
  ASSERT_TRUE(quick.ok()) << Describe(quick);
  EXPECT_LT(quick_took, 300ms) << "an inline call waited for the blocking handler";
  ASSERT_EQ(slow.wait_for(5s), std::future_status::ready);
  auto slow_reply = slow.get();
  ASSERT_TRUE(slow_reply.ok()) << Describe(slow_reply);
  EXPECT_EQ(*slow_reply, "slept");
}

TEST_P(ServerTest, FiftyConcurrentCallsOnOneConnectionEachGetTheirOwnAnswer) {
  auto client = MustConnect();
  ASSERT_NE(client, nullptr);
  constexpr int kCalls = 50;
  std::vector<std::future<Result<std::string>>> futures;
  const auto start = Clock::now();
  for (int i = 0; i < kCalls; ++i) {
    // Later calls sleep less, so they finish first.
    const int delay_ms = (kCalls - 1 - i) * 3;
    futures.push_back(client->call_future(
        "test", "sleep", std::to_string(delay_ms) + " call-" + std::to_string(i)));
  }
  for (int i = 0; i < kCalls; ++i) {
    ASSERT_EQ(futures[i].wait_for(10s), std::future_status::ready) << "call " << i;
    auto reply = futures[i].get();
    ASSERT_TRUE(reply.ok()) << "call " << i << ": " << Describe(reply);
    EXPECT_EQ(*reply, "call-" + std::to_string(i));
  }
  const auto took = Clock::now() - start;
  // Serially the sleeps add up to 3.7 s; concurrently they take ~150 ms.
  EXPECT_LT(took, 2000ms) << "calls on one connection did not run concurrently";

  std::vector<std::string> order;
  {
    std::lock_guard lock(state_->mu);
    order = state_->completion_order;
  }
  ASSERT_EQ(order.size(), static_cast<std::size_t>(kCalls));
  const auto position = [&](const std::string& tag) {
    return std::find(order.begin(), order.end(), tag) - order.begin();
  };
  EXPECT_GT(position("call-0"), position("call-49"))
      << "responses were not allowed to complete out of order";
}

TEST_P(ServerTest, ManyClientsOnSeparateThreadsAllGetTheirOwnAnswers) {
  constexpr int kClients = 6;
  constexpr int kCallsEach = 25;
  std::atomic<int> good{0};
  std::vector<std::thread> threads;
  for (int c = 0; c < kClients; ++c) {
    threads.emplace_back([&, c] {
      auto client = Client::connect(OptionsFor("user" + std::to_string(c)));
      if (!client.ok()) return;
      for (int i = 0; i < kCallsEach; ++i) {
        const std::string payload = std::to_string(c) + "/" + std::to_string(i);
        auto reply = (*client)->call("sys", "echo", payload);
        if (reply.ok() && *reply == payload) ++good;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(good.load(), kClients * kCallsEach);
  EXPECT_GE(server_->stats().calls_ok, static_cast<std::uint64_t>(kClients * kCallsEach));
}

// --- errors -----------------------------------------------------------------

TEST_P(ServerTest, AHandlerStatusReachesTheCallerWithItsCodeAndMessage) {
  auto client = MustConnect();
  ASSERT_NE(client, nullptr);
  struct Case {
    const char* method;
    Errc code;
    const char* message;
  };
  for (const Case& c : {Case{"fail", Errc::kPermissionDenied, "alice may not do this"},
                        Case{"fail_async", Errc::kFailedPrecondition, "not now, async"},
                        Case{"fail_blocking", Errc::kResourceExhausted, "the pool is tired"}}) {
    auto reply = client->call("test", c.method, "");
    ASSERT_FALSE(reply.ok()) << c.method;
    EXPECT_EQ(reply.code(), Code(c.code)) << c.method << ": " << Describe(reply);
    EXPECT_EQ(reply.status().message, c.message) << c.method;
  }
  // A failed call leaves the connection usable.
  auto after = client->call("sys", "echo", "still fine");
  ASSERT_TRUE(after.ok()) << Describe(after);
  EXPECT_GE(server_->stats().calls_failed, 3u);
}

TEST_P(ServerTest, AHandlerThatThrowsBecomesInternal) {
  auto client = MustConnect();
  ASSERT_NE(client, nullptr);
  for (const char* method : {"throw", "throw_async", "throw_blocking"}) {
    auto reply = client->call("test", method, "");
    ASSERT_FALSE(reply.ok()) << method;
    EXPECT_EQ(reply.code(), Code(Errc::kInternal)) << method << ": " << Describe(reply);
    EXPECT_EQ(retry_advice(reply.code()), RetryAdvice::kGiveUp);
  }
  auto after = client->call("sys", "echo", "survived");
  ASSERT_TRUE(after.ok()) << Describe(after);
  EXPECT_EQ(*after, "survived");
}

TEST_P(ServerTest, UnknownServiceOrMethodIsNotFound) {
  auto client = MustConnect();
  ASSERT_NE(client, nullptr);
  auto no_service = client->call("nosuch", "method", "");
  EXPECT_EQ(no_service.code(), Code(Errc::kNotFound)) << Describe(no_service);
  auto no_method = client->call("test", "nosuch", "");
  EXPECT_EQ(no_method.code(), Code(Errc::kNotFound)) << Describe(no_method);
  auto no_sys_method = client->call("sys", "shutdown", "");
  EXPECT_EQ(no_sys_method.code(), Code(Errc::kNotFound)) << Describe(no_sys_method);
  EXPECT_EQ(retry_advice(no_method.code()), RetryAdvice::kGiveUp);
  auto after = client->call("sys", "echo", "ok");
  EXPECT_TRUE(after.ok()) << Describe(after);
}

TEST_P(ServerTest, ACallPastItsDeadlineFailsFastAndTheConnectionStaysUsable) {
  auto client = MustConnect();
  ASSERT_NE(client, nullptr);
  CallOptions options;
  options.timeout = 50ms;
  const auto start = Clock::now();
  auto reply = client->call("test", "sleep", "3000 too-late", options);
  const auto took = Clock::now() - start;
  EXPECT_EQ(reply.code(), Code(Errc::kDeadlineExceeded)) << Describe(reply);
  EXPECT_EQ(retry_advice(reply.code()), RetryAdvice::kRetry);
  EXPECT_GE(took, 40ms);
  EXPECT_LT(took, 1000ms) << "the deadline did not cut the call short";

  auto after = client->call("sys", "echo", "still usable");
  ASSERT_TRUE(after.ok()) << Describe(after);
  EXPECT_EQ(*after, "still usable");
  EXPECT_TRUE(client->connection_status().ok()) << client->connection_status().to_string();
  // The client told the server (CANCEL), so the handler stops early.
  EXPECT_TRUE(Eventually([&] { return state_->cancelled_sleeps.load() >= 1; }, 2s))
      << "the handler never saw its call cancelled";
}

TEST_P(ServerTest, ADefaultCallTimeoutAppliesToCallsWithoutOne) {
  ClientOptions options = OptionsFor();
  options.default_call_timeout = 50ms;
  auto client = MustConnect(options);
  ASSERT_NE(client, nullptr);
  auto reply = client->call("test", "sleep", "3000 too-late");
  EXPECT_EQ(reply.code(), Code(Errc::kDeadlineExceeded)) << Describe(reply);
  auto quick = client->call("test", "sleep", "1 quick");
  ASSERT_TRUE(quick.ok()) << Describe(quick);
}

// --- JSON -------------------------------------------------------------------

TEST_P(ServerTest, AddJsonTakesAndReturnsJson) {
  auto client = MustConnect();
  ASSERT_NE(client, nullptr);
  auto reply = client->call("test", "add", R"({"a": 2, "b": 3.5})");
  ASSERT_TRUE(reply.ok()) << Describe(reply);
  const auto parsed = nlohmann::json::parse(*reply, nullptr, false);
  ASSERT_FALSE(parsed.is_discarded()) << *reply;
  EXPECT_DOUBLE_EQ(parsed["sum"].get<double>(), 5.5);
  // Compact serialization.
  EXPECT_EQ(reply->find(' '), std::string::npos) << *reply;

  auto blocking = client->call_json("test", "add_blocking", {{"a", 40}, {"b", 2}});
  ASSERT_TRUE(blocking.ok()) << Describe(blocking);
  EXPECT_EQ((*blocking)["sum"], 42);
  EXPECT_EQ((*blocking)["user"], "alice");
}

TEST_P(ServerTest, AddJsonRefusesInvalidJsonWithInvalidArgument) {
  auto client = MustConnect();
  ASSERT_NE(client, nullptr);
  for (const std::string& bad : {std::string("not json"), std::string("{\"a\": 1,"),
                                std::string()}) {
    auto reply = client->call("test", "add", bad);
    EXPECT_EQ(reply.code(), Code(Errc::kInvalidArgument)) << "'" << bad << "': " << Describe(reply);
  }
  // The handler's own refusal travels the same way.
  auto wrong_shape = client->call("test", "add", R"({"a": "x"})");
  EXPECT_EQ(wrong_shape.code(), Code(Errc::kInvalidArgument)) << Describe(wrong_shape);
  EXPECT_EQ(wrong_shape.status().message, "a and b must be numbers");
}

TEST_P(ServerTest, CallJsonSendsAndParsesJson) {
  auto client = MustConnect();
  ASSERT_NE(client, nullptr);
  auto sum = client->call_json("test", "add", {{"a", 1}, {"b", 2}});
  ASSERT_TRUE(sum.ok()) << Describe(sum);
  EXPECT_DOUBLE_EQ((*sum)["sum"].get<double>(), 3.0);

  const nlohmann::json doc = {{"list", {1, 2, 3}}, {"nested", {{"k", "v"}}}};
  auto echoed = client->call_json("sys", "echo", doc);
  ASSERT_TRUE(echoed.ok()) << Describe(echoed);
  EXPECT_EQ(*echoed, doc);

  auto not_json = client->call_json("test", "plain", nullptr);
  EXPECT_EQ(not_json.code(), Code(Errc::kDataLoss)) << Describe(not_json);

  auto missing = client->call_json("test", "nosuch", nullptr);
  EXPECT_EQ(missing.code(), Code(Errc::kNotFound)) << Describe(missing);
}

TEST_P(ServerTest, CallJsonWithAStringThatIsNotUtf8ReturnsAnErrorInsteadOfThrowing) {
  // result.h: "no exceptions cross the public API".
  auto client = MustConnect();
  ASSERT_NE(client, nullptr);
  const nlohmann::json request = {{"name", std::string("caf\xe9")}};  // Latin-1, not UTF-8
  Result<nlohmann::json> reply = Status(Errc::kUnknown, "not set");
  EXPECT_NO_THROW(reply = client->call_json("sys", "echo", request));
  if (!reply.ok()) {
    EXPECT_EQ(reply.code(), Code(Errc::kInvalidArgument)) << Describe(reply);
  }
  EXPECT_TRUE(client->call("sys", "echo", "x").ok());
}

TEST_P(ServerTest, WhoamiWorksForEveryUserNameTheServerAccepts) {
  // The simple mechanism accepts any bytes but whitespace and controls, so a
  // Latin-1 name gets in; whoami must then be able to report it.
  auto client = Client::connect(OptionsFor("caf\xe9"));
  if (!client.ok()) {
    EXPECT_EQ(client.code(), Code(Errc::kAuthenticationFailed)) << Describe(client);
    return;
  }
  auto reply = (*client)->call("sys", "whoami", "");
  ASSERT_TRUE(reply.ok()) << "authenticated, yet whoami fails: " << Describe(reply);
  // JSON text is UTF-8 (RFC 8259): a JSON parser must accept the reply.
  const auto parsed = nlohmann::json::parse(*reply, nullptr, false);
  EXPECT_FALSE(parsed.is_discarded()) << "whoami returned invalid JSON: " << *reply;
}

// --- lifecycle --------------------------------------------------------------

TEST_P(ServerTest, StopLetsAnInFlightCallFinishThenRefusesNewConnections) {
  std::unique_ptr<Client> client;
  std::future<Result<std::string>> slow;
  ASSERT_NO_FATAL_FAILURE(StartCall("slow", "", state_->slow_started, client, slow));

  const auto stop_started = Clock::now();
  std::thread stopper([this] { server_->stop(); });
  ASSERT_EQ(slow.wait_for(5s), std::future_status::ready);
  auto reply = slow.get();
  stopper.join();
  const auto stop_took = Clock::now() - stop_started;
  ASSERT_TRUE(reply.ok()) << "in-flight call was not allowed to finish: " << Describe(reply);
  EXPECT_EQ(*reply, "finished");
  EXPECT_LT(stop_took, 4s) << "stop() waited for the whole stop_grace";

  // The old connection no longer takes calls ...
  auto on_old = client->call("sys", "echo", "x");
  EXPECT_FALSE(on_old.ok());
  // ... and nobody can connect any more.
  ClientOptions late = OptionsFor();
  late.connect_timeout = 1s;
  auto refused = Client::connect(late);
  EXPECT_FALSE(refused.ok()) << "connected to a stopped server";
}

TEST_P(ServerTest, StopIsIdempotentAndWaitReturnsAfterIt) {
  auto client = MustConnect();
  ASSERT_NE(client, nullptr);
  server_->stop();
  server_->stop();
  std::thread waiter([this] { server_->wait(); });
  waiter.join();  // would hang if wait() missed the stop
  server_->stop();
  ClientOptions late = OptionsFor();
  late.connect_timeout = 1s;
  EXPECT_FALSE(Client::connect(late).ok());
}

TEST_P(ServerTest, StopFromAnotherThreadWakesWait) {
  std::promise<void> waited;
  std::thread waiter([&] {
    server_->wait();
    waited.set_value();
  });
  auto future = waited.get_future();
  EXPECT_EQ(future.wait_for(50ms), std::future_status::timeout) << "wait() returned too early";
  server_->stop();
  EXPECT_EQ(future.wait_for(5s), std::future_status::ready);
  waiter.join();
}

TEST_P(ServerTest, BindingAnEndpointThatIsInUseFailsStart) {
  ServerOptions options = DefaultServerOptions(endpoint_);
  Server second(std::move(options));
  const Status s = second.start();
  ASSERT_FALSE(s.ok()) << "two servers bound " << endpoint_.to_string();
  EXPECT_EQ(s.code.value(), EADDRINUSE) << s.to_string();
  // The first server is unaffected.
  auto client = MustConnect();
  ASSERT_NE(client, nullptr);
  EXPECT_TRUE(client->call("sys", "echo", "x").ok());
}

TEST_P(ServerTest, AFailedStartReportsNoBoundEndpoints) {
  // The first endpoint binds, the second is taken: start() must fail and
  // must not advertise the endpoint it released again.
  ServerOptions options = DefaultServerOptions(FreshEndpoint(GetParam()));
  options.endpoints.push_back(endpoint_);
  Server second(std::move(options));
  const Status s = second.start();
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(second.bound_endpoints(), ::testing::IsEmpty())
      << "bound_endpoints() lists an endpoint that is not bound after start() failed";
}

TEST_P(ServerTest, ServicesAreFixedOnceStartedAndSysIsReserved) {
  EXPECT_EQ(server_->add_service(Service("late")).code, Code(Errc::kFailedPrecondition));
  Server fresh(DefaultServerOptions(FreshEndpoint(GetParam())));
  EXPECT_EQ(fresh.add_service(Service("sys")).code, Code(Errc::kAlreadyExists));
  EXPECT_TRUE(fresh.add_service(Service("mine")).ok());
  EXPECT_EQ(fresh.add_service(Service("mine")).code, Code(Errc::kAlreadyExists));
  EXPECT_TRUE(fresh.start().ok());
  EXPECT_EQ(fresh.start().code, Code(Errc::kFailedPrecondition));
}

// --- limits -----------------------------------------------------------------

TEST_P(ServerTest, PastMaxConnectionsANewClientGetsServerBusyWhileTheFirstKeepsWorking) {
  ASSERT_NO_FATAL_FAILURE(StartServer([](ServerOptions& o) { o.max_connections = 1; }));
  auto first = MustConnect("first");
  ASSERT_NE(first, nullptr);

  auto second = Client::connect(OptionsFor("second"));
  ASSERT_FALSE(second.ok()) << "a second connection was accepted past max_connections=1";
  EXPECT_EQ(second.code(), Code(Errc::kServerBusy)) << Describe(second);
  EXPECT_EQ(retry_advice(second.code()), RetryAdvice::kRetry);
  EXPECT_GE(server_->stats().connections_refused_busy, 1u);

  auto reply = first->call("sys", "echo", "still served");
  ASSERT_TRUE(reply.ok()) << Describe(reply);
  EXPECT_EQ(*reply, "still served");

  // Once the first leaves, there is room again.
  first.reset();
  ASSERT_TRUE(Eventually([&] { return server_->stats().connections_active == 0; }))
      << "the closed connection was never released";
  auto third = Client::connect(OptionsFor("third"));
  ASSERT_TRUE(third.ok()) << Describe(third);
  EXPECT_TRUE((*third)->call("sys", "echo", "x").ok());
}

TEST_P(ServerTest, ARequestAboveTheServersFrameLimitEndsThatConnectionOnly) {
  ASSERT_NO_FATAL_FAILURE(StartServer([](ServerOptions& o) { o.max_frame_size = 64 * 1024; }));
  auto bystander = MustConnect("bystander");
  auto client = MustConnect();
  ASSERT_NE(client, nullptr);
  ASSERT_NE(bystander, nullptr);

  auto reply = client->call("sys", "echo", std::string(100 * 1024, 'x'));
  ASSERT_FALSE(reply.ok());
  EXPECT_TRUE(Eventually([&] { return !client->connection_status().ok(); }))
      << "the connection survived an oversize frame";
  const bool call_saw_it = reply.code() == Code(Errc::kFrameTooLarge);
  const bool connection_saw_it = client->connection_status().code == Code(Errc::kFrameTooLarge);
  EXPECT_TRUE(call_saw_it || connection_saw_it)
      << "call: " << Describe(reply) << ", connection: " << client->connection_status().to_string();
  EXPECT_TRUE(Eventually([&] { return server_->stats().protocol_errors >= 1; }));

  // Other connections and new clients are fine; a frame under the limit passes.
  auto still = bystander->call("sys", "echo", "unharmed");
  ASSERT_TRUE(still.ok()) << Describe(still);
  auto fresh = MustConnect();
  ASSERT_NE(fresh, nullptr);
  auto fits = fresh->call("sys", "echo", std::string(32 * 1024, 'y'));
  ASSERT_TRUE(fits.ok()) << Describe(fits);
  EXPECT_EQ(fits->size(), 32u * 1024);
}

TEST_P(ServerTest, TheClientRefusesToSendARequestAboveItsOwnFrameLimit) {
  ClientOptions options = OptionsFor();
  options.max_frame_size = 8 * 1024;
  auto client = MustConnect(options);
  ASSERT_NE(client, nullptr);
  auto reply = client->call("sys", "echo", std::string(16 * 1024, 'x'));
  EXPECT_EQ(reply.code(), Code(Errc::kFrameTooLarge)) << Describe(reply);
  // Nothing was sent, so the connection is fine.
  auto small = client->call("sys", "echo", "small");
  ASSERT_TRUE(small.ok()) << Describe(small);
}

// --- mechanisms and pipelining ------------------------------------------------

TEST_P(ServerTest, AClientAllowingOnlySimpleNegotiatesSimple) {
  auto client = MustConnect();  // allows only "simple"; the server enables only "simple"
  ASSERT_NE(client, nullptr);
  EXPECT_EQ(client->mechanism(), "simple");
  EXPECT_EQ(Whoami(*client)["mechanism"], "simple");
}

TEST_P(ServerTest, AClientFallsBackToTheFirstServerMechanismItAllows) {
  ClientOptions options = OptionsFor("dave");
  options.mechanisms.insert(options.mechanisms.begin(), std::make_shared<FakeClientMechanism>());
  auto client = MustConnect(options);
  ASSERT_NE(client, nullptr);
  EXPECT_EQ(client->mechanism(), "simple");
  EXPECT_EQ(Whoami(*client)["user"], "dave");
}

TEST_P(ServerTest, AClientWithNoMechanismTheServerEnablesGetsMechanismUnavailable) {
  ClientOptions options = OptionsFor();
  options.mechanisms = {std::make_shared<FakeClientMechanism>()};
  auto client = Client::connect(options);
  ASSERT_FALSE(client.ok()) << "connected with a mechanism the server does not enable";
  EXPECT_EQ(client.code(), Code(Errc::kMechanismUnavailable)) << Describe(client);
  EXPECT_EQ(retry_advice(client.code()), RetryAdvice::kGiveUp);
  EXPECT_THAT(client.status().message, HasSubstr("simple"));
}

TEST_P(ServerTest, AClientThatDoesNotWaitForAuthenticationCanCallAtOnce) {
  ClientOptions options = OptionsFor("erin");
  options.wait_for_authentication = false;
  auto client = MustConnect(options);
  ASSERT_NE(client, nullptr);
  // The first calls travel in the same flight as the negotiation.
  auto echo = client->call_future("sys", "echo", "first");
  EXPECT_EQ(Whoami(*client)["user"], "erin");
  auto echoed = echo.get();
  ASSERT_TRUE(echoed.ok()) << Describe(echoed);
  EXPECT_EQ(*echoed, "first");
  EXPECT_EQ(client->mechanism(), "simple");
  EXPECT_EQ(client->authenticated_user(), "erin");
}

TEST_P(ServerTest, PipelinedCallsSurviveARefusedFirstMechanism) {
  ClientOptions options = OptionsFor("frank");
  options.wait_for_authentication = false;
  options.mechanisms.insert(options.mechanisms.begin(), std::make_shared<FakeClientMechanism>());
  auto client = MustConnect(options);
  ASSERT_NE(client, nullptr);
  std::vector<std::future<Result<std::string>>> calls;
  for (int i = 0; i < 5; ++i) calls.push_back(client->call_future("sys", "echo", std::to_string(i)));
  for (int i = 0; i < 5; ++i) {
    ASSERT_EQ(calls[i].wait_for(5s), std::future_status::ready);
    auto reply = calls[i].get();
    ASSERT_TRUE(reply.ok()) << i << ": " << Describe(reply);
    EXPECT_EQ(*reply, std::to_string(i));
  }
  EXPECT_EQ(client->mechanism(), "simple");
}

TEST_P(ServerTest, AnAsyncClientCallsFromACoroutine) {
  ClientRuntime runtime(1);
  auto& io = runtime.next_context();
  ClientOptions options = OptionsFor("gina");
  auto future = asio::co_spawn(
      io,
      [options]() -> asio::awaitable<std::string> {
        auto client = co_await Client::async_connect(co_await asio::this_coro::executor, options);
        if (!client.ok()) co_return "connect: " + client.status().to_string();
        auto reply = co_await (*client)->async_call("test", "upper", "from a coroutine");
        if (!reply.ok()) co_return "call: " + reply.status().to_string();
        co_return *reply;
      },
      asio::use_future);
  ASSERT_EQ(future.wait_for(5s), std::future_status::ready);
  EXPECT_EQ(future.get(), "FROM A COROUTINE");
}

// --- more client behaviour ------------------------------------------------------

TEST_P(ServerTest, AResponseAboveTheClientsFrameLimitFailsTheCallWithFrameTooLarge) {
  ClientOptions options = OptionsFor();
  options.max_frame_size = 8 * 1024;
  auto client = MustConnect(options);
  ASSERT_NE(client, nullptr);
  auto fits = client->call("test", "repeat", "1000");
  ASSERT_TRUE(fits.ok()) << Describe(fits);
  EXPECT_EQ(fits->size(), 1000u);
  auto too_big = client->call("test", "repeat", "20000");
  EXPECT_EQ(too_big.code(), Code(Errc::kFrameTooLarge)) << Describe(too_big);
  // The server keeps serving everyone else.
  auto other = MustConnect();
  ASSERT_NE(other, nullptr);
  EXPECT_TRUE(other->call("sys", "echo", "x").ok());
}

TEST_P(ServerTest, DestroyingAClientFailsItsPendingCallsWithCancelled) {
  auto client = MustConnect();
  ASSERT_NE(client, nullptr);
  // Many pending calls, so that the client's IO thread still has completions
  // to run when the Client's destructor tears its runtime down.
  constexpr int kPending = 20000;
  std::vector<std::future<Result<std::string>>> pending;
  for (int i = 0; i < kPending; ++i) {
    pending.push_back(client->call_future("test", "stubborn", "400"));
  }
  // And one still running whatever the machine's speed: on a loaded machine
  // every 400 ms call may be answered before the Client goes.
  pending.push_back(client->call_future("test", "stubborn", "3000"));
  ASSERT_TRUE(client->call("sys", "echo", "all sent").ok());
  client.reset();  // "pending calls fail with kCancelled"
  // Calls the server answered before the Client went away (a slow build,
  // e.g. under sanitizers, takes longer than the handler's 400 ms to send
  // them all) succeed; every other one must fail with kCancelled.
  int cancelled = 0, answered = 0, abandoned = 0, other = 0;
  for (auto& f : pending) {
    ASSERT_EQ(f.wait_for(2s), std::future_status::ready) << "a pending call never ended";
    try {
      auto reply = f.get();
      if (reply.ok()) {
        ++answered;
      } else {
        reply.code() == Code(Errc::kCancelled) ? ++cancelled : ++other;
      }
    } catch (const std::future_error&) {
      ++abandoned;  // broken promise: the call's coroutine was destroyed unfinished
    }
  }
  EXPECT_EQ(abandoned, 0) << abandoned << " of " << pending.size()
                          << " futures were abandoned (std::future_error) instead of failing";
  EXPECT_GT(cancelled, 0);
  EXPECT_EQ(cancelled + answered, static_cast<int>(pending.size()));
  EXPECT_EQ(other, 0);
}

TEST_P(ServerTest, AHandlerSeesCancelledOnceTheClientHasGone) {
  // CallContext::cancelled(): "true once the client cancelled the call or the
  // connection went away".
  std::unique_ptr<Client> client;
  std::future<Result<std::string>> pending;
  ASSERT_NO_FATAL_FAILURE(StartCall("sleep", "1500 abandoned", state_->sleep_started, client, pending));
  client->close();
  EXPECT_TRUE(Eventually([&] { return state_->cancelled_sleeps.load() >= 1; }, 1s))
      << "the handler kept running for a connection that was gone";
}

TEST_P(ServerTest, ClosingAClientFailsItsPendingCallsWithCancelled) {
  std::unique_ptr<Client> client;
  std::future<Result<std::string>> pending;
  ASSERT_NO_FATAL_FAILURE(StartCall("sleep", "2000 never", state_->sleep_started, client, pending));
  client->close();
  ASSERT_EQ(pending.wait_for(2s), std::future_status::ready);
  auto reply = pending.get();
  EXPECT_EQ(reply.code(), Code(Errc::kCancelled)) << Describe(reply);
  auto after = client->call("sys", "echo", "x");
  EXPECT_EQ(after.code(), Code(Errc::kCancelled)) << Describe(after);
  client->close();  // idempotent
}

TEST_P(ServerTest, ABlockingCallOnTheClientsOwnIoThreadFailsInsteadOfDeadlocking) {
  ClientRuntime runtime(1);
  auto client = Client::connect(runtime, OptionsFor());
  ASSERT_TRUE(client.ok()) << Describe(client);
  std::promise<Result<std::string>> result;
  asio::post((*client)->executor(), [&] { result.set_value((*client)->call("sys", "echo", "x")); });
  auto future = result.get_future();
  ASSERT_EQ(future.wait_for(5s), std::future_status::ready) << "call() deadlocked on the IO thread";
  auto reply = future.get();
  EXPECT_EQ(reply.code(), Code(Errc::kFailedPrecondition)) << Describe(reply);
  client->reset();
}

TEST_P(ServerTest, APipelinedCallReportsAnAuthenticationFailure) {
  // Timing-sensitive while FrameChannel closes the whole stream on a write
  // error: if the pipelined request is written after the server has closed,
  // the write fails (EPIPE) and aborts the read that would have returned the
  // server's ERROR frame, so the call sees "operation aborted" instead.
  ClientOptions options = OptionsFor("has space");  // refused by the simple mechanism
  options.wait_for_authentication = false;
  auto client = Client::connect(options);
  ASSERT_TRUE(client.ok()) << "connect should not wait for the verdict: " << Describe(client);
  auto reply = (*client)->call("sys", "whoami", "");
  EXPECT_EQ(reply.code(), Code(Errc::kAuthenticationFailed)) << Describe(reply);
  EXPECT_EQ((*client)->connection_status().code, Code(Errc::kAuthenticationFailed));
  EXPECT_EQ(retry_advice(reply.code()), RetryAdvice::kGiveUp);
}

TEST_P(ServerTest, APipelinedCallReportsAnAuthenticationFailureEvenWhileStillSending) {
  // The server refuses the HELLO and closes while the client is still writing
  // a large pipelined request: the ERROR frame it sent first must still be
  // what the caller sees, not the failed write.
  ClientOptions options = OptionsFor("has space");
  options.wait_for_authentication = false;
  auto client = Client::connect(options);
  ASSERT_TRUE(client.ok()) << Describe(client);
  auto reply = (*client)->call("sys", "echo", std::string(4 * 1024 * 1024, 'p'));
  EXPECT_EQ(reply.code(), Code(Errc::kAuthenticationFailed)) << Describe(reply);
  EXPECT_EQ(retry_advice(reply.code()), RetryAdvice::kGiveUp) << Describe(reply);
}

TEST_P(ServerTest, AWaitingClientReportsAnAuthenticationFailureFromConnect) {
  auto client = Client::connect(OptionsFor("has space"));
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.code(), Code(Errc::kAuthenticationFailed)) << Describe(client);
  EXPECT_GE(server_->stats().negotiation_failures, 1u);
}

TEST_P(ServerTest, ACallLongerThanTheIdleTimeoutIsNotCutOff) {
  ASSERT_NO_FATAL_FAILURE(StartServer([](ServerOptions& o) { o.idle_timeout = 100ms; }));
  auto client = MustConnect();
  ASSERT_NE(client, nullptr);
  auto reply = client->call("test", "sleep", "300 outlived");
  ASSERT_TRUE(reply.ok()) << Describe(reply);
  EXPECT_EQ(*reply, "outlived");
}

TEST_P(ServerTest, IdleTimeIsCountedFromTheLastResponseNotTheLastRequest) {
  ASSERT_NO_FATAL_FAILURE(StartServer([](ServerOptions& o) { o.idle_timeout = 150ms; }));
  auto client = MustConnect();
  ASSERT_NE(client, nullptr);
  auto slow = client->call("test", "sleep", "400 slow");
  ASSERT_TRUE(slow.ok()) << Describe(slow);
  // Idle for 80 ms only, well under the 150 ms idle timeout.
  std::this_thread::sleep_for(80ms);
  EXPECT_TRUE(client->connection_status().ok())
      << "closed as idle 80 ms after a response: " << client->connection_status().to_string();
  auto next = client->call("sys", "echo", "next");
  EXPECT_TRUE(next.ok()) << Describe(next);
}

TEST_P(ServerTest, StopDoesNotWaitPastStopGraceForAHandlerThatIgnoresCancellation) {
  StopDuringCall(100ms, "stubborn", "800", state_->stubborn_started, 600ms);
}

TEST_P(ServerTest, StopPastStopGraceDoesNotLingerOnConnectionsItAlreadyClosed) {
  // A cooperative handler: it returns as soon as the call is cancelled,
  // which stop() does once stop_grace has passed.
  StopDuringCall(100ms, "sleep", "5000 cut", state_->sleep_started, 1000ms);
}

TEST_P(ServerTest, StopWithABlockingHandlerRunningPastStopGraceCompletesCleanly) {
  // stop() cannot interrupt a thread: it waits for the pool, then finishes.
  StopDuringCall(50ms, "blocking_sleep", "300", state_->blocking_sleep_started,
                 Clock::duration::max());
  test_server_.reset();  // the late completion must not touch freed state (ASan)
}

// --- options validation -------------------------------------------------------

TEST(ServerStartTest, StartWithoutEndpointsIsAConfigError) {
  ServerOptions options = DefaultServerOptions(FreshEndpoint(Kind::kTcp));
  options.endpoints.clear();
  Server server(std::move(options));
  const Status s = server.start();
  EXPECT_EQ(s.code, Code(Errc::kConfigError)) << s.to_string();
  EXPECT_TRUE(server.bound_endpoints().empty());
}

TEST(ServerStartTest, StartWithoutMechanismsIsAConfigError) {
  ServerOptions options = DefaultServerOptions(FreshEndpoint(Kind::kTcp));
  options.mechanisms.clear();
  Server server(std::move(options));
  const Status s = server.start();
  EXPECT_EQ(s.code, Code(Errc::kConfigError)) << s.to_string();
}

TEST(ServerStartTest, StartRefusesInconsistentLimits) {
  const std::vector<std::pair<const char*, std::function<void(ServerOptions&)>>> cases = {
      {"null mechanism", [](ServerOptions& o) { o.mechanisms.push_back(nullptr); }},
      {"mechanism twice",
       [](ServerOptions& o) { o.mechanisms.push_back(std::make_shared<SimpleServerMechanism>()); }},
      {"tiny frames", [](ServerOptions& o) { o.max_frame_size = 100; }},
      {"no connections", [](ServerOptions& o) { o.max_connections = 0; }},
      {"no blocking threads", [](ServerOptions& o) { o.blocking_threads = 0; }},
      {"zero negotiation timeout", [](ServerOptions& o) { o.negotiation_timeout = 0ms; }},
      {"output below frame", [](ServerOptions& o) { o.max_pending_output = 4096; }},
  };
  for (const auto& [name, tweak] : cases) {
    ServerOptions options = DefaultServerOptions(FreshEndpoint(Kind::kTcp));
    tweak(options);
    Server server(std::move(options));
    const Status s = server.start();
    EXPECT_EQ(s.code, Code(Errc::kConfigError)) << name << ": " << s.to_string();
  }
}

// add_json runs its handler inline or on the blocking pool only; asked for
// another execution, it does not throw out of the builder: it records the
// misuse, and add_service refuses the service with it.
TEST(ServerStartTest, AddServiceRefusesAJsonMethodWithAnExecutionItCannotUse) {
  const auto handler = [](CallContext&, const nlohmann::json& request) -> Result<nlohmann::json> {
    return request;
  };
  for (const Execution bad : {Execution::kAsync, Execution::kStream}) {
    Server server(DefaultServerOptions(FreshEndpoint(Kind::kTcp)));
    Service service("calc");
    service.add_json("echo", handler, bad);
    EXPECT_EQ(service.find("echo"), nullptr);
    const Status s = server.add_service(std::move(service));
    EXPECT_EQ(s.code, Code(Errc::kInvalidArgument)) << s.to_string();
    EXPECT_NE(s.message.find("calc.echo"), std::string::npos) << s.message;
  }
  Server server(DefaultServerOptions(FreshEndpoint(Kind::kTcp)));
  Service service("calc");
  service.add_json("echo", handler, Execution::kBlocking);
  EXPECT_TRUE(service.status().ok());
  EXPECT_TRUE(server.add_service(std::move(service)).ok());
}

TEST(ServerLifecycleTest, StartingAndStoppingManyTimesNeverHangs) {
  // Short timeouts make each IO thread's housekeeping timer tick often, so
  // that stop() meets it in every phase.
  std::mt19937 rng(1);
  std::uniform_int_distribution<int> pause_us(0, 12000);
  for (int cycle = 0; cycle < 300; ++cycle) {
    ServerOptions options = DefaultServerOptions(FreshEndpoint(Kind::kTcp));
    options.io_threads = 8;
    options.idle_timeout = 40ms;
    options.negotiation_timeout = 40ms;
    auto server = std::make_unique<Server>(std::move(options));
    const Status started = server->start();
    ASSERT_TRUE(started.ok()) << started.to_string();
    std::this_thread::sleep_for(std::chrono::microseconds(pause_us(rng)));
    ASSERT_TRUE(StopAndDestroy(server, 5s)) << "Server::stop() hung (cycle " << cycle << ")";
  }
}

TEST(ClientConnectTest, AServerThatNeverAnswersGivesNegotiationTimeout) {
  // A listening socket nobody accepts from: connect succeeds, nothing answers.
  const testing::SilentListener silent;
  ASSERT_NE(silent.port(), 0);

  ClientOptions options;
  options.endpoint = *Endpoint::parse("tcp://127.0.0.1:" + std::to_string(silent.port()));
  options.mechanisms = {std::make_shared<SimpleClientMechanism>("alice")};
  options.connect_timeout = 200ms;
  const auto start = Clock::now();
  auto client = Client::connect(options);
  const auto took = Clock::now() - start;
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.code(), Code(Errc::kNegotiationTimeout)) << Describe(client);
  EXPECT_EQ(retry_advice(client.code()), RetryAdvice::kRetry);
  EXPECT_GE(took, 150ms);
  EXPECT_LT(took, 2s);
}

TEST(UnixSocketFileTest, TheSocketFileExistsWhileServingAndIsRemovedOnStop) {
  const testing::ScopedTempDir scoped("server-test");
  ASSERT_TRUE(scoped.ok());
  const std::string& dir = scoped.path();
  const std::string path = dir + "/s.sock";
  {  // A stale socket file from a dead server is replaced.
    const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path.c_str());
    ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    ::close(fd);  // leaves the file, nobody listening
  }
  ServerOptions options = DefaultServerOptions(*Endpoint::parse("unix:" + path));
  options.listen.unix_socket_mode = 0600;
  Server server(std::move(options));
  const Status started = server.start();
  ASSERT_TRUE(started.ok()) << started.to_string();
  struct stat st {};
  ASSERT_EQ(::lstat(path.c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0600u);

  ClientOptions client_options;
  client_options.endpoint = server.bound_endpoints().front();
  client_options.mechanisms = {std::make_shared<SimpleClientMechanism>("alice")};
  auto client = Client::connect(client_options);
  ASSERT_TRUE(client.ok()) << Describe(client);
  auto reply = (*client)->call_json("sys", "whoami", nullptr);
  ASSERT_TRUE(reply.ok()) << Describe(reply);
  EXPECT_EQ((*reply)["user"], "alice");
  client->reset();

  server.stop();
  EXPECT_NE(::lstat(path.c_str(), &st), 0) << "the socket file outlived the server";
}

// The sockets this process holds: descriptor -> close-on-exec.
std::map<int, bool> OpenSockets() {
  std::map<int, bool> sockets;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
    std::error_code ec;
    const auto target = std::filesystem::read_symlink(entry.path(), ec);
    if (ec || !target.string().starts_with("socket:")) continue;
    const int fd = std::stoi(entry.path().filename().string());
    const int flags = ::fcntl(fd, F_GETFD);
    if (flags >= 0) sockets[fd] = (flags & FD_CLOEXEC) != 0;
  }
  return sockets;
}

// Every socket of a server (listeners on tcp, unix and tls, shared by two IO
// threads; accepted connections) and of its clients is close-on-exec: a
// program the process starts holds none of them open (socket_transport.cc).
TEST(SocketDescriptorTest, EverySocketOfAServerAndItsClientsIsCloseOnExec) {
  const auto before = OpenSockets();
  {
    testing::TestServer server;
    server.endpoint("tcp:").endpoint("unix:").tls().encryption(SecurityRequirement::kOptional).io_threads(2);
    const Status started = server.start();
    ASSERT_TRUE(started.ok()) << started.to_string();
    std::vector<std::unique_ptr<Client>> clients;
    for (const auto& endpoint : server.endpoints()) {
      for (int i = 0; i < 2; ++i) {
        auto client = server.client(endpoint).simple().connect();
        ASSERT_TRUE(client.ok()) << endpoint.to_string() << ": " << Describe(client);
        ASSERT_TRUE((*client)->call_json("sys", "whoami", nullptr).ok()) << endpoint.to_string();
        clients.push_back(std::move(*client));
      }
    }
    std::size_t added = 0;
    for (const auto& [fd, cloexec] : OpenSockets()) {
      if (before.contains(fd)) continue;
      ++added;
      EXPECT_TRUE(cloexec) << "socket descriptor " << fd << " is inherited by exec";
    }
    // 3 endpoints x 2 IO threads' listeners, 6 clients and 6 accepted.
    EXPECT_GE(added, 15u);
  }
}

// A Unix client bound to a path that fills sun_path has an address one
// byte longer than an endpoint holds (Linux adds a NUL): accepting it once
// threw from the accept loop and left the server accepting nothing.
TEST(SocketDescriptorTest, AUnixClientBoundToAFullLengthPathDoesNotStopAccepting) {
  const testing::ScopedTempDir scoped("long-peer");
  ASSERT_TRUE(scoped.ok());
  const std::string& dir = scoped.path();
  testing::TestServer server;
  server.endpoint("unix:" + dir + "/s.sock").io_threads(1);
  const Status started = server.start();
  ASSERT_TRUE(started.ok()) << started.to_string();

  sockaddr_un client_address{};
  client_address.sun_family = AF_UNIX;
  std::string client_path = dir + "/";
  client_path.append(sizeof client_address.sun_path - client_path.size(), 'c');  // no NUL left
  std::memcpy(client_address.sun_path, client_path.data(), client_path.size());
  sockaddr_un server_address{};
  server_address.sun_family = AF_UNIX;
  std::snprintf(server_address.sun_path, sizeof server_address.sun_path, "%s", (dir + "/s.sock").c_str());
  for (int i = 0; i < 2; ++i) {
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ASSERT_GE(fd, 0);
    ::unlink(client_path.c_str());
    ASSERT_EQ(::bind(fd, reinterpret_cast<const sockaddr*>(&client_address), sizeof client_address), 0)
        << std::strerror(errno);
    ASSERT_EQ(::connect(fd, reinterpret_cast<const sockaddr*>(&server_address), sizeof server_address), 0)
        << std::strerror(errno);
    // The next client is still accepted and served.
    auto client = server.client().simple().connect();
    ASSERT_TRUE(client.ok()) << Describe(client);
    EXPECT_TRUE((*client)->call_json("sys", "whoami", nullptr).ok());
    ::close(fd);
  }
  server.stop();
}

// A stopped server removes its socket file: a missing one is a server that
// is not there now, as a refused TCP connect is (client/connect_byte_stream.h).
TEST(ClientConnectTest, AMissingUnixSocketIsUnavailableAndSaysSo) {
  auto endpoint = Endpoint::parse("unix:/nonexistent-authrpc-dir/none.sock");
  ASSERT_TRUE(endpoint.ok());
  ClientOptions options;
  options.endpoint = *endpoint;
  options.mechanisms = {std::make_shared<SimpleClientMechanism>("alice")};
  options.connect_timeout = 1s;
  auto client = Client::connect(options);
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.code(), Errc::kUnavailable) << Describe(client);
  EXPECT_EQ(client.status().message,
            "cannot reach the server at unix:/nonexistent-authrpc-dir/none.sock: no such socket file "
            "(is the server running?)");
  EXPECT_EQ(retry_advice(client.code()), RetryAdvice::kRetry) << Describe(client);
}

TEST(ClientConnectTest, ConnectingWhereNobodyListensFailsWithRetryAdvice) {
  // Bind then stop a server to get a port that is (very likely) free.
  Endpoint endpoint;
  {
    testing::TestServer server;
    ASSERT_OK(server.start());
    endpoint = server.endpoint();
  }
  ClientOptions options;
  options.endpoint = endpoint;
  options.mechanisms = {std::make_shared<SimpleClientMechanism>("alice")};
  options.connect_timeout = 1s;
  auto client = Client::connect(options);
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(retry_advice(client.code()), RetryAdvice::kRetry) << Describe(client);
}

}  // namespace
}  // namespace authrpc
