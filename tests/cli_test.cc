// Integration tests of the command-line tools: runs the built authrpc-server
// and authrpc binaries as subprocesses on loopback.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gmock/gmock.h>
#include <google/protobuf/descriptor.pb.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "authrpc/auth/mechanism_registry.h"
#include "authrpc/auth/mechanisms/simple/simple.h"
#include "authrpc/client/client.h"
#include "authrpc/components/protobuf/service_schema.h"
#include "authrpc/security/base64url.h"
#include "authrpc/tools/flag_parser.h"
#include "tests/testing/test_support.h"
#include "tests/testing/http_client.h"
#include "tests/testing/test_tls.h"
#include "tests/testing/jwt_issuer.h"
#include "tests/testing/proto_items.h"
#include "tests/testing/scoped_temp_dir.h"
#include "tests/testing/test_programs.h"
#include "tests/testing/test_server.h"

extern char** environ;

namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

const std::string kServerBin = AUTHRPC_SERVER_BIN;
const std::string kCliBin = AUTHRPC_CLI_BIN;

// A child process with its stdout and stderr on pipes. The destructor kills
// (SIGKILL) and reaps it if it is still running, so no test leaves one behind.
class Child {
 public:
  // `env`: entries "NAME=VALUE" set for the child, "NAME" alone removes
  // NAME; the rest of this process's environment is inherited. stdin is
  // the file `stdin_path`.
  static std::unique_ptr<Child> Spawn(const std::vector<std::string>& args,
                                      const std::vector<std::string>& env = {},
                                      const std::string& stdin_path = "/dev/null") {
    int out[2], err[2];
    if (::pipe2(out, O_CLOEXEC) != 0) return nullptr;
    if (::pipe2(err, O_CLOEXEC) != 0) {
      ::close(out[0]);
      ::close(out[1]);
      return nullptr;
    }
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
    posix_spawn_file_actions_adddup2(&actions, err[1], STDERR_FILENO);
    posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, stdin_path.c_str(), O_RDONLY, 0);
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    std::vector<std::string> env_strings;
    for (char** e = environ; *e != nullptr; ++e) {
      const std::string entry = *e;
      const std::string name = entry.substr(0, entry.find('='));
      bool replaced = false;
      for (const auto& o : env) replaced = replaced || o.substr(0, o.find('=')) == name;
      if (!replaced) env_strings.push_back(entry);
    }
    for (const auto& o : env) {
      if (o.find('=') != std::string::npos) env_strings.push_back(o);
    }
    std::vector<char*> envp;
    for (auto& e : env_strings) envp.push_back(e.data());
    envp.push_back(nullptr);
    pid_t pid = -1;
    const int rc = ::posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&actions);
    ::close(out[1]);
    ::close(err[1]);
    if (rc != 0) {
      ::close(out[0]);
      ::close(err[0]);
      ADD_FAILURE() << "cannot spawn " << args[0] << ": " << std::strerror(rc);
      return nullptr;
    }
    return std::unique_ptr<Child>(new Child(pid, out[0], err[0]));
  }

  ~Child() {
    if (!exit_status_) {
      ::kill(pid_, SIGKILL);
      int status = 0;
      while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
      }
    }
    ::close(out_);
    ::close(err_);
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  pid_t pid() const { return pid_; }

  // One line of stdout (without the newline), or nullopt on end of stream or
  // timeout. Bytes after the line stay buffered for the next call.
  std::optional<std::string> ReadStdoutLine(Clock::duration timeout = 10s) {
    const auto until = Clock::now() + timeout;
    for (;;) {
      const auto nl = out_buffer_.find('\n');
      if (nl != std::string::npos) {
        std::string line = out_buffer_.substr(0, nl);
        out_buffer_.erase(0, nl + 1);
        return line;
      }
      if (!ReadSome(out_, out_buffer_, until)) return std::nullopt;
    }
  }

  // Sends `sig` and waits for the exit; the raw waitpid status, or nullopt
  // if the child is still running after `timeout`.
  std::optional<int> Signal(int sig, Clock::duration timeout = 10s) {
    ::kill(pid_, sig);
    return Wait(timeout);
  }

  // Waits for the child to exit, draining both pipes meanwhile.
  std::optional<int> Wait(Clock::duration timeout = 10s) {
    const auto until = Clock::now() + timeout;
    bool out_open = true, err_open = true;
    while (out_open || err_open) {
      pollfd fds[2] = {{out_, POLLIN, 0}, {err_, POLLIN, 0}};
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now()).count();
      if (left <= 0) return std::nullopt;
      const int ready = ::poll(fds, 2, static_cast<int>(left));
      if (ready < 0 && errno == EINTR) continue;
      if (ready == 0) return std::nullopt;
      if (out_open && (fds[0].revents & (POLLIN | POLLHUP))) out_open = Drain(out_, out_buffer_);
      if (err_open && (fds[1].revents & (POLLIN | POLLHUP))) err_open = Drain(err_, err_buffer_);
    }
    while (Clock::now() < until) {
      int status = 0;
      const pid_t r = ::waitpid(pid_, &status, WNOHANG);
      if (r == pid_) {
        exit_status_ = status;
        return status;
      }
      if (r < 0 && errno != EINTR) return std::nullopt;
      std::this_thread::sleep_for(5ms);
    }
    return std::nullopt;
  }

  const std::string& stdout_text() const { return out_buffer_; }
  const std::string& stderr_text() const { return err_buffer_; }

  // Reads stderr while the child runs until it contains `needle` after
  // offset `from`; false on timeout or end of stream. stderr_text() has
  // what was read.
  bool WaitForStderr(std::string_view needle, std::size_t from = 0, Clock::duration timeout = 10s) {
    const auto until = Clock::now() + timeout;
    while (err_buffer_.find(needle, std::min(from, err_buffer_.size())) == std::string::npos) {
      if (!ReadSome(err_, err_buffer_, until)) return false;
    }
    return true;
  }

 private:
  Child(pid_t pid, int out, int err) : pid_(pid), out_(out), err_(err) {}

  // Appends what is readable; false at end of stream.
  static bool Drain(int fd, std::string& into) {
    char buf[4096];
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) return errno == EINTR || errno == EAGAIN;
    if (n == 0) return false;
    into.append(buf, static_cast<std::size_t>(n));
    return true;
  }

  bool ReadSome(int fd, std::string& into, Clock::time_point until) {
    for (;;) {
      if (!authrpc::testing::WaitReadable(fd, until)) return false;
      const std::size_t before = into.size();
      if (!Drain(fd, into)) return false;
      if (into.size() > before) return true;
    }
  }

  pid_t pid_;
  int out_;
  int err_;
  std::string out_buffer_;
  std::string err_buffer_;
  std::optional<int> exit_status_;
};

struct RunResult {
  int exit_code = -1;  // -1: did not exit normally (signal or timeout)
  std::string out;
  std::string err;
};

// Runs a command to completion (10 s at most); `env` and `stdin_path` as
// for Child::Spawn.
RunResult RunCommand(const std::vector<std::string>& args, const std::vector<std::string>& env = {},
                     const std::string& stdin_path = "/dev/null") {
  RunResult r;
  auto child = Child::Spawn(args, env, stdin_path);
  if (!child) return r;
  const auto status = child->Wait(10s);
  r.out = child->stdout_text();
  r.err = child->stderr_text();
  if (status && WIFEXITED(*status)) r.exit_code = WEXITSTATUS(*status);
  return r;
}

std::string Describe(const RunResult& r) {
  return "exit " + std::to_string(r.exit_code) + "\n--- stdout\n" + r.out + "\n--- stderr\n" +
         r.err;
}

const char* kGoodConfig = R"({
  "listen": ["tcp://127.0.0.1:0"],
  "auth": {"mechanisms": ["simple"]},
  "io_threads": 1,
  "blocking_threads": 1,
  "negotiation_timeout_ms": 2000,
  "stop_grace_ms": 2000,
  "log_level": "error"
})";

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(dir_.ok()) << "no temporary directory"; }

  // Starts authrpc-server on a config listening on port 0 and reads the bound
  // endpoint it prints.
  void StartServer(const std::string& config_text = kGoodConfig) {
    const std::string config = dir_.Write("server.json", config_text);
    server_ = Child::Spawn({kServerBin, "--config", config, "--print-endpoints"});
    ASSERT_NE(server_, nullptr);
    auto line = server_->ReadStdoutLine(10s);
    ASSERT_TRUE(line.has_value()) << "authrpc-server printed no endpoint; stderr:\n"
                                  << server_->stderr_text();
    endpoint_ = *line;
    ASSERT_THAT(endpoint_, StartsWith("tcp://127.0.0.1:"));
    ASSERT_NE(endpoint_, "tcp://127.0.0.1:0") << "the port was not resolved";
  }

  authrpc::testing::ScopedTempDir dir_{"cli-test"};
  std::unique_ptr<Child> server_;
  std::string endpoint_;
};

TEST_F(CliTest, TheCliCallsWhoamiOnAServerStartedFromAConfigFile) {
  ASSERT_NO_FATAL_FAILURE(StartServer());
  const auto r = RunCommand({kCliBin, "call", "--server", endpoint_, "--auth", "simple", "--user",
                      "alice", "sys", "whoami"});
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  const auto identity = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_FALSE(identity.is_discarded()) << "stdout is not JSON: " << r.out;
  EXPECT_EQ(identity.value("user", ""), "alice");
  EXPECT_EQ(identity.value("mechanism", ""), "simple");
}

// `authrpc call --auth jwt` against authrpc-server configured for jwt over
// TLS: the token from a file, from a variable, and an expired one refused
// by the CLI itself with the credentials exit code.
TEST_F(CliTest, TheCliAuthenticatesWithAnAccessToken) {
  const auto& tls = authrpc::testing::TestTls::shared();
  const auto key = authrpc::testing::JwtTestKey::ed25519("cli-1");
  const long now = static_cast<long>(
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
          .count());
  auto token = [&](long ttl) {
    return key.sign({{"iss", "https://idp.test"}, {"aud", "cli-test"}, {"sub", "alice"},
                     {"exp", now + ttl}, {"iat", now}});
  };
  const nlohmann::json config = {
      {"listen", {"tls://127.0.0.1:0"}},
      {"tls", {{"certificate", tls.cert_file("server")}, {"private_key", tls.key_file("server")}}},
      {"auth",
       {{"mechanisms", {"jwt"}},
        {"options",
         {{"jwt",
           {{"issuer", "https://idp.test"},
            {"audience", "cli-test"},
            {"jwks_file", dir_.Write("jwks.json", authrpc::testing::jwks_document({&key}))}}}}}}},
      {"io_threads", 1},
      {"log_level", "error"}};
  server_ = Child::Spawn({kServerBin, "--config", dir_.Write("jwt.json", config.dump()),
                          "--print-endpoints"});
  ASSERT_NE(server_, nullptr);
  auto line = server_->ReadStdoutLine(10s);
  ASSERT_TRUE(line.has_value()) << server_->stderr_text();
  ASSERT_THAT(*line, StartsWith("tls://127.0.0.1:"));
  const std::vector<std::string> call = {kCliBin, "call", "--server", *line, "--ca", tls.ca_file(),
                                         "--auth", "jwt"};
  auto with = [&call](std::vector<std::string> more) {
    std::vector<std::string> args = call;
    args.insert(args.end(), more.begin(), more.end());
    return args;
  };
  const auto from_file =
      RunCommand(with({"--jwt-file", dir_.Write("token", token(600)), "sys", "whoami"}));
  ASSERT_EQ(from_file.exit_code, 0) << Describe(from_file);
  const auto identity = nlohmann::json::parse(from_file.out, nullptr, false);
  EXPECT_EQ(identity.value("user", ""), "alice");
  EXPECT_EQ(identity.value("mechanism", ""), "jwt");

  const auto from_env = RunCommand(with({"--jwt-env", "CLI_TEST_TOKEN", "sys", "whoami"}),
                                   {"CLI_TEST_TOKEN=" + token(600)});
  EXPECT_EQ(from_env.exit_code, 0) << Describe(from_env);

  const std::string expired = token(-3600);
  const auto refused =
      RunCommand(with({"--jwt-file", dir_.Write("expired", expired), "sys", "whoami"}));
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_THAT(refused.err, HasSubstr("CREDENTIALS_EXPIRED"));
  EXPECT_THAT(refused.err, Not(HasSubstr(expired.substr(expired.rfind('.') + 1))));
}

// `authrpc jwt inspect FILE|-`: each row a token (or not) in a file or on
// stdin, the exit status, what stdout must hold and how stderr starts. A
// decoded token's header and claims are indented JSON that parses back to
// what was signed; its signature never appears on either stream, and the
// token's strings reach the terminal escaped.
TEST_F(CliTest, JwtInspectDecodesATokenWithoutItsSignature) {
  const auto key = authrpc::testing::JwtTestKey::ec_p256("inspect-1");
  const long now = static_cast<long>(
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
          .count());
  const nlohmann::json claims = {{"iss", "https://idp.test"}, {"aud", "orders"}, {"sub", "alice"},
                                 {"exp", now + 3630}, {"iat", now - 5}, {"nbf", now - 5}};
  const std::string good = key.sign(claims);
  nlohmann::json expired_claims = claims;
  expired_claims["exp"] = now - 7200;
  const std::string expired = key.sign(expired_claims);
  nlohmann::json no_exp_claims = claims;
  no_exp_claims.erase("exp");
  const std::string no_exp = key.sign(no_exp_claims);
  // A subject that would clear the screen, end the line and turn the text
  // around if printed as it is.
  const std::string hostile = key.sign(
      {{"iss", "https://idp.test"}, {"aud", "orders"}, {"sub", "al\x1b[2J\nice\u202e"}, {"exp", now + 60}});
  const std::string usage = "authrpc: USAGE: jwt inspect: ";
  const std::string invalid = "authrpc: INVALID_ARGUMENT: ";
  struct Case {
    std::string name;
    std::string content;     // the file's (or stdin's)
    bool stdin_input;        // "-" instead of the file
    int exit_code;
    std::vector<std::string> out;  // substrings of stdout
    std::string err_prefix;  // "%" is the file's path
    std::vector<std::string> args = {};  // instead of the file, if given
  };
  const std::vector<Case> cases = {
      {"good", good + "\n", false, 0,
       {"not verified", "\"sub\": \"alice\"", "exp: ", "(expires in 1h 00m ", "nbf: ", "iat: ",
        "signature: 64 bytes (not shown)"}, ""},
      {"stdin", "  " + good + "\r\n", true, 0, {"not verified", "\"aud\": \"orders\"", "(expires in 1h 00m "}, ""},
      {"expired", expired, false, 0, {"(expired 2h 00m ", "s ago)"}, ""},
      {"no exp", no_exp, false, 0, {"exp: none (authrpc-server refuses a token without exp)"}, ""},
      {"hostile strings", hostile, false, 0, {"\"sub\": \"al\\u001b[2J\\nice\\u202e\""}, ""},
      {"one part", "abc", false, 1, {},
       invalid + "%: not a compact JWS (three base64url parts separated by dots): it has 1 part"},
      {"four parts", "e30.e30.e30.e30", false, 1, {}, invalid + "%: not a compact JWS"},
      {"four parts on stdin", "e30.e30.e30.e30", true, 1, {}, invalid + "stdin: not a compact JWS"},
      {"header not base64url", "e3+.e30.", false, 1, {}, invalid + "%: header is not base64url"},
      {"payload not base64url", "e30.e30=.", false, 1, {}, invalid + "%: payload is not base64url"},
      {"signature not base64url", "e30.e30.a/b", false, 1, {}, invalid + "%: signature is not base64url"},
      {"header not JSON", "bm90IGpzb24.e30.", false, 1, {}, invalid + "%: header is not a JSON object"},
      {"payload an array", "e30.W10.", false, 1, {}, invalid + "%: payload is not a JSON object"},
      {"a member twice", "e30.eyJhIjoxLCJhIjoyfQ.", false, 1, {}, invalid + "%: payload has a member twice"},
      {"empty", "\n", false, 1, {}, invalid + "%: empty: no token"},
      {"too long", std::string(70000, 'a'), false, 1, {}, invalid + "%: over 65536 bytes"},
      {"no file", "", false, 2, {}, usage + "FILE (or - for stdin) is required", {"jwt", "inspect"}},
      {"missing file", "", false, 2, {}, usage + "cannot read ", {"jwt", "inspect", "%/missing.jwt"}},
      {"two files", "", false, 2, {}, usage + "unexpected argument", {"jwt", "inspect", "a", "b"}},
      {"unknown option", "", false, 2, {}, usage + "unknown option --verify", {"jwt", "inspect", "--verify", "a"}},
      {"unknown subcommand", "", false, 2, {}, "authrpc: USAGE: unknown jwt command 'verify'", {"jwt", "verify"}},
  };
  const std::vector<std::string> signatures = {good.substr(good.rfind('.') + 1),
                                               expired.substr(expired.rfind('.') + 1),
                                               hostile.substr(hostile.rfind('.') + 1)};
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string file = dir_.Write("token.jwt", c.content);
    std::vector<std::string> args = {kCliBin};
    if (c.args.empty()) {
      args.insert(args.end(), {"jwt", "inspect", c.stdin_input ? "-" : file});
    } else {
      for (std::string a : c.args) args.push_back(a.starts_with("%") ? dir_.path() + a.substr(1) : a);
    }
    const auto r = RunCommand(args, {}, c.stdin_input ? file : "/dev/null");
    EXPECT_EQ(r.exit_code, c.exit_code) << Describe(r);
    for (const auto& sig : signatures) {
      EXPECT_THAT(r.out, Not(HasSubstr(sig)));
      EXPECT_THAT(r.err, Not(HasSubstr(sig)));
    }
    for (const auto& part : c.out) EXPECT_THAT(r.out, HasSubstr(part)) << Describe(r);
    if (c.exit_code != 0) {
      std::string prefix = c.err_prefix;
      if (const auto at = prefix.find('%'); at != std::string::npos) prefix.replace(at, 1, file);
      EXPECT_THAT(r.err, StartsWith(prefix)) << Describe(r);
      EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "one line:\n" << r.err;
      EXPECT_TRUE(r.out.empty()) << Describe(r);
      continue;
    }
    EXPECT_TRUE(r.err.empty()) << Describe(r);
    // Nothing but printable ASCII and newlines: a token cannot drive the terminal.
    const auto printable = [](char ch) { return ch == '\n' || (ch >= 0x20 && ch < 0x7f); };
    EXPECT_TRUE(std::all_of(r.out.begin(), r.out.end(), printable)) << Describe(r);
    // The claims block is JSON that reads back as what was signed.
    const auto from = r.out.find("claims:\n");
    const auto to = r.out.find("\n}\n", from);
    ASSERT_NE(to, std::string::npos) << Describe(r);
    const auto shown = nlohmann::json::parse(r.out.substr(from + 8, to + 2 - from - 8), nullptr, false);
    ASSERT_TRUE(shown.is_object()) << Describe(r);
    const std::string token = c.content.substr(c.content.find_first_not_of(' '));
    const auto payload = authrpc::security::base64url_decode(token.substr(token.find('.') + 1,
                                                                          token.rfind('.') - token.find('.') - 1));
    ASSERT_TRUE(payload.has_value());
    EXPECT_EQ(shown, nlohmann::json::parse(*payload)) << Describe(r);
    const auto header = r.out.find("header:\n{\n");
    ASSERT_NE(header, std::string::npos) << Describe(r);
    EXPECT_THAT(r.out.substr(header, from - header), HasSubstr("\"kid\": \"inspect-1\"")) << Describe(r);
  }
}

TEST_F(CliTest, TheResponseIsPrintedWithATrailingNewlineOrRawWithRaw) {
  ASSERT_NO_FATAL_FAILURE(StartServer());
  const std::vector<std::string> call = {kCliBin, "call", "--server", endpoint_, "--user", "bob",
                                         "--timeout", "5000", "sys", "echo", "--data"};
  struct Case {
    std::string data;
    bool raw;
    std::string out;
  };
  for (const Case& c : std::vector<Case>{{"hello there", false, "hello there\n"},
                                         {"hello there", true, "hello there"},
                                         {"two\nlines\n", false, "two\nlines\n"},
                                         {"", false, ""}}) {
    auto args = call;
    args.push_back(c.data);
    if (c.raw) args.push_back("--raw");
    const auto r = RunCommand(args);
    ASSERT_EQ(r.exit_code, 0) << Describe(r);
    EXPECT_EQ(r.out, c.out) << "data '" << c.data << "' raw " << c.raw;
  }
  const auto who = RunCommand({kCliBin, "call", "--server", endpoint_, "sys", "whoami"});
  ASSERT_EQ(who.exit_code, 0) << Describe(who);
  EXPECT_THAT(who.out, ::testing::EndsWith("}\n"));
}

// Each row: a command line, its exit status (tools/cli_exit.h) and how its
// one stderr line starts. "@" in an argument is replaced by a running
// server's endpoint, "#" by a stopped one's, "%" by the temp directory.
struct ExitCase {
  std::vector<std::string> args;  // after the binary
  int exit_code;
  std::string err_prefix;
  std::vector<std::string> env = {};
};

TEST_F(CliTest, EveryFailureHasItsExitCodeAndACodeOnStderr) {
  ASSERT_NO_FATAL_FAILURE(StartServer());
  const std::string running = endpoint_;
  // A port nothing listens on any more: a server that stopped.
  auto stopped = Child::Spawn({kServerBin, "--config", dir_.Write("stopped.json", kGoodConfig),
                               "--print-endpoints"});
  ASSERT_NE(stopped, nullptr);
  const auto stopped_line = stopped->ReadStdoutLine(10s);
  ASSERT_TRUE(stopped_line.has_value()) << stopped->stderr_text();
  ASSERT_TRUE(stopped->Signal(SIGTERM).has_value());
  const std::string gone = *stopped_line;
  const std::string usage = "authrpc: USAGE: ";
  const std::vector<ExitCase> cases = {
      // 2: usage.
      {{"frobnicate"}, 2, usage},
      {{"call", "sys", "whoami"}, 2, usage},
      {{"call", "--server", "ftp://nowhere", "sys", "whoami"}, 2, usage},
      {{"call", "--server", "@", "--auth", "nope", "sys", "whoami"}, 2, usage},
      {{"call", "--server", "@", "--bogus", "sys", "whoami"}, 2, usage},
      {{"call", "--server", "@", "sys"}, 2, usage},
      {{"call", "--server", "@", "--timeout", "12abc", "sys", "whoami"}, 2, usage},
      {{"call", "--server", "@", "--timeout", "-5", "sys", "whoami"}, 2, usage},
      {{"call", "--server", "@", "--timeout", "0", "sys", "whoami"}, 2, usage},
      {{"call", "--server", "@", "--timeout", " 5", "sys", "whoami"}, 2, usage},
      {{"call", "--server", "@", "--timeout", "99999999999", "sys", "whoami"}, 2, usage},
      {{"call", "--server", "@", "--connect-timeout", "5s", "sys", "whoami"}, 2, usage},
      {{"call", "--server", "@", "--timeout"}, 2, usage},
      {{"call", "--server", "@", "--auth", "token", "sys", "whoami"}, 2, usage, {"AUTHRPC_TOKEN_FILE"}},
      {{"token"}, 2, "usage: authrpc token"},
      {{"token", "frobnicate"}, 2, usage},
      {{"token", "fetch", "--server", "@", "-o", "%/t"}, 2, usage},
      {{"token", "print", "--renewer", "yarn", "--token-file", "%/t"}, 2, usage},
      {{"token", "renew", "--server", "@", "--json"}, 2, usage},
      {{"token", "cancel", "--server", "@", "--connect-timeout", "-1"}, 2, usage},
      {{"stats"}, 2, usage},
      {{"stats", "--server", "@", "whoami"}, 2, usage},
      {{"stats", "--server", "@", "--jsn"}, 2, usage},
      // 5: sys.stats is for authorization admins; this server has no policy.
      {{"stats", "--server", "@", "--user", "alice"}, 5, "authrpc: PERMISSION_DENIED: "},
      // 3: credentials. A token file that is not there says so
      // (UNAUTHENTICATED: fetch a token), not UNAVAILABLE.
      {{"call", "--server", "@", "--auth", "token", "--token-file", "%/missing", "sys", "whoami"},
       3, "authrpc: UNAUTHENTICATED: cannot read credentials file "},
      {{"token", "print", "--token-file", "%/missing"}, 3, "authrpc: UNAUTHENTICATED: "},
      {{"token", "renew", "--server", "@", "--token-file", "%/missing"}, 3, "authrpc: UNAUTHENTICATED: "},
      // 4: unavailable, with the code even though the cause is a system error.
      {{"call", "--server", "#", "--connect-timeout", "2000", "sys", "whoami"}, 4, "authrpc: UNAVAILABLE: "},
      {{"token", "fetch", "--server", "#", "--renewer", "", "-o", "%/t", "--auth", "simple"}, 4,
       "authrpc: UNAVAILABLE: "},
      // 1: anything else.
      {{"call", "--server", "@", "--user", "alice", "sys", "nosuchmethod"}, 1, "authrpc: NOT_FOUND: "},
  };
  for (const auto& c : cases) {
    std::vector<std::string> args = {kCliBin};
    std::string shown;
    for (std::string a : c.args) {
      if (a == "@") a = running;
      if (a == "#") a = gone;
      if (a.starts_with("%")) a = dir_.path() + a.substr(1);
      shown += " " + a;
      args.push_back(a);
    }
    const auto r = RunCommand(args, c.env);
    EXPECT_EQ(r.exit_code, c.exit_code) << shown << "\n" << Describe(r);
    EXPECT_THAT(r.err, StartsWith(c.err_prefix)) << shown;
    EXPECT_THAT(r.err, ::testing::EndsWith("\n")) << shown;
    EXPECT_TRUE(r.out.empty()) << shown << "\n" << Describe(r);
    if (c.exit_code != 2 || c.err_prefix == usage) {
      EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "one line: " << shown << "\n" << r.err;
    }
  }
}

// Answers whatever a client sends with an HTTP error, as a web server
// answers bytes it cannot parse: one connection, on a thread.
class HttpAnswerer {
 public:
  HttpAnswerer() {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof addr;
    if (fd_ < 0 || ::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        ::listen(fd_, 4) != 0 || ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &length) != 0) {
      ADD_FAILURE() << "HttpAnswerer: " << std::strerror(errno);
      return;
    }
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([fd = fd_] {
      const int peer = ::accept4(fd, nullptr, nullptr, SOCK_CLOEXEC);
      if (peer < 0) return;
      char buf[1024];
      if (::read(peer, buf, sizeof buf) > 0) {
        constexpr std::string_view kAnswer =
            "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
        [[maybe_unused]] const auto n = ::write(peer, kAnswer.data(), kAnswer.size());
      }
      // Closed only after the client: unread input would make close()
      // reset the connection, and the answer could be lost.
      ::shutdown(peer, SHUT_WR);
      pollfd p{peer, POLLIN, 0};
      while (::poll(&p, 1, 5000) == 1 && ::read(peer, buf, sizeof buf) > 0) {
      }
      ::close(peer);
    });
  }
  ~HttpAnswerer() {
    if (fd_ >= 0) ::shutdown(fd_, SHUT_RDWR);  // ends a waiting accept
    if (thread_.joinable()) thread_.join();
    if (fd_ >= 0) ::close(fd_);
  }
  std::string endpoint() const { return "tcp://127.0.0.1:" + std::to_string(port_); }

 private:
  int fd_ = -1;
  int port_ = 0;
  std::thread thread_;
};

// One cause, one answer: each row is a mistake a user makes, with the code,
// exit status (tools/cli_exit.h) and advice of its one stderr line
// "authrpc: CODE: message [advice]" and words the message must contain —
// the table of docs/CLI.md ("One cause, one answer"). Rows that share a
// cause (two unreadable credentials files, two transports a bearer token
// may not cross, two ways of not reaching a server) must agree. OpenSSL's
// packed error codes appear in no message. In arguments "@" is the running
// plaintext server (tcp), "U" its unix socket, "T" a TLS server, "#" a
// stopped server, "%" the temp directory.
TEST_F(CliTest, OneCauseHasOneCodeExitStatusAndAdvice) {
  const auto& tls = authrpc::testing::TestTls::shared();
  // A self-signed certificate (a CA's, served as a leaf) and one of the
  // test CA's for another name.
  const authrpc::testing::TestCa self_signed(tls.dir(), "cli-self-signed");
  tls.issue({"cli-elsewhere", "elsewhere", {"DNS:elsewhere.example"}});
  const std::string sock = dir_.path() + "/s.sock";
  // Starts authrpc-server on `config`; `endpoint` gets the first endpoint it prints.
  auto start = [this](const std::string& name, const nlohmann::json& config, std::string& endpoint) {
    auto child = Child::Spawn({kServerBin, "--config", dir_.Write(name, config.dump()), "--print-endpoints"});
    if (child) {
      auto line = child->ReadStdoutLine(10s);
      EXPECT_TRUE(line.has_value()) << name << ": " << child->stderr_text();
      endpoint = line.value_or("");
    }
    return child;
  };
  auto tls_config = [](const std::string& cert, const std::string& key) {
    return nlohmann::json{{"listen", {"tls://127.0.0.1:0"}},
                          {"tls", {{"certificate", cert}, {"private_key", key}}},
                          {"auth", {{"mechanisms", {"simple"}}}},
                          {"io_threads", 1},
                          {"log_level", "error"}};
  };
  auto plain_config = nlohmann::json::parse(kGoodConfig);
  plain_config["listen"] = {"tcp://127.0.0.1:0", "unix:" + sock};
  std::string plain_ep, good_ep, self_signed_ep, elsewhere_ep, gone_ep;
  const auto plain = start("plain.json", plain_config, plain_ep);
  const auto good = start("tls.json", tls_config(tls.cert_file("server"), tls.key_file("server")), good_ep);
  const auto self_signed_server = start(
      "self.json", tls_config(self_signed.ca_file(), self_signed.key_file("cli-self-signed")), self_signed_ep);
  const auto elsewhere = start(
      "elsewhere.json", tls_config(tls.cert_file("cli-elsewhere"), tls.key_file("cli-elsewhere")), elsewhere_ep);
  const auto stopped = start("stopped.json", nlohmann::json::parse(kGoodConfig), gone_ep);
  ASSERT_TRUE(plain && good && self_signed_server && elsewhere && stopped);
  ASSERT_TRUE(stopped->Signal(SIGTERM).has_value());
  HttpAnswerer http;
  const std::string tls_to_plain = "tls://" + plain_ep.substr(std::string("tcp://").size());

  struct Row {
    std::string cause;
    std::vector<std::string> args;  // after "authrpc call --server"
    std::string code;
    int exit_code;
    std::string advice;
    std::string says;  // in the message
    std::vector<std::string> env = {};
  };
  const std::string ca = tls.ca_file();
  const std::vector<Row> rows = {
      // A credentials file the user named cannot be read.
      {"token file unreadable", {"@", "--auth", "token", "--token-file", "%/no-token"}, "UNAUTHENTICATED", 3,
       "reauthenticate", "cannot read credentials file %/no-token: No such file or directory"},
      {"JWT file unreadable", {"T", "--ca", ca, "--auth", "jwt", "--jwt-file", "%/no-jwt"}, "UNAUTHENTICATED", 3,
       "reauthenticate", "cannot read token file %/no-jwt: No such file or directory"},
      {"keytab unreadable",
       {"@", "--auth", "kerberos", "--keytab", "%/no-keytab", "--principal", "alice@CLI.TEST"},
       "UNAUTHENTICATED", 3, "reauthenticate", "cannot read keytab %/no-keytab: No such file or directory"},
      // No Kerberos ticket to use.
      {"no ticket cache", {"@", "--auth", "kerberos"}, "CREDENTIALS_EXPIRED", 3, "reauthenticate",
       "no Kerberos ticket in the default ticket cache: run kinit",
       {"KRB5CCNAME=FILE:" + dir_.path() + "/no-ccache"}},
      // A bearer token never crosses plaintext: refused by the client itself.
      {"jwt over tcp://", {"@", "--auth", "jwt", "--jwt-file", "%/no-jwt"}, "CONFIG_ERROR", 2, "give-up",
       "bearer"},
      {"jwt over unix://", {"U", "--auth", "jwt", "--jwt-file", "%/no-jwt"}, "CONFIG_ERROR", 2, "give-up",
       "refusing to send a bearer token without TLS: use tls://"},
      // Nothing answers at the address.
      {"no such socket file", {"unix:%/no.sock"}, "UNAVAILABLE", 4, "retry",
       "cannot reach the server at unix:%/no.sock: no such socket file"},
      {"host name does not resolve", {"tcp://authrpc-cli-test.invalid:7000", "--connect-timeout", "5000"},
       "UNAVAILABLE", 4, "retry",
       "cannot reach the server at tcp://authrpc-cli-test.invalid:7000: host name authrpc-cli-test.invalid "
       "does not resolve"},
      {"nothing listens on the port", {"#"}, "UNAVAILABLE", 4, "retry", "connection refused"},
      // Something answers, but not authrpc.
      {"an HTTP server", {http.endpoint()}, "PROTOCOL_ERROR", 1, "give-up",
       "the server at " + http.endpoint() + " is not an authrpc server (it answered HTTP/1.1 400 Bad Request)"},
      {"tls:// to a plaintext port", {tls_to_plain, "--ca", ca}, "PROTOCOL_ERROR", 1, "give-up",
       "the server does not speak TLS"},
      // TLS files and certificates.
      {"CA file unreadable", {"T", "--ca", "%/no-ca.pem"}, "CONFIG_ERROR", 2, "give-up",
       "cannot read CA file %/no-ca.pem: No such file or directory"},
      {"client certificate unreadable", {"T", "--ca", ca, "--cert", "%/no-cert.pem", "--key", "%/no-key.pem"},
       "CONFIG_ERROR", 2, "give-up", "cannot read certificate file %/no-cert.pem: No such file or directory"},
      {"self-signed server certificate", {self_signed_ep, "--ca", ca}, "AUTHENTICATION_FAILED", 3, "give-up",
       "certificate verify failed: self-signed certificate"},
      {"certificate for another host", {elsewhere_ep, "--ca", ca}, "AUTHENTICATION_FAILED", 3, "give-up",
       "certificate verify failed: IP address mismatch (the server's certificate does not name 127.0.0.1)"},
  };
  auto expand = [&](std::string a) {
    if (a == "@") return plain_ep;
    if (a == "U") return "unix:" + sock;
    if (a == "T") return good_ep;
    if (a == "#") return gone_ep;
    for (std::size_t at; (at = a.find('%')) != std::string::npos;) a.replace(at, 1, dir_.path());
    return a;
  };
  for (const auto& row : rows) {
    SCOPED_TRACE(row.cause);
    std::vector<std::string> args = {kCliBin, "call", "--server"};
    for (const auto& a : row.args) args.push_back(expand(a));
    args.insert(args.end(), {"sys", "whoami"});
    const auto r = RunCommand(args, row.env);
    EXPECT_EQ(r.exit_code, row.exit_code) << Describe(r);
    EXPECT_THAT(r.err, StartsWith("authrpc: " + row.code + ": ")) << Describe(r);
    EXPECT_THAT(r.err, ::testing::EndsWith(" [" + row.advice + "]\n")) << Describe(r);
    EXPECT_THAT(r.err, HasSubstr(expand(row.says))) << Describe(r);
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << Describe(r);
    EXPECT_THAT(r.err, Not(::testing::ContainsRegex("error:[0-9A-Fa-f]{8}"))) << Describe(r);
    EXPECT_TRUE(r.out.empty()) << Describe(r);
  }
}

// The same missing Kerberos ticket is the same failure in `call` and in
// `token fetch` (it was a usage error in one and a failure in the other).
TEST_F(CliTest, AMissingKerberosTicketIsACredentialsFailureEverywhere) {
  ASSERT_NO_FATAL_FAILURE(StartServer());
  const std::vector<std::string> no_ticket = {"KRB5CCNAME=FILE:" + dir_.path() + "/no-ccache",
                                              "KRB5_CLIENT_KTNAME=FILE:" + dir_.path() + "/no-keytab"};
  const auto call = RunCommand({kCliBin, "call", "--server", endpoint_, "--auth", "kerberos", "sys", "whoami"},
                               no_ticket);
  const auto fetch = RunCommand({kCliBin, "token", "fetch", "--server", endpoint_, "--renewer", "",
                                 "-o", dir_.path() + "/t"},
                                no_ticket);
  EXPECT_EQ(call.exit_code, 3) << Describe(call);
  EXPECT_EQ(fetch.exit_code, 3) << Describe(fetch);
  const auto code = [](const std::string& err) {
    const auto first = err.find(": ");
    return err.substr(0, err.find(": ", first + 2));
  };
  EXPECT_EQ(code(call.err), code(fetch.err)) << call.err << fetch.err;
}

TEST_F(CliTest, HelpOfBothBinariesExitsZeroAndEachSubcommandHasItsOwn) {
  std::vector<std::string> token_pages;
  for (const auto& args : std::vector<std::vector<std::string>>{
           {kServerBin, "--help"}, {kCliBin, "--help"}, {kCliBin, "help"},
           {kCliBin, "call", "--help"}, {kCliBin, "describe", "--help"}, {kCliBin, "stats", "--help"},
           {kCliBin, "token", "--help"},
           {kCliBin, "token", "fetch", "--help"}, {kCliBin, "token", "renew", "--help"},
           {kCliBin, "token", "cancel", "--help"}, {kCliBin, "token", "print", "--help"},
           {kCliBin, "jwt", "--help"}, {kCliBin, "jwt", "inspect", "--help"}}) {
    const auto r = RunCommand(args);
    EXPECT_EQ(r.exit_code, 0) << args.back() << ": " << Describe(r);
    EXPECT_THAT(r.out, StartsWith("usage: ")) << Describe(r);
    EXPECT_THAT(r.out, ::testing::EndsWith("\n")) << Describe(r);
    if (args.size() == 4 && args[1] == "token") {
      EXPECT_THAT(r.out, StartsWith("usage: authrpc token " + args[2])) << r.out;
      token_pages.push_back(r.out);
    }
  }
  ASSERT_EQ(token_pages.size(), 4u);
  for (std::size_t i = 0; i < token_pages.size(); ++i) {
    for (std::size_t j = i + 1; j < token_pages.size(); ++j) EXPECT_NE(token_pages[i], token_pages[j]);
  }
  // --renewer belongs to fetch only.
  EXPECT_THAT(token_pages[0], HasSubstr("--renewer"));
  EXPECT_THAT(token_pages[3], Not(HasSubstr("--renewer")));
}

// `authrpc call --help` lists every flag a registered mechanism declares,
// from the registry (MechanismFlag::help): a mechanism added as a module
// shows its flags without the CLI naming it.
TEST_F(CliTest, CallHelpListsEveryMechanismsFlags) {
  const auto r = RunCommand({kCliBin, "call", "--help"});
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  const auto registry = authrpc::MechanismRegistry::with_builtins();
  std::size_t flags = 0;
  for (const auto& name : registry.client_names()) {
    for (const auto& f : registry.client(name)->flags) {
      ++flags;
      EXPECT_THAT(r.out, HasSubstr("\n  " + f.flag + " ")) << name;
    }
  }
  EXPECT_GE(flags, 10u);
  EXPECT_THAT(r.out, HasSubstr("jwt: the access token (a JWT) from file F"));
  EXPECT_THAT(r.out, HasSubstr("\n  --keytab F         kerberos, kerberos-sasl: log in from keytab F"));
}

TEST_F(CliTest, BothBinariesPrintTheirVersion) {
  for (const auto& args : std::vector<std::vector<std::string>>{
           {kCliBin, "--version"}, {kCliBin, "version"}, {kServerBin, "--version"}}) {
    const auto r = RunCommand(args);
    EXPECT_EQ(r.exit_code, 0) << Describe(r);
    const std::string name = args[0] == kServerBin ? "authrpc-server" : "authrpc";
    EXPECT_THAT(r.out, ::testing::MatchesRegex(name + " [0-9]+\\.[0-9]+\\.[0-9]+ \\(commit [0-9a-z]+\\)\n"))
        << Describe(r);
  }
}

TEST_F(CliTest, ServerUsageErrorsExitTwo) {
  for (const auto& args : std::vector<std::vector<std::string>>{
           {kServerBin}, {kServerBin, "--bogus"}, {kServerBin, "--config"}}) {
    const auto r = RunCommand(args);
    EXPECT_EQ(r.exit_code, 2) << args.back() << ": " << Describe(r);
    EXPECT_THAT(r.err, StartsWith("authrpc-server: USAGE: ")) << Describe(r);
  }
  const auto bare = RunCommand({kCliBin});
  EXPECT_EQ(bare.exit_code, 2) << Describe(bare);
  EXPECT_THAT(bare.err, StartsWith("usage: authrpc")) << Describe(bare);
}

TEST_F(CliTest, ABadConfigFileExitsTwo) {
  const std::vector<std::pair<std::string, std::string>> configs = {
      {"not-json.json", "{ this is not json"},
      {"unknown-key.json", R"({"listen": ["tcp://127.0.0.1:0"], "listne": []})"},
      {"no-listen.json", R"({"auth": {"mechanisms": ["simple"]}})"},
      {"bad-endpoint.json", R"({"listen": ["http://127.0.0.1:0"]})"},
      {"bad-mechanism.json", R"({"listen": ["tcp://127.0.0.1:0"], "auth": {"mechanisms": ["nope"]}})"},
      {"admin-not-object.json", R"({"listen": ["tcp://127.0.0.1:0"], "admin": "127.0.0.1:0"})"},
      {"admin-no-listen.json", R"({"listen": ["tcp://127.0.0.1:0"], "admin": {}})"},
      {"admin-unknown-key.json", R"({"listen": ["tcp://127.0.0.1:0"], "admin": {"listen": "127.0.0.1:0", "port": 1}})"},
      {"admin-bad-address.json", R"({"listen": ["tcp://127.0.0.1:0"], "admin": {"listen": "127.0.0.1:9464s"}})"},
      {"admin-bad-host-name.json",
       R"({"listen": ["tcp://127.0.0.1:0"], "admin": {"listen": "127.0.0.1:0", "hosts": ["*.example"]}})"},
  };
  for (const auto& [name, content] : configs) {
    const std::string path = dir_.Write(name, content);
    const auto r = RunCommand({kServerBin, "--config", path});
    EXPECT_EQ(r.exit_code, 2) << name << ": " << Describe(r);
    EXPECT_FALSE(r.err.empty()) << name << ": no explanation on stderr";
  }
  const auto missing = RunCommand({kServerBin, "--config", dir_.path() + "/does-not-exist.json"});
  EXPECT_EQ(missing.exit_code, 2) << Describe(missing);
}

// --check prints every problem as FILE:LINE:COLUMN: key: message and exits
// 2, or says OK and exits 0; an address someone holds is for the start to
// find, and both listeners' exit 1 for it.
TEST_F(CliTest, ServerCheckListsEveryProblemAndABusyAddressExitsOne) {
  const std::string bad = dir_.Write("bad.json", "{\"listen\": [\"tcp://127.0.0.1:0\"],\n \"io_threads\": \"2\",\n"
                                                 " \"lisen\": [], \"listen\": []}");
  const auto r = RunCommand({kServerBin, "--check", "--config", bad});
  EXPECT_EQ(r.exit_code, 2) << Describe(r);
  // The later "listen" is the one read: empty.
  EXPECT_EQ(r.err, bad + ":2:2: io_threads: must be a non-negative integer\n" + bad + ":3:2: lisen: unknown key\n" +
                       bad + ":3:15: listen: duplicate key (first at line 1, column 2)\n" + bad +
                       ":3:15: listen: must be a non-empty array of endpoint URIs\n")
      << Describe(r);
  const auto started = RunCommand({kServerBin, "--config", bad});
  EXPECT_EQ(started.exit_code, 2) << Describe(started);
  EXPECT_THAT(started.err, StartsWith("authrpc-server: " + bad + ":2:2: io_threads: ")) << Describe(started);

  const std::string good = dir_.Write("good.json", R"({"listen": ["tcp://127.0.0.1:0"]})");
  const auto ok = RunCommand({kServerBin, "--check", "--config", good});
  EXPECT_EQ(ok.exit_code, 0) << Describe(ok);
  EXPECT_EQ(ok.out, good + ": configuration OK\n");

  ASSERT_NO_FATAL_FAILURE(StartServer());
  const std::string port = endpoint_.substr(endpoint_.rfind(':') + 1);
  const std::string rpc_busy = dir_.Write("rpc-busy.json", R"({"listen": ["tcp://127.0.0.1:)" + port + R"("]})");
  EXPECT_EQ(RunCommand({kServerBin, "--check", "--config", rpc_busy}).exit_code, 0);
  const auto rpc = RunCommand({kServerBin, "--config", rpc_busy});
  EXPECT_EQ(rpc.exit_code, 1) << Describe(rpc);
#ifdef AUTHRPC_HAVE_ADMIN
  const std::string admin_busy = dir_.Write(
      "admin-busy.json", R"({"listen": ["tcp://127.0.0.1:0"], "admin": {"listen": "127.0.0.1:)" + port + R"("}})");
  const auto admin = RunCommand({kServerBin, "--config", admin_busy});
  EXPECT_EQ(admin.exit_code, 1) << Describe(admin);
  EXPECT_THAT(admin.err, Not(HasSubstr("serving on"))) << Describe(admin);
#endif
}

TEST_F(CliTest, SigtermStopsTheServerWithExitZero) {
  ASSERT_NO_FATAL_FAILURE(StartServer());
  // Serving first, so that the stop has a connection history to clean up.
  const auto r = RunCommand({kCliBin, "call", "--server", endpoint_, "--user", "alice", "sys", "echo"});
  ASSERT_EQ(r.exit_code, 0) << Describe(r);

  const auto start = Clock::now();
  const auto status = server_->Signal(SIGTERM, 10s);
  ASSERT_TRUE(status.has_value()) << "authrpc-server did not exit after SIGTERM";
  EXPECT_TRUE(WIFEXITED(*status)) << "killed by signal " << WTERMSIG(*status);
  EXPECT_EQ(WEXITSTATUS(*status), 0) << server_->stderr_text();
  EXPECT_LT(Clock::now() - start, 5s);
}

TEST_F(CliTest, SigintAlsoStopsTheServerWithExitZero) {
  ASSERT_NO_FATAL_FAILURE(StartServer());
  const auto status = server_->Signal(SIGINT, 10s);
  ASSERT_TRUE(status.has_value()) << "authrpc-server did not exit after SIGINT";
  ASSERT_TRUE(WIFEXITED(*status)) << "killed by signal " << WTERMSIG(*status);
  EXPECT_EQ(WEXITSTATUS(*status), 0) << server_->stderr_text();
}

// SIGHUP re-reads log_level: with "info" an idle close (a debug line) is not
// logged; after "debug" and SIGHUP it is, as a JSON line ("log_format":
// "json"); a bad value is reported and the level stays.
TEST_F(CliTest, SighupChangesTheLogLevel) {
  auto config_with = [](const std::string& level) {
    return nlohmann::json{{"listen", {"tcp://127.0.0.1:0"}},
                          {"auth", {{"mechanisms", {"simple"}}}},
                          {"io_threads", 1},
                          {"idle_timeout_ms", 100},
                          {"log_level", level},
                          {"log_format", "json"}}
        .dump();
  };
  const std::string config = dir_.Write("server.json", config_with("info"));
  server_ = Child::Spawn({kServerBin, "--config", config, "--print-endpoints"});
  ASSERT_NE(server_, nullptr);
  auto line = server_->ReadStdoutLine(10s);
  ASSERT_TRUE(line.has_value()) << server_->stderr_text();
  auto endpoint = authrpc::Endpoint::parse(*line);
  ASSERT_TRUE(endpoint.ok()) << *line;
  // Connects, calls, and waits until the server has closed the connection
  // for idleness (a call after a pause longer than idle_timeout_ms fails).
  auto idle_close = [&] {
    auto client = authrpc::testing::ConnectWith(*endpoint, std::make_shared<authrpc::SimpleClientMechanism>("alice"));
    ASSERT_TRUE(client.ok()) << client.status().to_string();
    ASSERT_TRUE((*client)->call("sys", "echo", "x").ok());
    bool closed = false;
    for (int i = 0; i < 20 && !closed; ++i) {
      std::this_thread::sleep_for(300ms);
      closed = !(*client)->call("sys", "echo", "x").ok();
    }
    EXPECT_TRUE(closed) << "the server did not close the idle connection";
  };
  constexpr std::string_view kIdleLine = "closing idle connection from";

  ASSERT_NO_FATAL_FAILURE(idle_close());
  EXPECT_FALSE(server_->WaitForStderr(kIdleLine, 0, 300ms)) << server_->stderr_text();

  dir_.Write("server.json", config_with("debug"));
  ASSERT_EQ(::kill(server_->pid(), SIGHUP), 0);
  ASSERT_TRUE(server_->WaitForStderr("SIGHUP: log level info -> debug")) << server_->stderr_text();
  ASSERT_NO_FATAL_FAILURE(idle_close());
  ASSERT_TRUE(server_->WaitForStderr(kIdleLine)) << server_->stderr_text();
  {
    const std::string& err = server_->stderr_text();
    const auto at = err.find(kIdleLine);
    const auto begin = err.rfind('\n', at) == std::string::npos ? 0 : err.rfind('\n', at) + 1;
    ASSERT_TRUE(server_->WaitForStderr("\n", at));
    const auto json_line = nlohmann::json::parse(err.substr(begin, err.find('\n', at) - begin), nullptr, false);
    ASSERT_TRUE(json_line.is_object()) << err;
    EXPECT_EQ(json_line.value("level", ""), "debug");
    EXPECT_THAT(json_line.value("message", ""), HasSubstr("127.0.0.1:"));
  }

  const std::size_t before_bad = server_->stderr_text().size();
  dir_.Write("server.json", config_with("loud"));
  ASSERT_EQ(::kill(server_->pid(), SIGHUP), 0);
  ASSERT_TRUE(server_->WaitForStderr("SIGHUP: log_level not changed, stays debug", before_bad))
      << server_->stderr_text();
  EXPECT_THAT(server_->stderr_text().substr(before_bad), HasSubstr("'log_level' must be debug, info, warning or error"));
  const std::size_t before_idle = server_->stderr_text().size();
  ASSERT_NO_FATAL_FAILURE(idle_close());
  EXPECT_TRUE(server_->WaitForStderr(kIdleLine, before_idle)) << "still at debug:\n" << server_->stderr_text();

  const auto status = server_->Signal(SIGTERM, 10s);
  ASSERT_TRUE(status.has_value());
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << server_->stderr_text();
}

// `authrpc stats` against authrpc-server with an authorization policy whose
// admin is alice: a summary for her, the raw JSON with --json, PERMISSION_DENIED
// (exit 5) for bob.
TEST_F(CliTest, StatsSummarisesTheServerForAnAdminOnly) {
  const std::string acl = dir_.Write("acl.json", R"({"admins": {"users": ["alice"]}})");
  auto config = nlohmann::json::parse(kGoodConfig);
  config["authorization"] = {{"acl_file", acl}};
  ASSERT_NO_FATAL_FAILURE(StartServer(config.dump()));
  // Some traffic to count.
  for (int i = 0; i < 3; ++i) {
    const auto r = RunCommand({kCliBin, "call", "--server", endpoint_, "--user", "carol", "sys", "whoami"});
    ASSERT_EQ(r.exit_code, 0) << Describe(r);
  }
  const auto summary = RunCommand({kCliBin, "stats", "--server", endpoint_, "--auth", "simple", "--user", "alice"});
  ASSERT_EQ(summary.exit_code, 0) << Describe(summary);
  EXPECT_THAT(summary.out, StartsWith("authrpc "));
  for (const char* part : {", up ", "\nconnections: ", "\nsessions by mechanism and outcome",
                           "\ncalls by method and code", "\nprocess: "}) {
    EXPECT_THAT(summary.out, HasSubstr(part));
  }
  EXPECT_TRUE(summary.err.empty()) << Describe(summary);

  const auto json = RunCommand({kCliBin, "stats", "--server", endpoint_, "--user", "alice", "--json"});
  ASSERT_EQ(json.exit_code, 0) << Describe(json);
  const auto stats = nlohmann::json::parse(json.out, nullptr, false);
  ASSERT_FALSE(stats.is_discarded()) << json.out;
  ASSERT_TRUE(stats["metrics"].is_array());
  bool uptime = false;
  for (const auto& family : stats["metrics"]) uptime = uptime || family["name"] == "authrpc_uptime_seconds";
  EXPECT_TRUE(uptime) << json.out;

  const auto denied = RunCommand({kCliBin, "stats", "--server", endpoint_, "--user", "bob"});
  EXPECT_EQ(denied.exit_code, 5) << Describe(denied);
  EXPECT_THAT(denied.err, StartsWith("authrpc: PERMISSION_DENIED: "));
  EXPECT_TRUE(denied.out.empty());
}

#ifdef AUTHRPC_TEST_ADMIN
// "admin": {"listen": "127.0.0.1:0"}: authrpc-server prints the admin
// listener's URL after its endpoints, serves /healthz, /readyz and /metrics
// there, and still stops cleanly.
TEST_F(CliTest, TheServerAnswersProbesAndScrapesOnItsAdminListener) {
  auto config = nlohmann::json::parse(kGoodConfig);
  config["admin"] = {{"listen", "127.0.0.1:0"}};
  ASSERT_NO_FATAL_FAILURE(StartServer(config.dump()));
  const auto url = server_->ReadStdoutLine(10s);
  ASSERT_TRUE(url.has_value()) << server_->stderr_text();
  ASSERT_THAT(*url, StartsWith("http://127.0.0.1:"));
  ASSERT_NE(*url, "http://127.0.0.1:0");
  const auto r = RunCommand({kCliBin, "call", "--server", endpoint_, "--user", "carol", "sys", "whoami"});
  ASSERT_EQ(r.exit_code, 0) << Describe(r);

  auto health = authrpc::testing::http_get(*url + "/healthz");
  ASSERT_TRUE(health.ok()) << health.status().to_string();
  EXPECT_EQ(health->status, 200);
  auto ready = authrpc::testing::http_get(*url + "/readyz");
  ASSERT_TRUE(ready.ok()) << ready.status().to_string();
  EXPECT_EQ(ready->status, 200) << ready->body;
  auto metrics = authrpc::testing::http_get(*url + "/metrics");
  ASSERT_TRUE(metrics.ok()) << metrics.status().to_string();
  EXPECT_EQ(metrics->status, 200);
  EXPECT_THAT(metrics->body, HasSubstr("\nauthrpc_build_info{version=\""));

  const auto status = server_->Signal(SIGTERM, 10s);
  ASSERT_TRUE(status.has_value()) << "authrpc-server did not exit after SIGTERM";
  ASSERT_TRUE(WIFEXITED(*status));
  EXPECT_EQ(WEXITSTATUS(*status), 0) << server_->stderr_text();
  EXPECT_FALSE(authrpc::testing::http_get(*url + "/healthz").ok()) << "still listening after the stop";
}
#else
TEST_F(CliTest, AnAdminSectionIsRefusedWithoutTheAdminComponent) {
  auto config = nlohmann::json::parse(kGoodConfig);
  config["admin"] = {{"listen", "127.0.0.1:0"}};
  const auto r = RunCommand({kServerBin, "--config", dir_.Write("admin.json", config.dump())});
  EXPECT_EQ(r.exit_code, 2) << Describe(r);
  EXPECT_THAT(r.err, HasSubstr("without the admin listener"));
}
#endif

TEST_F(CliTest, TheServerCanListenWhereTheCommandLineSays) {
  const std::string config = dir_.Write("server.json", kGoodConfig);
  const std::string unix_ep = "unix:@authrpc-cli-test-" + std::to_string(::getpid());
  server_ = Child::Spawn({kServerBin, "--config", config, "--listen", unix_ep, "--print-endpoints"});
  ASSERT_NE(server_, nullptr);
  auto line = server_->ReadStdoutLine(10s);
  ASSERT_TRUE(line.has_value()) << server_->stderr_text();
  EXPECT_EQ(*line, unix_ep);
  const auto r = RunCommand({kCliBin, "call", "--server", unix_ep, "--user", "carol", "sys", "whoami"});
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_EQ(nlohmann::json::parse(r.out, nullptr, false).value("user", ""), "carol");
}

// `authrpc describe` and `authrpc call --json` against a server in this
// process with the typed test services (tests/protos/*.proto, implemented
// in tests/testing/proto_items.h) beside the built-in sys.
class ProtoCliTest : public CliTest {
 protected:
  void SetUp() override {
    CliTest::SetUp();
    typed_.service(authrpc::test::ItemsService::make_service(authrpc::testing::make_items_service()))
        .service(authrpc::test::TagsService::make_service(authrpc::testing::make_tags_service()))
        .service(other::v2::ScaleService::make_service(authrpc::testing::make_scale_service()));
    const authrpc::Status s = typed_.start();
    ASSERT_TRUE(s.ok()) << s.to_string();
    endpoint_ = typed_.endpoint().to_string();
  }

  // kCliBin, then `args` with "@" replaced by the server's endpoint and a
  // leading "%" by the temporary directory.
  RunResult Run(const std::vector<std::string>& args, const std::string& stdin_path = "/dev/null") {
    std::vector<std::string> argv = {kCliBin};
    for (std::string a : args) {
      if (a == "@") a = endpoint_;
      if (a.starts_with("%")) a = dir_.path() + a.substr(1);
      argv.push_back(a);
    }
    return RunCommand(argv, {}, stdin_path);
  }

  authrpc::testing::TestServer typed_;
};

// Each line of `text` parsed as JSON (a line that is not JSON is null).
std::vector<nlohmann::json> JsonLines(const std::string& text) {
  std::vector<nlohmann::json> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(nlohmann::json::parse(line, nullptr, false));
  return lines;
}

TEST_F(ProtoCliTest, DescribeListsProtobufServicesAsProtoTextAndTheOthersByMethod) {
  struct Case {
    std::vector<std::string> args;  // after `describe --server @ --user alice`
    int exit_code;
    std::vector<std::string> shown;
    std::vector<std::string> not_shown = {};
  };
  const std::string items_rpcs =
      "service authrpc.test.Items {\n"
      "  rpc Echo(authrpc.test.Item) returns (authrpc.test.Item);\n"
      "  rpc EchoAsync(authrpc.test.Item) returns (authrpc.test.Item);\n"
      "  rpc EchoBlocking(authrpc.test.Item) returns (authrpc.test.Item);\n"
      "  rpc Fail(authrpc.test.Failure) returns (authrpc.test.Summary);\n"
      "  rpc WhoAmI(authrpc.test.Count) returns (authrpc.test.Summary);\n"
      "  rpc List(authrpc.test.Count) returns (stream authrpc.test.Item);\n"
      "  rpc Collect(stream authrpc.test.Item) returns (authrpc.test.Summary);\n"
      "  rpc Chat(stream authrpc.test.Item) returns (stream authrpc.test.Item);\n"
      "  rpc Missing(authrpc.test.Count) returns (authrpc.test.Summary);\n"
      "}\n";
  const std::vector<Case> cases = {
      {{}, 0,
       {items_rpcs,
        "service authrpc.test.Tags {\n  rpc Heaviest(authrpc.test.Count) returns (authrpc.test.common.Tag);\n}\n",
        "service other.v2.Scale {\n  rpc Total(other.v2.Weigh) returns (authrpc.test.common.Tag);\n}\n",
        "service sys {\n  // no schema: its methods carry bytes or JSON (authrpc call --data)\n",
        "\n  describe  // unary\n", "\n  whoami  // unary\n"}},
      // One service: its rpcs, then each message its methods use (nested
      // ones inside their message, another package's too), once.
      {{"authrpc.test.Items"}, 0,
       {items_rpcs, "\n// authrpc.test.Item (items.proto)\nmessage Item {\n", "  message Nested {\n",
        "  map<string, int64> counters = 4;\n", "  oneof payload {\n",
        "\n// authrpc.test.common.Tag (common.proto)\nmessage Tag {\n", "\n// authrpc.test.Failure (items.proto)\n",
        "\n// authrpc.test.Summary (items.proto)\n", "\n// authrpc.test.Count (items.proto)\n"},
       {"service sys", "service authrpc.test.Tags", "// authrpc.test.Item.Nested"}},
      {{"other.v2.Scale"}, 0,
       {"service other.v2.Scale {\n", "\n// other.v2.Weigh (other/v2/other.proto)\nmessage Weigh {\n",
        "\n// authrpc.test.common.Tag (common.proto)\n"},
       {"service authrpc.test.Items", "service sys"}},
      {{"sys"}, 0, {"service sys {\n", "  echo  // unary\n"}, {"service authrpc.test.Items"}},
  };
  for (const auto& c : cases) {
    std::vector<std::string> args = {"describe", "--server", "@", "--user", "alice"};
    args.insert(args.end(), c.args.begin(), c.args.end());
    const auto r = Run(args);
    const std::string shown = testing::PrintToString(c.args);
    ASSERT_EQ(r.exit_code, c.exit_code) << shown << "\n" << Describe(r);
    for (const auto& text : c.shown) EXPECT_THAT(r.out, HasSubstr(text)) << shown << "\n" << r.out;
    for (const auto& text : c.not_shown) EXPECT_THAT(r.out, Not(HasSubstr(text))) << shown << "\n" << r.out;
    // Each type once.
    for (const char* type : {"// authrpc.test.Item (", "// authrpc.test.common.Tag ("}) {
      std::size_t count = 0;
      for (auto at = r.out.find(type); at != std::string::npos; at = r.out.find(type, at + 1)) ++count;
      EXPECT_LE(count, c.args.empty() ? 3u : 1u) << shown << ": " << type << "\n" << r.out;
    }
  }
  const auto unknown = Run({"describe", "--server", "@", "no.Such"});
  EXPECT_EQ(unknown.exit_code, 1) << Describe(unknown);
  EXPECT_THAT(unknown.err, StartsWith("authrpc: NOT_FOUND: service no.Such: ")) << Describe(unknown);
  EXPECT_TRUE(unknown.out.empty()) << Describe(unknown);
  EXPECT_THAT(Run({"help"}).out, HasSubstr("\n  describe   list a server's services"));
  const auto two = Run({"describe", "--server", "@", "a.B", "c.D"});
  EXPECT_EQ(two.exit_code, 2) << Describe(two);
  EXPECT_THAT(two.err, StartsWith("authrpc: USAGE: ")) << Describe(two);
}

// `call --json`: the request from JSON, the response as JSON (the .proto's
// field names; int64 as strings, bytes in base64, as the proto3 JSON
// mapping has them), unary and each streaming kind.
TEST_F(ProtoCliTest, CallWithJsonSendsTheMessageAndPrintsTheResponseAsJson) {
  const std::string rich = R"({"key": "k1", "value": "AP8=", "tags": [{"name": "red", "weight": -3}],
      "counters": {"reads": 7}, "nested": {"values": [1, 2], "child": {"text": "inner"}}})";
  const nlohmann::json rich_out = {
      {"key", "k1"},
      {"value", "AP8="},
      {"tags", {{{"name", "red"}, {"weight", "-3"}}}},
      {"counters", {{"reads", "7"}}},
      {"nested", {{"values", {1, 2}}, {"child", {{"text", "inner"}}}}}};
  std::ofstream(dir_.path() + "/weigh.json")
      << R"({"tags": [{"name": "a", "weight": 2}, {"name": "b", "weight": "5"}]})";
  struct Case {
    std::vector<std::string> args;  // after `call --server @ --user alice`
    std::vector<nlohmann::json> lines;  // stdout: one JSON document per line; empty: one indented document
    nlohmann::json document = nullptr;
    std::string stdin_path = "/dev/null";
  };
  const std::vector<Case> cases = {
      // Nested messages, bytes, a map, a oneof and another package's message.
      {{"authrpc.test.Items", "Echo", "--json", rich}, {}, rich_out},
      {{"authrpc.test.Items", "EchoBlocking", "--json", rich}, {}, rich_out},
      {{"authrpc.test.Items", "WhoAmI", "--json", "{}"}, {}, {{"user", "alice"}}},
      {{"authrpc.test.Tags", "Heaviest", "--json", R"({"count": 4, "prefix": "p"})"}, {},
       {{"name", "p"}, {"weight", "4"}}},
      {{"other.v2.Scale", "Total", "--json-file", "%/weigh.json"}, {}, {{"name", "total"}, {"weight", "7"}}},
      {{"other.v2.Scale", "Total", "--json-file", "-"}, {}, {{"name", "total"}, {"weight", "7"}}, "%/weigh.json"},
      // Server-streaming: one document per line, per message.
      {{"authrpc.test.Items", "List", "--json", R"({"count": 3, "prefix": "i"})"},
       {{{"key", "i0"}, {"number", "0"}}, {{"key", "i1"}, {"number", "1"}}, {{"key", "i2"}, {"number", "2"}}}},
      {{"authrpc.test.Items", "List", "--json", "{}"}, {}, nullptr},
      // Client-streaming: an array of requests, the one response.
      {{"authrpc.test.Items", "Collect", "--json", R"([{"key": "a"}, {"key": "b", "text": "x"}])"}, {},
       {{"count", 2}, {"keys", {"a", "b"}}, {"user", "alice"}}},
      {{"authrpc.test.Items", "Collect", "--json", "[]"}, {}, {{"user", "alice"}}},
      // Bidirectional: an array of requests, a line per response.
      {{"authrpc.test.Items", "Chat", "--json", R"([{"key": "a"}, {"key": "b", "number": 5}])"},
       {{{"key", "a"}}, {{"key", "b"}, {"number", "5"}}}},
  };
  for (const auto& c : cases) {
    std::vector<std::string> args = {"call", "--server", "@", "--user", "alice", "--timeout", "10000"};
    args.insert(args.end(), c.args.begin(), c.args.end());
    const auto r = Run(args, c.stdin_path.starts_with("%") ? dir_.path() + c.stdin_path.substr(1) : c.stdin_path);
    const std::string shown = testing::PrintToString(c.args);
    ASSERT_EQ(r.exit_code, 0) << shown << "\n" << Describe(r);
    EXPECT_TRUE(r.err.empty()) << shown << "\n" << Describe(r);
    if (c.lines.empty() && !c.document.is_null()) {
      EXPECT_EQ(nlohmann::json::parse(r.out, nullptr, false), c.document) << shown << "\n" << r.out;
      EXPECT_THAT(r.out, HasSubstr("{\n")) << "indented: " << shown << "\n" << r.out;
    } else {
      EXPECT_EQ(JsonLines(r.out), c.lines) << shown << "\n" << r.out;
    }
  }
}

// What --json refuses, each with its exit status and one line on stderr:
// the user's JSON (2), a service without a schema (2), a method the schema
// lacks (1, naming the methods there are), and the server's own failures.
TEST_F(ProtoCliTest, CallWithJsonRefusesWhatDoesNotFitTheSchema) {
  const std::string usage = "authrpc: USAGE: ";
  struct Case {
    std::vector<std::string> args;  // after `call --server @ --user alice`
    int exit_code;
    std::string err_prefix;
    std::vector<std::string> said = {};
  };
  const std::vector<Case> cases = {
      {{"authrpc.test.Items", "Echo", "--json", R"({"key": "k", "bogus": 1})"}, 2, usage,
       {"--json as authrpc.test.Item: bogus: Cannot find field"}},
      {{"authrpc.test.Items", "Echo", "--json", R"({"key": )"}, 2, usage, {"--json is not JSON"}},
      {{"authrpc.test.Items", "Echo", "--json", R"({"key": 5.5, "counters": []})"}, 2, usage,
       {"--json as authrpc.test.Item: invalid value"}},
      {{"authrpc.test.Items", "Echo", "--json", "[]"}, 2, usage, {"one authrpc.test.Item message as a JSON object"}},
      {{"authrpc.test.Items", "Collect", "--json", R"({"key": "a"})"}, 2, usage, {"a JSON array of authrpc.test.Item"}},
      {{"authrpc.test.Items", "Chat", "--json", R"([{"key": "a"}, {"nope": 1}])"}, 2, usage, {"--json[1]", "nope"}},
      {{"authrpc.test.Items", "Echo", "--json", "{}", "--data", "x"}, 2, usage, {"--json and --data"}},
      {{"authrpc.test.Items", "Echo", "--data-file", "%/missing", "--json", "{}"}, 2, usage},
      {{"authrpc.test.Items", "Echo", "--json", "{}", "--raw"}, 2, usage},
      {{"authrpc.test.Items", "Echo", "--json-file", "%/missing"}, 2, usage, {"cannot read"}},
      {{"sys", "whoami", "--json", "{}"}, 2, usage, {"service sys has no protobuf schema: use --data"}},
      {{"authrpc.test.Items", "Nope", "--json", "{}"}, 1, "authrpc: NOT_FOUND: ",
       {"no method Nope (its methods: Echo, EchoAsync, EchoBlocking, Fail, WhoAmI, List, Collect, Chat, Missing)"}},
      {{"no.Such", "Echo", "--json", "{}"}, 1, "authrpc: NOT_FOUND: service no.Such: "},
      // The server's answers, as with --data.
      {{"authrpc.test.Items", "Fail", "--json", R"({"code": 7, "message": "not you"})"}, 5,
       "authrpc: PERMISSION_DENIED: not you"},
      {{"authrpc.test.Items", "Missing", "--json", "{}"}, 1, "authrpc: UNIMPLEMENTED: "},
      // A field by its JSON name (throwException for throw_exception).
      {{"authrpc.test.Items", "Fail", "--json", R"({"throwException": true})"}, 1, "authrpc: INTERNAL: "},
  };
  for (const auto& c : cases) {
    std::vector<std::string> args = {"call", "--server", "@", "--user", "alice"};
    args.insert(args.end(), c.args.begin(), c.args.end());
    const auto r = Run(args);
    const std::string shown = testing::PrintToString(c.args);
    EXPECT_EQ(r.exit_code, c.exit_code) << shown << "\n" << Describe(r);
    EXPECT_THAT(r.err, StartsWith(c.err_prefix)) << shown << "\n" << Describe(r);
    for (const auto& text : c.said) EXPECT_THAT(r.err, HasSubstr(text)) << shown;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "one line: " << shown << "\n" << r.err;
    EXPECT_TRUE(r.out.empty()) << shown << "\n" << Describe(r);
  }
}

// A schema the CLI cannot build (a file without the files it imports) or
// that lacks its service is the server's fault: DATA_LOSS, status 1, for
// describe and call --json alike.
TEST_F(ProtoCliTest, ASchemaThatDoesNotBuildIsDataLoss) {
  google::protobuf::FileDescriptorSet full;
  ASSERT_TRUE(full.ParseFromString(authrpc::proto::schema_of("authrpc.test.Items").schema));
  ASSERT_GE(full.file_size(), 2);
  google::protobuf::FileDescriptorSet without_imports, without_service;
  *without_imports.add_file() = full.file(full.file_size() - 1);  // items.proto alone
  *without_service.add_file() = full.file(0);
  authrpc::testing::TestServer server;
  for (const auto& [name, set] :
       {std::pair{"broken.Imports", &without_imports}, {"broken.Service", &without_service}}) {
    authrpc::Service service(name);
    service.add("Echo", [](authrpc::CallContext&, std::string_view) -> authrpc::Result<std::string> {
      return std::string();
    });
    service.set_schema({std::string(authrpc::proto::kCodecName), set->SerializeAsString()});
    server.service(std::move(service));
  }
  ASSERT_TRUE(server.start().ok());
  endpoint_ = server.endpoint().to_string();
  struct Case {
    std::vector<std::string> args;
    std::string err_prefix;
  };
  const std::vector<Case> cases = {
      {{"describe", "--server", "@", "broken.Imports"},
       "authrpc: DATA_LOSS: the schema of service broken.Imports does not build: items.proto: "},
      {{"call", "--server", "@", "broken.Imports", "Echo", "--json", "{}"},
       "authrpc: DATA_LOSS: the schema of service broken.Imports does not build: items.proto: "},
      {{"describe", "--server", "@"}, "authrpc: DATA_LOSS: the schema of service broken.Imports does not build"},
      {{"describe", "--server", "@", "broken.Service"},
       "authrpc: DATA_LOSS: the schema of service broken.Service does not define it"},
  };
  for (const auto& c : cases) {
    const auto r = Run(c.args);
    EXPECT_EQ(r.exit_code, 1) << Describe(r);
    EXPECT_THAT(r.err, StartsWith(c.err_prefix)) << Describe(r);
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_TRUE(r.out.empty()) << Describe(r);
  }
}

}  // namespace

// The parser the programs share (tools/flag_parser.h): each command line
// either parses to the values below or fails with the one usage message.
TEST(FlagParserTest, ParsesOrGivesTheUsageMessage) {
  struct Case {
    std::vector<std::string> args;
    std::string error;  // empty: parses
    std::string seen;   // with no error: the values, as "flag count size mode names ms positional"
  };
  const std::vector<Case> cases = {
      {{}, "", "0 1 0 on  0 "},
      {{"--quiet", "-n", "7", "--bytes", "2M", "--mode", "off", "--list", "a,b,a", "--ms", "1500", "x", "-"},
       "", "1 7 2097152 off a,b 1500 x,-"},
      {{"--bogus"}, "unknown option --bogus", ""},
      {{"-n"}, "-n needs a value", ""},
      {{"-n", "0"}, "-n: a count from 1 to 100", ""},
      {{"-n", "101"}, "-n: a count from 1 to 100", ""},
      {{"-n", " 5"}, "-n: a count from 1 to 100", ""},
      {{"-n", "-5"}, "-n: a count from 1 to 100", ""},
      {{"--bytes", "16M"}, "--bytes: a size from 1 to 15728640 bytes (K, M, G: KiB, MiB, GiB)", ""},
      {{"--bytes", "1X"}, "--bytes: a size from 1 to 15728640 bytes (K, M, G: KiB, MiB, GiB)", ""},
      {{"--mode", "both"}, "--mode: on, off or compare", ""},
      {{"--list", "a,,b"}, "--list: a comma-separated list of names", ""},
      {{"--ms", "12abc"}, "--ms: '12abc' is not a number of milliseconds from 1 to 2147483647", ""},
      {{"--ms", "0"}, "--ms: '0' is not a number of milliseconds from 1 to 2147483647", ""},
  };
  for (const auto& c : cases) {
    bool flag = false;
    std::size_t count = 1;
    std::uint64_t size = 0;
    std::string mode = "on";
    std::vector<std::string> names, positional;
    std::chrono::milliseconds ms{0};
    authrpc::cli::FlagParser parser;
    parser.flag("--quiet", &flag)
        .value("-n", authrpc::cli::count(&count, 1, 100))
        .value("--bytes", authrpc::cli::size(&size, 1, 15 * 1024 * 1024))
        .value("--mode", authrpc::cli::one_of(&mode, {"on", "off", "compare"}))
        .value("--list", authrpc::cli::list(&names))
        .value("--ms", authrpc::cli::milliseconds(&ms))
        .positional(&positional);
    std::vector<char*> argv;
    for (const auto& a : c.args) argv.push_back(const_cast<char*>(a.c_str()));
    const auto parsed = parser.parse(static_cast<int>(argv.size()), argv.data());
    const std::string line = testing::PrintToString(c.args);
    if (!c.error.empty()) {
      ASSERT_FALSE(parsed.ok()) << line;
      EXPECT_EQ(parsed.status().message, c.error) << line;
      continue;
    }
    ASSERT_TRUE(parsed.ok()) << line << ": " << parsed.status().to_string();
    auto joined = [](const std::vector<std::string>& v) {
      std::string out;
      for (const auto& s : v) out += (out.empty() ? "" : ",") + s;
      return out;
    };
    EXPECT_EQ(std::to_string(flag) + " " + std::to_string(count) + " " + std::to_string(size) + " " + mode + " " +
                  joined(names) + " " + std::to_string(ms.count()) + " " + joined(positional),
              c.seen)
        << line;
  }
  authrpc::cli::FlagParser strict;
  char help[] = "-h", extra[] = "x";
  char* help_argv[] = {extra, help};
  EXPECT_FALSE(strict.parse(1, help_argv).ok());  // "x": no positional arguments taken
  EXPECT_EQ(strict.parse(1, help_argv + 1).value(), authrpc::cli::FlagParser::Parsed::kHelp);
}
