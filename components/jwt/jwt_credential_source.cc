#include "authrpc/components/jwt/jwt_credential_source.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <limits>
#include <nlohmann/json.hpp>
#include <thread>
#include <utility>

#include "authrpc/base/log.h"
#include "authrpc/security/base64url.h"

extern char** environ;

namespace authrpc {
namespace {

using std::chrono::system_clock;
using TimePoint = system_clock::time_point;

constexpr std::size_t kMaxTokenBytes = JwtCredentialSource::kMaxTokenBytes;
// Enough of stderr for its first line; the rest is drained and dropped.
constexpr std::size_t kMaxStderrBytes = 4 * 1024;
// The most of that line an error message quotes.
constexpr std::size_t kMaxStderrExcerpt = 200;
// Later than this is not a time (and would overflow system_clock's
// nanoseconds, which end in 2262).
constexpr std::int64_t kMaxEpochSeconds =
    std::chrono::duration_cast<std::chrono::seconds>(system_clock::duration::max()).count() - 1;

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

std::string_view trim_space(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

bool is_base64url_char(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

std::string errno_text(int err) { return std::strerror(err); }

// "2026-12-01T22:50:00Z"
std::string format_utc(TimePoint t) {
  const std::time_t secs = system_clock::to_time_t(t);
  std::tm tm{};
  char buf[32] = "?";
  if (::gmtime_r(&secs, &tm) != nullptr) std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// RFC 3339 date-time ("2026-12-01T22:50:00Z", fraction and offset allowed),
// as ExecCredential's status.expirationTimestamp; nullopt for anything else.
std::optional<TimePoint> parse_rfc3339(std::string_view s) {
  std::size_t i = 0;
  auto digits = [&](std::size_t n, int* out) {
    if (i + n > s.size()) return false;
    int v = 0;
    for (std::size_t k = 0; k < n; ++k) {
      const char c = s[i + k];
      if (c < '0' || c > '9') return false;
      v = v * 10 + (c - '0');
    }
    i += n;
    *out = v;
    return true;
  };
  auto expect = [&](std::string_view set) {
    if (i >= s.size() || set.find(s[i]) == std::string_view::npos) return false;
    ++i;
    return true;
  };
  int year, mon, day, hour, min, sec;
  if (!digits(4, &year) || !expect("-") || !digits(2, &mon) || !expect("-") || !digits(2, &day) ||
      !expect("Tt ") || !digits(2, &hour) || !expect(":") || !digits(2, &min) || !expect(":") ||
      !digits(2, &sec)) {
    return std::nullopt;
  }
  if (mon < 1 || mon > 12 || day < 1 || day > 31 || hour > 23 || min > 59 || sec > 60) return std::nullopt;
  if (i < s.size() && s[i] == '.') {
    ++i;
    const std::size_t start = i;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i;
    if (i == start) return std::nullopt;  // the fraction is dropped: expiry to the second
  }
  int offset_seconds = 0;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) {
    const int sign = s[i] == '-' ? -1 : 1;
    ++i;
    int oh, om;
    if (!digits(2, &oh) || !expect(":") || !digits(2, &om) || oh > 23 || om > 59) return std::nullopt;
    offset_seconds = sign * (oh * 3600 + om * 60);
  } else if (!expect("Zz")) {
    return std::nullopt;
  }
  if (i != s.size()) return std::nullopt;
  std::tm tm{};
  tm.tm_year = year - 1900;
  tm.tm_mon = mon - 1;
  tm.tm_mday = day;
  tm.tm_hour = hour;
  tm.tm_min = min;
  tm.tm_sec = sec;
  const std::time_t t = ::timegm(&tm);
  if (t == static_cast<std::time_t>(-1)) return std::nullopt;
  const std::int64_t epoch = static_cast<std::int64_t>(t) - offset_seconds;
  if (epoch < 0 || epoch > kMaxEpochSeconds) return std::nullopt;
  return TimePoint(std::chrono::seconds(epoch));
}

// An error unless `token` is a compact JWS: three base64url parts separated
// by two dots, the header and payload non-empty. Says what is wrong without
// quoting any of it.
Status check_compact_jws(std::string_view token, const std::string& from) {
  const auto dots = std::count(token.begin(), token.end(), '.');
  const std::string prefix = "the token from " + from + " is not a compact JWS (header.payload.signature)";
  if (dots != 2) {
    return Status(Errc::kInvalidArgument, prefix + ": it has " + std::to_string(dots) + " dots, not 2");
  }
  const std::size_t first = token.find('.');
  const std::size_t second = token.find('.', first + 1);
  const std::string_view parts[] = {token.substr(0, first), token.substr(first + 1, second - first - 1),
                                    token.substr(second + 1)};
  static constexpr const char* kNames[] = {"header", "payload", "signature"};
  for (int p = 0; p < 3; ++p) {
    if (p < 2 && parts[p].empty()) {
      return Status(Errc::kInvalidArgument, prefix + ": its " + kNames[p] + " is empty");
    }
    if (!std::all_of(parts[p].begin(), parts[p].end(), is_base64url_char)) {
      return Status(Errc::kInvalidArgument, prefix + ": its " + kNames[p] + " is not base64url");
    }
  }
  for (int p = 0; p < 2; ++p) {
    auto decoded = security::base64url_decode(parts[p]);
    if (!decoded) return Status(Errc::kInvalidArgument, prefix + ": its " + kNames[p] + " is not base64url");
    security::cleanse(decoded->data(), decoded->size());
  }
  return {};
}

// An owned file descriptor.
class OwnedFd {
 public:
  OwnedFd() = default;
  explicit OwnedFd(int fd) : fd_(fd) {}
  OwnedFd(const OwnedFd&) = delete;
  OwnedFd& operator=(const OwnedFd&) = delete;
  ~OwnedFd() { reset(); }
  int get() const { return fd_; }
  void reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

// ---------------------------------------------------------------------------
// The command

// What a run of the token command left: its stdout (in a wiped buffer: it
// holds the token), the start of its stderr, and how it ended.
struct CommandRun {
  CommandRun() = default;
  CommandRun(CommandRun&&) = default;
  ~CommandRun() { security::cleanse(err.data(), err.size()); }  // it may echo the token

  security::SecretBytes out;  // kMaxTokenBytes + 1 bytes; out_len of them read
  std::size_t out_len = 0;
  std::string err;
  int wait_status = 0;
  bool timed_out = false;
  bool out_too_large = false;

  std::string_view stdout_text() const { return out.view().substr(0, out_len); }
};

// The first non-blank line of stderr, trimmed, with what stdout held and
// anything that looks like a JWT replaced, cut to kMaxStderrExcerpt bytes
// and escaped for a log line; empty when stderr said nothing.
std::string stderr_excerpt(const CommandRun& run) {
  std::string_view line = trim_space(run.err);
  line = trim_space(line.substr(0, line.find('\n')));
  std::string text(line);
  // A command that fails after printing its token, or that complains about
  // the token it was given, may echo one; an error message never quotes it.
  // Redacted before the line is cut, so that no cut leaves a piece of one.
  const std::string_view printed = trim_space(run.stdout_text());
  constexpr std::string_view kRedacted = "[redacted]";
  if (printed.size() >= 8) {
    for (std::size_t at = text.find(printed); at != std::string::npos; at = text.find(printed, at + kRedacted.size())) {
      text.replace(at, printed.size(), kRedacted);
    }
  }
  // A JWT's header and payload are base64url JSON objects: they start with
  // "eyJ" ('{"'). Everything from there to the end of the base64url run goes.
  for (std::size_t at = text.find("eyJ"); at != std::string::npos; at = text.find("eyJ", at + kRedacted.size())) {
    std::size_t end = at;
    while (end < text.size() && (is_base64url_char(text[end]) || text[end] == '.')) ++end;
    text.replace(at, end - at, kRedacted);
  }
  std::string excerpt = escape_for_log(std::string_view(text).substr(0, kMaxStderrExcerpt));
  security::cleanse(text.data(), text.size());
  return excerpt;
}

std::string with_stderr(std::string message, const CommandRun& run) {
  const std::string excerpt = stderr_excerpt(run);
  if (!excerpt.empty()) message += " (stderr: " + excerpt + ")";
  return message;
}

// Kills the command's process group (the shell and whatever it started) and
// reaps the shell.
void kill_and_reap(pid_t pid, int* wait_status) {
  ::kill(-pid, SIGKILL);
  while (::waitpid(pid, wait_status, 0) < 0 && errno == EINTR) {
  }
}

// Milliseconds until `deadline`, rounded up; 0 once it has passed.
std::int64_t ms_until(std::chrono::steady_clock::time_point deadline) {
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
  return std::max<std::int64_t>(0, left.count());
}

// Starts /bin/sh -c `command` in a process group of its own, stdin from
// /dev/null, stdout and stderr on `out` and `err`, and no other descriptor.
// posix_spawn, not fork: the caller is multi-threaded, and glibc's
// posix_spawn execs straight from a vfork-like child.
Result<pid_t> spawn_shell(const std::string& command, int out, int err) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  int prepared = posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  if (prepared == 0) prepared = posix_spawn_file_actions_adddup2(&actions, out, STDOUT_FILENO);
  if (prepared == 0) prepared = posix_spawn_file_actions_adddup2(&actions, err, STDERR_FILENO);
  // Nothing else of this process's: descriptors the application left
  // inheritable (a log file, a socket of its own) stay here. Not started
  // at all if that cannot be arranged (ENOMEM).
  if (prepared == 0) prepared = posix_spawn_file_actions_addclosefrom_np(&actions, STDERR_FILENO + 1);
  if (prepared != 0) {
    posix_spawn_file_actions_destroy(&actions);
    return Result<pid_t>(Errc::kUnavailable,
                         "token command: cannot set up its descriptors: " + errno_text(prepared));
  }
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  // Its own process group, so that a timeout kills what the shell started
  // too; default signal dispositions and an empty mask, whatever the
  // application set (a server often ignores SIGPIPE).
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  posix_spawnattr_setpgroup(&attr, 0);
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  sigdelset(&all, SIGKILL);
  sigdelset(&all, SIGSTOP);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &all);
  char sh[] = "sh";
  char dash_c[] = "-c";
  std::string command_copy = command;
  char* argv[] = {sh, dash_c, command_copy.data(), nullptr};
  pid_t pid = -1;
  const int rc = ::posix_spawn(&pid, "/bin/sh", &actions, &attr, argv, environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) return Result<pid_t>(Errc::kUnavailable, "token command: cannot start /bin/sh: " + errno_text(rc));
  return pid;
}

// Reads the command's stdout (bounded) and stderr (its start) into `run`
// until both close, stdout is over the limit, or `deadline` passes
// (run.timed_out). A poll failure kills the group.
Status collect_output(pid_t pid, int out, int err, std::chrono::steady_clock::time_point deadline,
                      CommandRun* run) {
  run->out.reset(kMaxTokenBytes + 1);
  bool out_open = true, err_open = true;
  char err_buf[1024];
  while (out_open || err_open) {
    const std::int64_t left = ms_until(deadline);
    if (left == 0) {
      run->timed_out = true;
      break;
    }
    pollfd fds[2];
    nfds_t n = 0;
    if (out_open) fds[n++] = {out, POLLIN, 0};
    if (err_open) fds[n++] = {err, POLLIN, 0};
    const int ready = ::poll(fds, n, static_cast<int>(std::min<std::int64_t>(left, 60'000)));
    if (ready < 0 && errno != EINTR) {
      const int poll_errno = errno;
      kill_and_reap(pid, &run->wait_status);
      return Status(Errc::kUnavailable, "token command: poll: " + errno_text(poll_errno));
    }
    if (ready <= 0) continue;
    for (nfds_t k = 0; k < n; ++k) {
      if (fds[k].revents == 0) continue;
      if (fds[k].fd == out) {
        const ssize_t got = ::read(out, run->out.data() + run->out_len, run->out.size() - run->out_len);
        if (got > 0) {
          run->out_len += static_cast<std::size_t>(got);
          if (run->out_len > kMaxTokenBytes) run->out_too_large = true;
        } else if (got == 0 || (errno != EINTR && errno != EAGAIN)) {
          out_open = false;
        }
      } else {
        const ssize_t got = ::read(err, err_buf, sizeof err_buf);
        if (got > 0) {
          const std::size_t keep = std::min(static_cast<std::size_t>(got), kMaxStderrBytes - run->err.size());
          run->err.append(err_buf, keep);
        } else if (got == 0 || (errno != EINTR && errno != EAGAIN)) {
          err_open = false;
        }
      }
    }
    if (run->out_too_large) break;
  }
  security::cleanse(err_buf, sizeof err_buf);
  return Status();
}

// Waits for the shell, whose pipes have closed, to exit (it is exiting, or
// closed them and lingers), killing its group once `deadline` passes.
Status reap(pid_t pid, std::chrono::steady_clock::time_point deadline, CommandRun* run) {
  for (;;) {
    const pid_t done = ::waitpid(pid, &run->wait_status, WNOHANG);
    if (done == pid) return Status();
    if (done < 0 && errno == EINTR) continue;
    if (done < 0) {
      // ECHILD: the application ignores SIGCHLD, so the kernel reaped it.
      return Status(Errc::kUnavailable, "token command: cannot read its exit status (" +
                                            errno_text(errno) + "; is SIGCHLD ignored?)");
    }
    if (ms_until(deadline) == 0) {
      run->timed_out = true;
      kill_and_reap(pid, &run->wait_status);
      return Status();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

// Runs `command` (spawn_shell), collecting its output until both pipes
// close and the shell exits, or the timeout passes (then kills the group).
Result<CommandRun> run_command(const std::string& command, std::chrono::milliseconds timeout) {
  int out_pipe[2], err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0) {
    return Result<CommandRun>(Errc::kUnavailable, "token command: pipe: " + errno_text(errno));
  }
  OwnedFd out_read(out_pipe[0]), out_write(out_pipe[1]);
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) {
    return Result<CommandRun>(Errc::kUnavailable, "token command: pipe: " + errno_text(errno));
  }
  OwnedFd err_read(err_pipe[0]), err_write(err_pipe[1]);
  const auto pid = spawn_shell(command, out_write.get(), err_write.get());
  if (!pid.ok()) return pid.status();
  out_write.reset();
  err_write.reset();
  ::fcntl(out_read.get(), F_SETFL, O_NONBLOCK);
  ::fcntl(err_read.get(), F_SETFL, O_NONBLOCK);

  CommandRun run;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  if (Status s = collect_output(*pid, out_read.get(), err_read.get(), deadline, &run); !s.ok()) return s;
  if (run.timed_out || run.out_too_large) {
    kill_and_reap(*pid, &run.wait_status);
    return run;
  }
  if (Status s = reap(*pid, deadline, &run); !s.ok()) return s;
  return run;
}

// Wipes the strings of a JSON value that may hold a token; iterative, as a
// command's output may nest deeply.
struct WipedJson {
  nlohmann::json j;
  ~WipedJson() {
    std::vector<nlohmann::json*> todo{&j};
    while (!todo.empty()) {
      nlohmann::json* v = todo.back();
      todo.pop_back();
      if (v->is_string()) {
        auto& s = v->get_ref<std::string&>();
        security::cleanse(s.data(), s.size());
      } else if (v->is_structured()) {
        for (auto& child : *v) todo.push_back(&child);
      }
    }
  }
};

// The token in what the command printed: the text itself, or the
// "access_token" of an OAuth 2.0 token response (with "expires_in"), or the
// "status"."token" of a Kubernetes ExecCredential (with
// "status"."expirationTimestamp"). `expiry` gets the JSON's expiry, if any.
Result<security::SecretBytes> token_from_output(std::string_view printed, std::optional<TimePoint>* expiry) {
  using R = Result<security::SecretBytes>;
  if (printed.empty() || printed.front() != '{') return security::SecretBytes(printed);
  WipedJson doc;
  doc.j = nlohmann::json::parse(printed, nullptr, /*allow_exceptions=*/false);
  if (doc.j.is_discarded() || !doc.j.is_object()) {
    return R(Errc::kInvalidArgument, "token command printed something that starts with '{' but is not a JSON object");
  }
  if (auto it = doc.j.find("access_token"); it != doc.j.end() && it->is_string()) {
    if (auto in = doc.j.find("expires_in"); in != doc.j.end() && in->is_number()) {
      const double seconds = in->get<double>();
      if (seconds >= 0 && seconds < 10.0 * 365 * 24 * 3600) {
        *expiry = system_clock::now() + std::chrono::seconds(static_cast<std::int64_t>(seconds));
      }
    }
    return security::SecretBytes(it->get_ref<const std::string&>());
  }
  if (auto status = doc.j.find("status"); status != doc.j.end() && status->is_object()) {
    // names: the ExecCredential JSON field "status"."token", not a mechanism
    if (auto it = status->find("token"); it != status->end() && it->is_string()) {
      if (auto at = status->find("expirationTimestamp"); at != status->end() && at->is_string()) {
        *expiry = parse_rfc3339(at->get_ref<const std::string&>());
      }
      return security::SecretBytes(it->get_ref<const std::string&>());
    }
  }
  std::string message = "token command printed a JSON object with neither an \"access_token\" nor a "
                        "\"status\".\"token\" string";
  // An OAuth 2.0 error response (RFC 6749 §5.2) says why.
  if (auto error = doc.j.find("error"); error != doc.j.end() && error->is_string()) {
    message += "; its \"error\" is " + escape_for_log(error->get_ref<const std::string&>().substr(0, 100));
  }
  return R(Errc::kInvalidArgument, std::move(message));
}

Result<security::SecretBytes> read_command(const JwtCredentialSourceOptions& options, std::optional<TimePoint>* expiry) {
  using R = Result<security::SecretBytes>;
  auto ran = run_command(options.command, options.command_timeout);
  if (!ran.ok()) return ran.status();
  const CommandRun& run = *ran;
  if (run.timed_out) {
    return R(Errc::kUnavailable,
             with_stderr("token command timed out after " + std::to_string(options.command_timeout.count()) +
                             " ms and was killed",
                         run));
  }
  if (run.out_too_large) return R(Errc::kInvalidArgument, "token command printed more than 64 KiB");
  if (WIFSIGNALED(run.wait_status)) {
    return R(Errc::kUnavailable,
             with_stderr("token command was killed by signal " + std::to_string(WTERMSIG(run.wait_status)), run));
  }
  if (!WIFEXITED(run.wait_status) || WEXITSTATUS(run.wait_status) != 0) {
    return R(Errc::kUnavailable,
             with_stderr("token command exited with status " + std::to_string(WEXITSTATUS(run.wait_status)), run));
  }
  const std::string_view printed = trim_space(run.stdout_text());
  if (printed.empty()) return R(Errc::kUnavailable, with_stderr("token command printed nothing", run));
  auto token = token_from_output(printed, expiry);
  if (token.ok()) {
    const std::string_view inner = trim_space(token->view());
    if (inner.size() != token->size()) token = security::SecretBytes(inner);
    if (token->empty()) return R(Errc::kUnavailable, "token command printed an empty token");
  }
  return token;
}

// ---------------------------------------------------------------------------
// The file

Result<security::SecretBytes> read_file(const std::string& path, struct stat* st) {
  using R = Result<security::SecretBytes>;
  // O_NONBLOCK: opening a FIFO with no writer would otherwise wait forever;
  // it is refused below, as anything but a regular file is.
  OwnedFd fd(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY));
  if (fd.get() < 0) return R(Errc::kUnauthenticated, "cannot read token file " + path + ": " + errno_text(errno));
  if (::fstat(fd.get(), st) != 0) {
    return R(Errc::kUnauthenticated, "cannot read token file " + path + ": " + errno_text(errno));
  }
  if (!S_ISREG(st->st_mode)) return R(Errc::kInvalidArgument, "token file " + path + " is not a regular file");
  if (st->st_size > static_cast<off_t>(kMaxTokenBytes)) {
    return R(Errc::kInvalidArgument, "token file " + path + " is larger than 64 KiB");
  }
  security::SecretBytes buf;
  buf.reset(kMaxTokenBytes + 1);
  std::size_t len = 0;
  while (len < buf.size()) {
    const ssize_t got = ::read(fd.get(), buf.data() + len, buf.size() - len);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return R(Errc::kUnauthenticated, "cannot read token file " + path + ": " + errno_text(errno));
    if (got == 0) break;
    len += static_cast<std::size_t>(got);
  }
  // It grew between fstat and read.
  if (len > kMaxTokenBytes) return R(Errc::kInvalidArgument, "token file " + path + " is larger than 64 KiB");
  const std::string_view text = trim_space(buf.view().substr(0, len));
  if (text.empty()) return R(Errc::kUnauthenticated, "token file " + path + " is empty");
  return security::SecretBytes(text);
}

std::int64_t nanoseconds(const timespec& ts) {
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

}  // namespace

JwtCredentialSource::JwtCredentialSource(JwtCredentialSourceOptions options) : options_(std::move(options)) {}

Result<std::shared_ptr<JwtCredentialSource>> JwtCredentialSource::make(JwtCredentialSourceOptions options) {
  using R = Result<std::shared_ptr<JwtCredentialSource>>;
  const int set = !options.file.empty() + !options.env.empty() + !options.command.empty();
  if (set != 1) {
    return R(Errc::kConfigError, "jwt token source: set exactly one of file, env and command (" +
                                     std::to_string(set) + " set)");
  }
  if (options.env.find('=') != std::string::npos || options.env.find('\0') != std::string::npos) {
    return R(Errc::kConfigError, "jwt token source: env must name an environment variable; '" +
                                     escape_for_log(options.env) + "' is not a name");
  }
  // The bounds keep time arithmetic far from overflow; no token lives a year.
  if (options.refresh_before.count() < 0 || options.refresh_before > std::chrono::days(365)) {
    return R(Errc::kConfigError, "jwt token source: refresh_before must be between 0 and 365 days");
  }
  if (options.command_timeout.count() <= 0 || options.command_timeout > std::chrono::hours(24)) {
    return R(Errc::kConfigError, "jwt token source: command_timeout must be positive and at most 24 h");
  }
  return std::shared_ptr<JwtCredentialSource>(new JwtCredentialSource(std::move(options)));
}

std::optional<system_clock::time_point> JwtCredentialSource::unverified_expiry(std::string_view compact_jws) {
  const std::size_t first = compact_jws.find('.');
  if (first == std::string_view::npos) return std::nullopt;
  const std::size_t second = compact_jws.find('.', first + 1);
  if (second == std::string_view::npos) return std::nullopt;
  auto payload = security::base64url_decode(compact_jws.substr(first + 1, second - first - 1));
  if (!payload) return std::nullopt;
  // The parser keeps its own stack: a deeply nested payload cannot exhaust ours.
  const nlohmann::json claims = nlohmann::json::parse(*payload, nullptr, /*allow_exceptions=*/false);
  if (claims.is_discarded() || !claims.is_object()) return std::nullopt;
  const auto exp = claims.find("exp");
  if (exp == claims.end() || !exp->is_number()) return std::nullopt;
  if (exp->is_number_float()) {
    const double v = exp->get<double>();
    if (!std::isfinite(v) || v < 0 || v > static_cast<double>(kMaxEpochSeconds)) return std::nullopt;
    return TimePoint(std::chrono::duration_cast<system_clock::duration>(std::chrono::duration<double>(v)));
  }
  if (exp->is_number_unsigned()) {
    const auto v = exp->get<std::uint64_t>();
    if (v > static_cast<std::uint64_t>(kMaxEpochSeconds)) return std::nullopt;
    return TimePoint(std::chrono::seconds(static_cast<std::int64_t>(v)));
  }
  const auto v = exp->get<std::int64_t>();
  if (v < 0 || v > kMaxEpochSeconds) return std::nullopt;
  return TimePoint(std::chrono::seconds(v));
}

Result<JwtCredentialSource::Fetched> JwtCredentialSource::fetch() const {
  using R = Result<Fetched>;
  Fetched fetched;
  std::string from;
  if (!options_.file.empty()) {
    from = "token file " + options_.file;
    struct stat st {};
    auto token = read_file(options_.file, &st);
    if (!token.ok()) return token.status();
    fetched.token = std::move(*token);
    fetched.file = FileIdentity{static_cast<std::uint64_t>(st.st_dev), static_cast<std::uint64_t>(st.st_ino),
                                static_cast<std::int64_t>(st.st_size), nanoseconds(st.st_mtim),
                                nanoseconds(st.st_ctim)};
  } else if (!options_.env.empty()) {
    from = "environment variable " + options_.env;
    const char* value = std::getenv(options_.env.c_str());
    if (value == nullptr) return R(Errc::kUnauthenticated, from + " is not set");
    const std::string_view text(value);
    if (text.size() > kMaxTokenBytes) return R(Errc::kInvalidArgument, from + " is larger than 64 KiB");
    const std::string_view trimmed = trim_space(text);
    if (trimmed.empty()) return R(Errc::kUnauthenticated, from + " is empty");
    fetched.token = security::SecretBytes(trimmed);
  } else {
    from = "token command";
    auto token = read_command(options_, &fetched.expiry);
    if (!token.ok()) return token.status();
    fetched.token = std::move(*token);
  }
  if (Status bad = check_compact_jws(fetched.token.view(), from); !bad.ok()) return bad;
  // The token's own exp wins over what a command's JSON said about it.
  if (auto exp = unverified_expiry(fetched.token.view())) fetched.expiry = exp;
  if (fetched.expiry && *fetched.expiry <= system_clock::now()) {
    return R(Errc::kCredentialsExpired,
             "the token from " + from + " expired at " + format_utc(*fetched.expiry) + "; get a new one");
  }
  return fetched;
}

bool JwtCredentialSource::cache_usable(TimePoint now, const std::optional<FileIdentity>& file_now) const {
  if (cached_.empty()) return false;
  if (!options_.file.empty() && (!file_now || !file_ || *file_now != *file_)) return false;
  if (!expiry_) return !options_.file.empty();  // no exp: a file's until it changes; else re-read
  return now + options_.refresh_before < *expiry_;
}

void JwtCredentialSource::drop_cache() {
  cached_.reset();
  expiry_.reset();
  file_.reset();
}

Result<security::SecretBytes> JwtCredentialSource::token() {
  std::lock_guard lock(mu_);
  std::optional<FileIdentity> file_now;
  if (!options_.file.empty()) {
    struct stat st {};
    // stat, not lstat: a Kubernetes projected volume swaps a symlink.
    if (::stat(options_.file.c_str(), &st) != 0) {
      const int err = errno;
      drop_cache();
      return Result<security::SecretBytes>(Errc::kUnauthenticated,
                                           "cannot read token file " + options_.file + ": " + errno_text(err));
    }
    file_now = FileIdentity{static_cast<std::uint64_t>(st.st_dev), static_cast<std::uint64_t>(st.st_ino),
                            static_cast<std::int64_t>(st.st_size), nanoseconds(st.st_mtim), nanoseconds(st.st_ctim)};
  }
  if (cache_usable(system_clock::now(), file_now)) return cached_;
  auto fetched = fetch();
  if (!fetched.ok()) {
    drop_cache();
    return fetched.status();
  }
  cached_ = std::move(fetched->token);  // the move wipes the token it replaces
  expiry_ = fetched->expiry;
  file_ = fetched->file;
  return cached_;
}

}  // namespace authrpc
