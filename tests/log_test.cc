// Log lines and peer-chosen strings (base/log.h, docs/AUTHZ.md "Logs"):
// escape_for_log() over a table of hostile and harmless inputs, a LogSink
// escaping for every caller, and a real Server on loopback whose log is
// captured while raw peers send a mechanism name, a token's service and an
// ERROR message that try to forge a line ("\n[INFO] forged") and clear the
// reader's terminal ("\x1b[2J"): each must produce exactly one line, escaped.
// The level: shared by a sink's copies, changed at run time, checked before
// any escaping; the stderr sinks (text and JSON lines) read from a
// redirected fd 2, the JSON lines parsed back with nlohmann.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

#include "authrpc/auth/mechanisms/simple/simple.h"
#include "authrpc/auth/mechanisms/token/token_mechanism.h"
#include "authrpc/base/log.h"
#include "authrpc/rpc/messages.h"
#include "authrpc/server/server.h"
#include "authrpc/server/token_service.h"
#include "tests/testing/test_server.h"
#include "tests/testing/test_support.h"

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

// What `f` writes to stderr (fd 2 redirected to an unnamed temporary file).
std::string CaptureStderr(const std::function<void()>& f) {
  std::fflush(stderr);
  std::FILE* file = std::tmpfile();
  if (file == nullptr) {
    ADD_FAILURE() << "tmpfile failed";
    return {};
  }
  const int saved = ::dup(STDERR_FILENO);
  ::dup2(::fileno(file), STDERR_FILENO);
  f();
  std::fflush(stderr);
  ::dup2(saved, STDERR_FILENO);
  ::close(saved);
  std::string out;
  std::rewind(file);
  char buf[4096];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, file)) > 0;) out.append(buf, n);
  std::fclose(file);
  return out;
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::size_t start = 0;
  for (std::size_t nl; (nl = text.find('\n', start)) != std::string::npos; start = nl + 1) {
    lines.push_back(text.substr(start, nl - start));
  }
  EXPECT_EQ(start, text.size()) << "output ends with a newline";
  return lines;
}

TEST(LogSink, LevelIsSharedByCopiesAndChangesAtRunTime) {
  CapturedLog log;
  LogSink sink = log.sink();
  // A sink from a plain function passes everything until told otherwise.
  EXPECT_EQ(sink.level(), LogLevel::kDebug);
  for (LogLevel l : {LogLevel::kDebug, LogLevel::kInfo, LogLevel::kWarning, LogLevel::kError}) {
    EXPECT_TRUE(sink.enabled(l));
  }
  const LogSink copy = sink;       // e.g. the token service's
  LogSink copy_of_copy = copy;     // e.g. the audit log's
  copy_of_copy.set_level(LogLevel::kWarning);
  struct Case {
    LogLevel level;
    bool passes;
  };
  const Case cases[] = {{LogLevel::kDebug, false},
                        {LogLevel::kInfo, false},
                        {LogLevel::kWarning, true},
                        {LogLevel::kError, true}};
  for (const LogSink* s : std::vector<const LogSink*>{&sink, &copy, &copy_of_copy}) {
    EXPECT_EQ(s->level(), LogLevel::kWarning);
    for (const auto& c : cases) EXPECT_EQ(s->enabled(c.level), c.passes) << static_cast<int>(c.level);
  }
  sink(LogLevel::kInfo, "dropped info");
  copy(LogLevel::kDebug, "dropped debug");
  copy(LogLevel::kWarning, "kept warning");
  EXPECT_EQ(log.lines(), std::vector<std::string>{"kept warning"});
  sink.set_level(LogLevel::kDebug);
  copy_of_copy(LogLevel::kDebug, "kept debug");
  EXPECT_EQ(log.lines(), (std::vector<std::string>{"kept warning", "kept debug"}));
  // A sink of its own is not affected.
  LogSink other = log.sink();
  other.set_level(LogLevel::kError);
  EXPECT_TRUE(sink.enabled(LogLevel::kDebug));

  // An empty sink passes nothing and ignores set_level; so does the null sink.
  LogSink empty;
  empty.set_level(LogLevel::kDebug);
  EXPECT_FALSE(empty.enabled(LogLevel::kError));
  const LogSink null = null_log_sink();
  EXPECT_TRUE(null);
  for (LogLevel l : {LogLevel::kDebug, LogLevel::kInfo, LogLevel::kWarning, LogLevel::kError}) {
    EXPECT_FALSE(null.enabled(l));
  }
}

// A message below the level is dropped before it is escaped: escaping 64 MiB
// takes tens of milliseconds, dropping it must not.
TEST(LogSink, FilterRunsBeforeEscaping) {
  std::size_t seen = 0;
  LogSink sink = [&](LogLevel, std::string_view m) { seen += m.size(); };
  sink.set_level(LogLevel::kInfo);
  const std::string big(64u << 20, '\n');  // every byte escapes to two
  using Clock = std::chrono::steady_clock;
  auto timed = [&](LogLevel level) {
    const auto start = Clock::now();
    sink(level, big);
    return Clock::now() - start;
  };
  // The best of three: a drop is a load and a compare, but a loaded machine
  // may preempt any single one of them.
  auto dropped = timed(LogLevel::kDebug);
  for (int i = 0; i < 2; ++i) dropped = std::min(dropped, timed(LogLevel::kDebug));
  EXPECT_EQ(seen, 0u);
  const auto logged = timed(LogLevel::kInfo);
  EXPECT_EQ(seen, big.size() * 2);
  EXPECT_LT(dropped * 100, logged) << "dropped " << std::chrono::duration<double, std::micro>(dropped).count()
                                   << " us, logged " << std::chrono::duration<double, std::micro>(logged).count()
                                   << " us";
}

TEST(StderrLogSink, TextLinesAndRunTimeLevel) {
  const std::string out = CaptureStderr([] {
    LogSink sink = stderr_log_sink(LogLevel::kWarning);
    EXPECT_EQ(sink.level(), LogLevel::kWarning);
    sink(LogLevel::kInfo, "hidden info");
    sink(LogLevel::kWarning, "warn " + std::string(kForgery));
    const LogSink copy = sink;
    copy.set_level(LogLevel::kDebug);
    sink(LogLevel::kDebug, "shown debug");
  });
  const auto lines = Lines(out);
  ASSERT_EQ(lines.size(), 2u) << out;
  const std::regex stamp(R"(^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z (WARN|DEBUG) .*)");
  for (const auto& l : lines) EXPECT_TRUE(std::regex_match(l, stamp)) << l;
  EXPECT_THAT(lines[0], ::testing::EndsWith(" WARN warn " + std::string(kForgeryEscaped)));
  EXPECT_THAT(lines[1], ::testing::EndsWith(" DEBUG shown debug"));
}

TEST(JsonLogSink, OneObjectPerLineThatParsesBack) {
  const std::string messages[] = {
      "plain",
      "forged " + std::string(kForgery),                // newline, ESC
      "quote \" backslash \\ tab \t nul " + std::string(1, '\0') + " bell \a del \x7f",
      "m\xc3\xbcller \xe2\x82\xac ls \xe2\x80\xa8 bad \xff",  // UTF-8, U+2028, not UTF-8
      "",
  };
  const std::string out = CaptureStderr([&] {
    LogSink sink = json_log_sink(LogLevel::kInfo);
    sink(LogLevel::kDebug, "hidden debug");
    for (const auto& m : messages) sink(LogLevel::kWarning, m);
    sink(LogLevel::kError, "last");
  });
  for (const char c : out) {
    const auto u = static_cast<unsigned char>(c);
    if (c != '\n') {
      EXPECT_FALSE(u < 0x20 || u == 0x7f) << "raw control byte " << int(u) << " in " << out;
    }
  }
  const auto lines = Lines(out);
  ASSERT_EQ(lines.size(), std::size(messages) + 1) << out;
  const std::regex time(R"(^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$)");
  for (std::size_t i = 0; i < lines.size(); ++i) {
    SCOPED_TRACE(lines[i]);
    const auto j = nlohmann::json::parse(lines[i]);  // throws (fails the test) if not JSON
    ASSERT_TRUE(j.is_object());
    EXPECT_EQ(j.size(), 3u);
    EXPECT_TRUE(std::regex_match(j["time"].get<std::string>(), time));
    const bool last = i == std::size(messages);
    EXPECT_EQ(j["level"], last ? "error" : "warning");
    // What a reader gets back is the log-escaped text: one line, no
    // terminal control, exactly as the text format shows it.
    EXPECT_EQ(j["message"], last ? "last" : escape_for_log(messages[i]));
  }
  EXPECT_THAT(lines[1], HasSubstr(R"(forged \\n[INFO] forged\\x1b[2J)"));
  EXPECT_THAT(lines[2], HasSubstr(R"(quote \" backslash \\\\ tab \\t nul \\x00)"));
}

TEST(LogLevelName, Names) {
  EXPECT_EQ(log_level_name(LogLevel::kDebug), "debug");
  EXPECT_EQ(log_level_name(LogLevel::kInfo), "info");
  EXPECT_EQ(log_level_name(LogLevel::kWarning), "warning");
  EXPECT_EQ(log_level_name(LogLevel::kError), "error");
}

// Peer strings reach the server's log escaped, one line each.
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
