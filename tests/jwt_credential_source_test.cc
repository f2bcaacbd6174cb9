// The jwt client's token source (components/jwt/jwt_credential_source.h): a token
// from a real file (rewritten in place, renamed over, a FIFO, too large), a
// real environment variable and a real /bin/sh command (JSON output, failures,
// timeouts with no process left behind); its cache; unverified_expiry; and that
// no error message quotes the token. Tokens are made here by base64url-encoding
// JSON with a fake signature: the source never verifies.
#include "authrpc/components/jwt/jwt_credential_source.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "authrpc/security/base64url.h"
#include "tests/testing/test_support.h"

namespace authrpc {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using std::chrono::system_clock;
using testing::Describe;

std::int64_t seconds_now() {
  return std::chrono::duration_cast<seconds>(system_clock::now().time_since_epoch()).count();
}

std::string b64(std::string_view s) { return security::base64url_encode(s); }

// A compact JWS with `payload` as its claims and a fake signature.
std::string Jwt(const std::string& payload, std::string_view signature = "not-a-real-signature") {
  return b64(R"({"alg":"RS256","typ":"JWT"})") + "." + b64(payload) + "." + b64(signature);
}

// A token for `sub` expiring `in` seconds from now (negative: in the past).
std::string JwtExpiringIn(std::int64_t in, const std::string& sub = "alice") {
  return Jwt(R"({"sub":")" + sub + R"(","exp":)" + std::to_string(seconds_now() + in) + "}");
}

std::string JwtWithoutExp(const std::string& sub = "alice") { return Jwt(R"({"sub":")" + sub + R"("})"); }

// Fails the test when `message` quotes `token` or its payload or signature.
void ExpectNoToken(const std::string& message, const std::string& token) {
  EXPECT_EQ(message.find(token), std::string::npos) << message;
  const auto first = token.find('.'), last = token.rfind('.');
  if (first == std::string::npos || first == last) return;
  const std::string payload = token.substr(first + 1, last - first - 1);
  const std::string signature = token.substr(last + 1);
  if (payload.size() >= 8) {
    EXPECT_EQ(message.find(payload), std::string::npos) << message;
  }
  if (signature.size() >= 8) {
    EXPECT_EQ(message.find(signature), std::string::npos) << message;
  }
}

// A temporary directory removed at the end of the test.
struct ScratchDir {
  std::string path = testing::TempDir("jwtsrc");
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  std::string operator/(const std::string& name) const { return path + "/" + name; }
};

// Writes in place (same inode).
void WriteFile(const std::string& path, const std::string& content) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << content;
  ASSERT_TRUE(out.good()) << path;
}

std::shared_ptr<JwtCredentialSource> MakeSource(JwtCredentialSourceOptions options) {
  auto source = JwtCredentialSource::make(std::move(options));
  EXPECT_TRUE(source.ok()) << Describe(source);
  return source.ok() ? *source : nullptr;
}

std::string TokenText(const Result<security::SecretBytes>& r) {
  return r.ok() ? std::string(r->view()) : std::string();
}

// What a call should give: a token, or a code and a part of the message.
struct Expect {
  std::string token;  // when code is kOk
  Errc code = Errc::kOk;
  std::string message_part;
};

Expect Ok(std::string token) { return {std::move(token), Errc::kOk, ""}; }

void Check(const Result<security::SecretBytes>& got, const Expect& want, const std::string& secret) {
  if (want.code == Errc::kOk) {
    ASSERT_TRUE(got.ok()) << Describe(got);
    EXPECT_EQ(got->view(), want.token);
    return;
  }
  ASSERT_FALSE(got.ok()) << "expected " << errc_name(want.code);
  EXPECT_EQ(got.code(), make_error_code(want.code)) << got.status().to_string();
  EXPECT_NE(got.status().message.find(want.message_part), std::string::npos)
      << "'" << got.status().message << "' lacks '" << want.message_part << "'";
  ExpectNoToken(got.status().to_string(), secret);
}

// ---------------------------------------------------------------------------
// make()

TEST(JwtCredentialSource, MakeRefusesAnythingButExactlyOneSource) {
  struct Case {
    const char* name;
    JwtCredentialSourceOptions options;
    const char* message_part;
  };
  JwtCredentialSourceOptions two;
  two.file = "/x";
  two.env = "X";
  JwtCredentialSourceOptions three = two;
  three.command = "true";
  JwtCredentialSourceOptions bad_env;
  bad_env.env = "A=B";
  JwtCredentialSourceOptions negative;
  negative.env = "X";
  negative.refresh_before = seconds(-1);
  JwtCredentialSourceOptions huge_refresh;
  huge_refresh.env = "X";
  huge_refresh.refresh_before = seconds::max();
  JwtCredentialSourceOptions no_timeout;
  no_timeout.command = "true";
  no_timeout.command_timeout = milliseconds(0);
  JwtCredentialSourceOptions huge_timeout;
  huge_timeout.command = "true";
  huge_timeout.command_timeout = milliseconds::max();
  const Case cases[] = {
      {"none", {}, "exactly one of file, env and command (0 set)"},
      {"two", two, "(2 set)"},
      {"three", three, "(3 set)"},
      {"env with =", bad_env, "is not a name"},
      {"negative refresh_before", negative, "refresh_before must be between 0 and 365 days"},
      {"refresh_before past overflow", huge_refresh, "refresh_before must be between 0 and 365 days"},
      {"zero command_timeout", no_timeout, "command_timeout must be positive and at most 24 h"},
      {"command_timeout past overflow", huge_timeout, "command_timeout must be positive and at most 24 h"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    auto source = JwtCredentialSource::make(c.options);
    ASSERT_FALSE(source.ok());
    EXPECT_EQ(source.code(), make_error_code(Errc::kConfigError));
    EXPECT_NE(source.status().message.find(c.message_part), std::string::npos) << source.status().message;
  }
}

// ---------------------------------------------------------------------------
// file

TEST(JwtCredentialSource, FileCases) {
  ScratchDir dir;
  const std::string token = JwtExpiringIn(3600, "file-user");
  const std::string no_signature = b64(R"({"alg":"RS256"})") + "." + b64(R"({"sub":"x"})") + ".";
  const std::string expired = JwtExpiringIn(-60, "expired-user");
  struct Case {
    const char* name;
    std::function<void(const std::string& path)> make;  // nullptr: no file
    Expect want;
    std::string secret;  // what no message may quote
  };
  auto content = [](std::string text) { return [text](const std::string& p) { WriteFile(p, text); }; };
  std::string padded = token + std::string(JwtCredentialSource::kMaxTokenBytes - token.size(), ' ');
  const Case cases[] = {
      {"token", content(token + "\n"), Ok(token), token},
      {"surrounded by whitespace", content(" \n\t" + token + " \r\n\n"), Ok(token), token},
      {"exactly 64 KiB", content(padded), Ok(token), token},
      {"signature part empty", content(no_signature), Ok(no_signature), token},
      {"missing", nullptr, {"", Errc::kUnauthenticated, "No such file or directory"}, token},
      {"empty", content(""), {"", Errc::kUnauthenticated, "is empty"}, token},
      {"whitespace only", content(" \n\n "), {"", Errc::kUnauthenticated, "is empty"}, token},
      {"larger than 64 KiB", content(padded + " "), {"", Errc::kInvalidArgument, "is larger than 64 KiB"}, token},
      {"FIFO", [](const std::string& p) { ASSERT_EQ(::mkfifo(p.c_str(), 0600), 0); },
       {"", Errc::kInvalidArgument, "is not a regular file"}, token},
      {"directory", [](const std::string& p) { std::filesystem::create_directory(p); },
       {"", Errc::kInvalidArgument, "is not a regular file"}, token},
      {"no dots", content("notajws"), {"", Errc::kInvalidArgument, "it has 0 dots, not 2"}, "notajws"},
      {"four parts", content(token + ".x"), {"", Errc::kInvalidArgument, "it has 3 dots, not 2"}, token},
      {"empty header", content(token.substr(token.find('.'))),
       {"", Errc::kInvalidArgument, "its header is empty"}, token},
      {"empty payload", content(b64("{}") + ".." + b64("sig")), {"", Errc::kInvalidArgument, "its payload is empty"},
       token},
      {"two tokens on two lines", content(token + "\n" + token),
       {"", Errc::kInvalidArgument, "it has 4 dots, not 2"}, token},
      {"inner whitespace", content(token.substr(0, 20) + " " + token.substr(20)),
       {"", Errc::kInvalidArgument, "is not base64url"}, token},
      {"padding", content(token + "=="), {"", Errc::kInvalidArgument, "its signature is not base64url"}, token},
      {"impossible base64url length", content("a." + b64("{}") + ".sig"),
       {"", Errc::kInvalidArgument, "its header is not base64url"}, token},
      {"expired", content(expired), {"", Errc::kCredentialsExpired, "expired at 20"}, expired},
  };
  int n = 0;
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string path = dir / ("token" + std::to_string(n++));
    if (c.make) c.make(path);
    JwtCredentialSourceOptions options;
    options.file = path;
    auto source = MakeSource(options);
    ASSERT_TRUE(source);
    const auto start = std::chrono::steady_clock::now();
    Check(source->token(), c.want, c.secret);
    EXPECT_LT(std::chrono::steady_clock::now() - start, seconds(2));
    // A second call says the same (from the cache or read again).
    Check(source->token(), c.want, c.secret);
  }
}

TEST(JwtCredentialSource, FileIsReadAgainWhenItChanges) {
  ScratchDir dir;
  const std::string path = dir / "token";
  JwtCredentialSourceOptions options;
  options.file = path;
  // Tokens without exp: only a change of the file replaces them.
  const std::string first = JwtWithoutExp("first");
  WriteFile(path, first);
  auto source = MakeSource(options);
  ASSERT_TRUE(source);
  EXPECT_EQ(TokenText(source->token()), first);
  EXPECT_EQ(TokenText(source->token()), first);

  struct stat before {};
  ASSERT_EQ(::stat(path.c_str(), &before), 0);
  const timespec same_times[2] = {before.st_atim, before.st_mtim};

  // Rewritten in place within the same second (mtime set back exactly), with
  // a different size.
  const std::string longer = JwtWithoutExp("second-longer");
  WriteFile(path, longer);
  ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), same_times, 0), 0);
  EXPECT_EQ(TokenText(source->token()), longer);

  // Rewritten in place with the same size and the same mtime: ctime changed.
  const std::string same_size = JwtWithoutExp("second-LONGER");
  ASSERT_EQ(same_size.size(), longer.size());
  WriteFile(path, same_size);
  ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), same_times, 0), 0);
  EXPECT_EQ(TokenText(source->token()), same_size);

  // Renamed over (a new inode), as atomic writers and Kubernetes do.
  const std::string renamed = JwtWithoutExp("SECOND-LONGER");
  ASSERT_EQ(renamed.size(), same_size.size());
  WriteFile(path + ".new", renamed);
  ASSERT_EQ(::rename((path + ".new").c_str(), path.c_str()), 0);
  EXPECT_EQ(TokenText(source->token()), renamed);

  // Through a symlink that is swapped to another file.
  const std::string link = dir / "link";
  const std::string target_a = dir / "a", target_b = dir / "b";
  const std::string via_a = JwtWithoutExp("via-a"), via_b = JwtWithoutExp("via-b");
  WriteFile(target_a, via_a);
  WriteFile(target_b, via_b);
  ASSERT_EQ(::symlink(target_a.c_str(), link.c_str()), 0);
  JwtCredentialSourceOptions linked;
  linked.file = link;
  auto through_link = MakeSource(linked);
  ASSERT_TRUE(through_link);
  EXPECT_EQ(TokenText(through_link->token()), via_a);
  ASSERT_EQ(::symlink(target_b.c_str(), (link + ".new").c_str()), 0);
  ASSERT_EQ(::rename((link + ".new").c_str(), link.c_str()), 0);
  EXPECT_EQ(TokenText(through_link->token()), via_b);

  // Removed: no stale token.
  ASSERT_EQ(::unlink(path.c_str()), 0);
  auto gone = source->token();
  EXPECT_EQ(gone.code(), make_error_code(Errc::kUnauthenticated)) << Describe(gone);
  // Back again.
  WriteFile(path, first);
  EXPECT_EQ(TokenText(source->token()), first);
}

// ---------------------------------------------------------------------------
// environment variable

TEST(JwtCredentialSource, EnvironmentVariable) {
  constexpr const char* kVar = "AUTHRPC_JWT_TOKEN_SOURCE_TEST";
  const std::string a = JwtWithoutExp("env-a"), b = JwtWithoutExp("env-b");
  struct Step {
    const char* name;
    std::optional<std::string> value;  // nullopt: unset
    Expect want;
  };
  const Step steps[] = {
      {"unset", std::nullopt, {"", Errc::kUnauthenticated, "environment variable AUTHRPC_JWT_TOKEN_SOURCE_TEST is not set"}},
      {"set", a, Ok(a)},
      {"set with a newline", a + "\n", Ok(a)},
      {"changed", b, Ok(b)},
      {"empty", "", {"", Errc::kUnauthenticated, "is empty"}},
      {"not a JWS", "hello", {"", Errc::kInvalidArgument, "is not a compact JWS"}},
      {"larger than 64 KiB", std::string(JwtCredentialSource::kMaxTokenBytes + 1, 'a'),
       {"", Errc::kInvalidArgument, "is larger than 64 KiB"}},
      {"set again", a, Ok(a)},
      {"unset again", std::nullopt, {"", Errc::kUnauthenticated, "is not set"}},
  };
  JwtCredentialSourceOptions options;
  options.env = kVar;
  auto source = MakeSource(options);
  ASSERT_TRUE(source);
  for (const auto& s : steps) {
    SCOPED_TRACE(s.name);
    if (s.value) {
      ::setenv(kVar, s.value->c_str(), 1);
    } else {
      ::unsetenv(kVar);
    }
    Check(source->token(), s.want, a);
    ExpectNoToken(source->token().status().message, b);
  }

  // A token with a fresh exp is served from the cache until refresh_before
  // from its exp, even if the variable changes meanwhile.
  const std::string fresh = JwtExpiringIn(3600, "env-fresh");
  ::setenv(kVar, fresh.c_str(), 1);
  EXPECT_EQ(TokenText(source->token()), fresh);
  ::setenv(kVar, b.c_str(), 1);
  EXPECT_EQ(TokenText(source->token()), fresh);
  ::unsetenv(kVar);
}

// ---------------------------------------------------------------------------
// command

TEST(JwtCredentialSource, CommandCases) {
  const std::string token = JwtExpiringIn(3600, "command-user");
  const std::string no_exp = JwtWithoutExp("command-no-exp");
  const std::string exec_credential =
      R"({"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":")" + no_exp +
      R"(","expirationTimestamp":"2099-01-01T00:00:00Z"}})";
  const std::string expired_exec_credential =
      R"({"kind":"ExecCredential","status":{"token":")" + no_exp + R"(","expirationTimestamp":"2020-01-01T00:00:00Z"}})";
  const std::string oauth = R"({"access_token":")" + token + R"(","token_type":"Bearer","expires_in":3600})";
  // Longer than the excerpt of stderr a message quotes.
  const std::string long_token = Jwt(R"({"sub":")" + std::string(400, 'x') + R"("})");
  auto print = [](const std::string& text) { return "printf '%s\\n' '" + text + "'"; };
  struct Case {
    const char* name;
    std::string command;
    Expect want;
  };
  const Case cases[] = {
      {"prints a token", print(token), Ok(token)},
      {"prints it with blank lines around", "echo; echo '  " + token + "  '; echo", Ok(token)},
      {"prints an OAuth 2.0 token response", print(oauth), Ok(token)},
      {"prints an ExecCredential", print(exec_credential), Ok(no_exp)},
      {"prints an expired ExecCredential", print(expired_exec_credential),
       {"", Errc::kCredentialsExpired, "expired at 2020-01-01T00:00:00Z"}},
      {"fails with stderr", print(token) + "; printf 'no credentials\\033[31m for you\\n' >&2; exit 3",
       {"", Errc::kUnavailable, "exited with status 3 (stderr: no credentials\\x1b[31m for you)"}},
      {"fails quoting the token on stderr", "echo 'token " + token + " refused' >&2; exit 1",
       {"", Errc::kUnavailable, "(stderr: token [redacted] refused)"}},
      {"fails quoting a long token after a prefix", "echo 'Authorization: Bearer%20" + long_token + "' >&2; exit 1",
       {"", Errc::kUnavailable, "(stderr: Authorization: Bearer%20[redacted])"}},
      {"fails echoing its stdout on stderr", "echo abcdefghijklmnop; echo 'got abcdefghijklmnop' >&2; exit 1",
       {"", Errc::kUnavailable, "(stderr: got [redacted])"}},
      {"fails after a blank stderr line", "echo >&2; echo '  out of luck' >&2; exit 2",
       {"", Errc::kUnavailable, "exited with status 2 (stderr: out of luck)"}},
      {"does not exist", "/nonexistent/token-helper", {"", Errc::kUnavailable, "exited with status 127 (stderr: "}},
      {"is killed", "kill -9 $$", {"", Errc::kUnavailable, "was killed by signal 9"}},
      {"prints nothing", "true", {"", Errc::kUnavailable, "printed nothing"}},
      {"prints whitespace", "echo; echo '   '", {"", Errc::kUnavailable, "printed nothing"}},
      {"reads stdin", "cat", {"", Errc::kUnavailable, "printed nothing"}},
      {"prints an OAuth error", print(R"({"error":"invalid_client","error_description":"x"})"),
       {"", Errc::kInvalidArgument, "its \"error\" is invalid_client"}},
      {"prints broken JSON", print(R"({"access_token":")" + token), {"", Errc::kInvalidArgument, "not a JSON object"}},
      {"prints JSON with a non-string token", print(R"({"access_token":42})"),
       {"", Errc::kInvalidArgument, "neither an \"access_token\""}},
      {"prints an empty access_token", print(R"({"access_token":" "})"), {"", Errc::kUnavailable, "empty token"}},
      {"prints something else", "echo hello", {"", Errc::kInvalidArgument, "it has 0 dots, not 2"}},
      {"prints more than 64 KiB", "head -c 70000 /dev/zero | tr '\\0' a",
       {"", Errc::kInvalidArgument, "printed more than 64 KiB"}},
      {"prints more than 64 KiB and never ends", "yes", {"", Errc::kInvalidArgument, "printed more than 64 KiB"}},
      {"prints an expired token", print(JwtExpiringIn(-5)), {"", Errc::kCredentialsExpired, "expired at 20"}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    JwtCredentialSourceOptions options;
    options.command = c.command;
    auto source = MakeSource(options);
    ASSERT_TRUE(source);
    auto got = source->token();
    Check(got, c.want, token);
    if (!got.ok()) {
      ExpectNoToken(got.status().message, no_exp);
      ExpectNoToken(got.status().message, long_token);
      EXPECT_EQ(got.status().message.find(long_token.substr(long_token.find('.') + 1, 20)), std::string::npos);
    }
  }
  // Every child was reaped.
  int status = 0;
  EXPECT_EQ(::waitpid(-1, &status, WNOHANG), -1);
  EXPECT_EQ(errno, ECHILD);
}

// The command gets stdin, stdout and stderr and nothing else of this
// process's, even a descriptor the application left inheritable.
TEST(JwtCredentialSource, TheCommandInheritsNoOtherDescriptor) {
  const int inheritable = ::open("/dev/null", O_RDONLY);  // no O_CLOEXEC, on purpose
  ASSERT_GE(inheritable, 3);
  const std::string token = JwtExpiringIn(3600, "fd-user");
  JwtCredentialSourceOptions options;
  options.command = "if [ -e /proc/$$/fd/" + std::to_string(inheritable) +
                    " ]; then echo 'inherited a descriptor' >&2; exit 1; fi; printf '%s' '" + token + "'";
  auto source = MakeSource(options);
  ASSERT_TRUE(source);
  auto got = source->token();
  ::close(inheritable);
  Check(got, Ok(token), token);
}

// How many processes of process group `group` are alive: not exited, nor
// exited and waiting for their parent (init, for the shell's orphans, which
// may reap them only a second or two later) to reap them.
int LiveMembers(pid_t group) {
  int live = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    std::ifstream in(entry.path() / "stat");
    std::string stat;
    if (!std::getline(in, stat)) continue;
    // "pid (comm) state ppid pgrp ...": comm may hold spaces and parentheses.
    const auto close = stat.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream fields(stat.substr(close + 1));
    char state = 0;
    pid_t ppid = 0, pgrp = 0;
    if (!(fields >> state >> ppid >> pgrp)) continue;
    if (pgrp == group && state != 'Z' && state != 'X') ++live;
  }
  return live;
}

// A command that does not finish is killed with everything it started, and
// reaped, soon after the timeout.
TEST(JwtCredentialSource, CommandTimeoutKillsTheProcessGroup) {
  ScratchDir dir;
  const std::string pid_file = dir / "pid";
  struct Case {
    const char* name;
    std::string command;
  };
  const Case cases[] = {
      {"sleeps", "echo $$ > " + pid_file + "; sleep 30"},
      {"closes its output and sleeps", "echo $$ > " + pid_file + "; exec >&- 2>&-; sleep 30"},
      {"leaves a child holding stdout", "echo $$ > " + pid_file + "; sleep 30 & echo started"},
      {"prints part of a token and stalls", "echo $$ > " + pid_file + "; printf 'eyJhbGciOi'; echo waiting >&2; sleep 30"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    ::unlink(pid_file.c_str());
    JwtCredentialSourceOptions options;
    options.command = c.command;
    options.command_timeout = milliseconds(200);
    auto source = MakeSource(options);
    ASSERT_TRUE(source);
    const auto start = std::chrono::steady_clock::now();
    auto got = source->token();
    const auto took = std::chrono::steady_clock::now() - start;
    EXPECT_LT(took, seconds(2));
    EXPECT_GE(took, milliseconds(190));
    ASSERT_FALSE(got.ok());
    EXPECT_EQ(got.code(), make_error_code(Errc::kUnavailable));
    EXPECT_NE(got.status().message.find("token command timed out after 200 ms and was killed"), std::string::npos)
        << got.status().message;
    // No zombie of ours.
    int status = 0;
    EXPECT_EQ(::waitpid(-1, &status, WNOHANG), -1);
    EXPECT_EQ(errno, ECHILD);
    // Nothing of its process group runs any more (the sleep included).
    std::ifstream in(pid_file);
    pid_t group = 0;
    ASSERT_TRUE(in >> group);
    EXPECT_TRUE(testing::Eventually([&] { return LiveMembers(group) == 0; }))
        << LiveMembers(group) << " processes of group " << group << " still run";
  }
}

// ---------------------------------------------------------------------------
// the cache

// How many times the command ran: it appends a line to a file each run.
int Runs(const std::string& count_file) {
  std::ifstream in(count_file);
  return static_cast<int>(std::count(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>(), '\n'));
}

TEST(JwtCredentialSource, CacheUntilRefreshBeforeExp) {
  ScratchDir dir;
  const std::string fresh = JwtExpiringIn(3600, "cached");
  const std::string no_exp = JwtWithoutExp("uncached");
  const std::string expired = JwtExpiringIn(-5, "expired");
  const std::string exec_credential =
      R"({"kind":"ExecCredential","status":{"token":")" + no_exp + R"(","expirationTimestamp":"2099-01-01T00:00:00Z"}})";
  const std::string oauth_short = R"({"access_token":")" + no_exp + R"(","expires_in":10})";
  struct Case {
    const char* name;
    std::string printed;
    seconds refresh_before;
    int runs_after_three_calls;
    Expect want;
  };
  const Case cases[] = {
      {"fresh token: cached", fresh, seconds(30), 1, Ok(fresh)},
      {"exp within refresh_before: run each time", fresh, seconds(7200), 3, Ok(fresh)},
      {"no exp: run each time", no_exp, seconds(30), 3, Ok(no_exp)},
      {"ExecCredential's expirationTimestamp: cached", exec_credential, seconds(30), 1, Ok(no_exp)},
      {"OAuth expires_in within refresh_before: run each time", oauth_short, seconds(30), 3, Ok(no_exp)},
      {"expired: never cached", expired, seconds(30), 3, {"", Errc::kCredentialsExpired, "expired at 20"}},
  };
  int n = 0;
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string count_file = dir / ("count" + std::to_string(n++));
    JwtCredentialSourceOptions options;
    options.command = "echo run >> " + count_file + "; printf '%s' '" + c.printed + "'";
    options.refresh_before = c.refresh_before;
    auto source = MakeSource(options);
    ASSERT_TRUE(source);
    for (int i = 0; i < 3; ++i) Check(source->token(), c.want, c.printed);
    EXPECT_EQ(Runs(count_file), c.runs_after_three_calls);
  }
}

TEST(JwtCredentialSource, ConcurrentCallersRunTheCommandOnce) {
  ScratchDir dir;
  const std::string count_file = dir / "count";
  const std::string token = JwtExpiringIn(3600, "concurrent");
  JwtCredentialSourceOptions options;
  options.command = "echo run >> " + count_file + "; sleep 0.1; echo '" + token + "'";
  auto source = MakeSource(options);
  ASSERT_TRUE(source);
  std::atomic<int> good{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&] {
      auto got = source->token();
      if (got.ok() && got->view() == token) ++good;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(good.load(), 8);
  EXPECT_EQ(Runs(count_file), 1);
}

// ---------------------------------------------------------------------------
// unverified_expiry

TEST(JwtCredentialSource, UnverifiedExpiry) {
  using TimePoint = system_clock::time_point;
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  struct Case {
    const char* name;
    std::string jws;
    std::optional<TimePoint> want;
  };
  const Case cases[] = {
      {"integer exp", Jwt(R"({"exp":1700000000})"), TimePoint(seconds(1700000000))},
      {"float exp", Jwt(R"({"exp":1700000000.5})"), TimePoint(milliseconds(1700000000500))},
      {"exp among other claims", Jwt(R"({"sub":"a","exp":1,"iat":0})"), TimePoint(seconds(1))},
      {"exp zero", Jwt(R"({"exp":0})"), TimePoint(seconds(0))},
      {"empty signature part", Jwt(R"({"exp":5})", ""), TimePoint(seconds(5))},
      {"no exp", Jwt(R"({"sub":"a"})"), std::nullopt},
      {"string exp", Jwt(R"({"exp":"1700000000"})"), std::nullopt},
      {"null exp", Jwt(R"({"exp":null})"), std::nullopt},
      {"boolean exp", Jwt(R"({"exp":true})"), std::nullopt},
      {"negative exp", Jwt(R"({"exp":-1})"), std::nullopt},
      {"negative float exp", Jwt(R"({"exp":-0.5})"), std::nullopt},
      {"absurd exp", Jwt(R"({"exp":1e300})"), std::nullopt},
      {"exp past int64", Jwt(R"({"exp":18446744073709551615})"), std::nullopt},
      {"exp past system_clock", Jwt(R"({"exp":9300000000})"), std::nullopt},
      {"exp beyond a double", Jwt(R"({"exp":1e400})"), std::nullopt},
      {"bad base64url payload", b64("{}") + ".@@@." + b64("s"), std::nullopt},
      {"padded payload", b64("{}") + "." + b64(R"({"exp":1})") + "==." + b64("s"), std::nullopt},
      {"bad JSON payload", Jwt(R"({"exp":1)"), std::nullopt},
      {"JSON array payload", Jwt(R"([{"exp":1}])"), std::nullopt},
      {"deeply nested payload", Jwt(deep), std::nullopt},
      {"no dots", "abc", std::nullopt},
      {"one dot", b64("{}") + "." + b64(R"({"exp":1})"), std::nullopt},
      {"empty", "", std::nullopt},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const auto got = JwtCredentialSource::unverified_expiry(c.jws);
    ASSERT_EQ(got.has_value(), c.want.has_value());
    if (got) {
      EXPECT_EQ(*got, *c.want);
    }
  }
}

}  // namespace
}  // namespace authrpc
