// The server's one dispatch (ServerConnection::dispatch): a handler runs the
// way its method asks — inline, as a coroutine, on the blocking pool, or as a
// streaming call — and whatever it throws, of any type, becomes its call's
// status in one place: INTERNAL, or INVALID_ARGUMENT for a JSON exception
// (the request did not have the form the handler reads), with a generic
// message; what the exception said is in the server's log under the call's
// id. The connection keeps serving. A real server and client over loopback
// TCP.
#include <gtest/gtest.h>

#include <asio/co_spawn.hpp>
#include <asio/use_future.hpp>
#include <chrono>
#include <cstring>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <ostream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "authrpc/auth/mechanisms/simple/simple.h"
#include "authrpc/client/client.h"
#include "authrpc/server/server.h"
#include "tests/testing/test_server.h"
#include "tests/testing/test_support.h"

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
  // Encoding handlers (Service::add_encoding), inline and on the blocking
  // pool: "encoded_*" writes "<request>!"; "_empty" reserves nothing;
  // "_refuses" writes, then fails; "_twice" reserves twice (the second
  // counts); "_throws" writes, then throws.
  for (const auto& [kind, execution] : {std::pair{"inline", Execution::kInline},
                                        std::pair{"blocking", Execution::kBlocking}}) {
    const std::string prefix = std::string("encoded_") + kind;
    s.add_encoding(prefix, [](CallContext&, std::string_view request, ResponseBuffer& out) {
      char* p = out.reserve(request.size() + 1);
      request.copy(p, request.size());
      p[request.size()] = '!';
      return Status();
    }, execution);
    s.add_encoding(prefix + "_empty", [](CallContext&, std::string_view, ResponseBuffer&) { return Status(); },
                   execution);
    s.add_encoding(prefix + "_refuses", [](CallContext&, std::string_view, ResponseBuffer& out) {
      std::memset(out.reserve(1000), 'x', 1000);
      return Status(Errc::kPermissionDenied, "not for you");
    }, execution);
    s.add_encoding(prefix + "_twice", [](CallContext&, std::string_view, ResponseBuffer& out) {
      std::memset(out.reserve(1000), 'x', 1000);
      std::memcpy(out.reserve(6), "second", 6);
      return Status();
    }, execution);
    s.add_encoding(prefix + "_std", [](CallContext&, std::string_view, ResponseBuffer& out) -> Status {
      std::memset(out.reserve(10), 'x', 10);
      throw_one(Throws::kStdException);
    }, execution);
  }
  // Reads a member as a number: a request where it is a string throws a
  // json type_error, one without it a json out_of_range.
  s.add_json("json_member", [](CallContext&, const nlohmann::json& request) -> Result<nlohmann::json> {
    return nlohmann::json{{"twice", 2 * request.at("n").get<int>()}};
  });
  // Parses its bytes itself, with nlohmann's throwing parse.
  s.add("json_parse", [](CallContext&, std::string_view request) -> Result<std::string> {
    return nlohmann::json::parse(request).dump();
  });
  s.add("echo", [](CallContext&, std::string_view request) -> Result<std::string> {
    return std::string(request);
  });
  // Two names over 16 bytes with the service's that differ only in their
  // middle: each answers with its name and the request.
  for (const char* name : {"echo_with_a_long_name", "echo_wxth_a_long_name"}) {
    s.add(name, [name](CallContext&, std::string_view request) -> Result<std::string> {
      return std::string(name) + ":" + std::string(request);
    });
  }
  return s;
}

struct Case {
  const char* method;
  bool streaming;
  const char* request;
  Errc code;                 // the call's status, as the client sees it
  const char* in_log;        // what the server's log says of it
};

// The server's log lines.
struct Log {
  std::mutex mu;
  std::vector<std::string> lines;

  std::string all() {
    std::lock_guard lock(mu);
    std::string out;
    for (const auto& line : lines) out += line + "\n";
    return out;
  }
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.method; }

class ServerDispatchTest : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    server_ = std::make_unique<testing::TestServer>();
    server_->service(ThrowingService())
        .log(LogSink([log = log_](LogLevel, std::string_view line) {
          std::lock_guard lock(log->mu);
          log->lines.emplace_back(line);
        }))
        .options([](ServerOptions& o) { o.stop_grace = 2s; });
    ASSERT_OK(server_->start());
    auto client = server_->client().simple("alice").connect();
    ASSERT_TRUE(client.ok()) << Describe(client);
    client_ = std::move(*client);
  }

  void TearDown() override {
    client_.reset();
    server_.reset();
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

  std::shared_ptr<Log> log_ = std::make_shared<Log>();
  std::unique_ptr<testing::TestServer> server_;
  std::unique_ptr<Client> client_;
};

TEST_P(ServerDispatchTest, AThrowingHandlerFailsItsCallAlone) {
  const Case& c = GetParam();
  Status got;
  if (c.streaming) {
    got = StreamCall(c.method);
  } else {
    auto r = client_->call("dispatch", c.method, c.request, {10s});
    got = r.ok() ? Status() : r.status();
  }
  EXPECT_EQ(got.code, c.code) << got.to_string();
  // The caller learns which call to look up, not what the exception said.
  EXPECT_NE(got.message.find(" in the server's log)"), std::string::npos) << got.message;
  EXPECT_EQ(got.message.find(c.in_log), std::string::npos) << got.message;
  EXPECT_EQ(got.message.find("json.exception"), std::string::npos) << got.message;
  const auto call = got.message.find("(call ");
  ASSERT_NE(call, std::string::npos) << got.message;
  const std::string call_id = got.message.substr(call + 6, got.message.find(' ', call + 6) - call - 6);
  const std::string log = log_->all();
  EXPECT_NE(log.find("dispatch." + std::string(c.method) + " call " + call_id + " from "),
            std::string::npos)
      << log;
  EXPECT_NE(log.find(c.in_log), std::string::npos) << log;
  // The connection and the server go on serving.
  auto echo = client_->call("dispatch", "echo", "still here", {10s});
  ASSERT_TRUE(echo.ok()) << Describe(echo);
  EXPECT_EQ(*echo, "still here");
  EXPECT_EQ(server_->stats().protocol_errors, 0u);
}

// An encoding handler's response is what it wrote, inline (encoded in the
// connection's output) as on the blocking pool; an error answers with
// itself and none of what was written, and the next call's answer is whole.
TEST_F(ServerDispatchTest, EncodingHandlersAnswerWithWhatTheyWrote) {
  const struct {
    const char* suffix;
    Errc code;
    const char* payload;
  } rows[] = {
      {"", Errc::kOk, "ping!"},
      {"_empty", Errc::kOk, ""},
      {"_refuses", Errc::kPermissionDenied, nullptr},
      {"_twice", Errc::kOk, "second"},
  };
  for (const char* kind : {"encoded_inline", "encoded_blocking"}) {
    for (const auto& row : rows) {
      const std::string method = kind + std::string(row.suffix);
      auto r = client_->call("dispatch", method, "ping", {10s});
      if (row.code == Errc::kOk) {
        ASSERT_TRUE(r.ok()) << method << ": " << Describe(r);
        EXPECT_EQ(*r, row.payload) << method;
      } else {
        EXPECT_EQ(r.status().code, row.code) << method << ": " << Describe(r);
        EXPECT_EQ(r.status().message, "not for you") << method;
      }
      auto next = client_->call("dispatch", kind, "next", {10s});
      ASSERT_TRUE(next.ok()) << method << ", then " << kind << ": " << Describe(next);
      EXPECT_EQ(*next, "next!") << method;
    }
  }
  // add_encoding takes the two plain ways only.
  Service wrong("wrong");
  wrong.add_encoding("m", [](CallContext&, std::string_view, ResponseBuffer&) { return Status(); },
                     Execution::kAsync);
  EXPECT_EQ(wrong.status().code, Errc::kInvalidArgument) << wrong.status().to_string();
  EXPECT_EQ(server_->stats().protocol_errors, 0u);
}

// Calls naming different methods, and unknown ones, in turn on one
// connection (names over 16 bytes too, differing only in their middle)
// each reach their own handler (the connection remembers the
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
      {"dispatch", "echo_with_a_long_name", Errc::kOk}, {"dispatch", "echo_wxth_a_long_name", Errc::kOk},
      {"dispatch", "echo_with_a_long_name", Errc::kOk},
  };
  int n = 0;
  for (const auto& c : calls) {
    const std::string request = "call " + std::to_string(n++);
    auto r = client_->call(c.service, c.method, request, {10s});
    const std::string method = c.method;
    if (c.code == Errc::kOk) {
      ASSERT_TRUE(r.ok()) << c.service << "." << c.method << ": " << Describe(r);
      EXPECT_EQ(*r, method.size() > 4 ? method + ":" + request : request) << c.service << "." << c.method;
    } else {
      EXPECT_EQ(r.status().code, c.code) << c.service << "." << c.method << ": " << Describe(r);
    }
  }
}

// A name that names nothing comes back in NOT_FOUND escaped and cut short,
// however long the caller made it.
TEST_F(ServerDispatchTest, AnUnknownNameComesBackEscapedAndCut) {
  const std::string service = "\x1b[2J" + std::string(64 << 10, 's');
  const std::string method = std::string(64 << 10, 'm') + "\n";
  auto r = client_->call(service, method, "x", {10s});
  ASSERT_EQ(r.status().code, Errc::kNotFound) << Describe(r);
  EXPECT_LT(r.status().message.size(), 200u) << r.status().message.size();
  EXPECT_EQ(r.status().message.find_first_of("\x1b\n"), std::string::npos) << r.status().message;
  EXPECT_NE(r.status().message.find("no method \\x1b[2Jsss"), std::string::npos) << r.status().message;
}

INSTANTIATE_TEST_SUITE_P(
    Table, ServerDispatchTest,
    ::testing::Values(
        Case{"inline_std", false, "x", Errc::kInternal, "the handler threw: boom"},
        Case{"inline_int", false, "x", Errc::kInternal, "not a std::exception"},
        Case{"blocking_std", false, "x", Errc::kInternal, "the handler threw: boom"},
        Case{"blocking_int", false, "x", Errc::kInternal, "not a std::exception"},
        Case{"async_std", false, "x", Errc::kInternal, "the handler threw: boom"},
        Case{"async_int", false, "x", Errc::kInternal, "not a std::exception"},
        Case{"stream_std", true, "", Errc::kInternal, "the handler threw: boom"},
        Case{"stream_int", true, "", Errc::kInternal, "not a std::exception"},
        Case{"encoded_inline_std", false, "x", Errc::kInternal, "the handler threw: boom"},
        Case{"encoded_blocking_std", false, "x", Errc::kInternal, "the handler threw: boom"},
        Case{"json_member", false, R"({"n": "two"})", Errc::kInvalidArgument, "type_error"},
        Case{"json_parse", false, "{not json", Errc::kInvalidArgument, "parse_error"}),
    [](const ::testing::TestParamInfo<Case>& row) { return std::string(row.param.method); });

}  // namespace
}  // namespace authrpc
