// Negotiation: the KDC-less half of the negotiation table
// (tests/testing/negotiation_table.h: `simple`, `x509` and the test mechanisms
// plain-test and reject-test, one ctest entry per row), a check on the table
// itself, and what a table row cannot show: pipelined calls behind
// negotiation, failure counting, a prompt stop after a port probe.
// Real Servers and Clients over loopback TCP (tests/testing/test_server.h).
#include <gtest/gtest.h>

#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/post.hpp>
#include <asio/steady_timer.hpp>
#include <asio/use_awaitable.hpp>
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <ostream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "authrpc/auth/mechanism_registry.h"
#include "authrpc/client/client.h"
#include "authrpc/server/server.h"
#include "tests/testing/negotiation_table.h"
#include "tests/testing/test_server.h"
#include "tests/testing/test_support.h"

namespace authrpc {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using testing::ClientMechanismFor;
using testing::ServerMechanismFor;
using testing::NegotiationTable;
using testing::SessionLog;

// ---------------------------------------------------------------------------
// Fixture: one server per test, with a `test.count` method that counts how
// often it ran (to see that dropped pipelined calls never execute).

class NegotiationTest : public ::testing::Test {
 protected:
  void TearDown() override { server_.stop(); }

  Endpoint start_server(const std::vector<std::string>& mechanisms) {
    for (const auto& name : mechanisms) server_.mechanism(ServerMechanismFor(name, &server_log_));
    server_.blocking_threads(1).options([this](ServerOptions& o) {
      o.negotiation_timeout = negotiation_timeout_;
      o.stop_grace = 2s;
    });
    Service test("test");
    test.add("count", [this](CallContext& ctx, std::string_view request) -> Result<std::string> {
      ++executed_;
      {
        std::lock_guard lock(order_mu_);
        order_.emplace_back(request.substr(0, request.find('.')));
      }
      return std::string(request) + "/" + ctx.identity().mechanism;
    });
    server_.service(std::move(test));
    const Status s = server_.start();
    EXPECT_TRUE(s.ok()) << s.to_string();
    if (!s.ok()) return Endpoint{};
    const auto& bound = server_.endpoints();
    EXPECT_EQ(bound.size(), 1u);
    EXPECT_NE(bound[0].port, 0);
    return bound[0];
  }

  ClientOptions client_options(const Endpoint& ep, const std::vector<std::string>& specs) {
    testing::TestClient client(ep);
    for (const auto& spec : specs) client.mechanism(ClientMechanismFor(spec, &client_log_));
    return client.build();
  }

  // Short, so that a connection the server forgets to clean up (see
  // StopIsPromptAfterAClientLeavesBeforeThePreamble) costs little.
  std::chrono::milliseconds negotiation_timeout_ = 5s;
  testing::TestServer server_;
  SessionLog server_log_;
  SessionLog client_log_;
  std::atomic<int> executed_{0};
  std::mutex order_mu_;
  std::vector<std::string> order_;  // the calls `test.count` ran, by payload up to its first '.'
};

// Runs a coroutine on `io` to completion (bounded).
void run_coroutine(asio::io_context& io, std::function<asio::awaitable<void>()> body) {
  bool done = false;
  asio::co_spawn(io, std::move(body), [&done](std::exception_ptr e) {
    done = true;
    if (e) std::rethrow_exception(e);
  });
  io.run_for(30s);
  EXPECT_TRUE(done) << "coroutine did not finish";
}

// ---------------------------------------------------------------------------
// The table's rows that need no KDC (the others run in negotiation_itest)

INSTANTIATE_TEST_SUITE_P(WithoutKdc, NegotiationTable, ::testing::ValuesIn(testing::NegotiationRows(false)),
                         [](const auto& tp) { return std::string(tp.param.name); });

// One table: a row name says which row failed, and a built-in mechanism
// without a row where it is negotiated is a mechanism the table forgot.
TEST(NegotiationTableRows, NamesAreUniqueAndEveryBuiltInMechanismIsNegotiatedSomewhere) {
  std::set<std::string> names, negotiated;
  for (const auto& row : testing::AllNegotiationRows()) {
    EXPECT_TRUE(names.insert(row.name).second) << "two rows named " << row.name;
    if (row.expected == Errc::kOk) negotiated.insert(row.mechanism);
  }
  for (const auto& name : MechanismRegistry::with_builtins().server_names()) {
    EXPECT_TRUE(negotiated.contains(name)) << "no row negotiates " << name;
  }
}

const std::string kS = "simple";
const std::string kP = "plain-test";
const std::string kR = "reject-test";

// ---------------------------------------------------------------------------
// Beyond the table

TEST_F(NegotiationTest, PlainIdentityReachesTheServerWithItsPrincipal) {
  const Endpoint ep = start_server({kP});
  auto client = Client::connect(client_options(ep, {kP}));
  ASSERT_TRUE(client.ok()) << client.status().to_string();
  auto whoami = (*client)->call_json("sys", "whoami", json::object());
  ASSERT_TRUE(whoami.ok()) << whoami.status().to_string();
  EXPECT_EQ((*whoami)["user"], "carol");
  EXPECT_EQ((*whoami)["principal"], "carol@TEST");
  EXPECT_EQ((*whoami)["realm"], "TEST");
  EXPECT_EQ((*whoami)["mechanism"], kP);
  EXPECT_TRUE((*whoami)["real_user"].is_null());
}

TEST_F(NegotiationTest, ServerCountsNegotiationFailuresAndKeepsServing) {
  const Endpoint ep = start_server({kR, kS});
  for (int i = 0; i < 3; ++i) {
    auto bad = Client::connect(client_options(ep, {kR}));
    ASSERT_FALSE(bad.ok());
    EXPECT_EQ(bad.code(), Errc::kAuthenticationFailed);
  }
  // Counted on the server's thread, perhaps after the client saw the error.
  testing::Eventually([&] { return server_.stats().negotiation_failures >= 3; }, 10s);
  EXPECT_EQ(server_.stats().negotiation_failures, 3u);
  auto good = Client::connect(client_options(ep, {kS}));
  ASSERT_TRUE(good.ok()) << good.status().to_string();
  EXPECT_EQ((*good)->mechanism(), kS);
}

// A client that connects and leaves without sending the preamble (a port
// probe, a TCP health check, or a client with no mechanism configured) must
// not keep anything alive on the server: stop() returns at once.
// (Bug: see report — ServerConnection::run() leaves the negotiation timer
// armed on that path, which keeps the connection and its socket alive and
// the IO thread busy until negotiation_timeout.)
TEST_F(NegotiationTest, StopIsPromptAfterAClientLeavesBeforeThePreamble) {
  negotiation_timeout_ = 5s;
  const Endpoint ep = start_server({kS});
  {
    asio::io_context io;
    asio::ip::tcp::socket probe(io);
    std::error_code ec;
    probe.connect({asio::ip::make_address(ep.host), ep.port}, ec);
    ASSERT_FALSE(ec) << ec.message();
    probe.close();
  }
  // Wait until the server has seen the connection come and go.
  testing::Eventually(
      [&] {
        const auto stats = server_.stats();
        return stats.connections_accepted >= 1 && stats.connections_active == 0;
      },
      5s);
  // Not a wait for an event: a window in which a wrongly counted failure or
  // a second connection would show (nothing announces that they did not happen).
  std::this_thread::sleep_for(50ms);
  ASSERT_EQ(server_.stats().connections_accepted, 1u);
  EXPECT_EQ(server_.stats().connections_active, 0u);
  EXPECT_EQ(server_.stats().negotiation_failures, 0u);  // a plain disconnect is not a failure

  const auto start = std::chrono::steady_clock::now();
  server_.stop();
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_LT(took, 2s) << "Server::stop() took "
                      << std::chrono::duration_cast<std::chrono::milliseconds>(took).count()
                      << " ms (negotiation_timeout is 5000 ms)";
}

// Pipelining (wait_for_authentication = false): calls made right after
// connect travel behind the client's last negotiation token. If the server
// refuses the mechanism it drops them unexecuted; the client must send them
// again behind the next mechanism's final message; and the same if the server
// challenges a message the client sent as its last. The calls are issued on the
// client's own event loop before it ever suspends, so they are certainly
// queued before the server's answer can arrive.
struct PipelineCase {
  const char* name;
  std::vector<std::string> client;
  std::vector<std::string> server;
  Errc expected;  // for every call
  std::string mechanism;
  std::vector<std::string> client_sessions;
  std::size_t padding = 0;  // bytes added to each call's payload
};

void PrintTo(const PipelineCase& c, std::ostream* os) { *os << c.name; }

// The tests of pipelining, one per `Case` (a table row naming the server's
// and the client's mechanisms).
template <class Case>
class PipelinedTest : public NegotiationTest, public ::testing::WithParamInterface<Case> {
 protected:
  // Starts the server with the case's server mechanisms; `options` are then
  // those of a client with its client mechanisms that calls without waiting
  // for authentication.
  void start_pipelining(ClientOptions& options) {
    const Endpoint ep = start_server(this->GetParam().server);
    ASSERT_NE(ep.port, 0);
    options = client_options(ep, this->GetParam().client);
    options.wait_for_authentication = false;
  }
};

using PipelinedNegotiationTest = PipelinedTest<PipelineCase>;

TEST_P(PipelinedNegotiationTest, CallsBehindNegotiation) {
  const auto& c = GetParam();
  ClientOptions options;
  ASSERT_NO_FATAL_FAILURE(start_pipelining(options));

  constexpr int kCalls = 4;
  asio::io_context io;
  Status connect_status;
  std::string mechanism_before;
  std::vector<Result<std::string>> results(kCalls);
  Result<std::string> whoami;
  Status auth_status;
  std::string mechanism_after;
  run_coroutine(io, [&]() -> asio::awaitable<void> {
    auto client = co_await Client::async_connect(io.get_executor(), options);
    connect_status = client.status();
    if (!client.ok()) co_return;
    mechanism_before = (*client)->mechanism();
    // Calls 1..3 start at once (co_spawn runs them up to their first wait);
    // call 0 is queued synchronously by the co_await below.
    int finished = 0;
    // async_call takes string_views and runs lazily: keep the payloads alive.
    std::vector<std::string> payloads;
    for (int i = 0; i < kCalls; ++i) {
      payloads.push_back("call-" + std::to_string(i) + std::string(c.padding, '.'));
    }
    for (int i = 1; i < kCalls; ++i) {
      asio::co_spawn(io, (*client)->async_call("test", "count", payloads[i]),
                     [&, i](std::exception_ptr, Result<std::string> r) {
                       results[i] = std::move(r);
                       ++finished;
                     });
    }
    results[0] = co_await (*client)->async_call("test", "count", payloads[0]);
    auth_status = co_await (*client)->async_wait_authenticated();
    while (finished < kCalls - 1) {
      asio::steady_timer t(io, 1ms);
      co_await t.async_wait(asio::use_awaitable);
    }
    if (auth_status.ok()) {
      whoami = co_await (*client)->async_call("sys", "whoami", "");
    }
    mechanism_after = (*client)->mechanism();
    (*client)->close();
  });

  ASSERT_TRUE(connect_status.ok()) << "with wait_for_authentication=false connect returns before "
                                      "negotiation ends: "
                                   << connect_status.to_string();
  EXPECT_EQ(mechanism_before, "") << "negotiation finished before the calls were queued";
  if (c.expected == Errc::kOk) {
    EXPECT_TRUE(auth_status.ok()) << auth_status.to_string();
    for (int i = 0; i < kCalls; ++i) {
      ASSERT_TRUE(results[i].ok()) << "call " << i << ": " << results[i].status().to_string();
      EXPECT_EQ(*results[i],
                "call-" + std::to_string(i) + std::string(c.padding, '.') + "/" + c.mechanism);
    }
    // Each call ran exactly once: copies dropped behind a refused HELLO
    // were not executed, and the resent ones were.
    EXPECT_EQ(executed_.load(), kCalls);
    ASSERT_TRUE(whoami.ok()) << whoami.status().to_string();
    EXPECT_EQ(json::parse(*whoami)["mechanism"], c.mechanism);
    EXPECT_EQ(mechanism_after, c.mechanism);
  } else {
    EXPECT_EQ(auth_status.code, c.expected) << auth_status.to_string();
    for (int i = 0; i < kCalls; ++i) {
      EXPECT_EQ(results[i].code(), c.expected)
          << "call " << i << ": " << results[i].status().to_string();
    }
    EXPECT_EQ(executed_.load(), 0);
  }
  EXPECT_EQ(client_log_.names(), c.client_sessions);
}

INSTANTIATE_TEST_SUITE_P(
    Table, PipelinedNegotiationTest,
    ::testing::Values(
        // Accepted at once: calls ride in the first flight.
        PipelineCase{"accepted_first", {kS}, {kS}, Errc::kOk, kS, {kS}},
        PipelineCase{"accepted_multi_round", {kP}, {kP}, Errc::kOk, kP, {kP}},
        // simple's HELLO carries its final message, so the calls follow it and
        // are dropped by the server; plain-test then takes two rounds before
        // its final message, behind which the calls must be resent.
        PipelineCase{"refused_simple_then_plain", {kS, kP}, {kP}, Errc::kOk, kP, {kS, kP}},
        // Calls held during plain-test's first round, then follow simple.
        PipelineCase{"refused_plain_then_simple", {kP, kS}, {kS}, Errc::kOk, kS, {kP, kS}},
        PipelineCase{"refused_reject_then_simple", {kR, kS}, {kS}, Errc::kOk, kS, {kR, kS}},
        // The client's HELLO was its last message, but the server challenges
        // it (a `token` ticket it did not issue): the calls behind it are
        // dropped and follow the client's answer.
        PipelineCase{"challenged_after_final", {"plain-test:optimistic"}, {kP}, Errc::kOk, kP, {kP}},
        // Calls larger than the server's limit before authentication
        // (max_negotiation_frame_size, 64 KiB) would end the connection if
        // the server read them to drop them: the client holds them until
        // AUTH_SUCCESS (larger than 4096 bytes, the smallest such limit).
        PipelineCase{"challenged_after_final_large", {"plain-test:optimistic"}, {kP}, Errc::kOk, kP,
                     {kP}, 70'000},
        PipelineCase{"refused_simple_then_plain_large", {kS, kP}, {kP}, Errc::kOk, kP, {kS, kP},
                     70'000},
        PipelineCase{"accepted_first_large", {kS}, {kS}, Errc::kOk, kS, {kS}, 70'000},
        // Failures reach every pipelined call.
        PipelineCase{"rejected", {kR}, {kR}, Errc::kAuthenticationFailed, "", {kR}},
        PipelineCase{"refused_then_rejected", {kS, kR}, {kR}, Errc::kAuthenticationFailed, "",
                     {kS, kR}},
        PipelineCase{"wrong_password", {"plain-test:wrong"}, {kP}, Errc::kAuthenticationFailed, "",
                     {kP}},
        PipelineCase{"nothing_in_common", {kS}, {kP}, Errc::kMechanismUnavailable, "", {kS}}),
    [](const auto& tp) { return std::string(tp.param.name); });

// Pipelined calls of mixed sizes keep their order and run once, whichever
// way negotiation goes: made before the client's last message was queued
// (held, then sent behind it) or after (sent at once: the optimistic path),
// with a request over 4096 bytes among them (it and the ones after it wait
// for AUTH_SUCCESS).
struct OrderCase {
  const char* name;
  std::vector<std::string> server;
  std::vector<std::string> client;
  int turns_before_calls;  // event-loop turns after connect before the calls are made
};

void PrintTo(const OrderCase& c, std::ostream* os) { *os << c.name; }

using PipelinedOrderTest = PipelinedTest<OrderCase>;

TEST_P(PipelinedOrderTest, MixedSizesRunOnceInOrder) {
  const auto& c = GetParam();
  ClientOptions options;
  ASSERT_NO_FATAL_FAILURE(start_pipelining(options));
  const std::vector<std::size_t> sizes = {10, 70'000, 10, 5'000, 10};
  std::vector<std::string> payloads;
  std::vector<std::string> in_order;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    in_order.push_back("c" + std::to_string(i));
    payloads.push_back(in_order.back() + std::string(sizes[i], '.'));
  }
  std::vector<Result<std::string>> results(sizes.size());
  std::string mechanism_before;
  // The calls must be made before AUTH_SUCCESS arrives; over loopback a
  // fast server can beat the client's event-loop turns, so a connection
  // that authenticated first is tried again (its calls are not counted).
  for (int attempt = 0; attempt < 20; ++attempt) {
    {
      std::lock_guard lock(order_mu_);
      order_.clear();
    }
    executed_ = 0;
    asio::io_context io;
    run_coroutine(io, [&]() -> asio::awaitable<void> {
      auto client = co_await Client::async_connect(io.get_executor(), options);
      if (!client.ok()) co_return;
      for (int i = 0; i < c.turns_before_calls; ++i) co_await asio::post(io, asio::use_awaitable);
      mechanism_before = (*client)->mechanism();
      std::size_t finished = 0;
      for (std::size_t i = 0; i < sizes.size(); ++i) {
        asio::co_spawn(io, (*client)->async_call("test", "count", payloads[i]),
                       [&, i](std::exception_ptr, Result<std::string> r) {
                         results[i] = std::move(r);
                         ++finished;
                       });
      }
      while (finished < sizes.size()) {
        asio::steady_timer t(io, 1ms);
        co_await t.async_wait(asio::use_awaitable);
      }
      (*client)->close();
    });
    if (mechanism_before.empty()) break;
  }
  EXPECT_EQ(mechanism_before, "") << "negotiation finished before the calls were made, 20 times";
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    EXPECT_TRUE(results[i].ok()) << "call " << i << ": " << results[i].status().to_string();
  }
  EXPECT_EQ(executed_.load(), static_cast<int>(sizes.size()));
  std::lock_guard lock(order_mu_);
  EXPECT_EQ(order_, in_order);
}

INSTANTIATE_TEST_SUITE_P(
    Table, PipelinedOrderTest,
    ::testing::Values(OrderCase{"held_challenged_after_final", {kP}, {"plain-test:optimistic"}, 0},
                      OrderCase{"sent_challenged_after_final", {kP}, {"plain-test:optimistic"}, 2},
                      OrderCase{"held_accepted_first", {kS}, {kS}, 0},
                      OrderCase{"sent_accepted_first", {kS}, {kS}, 2},
                      OrderCase{"held_refused_then_plain", {kP}, {kS, kP}, 0},
                      OrderCase{"sent_refused_then_plain", {kP}, {kS, kP}, 2},
                      OrderCase{"sent_refused_then_optimistic", {kP}, {kS, "plain-test:optimistic"}, 2},
                      OrderCase{"multi_round", {kP}, {kP}, 2}),
    [](const auto& tp) { return std::string(tp.param.name); });

}  // namespace
}  // namespace authrpc
