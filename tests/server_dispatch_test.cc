// The server's one dispatch (ServerConnection::dispatch): a handler runs the
// way its method asks — inline, as a coroutine, on the blocking pool, or as a
// streaming call — and whatever it throws, of any type, becomes its call's
// INTERNAL status in one place; the connection keeps serving. A real server
// and client over loopback TCP.
#include <gtest/gtest.h>

#include <asio/co_spawn.hpp>
#include <asio/use_future.hpp>
#include <chrono>
#include <memory>
#include <ostream>
#include <stdexcept>
#include <string>

#include "authrpc/auth/simple.h"
#include "authrpc/client/client.h"
#include "authrpc/server/server.h"
#include "tests/test_support.h"

namespace authrpc {
namespace {

using namespace std::chrono_literals;
using testing::Describe;

// What a handler throws: a std::exception, or something that is not one.
enum class Throws { kStdException, kInt };

[[noreturn]] void throw_one(Throws what) {
  if (what == Throws::kStdException) throw std::runtime_error("boom");
  throw 42;
}

Service ThrowingService() {
  Service s("dispatch");
  for (const Throws what : {Throws::kStdException, Throws::kInt}) {
    const std::string suffix = what == Throws::kStdException ? "_std" : "_int";
    s.add("inline" + suffix, [what](CallContext&, std::string_view) -> Result<std::string> {
      throw_one(what);
    });
    s.add_blocking("blocking" + suffix,
                   [what](CallContext&, std::string_view) -> Result<std::string> {
                     throw_one(what);
                   });
    s.add_async("async" + suffix,
                [what](CallContext&, std::string) -> asio::awaitable<Result<std::string>> {
                  throw_one(what);
                  co_return std::string("unreachable");
                });
    s.add_stream("stream" + suffix,
                 [what](CallContext&, ServerStream&) -> asio::awaitable<Result<std::string>> {
                   throw_one(what);
                   co_return std::string("unreachable");
                 });
  }
  s.add("echo", [](CallContext&, std::string_view request) -> Result<std::string> {
    return std::string(request);
  });
  return s;
}

struct Case {
  const char* method;
  bool streaming;
  const char* expected;  // the call's status, as the client sees it
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.method; }

class ServerDispatchTest : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    ServerOptions options;
    options.endpoints = {testing::FreshEndpoint(testing::SocketKind::kTcp, "authrpc-dispatch")};
    options.mechanisms = {std::make_shared<SimpleServerMechanism>()};
    options.io_threads = 1;
    options.blocking_threads = 2;
    options.stop_grace = 2s;
    options.log = null_log_sink();
    server_ = std::make_unique<Server>(std::move(options));
    ASSERT_TRUE(server_->add_service(ThrowingService()).ok());
    const Status started = server_->start();
    ASSERT_TRUE(started.ok()) << started.to_string();
    auto client = testing::ConnectWith(server_->bound_endpoints().front(),
                                       std::make_shared<SimpleClientMechanism>("alice"));
    ASSERT_TRUE(client.ok()) << Describe(client);
    client_ = std::move(*client);
  }

  void TearDown() override {
    client_.reset();
    testing::StopAndDestroy(server_);
  }

  // A streaming call's outcome: the status its finish() returns.
  Status StreamCall(const std::string& method) {
    auto done = asio::co_spawn(
        client_->executor(),
        [this, method]() -> asio::awaitable<Status> {
          auto stream = co_await client_->async_open_stream("dispatch", method, "");
          if (!stream.ok()) co_return stream.status();
          auto final = co_await (*stream)->finish();
          co_return final.ok() ? Status() : final.status();
        },
        asio::use_future);
    if (done.wait_for(10s) != std::future_status::ready) {
      return Status(Errc::kDeadlineExceeded, "the streaming call did not end");
    }
    return done.get();
  }

  std::unique_ptr<Server> server_;
  std::unique_ptr<Client> client_;
};

TEST_P(ServerDispatchTest, AThrowingHandlerFailsItsCallAlone) {
  const Case& c = GetParam();
  Status got;
  if (c.streaming) {
    got = StreamCall(c.method);
  } else {
    auto r = client_->call("dispatch", c.method, "x", {10s});
    got = r.ok() ? Status() : r.status();
  }
  EXPECT_EQ(got.code, Errc::kInternal) << got.to_string();
  EXPECT_EQ(got.message, c.expected);
  // The connection and the server go on serving.
  auto echo = client_->call("dispatch", "echo", "still here", {10s});
  ASSERT_TRUE(echo.ok()) << Describe(echo);
  EXPECT_EQ(*echo, "still here");
  EXPECT_EQ(server_->stats().protocol_errors, 0u);
}

// Calls naming different methods, and unknown ones, in turn on one
// connection each reach their own handler (the connection remembers the
// last method it found: ServerConnection::admit_call).
TEST_F(ServerDispatchTest, CallsInTurnOnOneConnectionReachTheirOwnMethods) {
  const struct {
    const char* service;
    const char* method;
    Errc code;
  } calls[] = {
      {"dispatch", "echo", Errc::kOk},       {"dispatch", "echo", Errc::kOk},
      {"dispatch", "inline_std", Errc::kInternal}, {"dispatch", "echo", Errc::kOk},
      {"dispatch", "no_such", Errc::kNotFound},    {"dispatch", "echo", Errc::kOk},
      {"sys", "echo", Errc::kOk},            {"dispatc", "echo", Errc::kNotFound},
      {"dispatch", "ech", Errc::kNotFound},  {"dispatch", "echo", Errc::kOk},
  };
  int n = 0;
  for (const auto& c : calls) {
    const std::string request = "call " + std::to_string(n++);
    auto r = client_->call(c.service, c.method, request, {10s});
    if (c.code == Errc::kOk) {
      ASSERT_TRUE(r.ok()) << c.service << "." << c.method << ": " << Describe(r);
      EXPECT_EQ(*r, request) << c.service << "." << c.method;
    } else {
      EXPECT_EQ(r.status().code, c.code) << c.service << "." << c.method << ": " << Describe(r);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Table, ServerDispatchTest,
    ::testing::Values(
        Case{"inline_std", false, "handler threw: boom"},
        Case{"inline_int", false, "handler threw: unknown exception"},
        Case{"blocking_std", false, "handler threw: boom"},
        Case{"blocking_int", false, "handler threw: unknown exception"},
        Case{"async_std", false, "handler threw: boom"},
        Case{"async_int", false, "handler threw: unknown exception"},
        Case{"stream_std", true, "handler threw: boom"},
        Case{"stream_int", true, "handler threw: unknown exception"}),
    [](const ::testing::TestParamInfo<Case>& row) { return std::string(row.param.method); });

}  // namespace
}  // namespace authrpc
