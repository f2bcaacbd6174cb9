// Log lines and peer-chosen strings (security/base/log.h, docs/AUTHZ.md "Logs"):
// escape_for_log() over a table of hostile and harmless inputs, a LogSink
// escaping for every caller, and a real Server on loopback whose log is
// captured while raw peers send a mechanism name, a token's service and an
// ERROR message that try to forge a line ("\n[INFO] forged") and clear the
// reader's terminal ("\x1b[2J"): each must produce exactly one line, escaped.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <mutex>
#include <string>
#include <vector>

#include "authrpc/auth/simple.h"
#include "authrpc/auth/token_mechanism.h"
#include "authrpc/security/base/log.h"
#include "authrpc/rpc/messages.h"
#include "authrpc/server/server.h"
#include "authrpc/server/token_service.h"
#include "tests/test_server.h"
#include "tests/test_support.h"

namespace authrpc {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;
using testing::Describe;
using testing::RawConnection;

constexpr std::string_view kForgery = "\n[INFO] forged\x1b[2J";
constexpr std::string_view kForgeryEscaped = "\\n[INFO] forged\\x1b[2J";

TEST(EscapeForLog, Table) {
  struct Case {
    std::string in;
    std::string out;
  };
  const Case cases[] = {
      {"plain text: alice@EXAMPLE.COM (127.0.0.1:5000)", "plain text: alice@EXAMPLE.COM (127.0.0.1:5000)"},
      {"", ""},
      {std::string(kForgery), std::string(kForgeryEscaped)},
      {"a\r\nb\tc", "a\\r\\nb\\tc"},
      {std::string("nul\0byte", 8), "nul\\x00byte"},
      {"del\x7f", "del\\x7f"},
      {"back\\slash \\n", "back\\\\slash \\\\n"},
      {"m\xc3\xbcller \xe2\x82\xac \xf0\x9f\x94\x91", "m\xc3\xbcller \xe2\x82\xac \xf0\x9f\x94\x91"},
      {"c1 \xc2\x85 \xc2\x9b", "c1 \\u{0085} \\u{009b}"},
      {"ls \xe2\x80\xa8 ps \xe2\x80\xa9", "ls \\u{2028} ps \\u{2029}"},
      {"bidi \xe2\x80\xae evil \xe2\x81\xa6", "bidi \\u{202e} evil \\u{2066}"},
      {"bad \xff \xc0\xaf \xed\xa0\x80 \xe2\x82", "bad \\xff \\xc0\\xaf \\xed\\xa0\\x80 \\xe2\\x82"},
      {"\xf4\x90\x80\x80 \xf0\x8f\xbf\xbf", "\\xf4\\x90\\x80\\x80 \\xf0\\x8f\\xbf\\xbf"},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(escape_for_log(c.in), c.out) << "input: " << ::testing::PrintToString(c.in);
  }
}

class CapturedLog {
 public:
  LogSink sink() {
    return [this](LogLevel, std::string_view message) {
      std::lock_guard lock(mu_);
      lines_.emplace_back(message);
    };
  }
  std::vector<std::string> lines() const {
    std::lock_guard lock(mu_);
    return lines_;
  }
  // The lines containing `needle`, once there is at least one (or after 5 s).
  std::vector<std::string> WaitFor(std::string_view needle) const {
    std::vector<std::string> found;
    testing::Eventually(
        [&] {
          found.clear();
          for (const auto& l : lines()) {
            if (l.find(needle) != std::string::npos) found.push_back(l);
          }
          return !found.empty();
        },
        5s);
    return found;
  }

 private:
  mutable std::mutex mu_;
  std::vector<std::string> lines_;
};

TEST(LogSink, EscapesForEveryCaller) {
  CapturedLog log;
  LogSink sink = log.sink();
  sink(LogLevel::kWarning, "user " + std::string(kForgery));
  ASSERT_EQ(log.lines().size(), 1u);
  EXPECT_EQ(log.lines()[0], "user " + std::string(kForgeryEscaped));
  LogSink empty;
  EXPECT_FALSE(empty);
  empty(LogLevel::kError, "dropped");  // an empty sink drops, never throws
}

// Defect 6: peer strings reach the server's log escaped, one line each.
TEST(LogSink, PeerStringsReachTheServerLogEscaped) {
  CapturedLog log;
  TokenServiceOptions t;
  t.store = TokenServiceOptions::Store::kMemory;
  t.mechanism.services = {"svc"};
  t.mechanism.allow_plaintext = true;  // tcp://: the challenge exchange's HELLO names the service
  t.log = log.sink();
  auto tokens = TokenService::open(std::move(t));
  ASSERT_TRUE(tokens.ok()) << Describe(tokens);
  testing::TestServer server;
  server.mechanisms({std::make_shared<SimpleServerMechanism>(), (*tokens)->mechanism()}).log(log.sink());
  ASSERT_OK(server.start());
  const std::uint16_t port = server.endpoint().port;

  struct Case {
    const char* name;
    std::string marker;  // unique text in the forged string
    std::function<void(RawConnection&, const std::string&)> send;
  };
  const Case cases[] = {
      // The first unknown name is answered with MECHANISMS, the second fails.
      {"mechanism name", "mechanism-forged",
       [](RawConnection& c, const std::string& text) {
         ASSERT_TRUE(c.SendHello(text, ""));
         auto offer = c.ReadFrame();
         ASSERT_TRUE(offer.has_value());
         ASSERT_EQ(offer->type, wire::FrameType::kMechanisms);
         std::string again;
         wire::append_hello(again, {wire::kNoFeatures, text, ""});
         c.Send(again);
       }},
      {"token service", "service-forged",
       [](RawConnection& c, const std::string& text) {
         token_wire::ChallengeHello hello;
         hello.identifier = "not an identifier";
         hello.service = text;
         c.SendHello("token", hello.encode());
       }},
      {"ERROR message", "error-forged",
       [](RawConnection& c, const std::string& text) {
         ASSERT_TRUE(c.SendHello("simple", "alice"));
         auto reply = c.ReadFrame();
         ASSERT_TRUE(reply.has_value());
         ASSERT_EQ(reply->type, wire::FrameType::kAuthSuccess);
         std::string out;
         wire::append_error(out, 13, text);
         c.Send(out);
       }},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    RawConnection connection(port);
    ASSERT_TRUE(connection.connected());
    c.send(connection, c.marker + std::string(kForgery));
    const auto lines = log.WaitFor(c.marker);
    ASSERT_EQ(lines.size(), 1u) << "exactly one line names it";
    EXPECT_THAT(lines[0], HasSubstr(c.marker + std::string(kForgeryEscaped)));
    connection.Close();
  }
  for (const auto& line : log.lines()) {
    EXPECT_EQ(line.find_first_of("\n\r\x1b"), std::string::npos) << line;
    EXPECT_THAT(line, ::testing::Not(HasSubstr("\n[INFO]")));
  }
  server.stop();
}

}  // namespace
}  // namespace authrpc
