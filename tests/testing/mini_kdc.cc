#include "tests/testing/mini_kdc.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <sstream>
#include <thread>
#include <utility>

extern char** environ;

namespace authrpc::testing {

using authrpc::Errc;
using authrpc::Result;
using authrpc::Status;

namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

constexpr auto kCommandTimeout = 20s;
constexpr auto kKdcStartTimeout = 5s;
constexpr auto kKdcStopTimeout = 2s;
constexpr int kStartAttempts = 5;
constexpr const char* kEnctypes = "aes256-cts-hmac-sha1-96 aes128-cts-hmac-sha1-96";

std::string errno_text(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

// --- child processes ----------------------------------------------------------

// Absolute path of TOOL: PATH first, then where Debian puts the krb5 tools
// (krb5kdc, kdb5_util and kadmin.local live in /usr/sbin, often not in PATH).
std::string find_tool(const std::string& tool) {
  if (tool.find('/') != std::string::npos) return tool;
  std::string dirs = std::getenv("PATH") ? std::getenv("PATH") : "";
  dirs += ":/usr/sbin:/usr/bin:/sbin:/bin:/usr/local/sbin:/usr/local/bin";
  std::istringstream in(dirs);
  for (std::string dir; std::getline(in, dir, ':');) {
    if (dir.empty()) continue;
    std::string path = dir + "/" + tool;
    if (access(path.c_str(), X_OK) == 0) return path;
  }
  return {};
}

std::string join(const std::vector<std::string>& argv) {
  std::string s;
  for (const auto& a : argv) s += (s.empty() ? "" : " ") + a;
  return s;
}

// NUL-terminated char* views of strings, built before fork() so that the child
// only makes async-signal-safe calls.
class CStrings {
 public:
  explicit CStrings(std::vector<std::string> strings) : strings_(std::move(strings)) {
    for (auto& s : strings_) ptrs_.push_back(s.data());
    ptrs_.push_back(nullptr);
  }
  char* const* get() { return ptrs_.data(); }

 private:
  std::vector<std::string> strings_;
  std::vector<char*> ptrs_;
};

// The calling process's environment without its Kerberos settings, plus VARS.
std::vector<std::string> child_environment(const std::map<std::string, std::string>& vars) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string_view entry(*e);
    std::string_view name = entry.substr(0, entry.find('='));
    bool kerberos = name.starts_with("KRB5") && name != "KRB5_TRACE";
    if (!kerberos && !vars.contains(std::string(name))) env.emplace_back(entry);
  }
  for (const auto& [name, value] : vars) env.push_back(name + "=" + value);
  return env;
}

struct ChildFds {
  int in, out, err;
};

// fork + execve with FDS as stdin/stdout/stderr and no other descriptors. With
// DIE_WITH_PARENT the child gets SIGTERM when the calling thread exits.
Result<pid_t> spawn(const std::string& path, const std::vector<std::string>& argv,
                    const std::vector<std::string>& env, ChildFds fds, bool die_with_parent) {
  CStrings c_argv(argv);
  CStrings c_env(env);
  const pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) return Status(Errc::kUnavailable, errno_text("fork"));
  if (pid == 0) {
    if (dup2(fds.in, 0) < 0 || dup2(fds.out, 1) < 0 || dup2(fds.err, 2) < 0) _exit(127);
    close_range(3, ~0U, 0);
    if (die_with_parent && (prctl(PR_SET_PDEATHSIG, SIGTERM) != 0 || getppid() != parent)) {
      _exit(127);
    }
    execve(path.c_str(), c_argv.get(), c_env.get());
    _exit(127);
  }
  return pid;
}

// waitpid() for PID, as an exit code (128 + signal if killed).
int wait_exit_code(pid_t pid, int options, bool* exited = nullptr) {
  int status = 0;
  pid_t r;
  do {
    r = waitpid(pid, &status, options);
  } while (r < 0 && errno == EINTR);
  if (exited) *exited = r == pid;
  if (r != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// An owned file descriptor, closed on destruction or reset().
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  Fd& operator=(Fd&& other) noexcept {
    reset(std::exchange(other.fd_, -1));
    return *this;
  }
  ~Fd() { reset(); }
  int get() const { return fd_; }
  bool open() const { return fd_ >= 0; }
  void reset(int fd = -1) {
    if (fd_ >= 0) close(fd_);
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

// Both ends of a pipe (or, for stdin, of a socket pair: send(MSG_NOSIGNAL) to
// it never raises SIGPIPE in the test process).
struct Channel {
  Fd ours, theirs;
};

Result<Channel> make_channel(bool socket) {
  int fds[2];
  int r = socket ? socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) : pipe2(fds, O_CLOEXEC);
  if (r != 0) return Status(Errc::kUnavailable, errno_text(socket ? "socketpair" : "pipe2"));
  // The parent reads from a pipe's [0] end and uses [0] of the socket pair.
  return Channel{Fd(fds[0]), Fd(fds[1])};
}

// Appends what FD has to SINK; closes FD at end of file or on error.
void read_some(Fd& fd, std::string& sink) {
  char buf[4096];
  ssize_t n = read(fd.get(), buf, sizeof buf);
  if (n > 0) {
    sink.append(buf, static_cast<size_t>(n));
  } else if (n == 0 || errno != EINTR) {
    fd.reset();
  }
}

// Sends the rest of DATA from WRITTEN on; closes FD when done or when the
// child stopped reading.
void write_some(Fd& fd, const std::string& data, size_t& written) {
  ssize_t n = send(fd.get(), data.data() + written, data.size() - written, MSG_NOSIGNAL);
  if (n > 0) written += static_cast<size_t>(n);
  if (n < 0 && errno != EINTR && errno != EAGAIN) written = data.size();
  if (written == data.size()) fd.reset();
}

// Feeds STDIN_DATA to the child and collects its stdout and stderr until both
// close; false on timeout.
bool pump(Fd in, const std::string& stdin_data, Fd out, Fd err, CommandResult& result) {
  size_t written = 0;
  if (stdin_data.empty()) in.reset();
  const auto deadline = Clock::now() + kCommandTimeout;
  while (out.open() || err.open()) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left <= 0ms) return false;
    pollfd p[3] = {{out.get(), POLLIN, 0}, {err.get(), POLLIN, 0}, {in.get(), POLLOUT, 0}};
    if (poll(p, 3, static_cast<int>(left.count())) < 0 && errno != EINTR) return false;
    if (p[0].revents != 0) read_some(out, result.out);
    if (p[1].revents != 0) read_some(err, result.err);
    if (p[2].revents != 0) write_some(in, stdin_data, written);
  }
  return true;
}

Result<CommandResult> run_command(const std::vector<std::string>& argv,
                                  const std::map<std::string, std::string>& vars,
                                  const std::string& stdin_data) {
  if (argv.empty()) return Status(Errc::kInvalidArgument, "run: empty command");
  std::string path = find_tool(argv[0]);
  if (path.empty()) {
    return Status(Errc::kConfigError,
                  argv[0] + " not found: install the Kerberos packages (scripts/setup.sh)");
  }
  auto in = make_channel(true);
  auto out = make_channel(false);
  auto err = make_channel(false);
  for (const auto* c : {&in, &out, &err}) {
    if (!c->ok()) return c->status();
  }
  auto pid = spawn(path, argv, child_environment(vars),
                   {in->theirs.get(), out->theirs.get(), err->theirs.get()}, false);
  for (auto* c : {&in, &out, &err}) (*c)->theirs.reset();
  if (!pid.ok()) return pid.status();

  CommandResult result;
  if (!pump(std::move(in->ours), stdin_data, std::move(out->ours), std::move(err->ours), result)) {
    kill(*pid, SIGKILL);
    wait_exit_code(*pid, 0);
    return Status(Errc::kDeadlineExceeded, "`" + join(argv) + "` timed out");
  }
  result.exit_code = wait_exit_code(*pid, 0);
  if (result.exit_code == 127 && result.err.empty()) result.err = "could not execute " + path;
  return result;
}

// --- ports ---------------------------------------------------------------------

sockaddr_in loopback(int port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return a;
}

bool can_bind(int type, int port, int* bound_port = nullptr) {
  int fd = socket(AF_INET, type | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_in a = loopback(port);
  socklen_t len = sizeof a;
  bool ok = bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
            getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0;
  if (ok && bound_port) *bound_port = ntohs(a.sin_port);
  close(fd);
  return ok;
}

// A port the kernel just gave out for TCP on 127.0.0.1 that UDP can bind too.
// Without SO_REUSEPORT on our probes, a socket sharing the port fails them.
Result<int> pick_free_port() {
  for (int i = 0; i < 20; ++i) {
    int port = 0;
    if (can_bind(SOCK_STREAM, 0, &port) && can_bind(SOCK_DGRAM, port)) return port;
  }
  return Status(Errc::kUnavailable, "no free loopback port for the KDC");
}

bool accepts_connections(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_in a = loopback(port);
  bool ok = connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  close(fd);
  return ok;
}

// Inodes of TCP listeners and UDP sockets bound to PORT (any address), from
// /proc/net/{tcp,tcp6,udp,udp6}.
// Every socket of the machine has a line there, TIME_WAIT ones too (tens of
// thousands after a benchmark): only lines naming the port are parsed.
std::set<unsigned long> socket_inodes_on_port(int port) {
  std::set<unsigned long> inodes;
  char needle[8];
  std::snprintf(needle, sizeof needle, ":%04X ", static_cast<unsigned>(port) & 0xFFFF);
  for (const char* table : {"tcp", "tcp6", "udp", "udp6"}) {
    std::ifstream in(std::string("/proc/net/") + table);
    std::string line;
    std::getline(in, line);  // header
    while (std::getline(in, line)) {
      if (line.find(needle) == std::string::npos) continue;  // neither address has the port
      std::istringstream f(line);
      std::string slot, local, remote, state, skip;
      unsigned long inode = 0;
      f >> slot >> local >> remote >> state >> skip >> skip >> skip >> skip >> skip >> inode;
      int local_port =
          static_cast<int>(std::strtol(local.substr(local.rfind(':') + 1).c_str(), nullptr, 16));
      bool tcp_listen = table[0] == 't' && state == "0A";
      if (local_port == port && (tcp_listen || table[0] == 'u')) inodes.insert(inode);
    }
  }
  return inodes;
}

std::set<unsigned long> socket_inodes_of(pid_t pid) {
  std::set<unsigned long> inodes;
  std::string fd_dir = "/proc/" + std::to_string(pid) + "/fd";
  DIR* d = opendir(fd_dir.c_str());
  if (d == nullptr) return inodes;
  while (dirent* e = readdir(d)) {
    char target[64] = {};
    std::string link = fd_dir + "/" + e->d_name;
    if (readlink(link.c_str(), target, sizeof target - 1) > 0 &&
        std::strncmp(target, "socket:[", 8) == 0) {
      inodes.insert(std::strtoul(target + 8, nullptr, 10));
    }
  }
  closedir(d);
  return inodes;
}

// krb5kdc sets SO_REUSEPORT, so a stale KDC could share our port and answer
// with other keys. True if PID owns every socket on PORT.
bool sole_owner_of_port(pid_t pid, int port) {
  auto on_port = socket_inodes_on_port(port);
  auto owned = socket_inodes_of(pid);
  if (on_port.empty()) return false;
  for (auto inode : on_port)
    if (!owned.contains(inode)) return false;
  return true;
}

// --- files -----------------------------------------------------------------------

Status write_file(const std::string& path, const std::string& content) {
  std::ofstream out(path, std::ios::trunc);
  out << content;
  out.close();
  if (!out) return Status(Errc::kConfigError, "cannot write " + path);
  return {};
}

std::string last_lines(const std::string& path, size_t n) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  std::string tail;
  for (size_t i = lines.size() > n ? lines.size() - n : 0; i < lines.size(); ++i)
    tail += "\n  " + lines[i];
  return tail;
}

std::string random_hex(size_t bytes) {
  std::random_device rd;
  std::string s;
  const char* digits = "0123456789abcdef";
  for (size_t i = 0; i < bytes; ++i) {
    unsigned v = rd() & 0xff;
    s += digits[v >> 4];
    s += digits[v & 0xf];
  }
  return s;
}

std::string seconds(std::chrono::seconds s) { return std::to_string(s.count()) + "s"; }

// kadmin.local parses -q itself: keep names and paths to one plain word.
bool plain_word(const std::string& s) {
  return !s.empty() && s.find_first_of(" \t\n\"'\\") == std::string::npos;
}

// kadmin.local exits 0 on most errors; they show as "command: message" on stderr.
bool kadmin_reported_error(const std::string& err) {
  std::istringstream in(err);
  for (std::string line; std::getline(in, line);) {
    size_t colon = line.find(": ");
    if (colon != std::string::npos && colon > 0 &&
        line.find_first_not_of("abcdefghijklmnopqrstuvwxyz_.") == colon) {
      return true;
    }
  }
  return false;
}

std::string trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

}  // namespace

// --- MiniKdc -----------------------------------------------------------------------

MiniKdc::MiniKdc(MiniKdcOptions options)
    : options_(std::move(options)), requested_lifetime_(options_.ticket_lifetime) {}

MiniKdc::~MiniKdc() {
  (void)stop();
  if (!dir_.empty() && !options_.keep_dir) {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
}

bool MiniKdc::tools_installed(std::string* missing) {
  for (const char* tool : {"krb5kdc", "kdb5_util", "kadmin.local", "kinit"}) {
    if (find_tool(tool).empty()) {
      if (missing) *missing = tool;
      return false;
    }
  }
  return true;
}

Status MiniKdc::start() {
  if (running()) {
    return Status(Errc::kFailedPrecondition,
                  "MiniKdc already running on port " + std::to_string(port_));
  }
  if (!plain_word(options_.realm)) return Status(Errc::kInvalidArgument, "bad realm name");
  if (dir_.empty()) {
    if (auto s = create_dir(); !s.ok()) return s;
  }
  Status last;
  for (int attempt = 0; attempt < kStartAttempts; ++attempt) {
    auto port = pick_free_port();
    if (!port.ok()) return port.status();
    port_ = *port;
    if (auto s = write_configs(); !s.ok()) return s;
    if (!database_created_) {
      if (auto s = create_database(); !s.ok()) return s;
    }
    last = start_on_port(port_);
    if (last.ok()) return {};
  }
  port_ = 0;
  return last;
}

Status MiniKdc::create_dir() {
  std::string parent = options_.parent_dir;
  if (parent.empty()) parent = std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp";
  std::string tmpl = parent + "/authrpc-kdc.XXXXXX";
  if (mkdtemp(tmpl.data()) == nullptr) {
    return Status(Errc::kConfigError, errno_text(("mkdtemp " + tmpl).c_str()));
  }
  dir_ = std::filesystem::absolute(tmpl).string();
  std::error_code ec;
  std::filesystem::create_directory(rcache_dir(), ec);
  if (ec) return Status(Errc::kConfigError, "cannot create " + rcache_dir() + ": " + ec.message());
  return {};
}

// The same configuration as scripts/kdc writes.
std::string MiniKdc::kdc_conf_text() const {
  const std::string listen = "127.0.0.1:" + std::to_string(port_);
  std::ostringstream o;
  o << "[kdcdefaults]\n"
    << "  kdc_listen = " << listen << "\n"
    << "  kdc_tcp_listen = " << listen << "\n\n"
    << "[realms]\n"
    << "  " << options_.realm << " = {\n"
    << "    database_name = " << dir_ << "/principal\n"
    << "    key_stash_file = " << dir_ << "/stash\n"
    << "    acl_file = " << dir_ << "/kadm5.acl\n"
    << "    kdc_listen = " << listen << "\n"
    << "    kdc_tcp_listen = " << listen << "\n"
    << "    max_life = " << seconds(options_.ticket_lifetime) << "\n"
    << "    max_renewable_life = " << seconds(options_.renew_lifetime) << "\n"
    << "    master_key_type = aes256-cts-hmac-sha1-96\n"
    << "    supported_enctypes = aes256-cts-hmac-sha1-96:normal aes128-cts-hmac-sha1-96:normal\n"
    << "    default_principal_flags = " << (options_.require_preauth ? "+" : "-") << "preauth\n"
    << "  }\n\n"
    << "[logging]\n"
    << "  kdc = FILE:" << kdc_log() << "\n"
    << "  admin_server = FILE:" << dir_ << "/kadmin.log\n"
    << "  default = FILE:" << dir_ << "/kadmin.log\n\n"
    << "[plugins]\n"
    << "  kdcpreauth = {\n"
    << "    disable = spake\n"  // unconfigured SPAKE logs an error at every start
    << "  }\n";
  return o.str();
}

std::string MiniKdc::krb5_conf_text() const {
  std::ostringstream o;
  o << "[libdefaults]\n"
    << "  default_realm = " << options_.realm << "\n"
    << "  dns_lookup_kdc = false\n"
    << "  dns_lookup_realm = false\n"
    << "  dns_canonicalize_hostname = false\n"
    << "  rdns = false\n"
    << "  udp_preference_limit = 1\n"
    << "  ignore_acceptor_hostname = true\n"
    << "  ticket_lifetime = " << seconds(requested_lifetime_) << "\n"
    << "  renew_lifetime = " << seconds(options_.renew_lifetime) << "\n"
    << "  default_tkt_enctypes = " << kEnctypes << "\n"
    << "  default_tgs_enctypes = " << kEnctypes << "\n"
    << "  permitted_enctypes = " << kEnctypes << "\n\n"
    << "[realms]\n"
    << "  " << options_.realm << " = {\n"
    << "    kdc = 127.0.0.1:" << port_ << "\n"
    << "  }\n\n"
    << "[domain_realm]\n"
    << "  localhost = " << options_.realm << "\n";
  return o.str();
}

Status MiniKdc::write_configs() const {
  if (auto s = write_file(kdc_conf(), kdc_conf_text()); !s.ok()) return s;
  if (auto s = write_file(krb5_conf(), krb5_conf_text()); !s.ok()) return s;
  return write_file(dir_ + "/kadm5.acl", "# No kadmind runs for this realm.\n");
}

Status MiniKdc::create_database() {
  std::string master = random_hex(16);  // lives only in the stash file
  auto s = check_command({"kdb5_util", "create", "-s", "-r", options_.realm},
                         master + "\n" + master + "\n");
  if (s.ok()) database_created_ = true;
  return s;
}

Status MiniKdc::start_on_port(int port) {
  std::string krb5kdc = find_tool("krb5kdc");
  if (krb5kdc.empty()) {
    return Status(Errc::kConfigError, "krb5kdc not found: install krb5-kdc (scripts/setup.sh)");
  }
  Fd log(open(kdc_log().c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644));
  Fd null(open("/dev/null", O_RDONLY | O_CLOEXEC));
  if (!log.open() || !null.open()) {
    return Status(Errc::kConfigError, errno_text(("open " + kdc_log()).c_str()));
  }
  auto pid = spawn(krb5kdc, {"krb5kdc", "-n"}, child_environment(env()),
                   {null.get(), log.get(), log.get()}, true);
  if (!pid.ok()) return pid.status();
  pid_ = *pid;
  if (auto s = wait_until_serving(port); !s.ok()) {
    (void)stop();
    return s;
  }
  return {};
}

Status MiniKdc::wait_until_serving(int port) {
  const std::string where = "krb5kdc on 127.0.0.1:" + std::to_string(port);
  const auto deadline = Clock::now() + kKdcStartTimeout;
  while (!accepts_connections(port)) {
    bool exited = false;
    int code = wait_exit_code(pid_, WNOHANG, &exited);
    if (exited) {
      pid_ = -1;
      return Status(Errc::kUnavailable, where + " exited with " + std::to_string(code) +
                                            " at start; " + kdc_log() + ":" +
                                            last_lines(kdc_log(), 5));
    }
    if (Clock::now() > deadline) {
      return Status(Errc::kUnavailable, where + " did not accept connections");
    }
    std::this_thread::sleep_for(5ms);
  }
  if (!sole_owner_of_port(pid_, port)) {
    return Status(Errc::kUnavailable, where + ": another process shares the port (SO_REUSEPORT)");
  }
  return {};
}

Status MiniKdc::stop() {
  if (pid_ <= 0) return {};
  kill(pid_, SIGTERM);
  bool exited = false;
  const auto deadline = Clock::now() + kKdcStopTimeout;
  while (!exited && Clock::now() < deadline) {
    wait_exit_code(pid_, WNOHANG, &exited);
    if (!exited) std::this_thread::sleep_for(2ms);
  }
  if (!exited) {
    kill(pid_, SIGKILL);
    wait_exit_code(pid_, 0);
  }
  pid_ = -1;
  return {};
}

Status MiniKdc::add_principal(const std::string& name,
                               const std::optional<std::string>& password) {
  if (!plain_word(name)) return Status(Errc::kInvalidArgument, "bad principal name");
  if (password) return kadmin("addprinc " + name, *password + "\n" + *password + "\n");
  return kadmin("addprinc -randkey " + name);
}

Status MiniKdc::create_keytab(const std::string& principal, const std::string& path) {
  if (!plain_word(principal) || !plain_word(path)) {
    return Status(Errc::kInvalidArgument, "bad principal or keytab path");
  }
  return kadmin("ktadd -k " + path + " -norandkey " + principal);
}

Status MiniKdc::create_service_keytab(const std::string& principal) {
  if (!key_version(principal).ok()) {
    if (auto s = add_principal(principal); !s.ok()) return s;
  }
  return create_keytab(principal, service_keytab());
}

Status MiniKdc::change_key(const std::string& principal) {
  if (!plain_word(principal)) return Status(Errc::kInvalidArgument, "bad principal name");
  return kadmin("cpw -randkey " + principal);
}

Result<int> MiniKdc::key_version(const std::string& principal) {
  if (!plain_word(principal)) return Status(Errc::kInvalidArgument, "bad principal name");
  auto r = run({"kadmin.local", "-r", options_.realm, "-q", "getprinc " + principal});
  if (!r.ok()) return r.status();
  std::istringstream in(r->out);
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with("Key: vno ")) return std::atoi(line.c_str() + 9);
  }
  return Status(Errc::kNotFound, "getprinc " + principal + ": " + trimmed(r->err));
}

Status MiniKdc::kinit(const std::string& principal, const std::string& keytab) {
  return check_command({"kinit", "-kt", keytab, principal});
}

Status MiniKdc::kinit_with_password(const std::string& principal, const std::string& password) {
  return check_command({"kinit", principal}, password + "\n");
}

Status MiniKdc::set_ticket_lifetime(std::chrono::seconds lifetime) {
  if (lifetime <= 0s || lifetime > options_.ticket_lifetime) {
    return Status(Errc::kInvalidArgument,
                  "ticket lifetime must be in (0, " + seconds(options_.ticket_lifetime) + "]");
  }
  requested_lifetime_ = lifetime;
  return dir_.empty() ? Status() : write_configs();
}

std::map<std::string, std::string> MiniKdc::env() const {
  return {
      {"KRB5_CONFIG", krb5_conf()},
      {"KRB5_KDC_PROFILE", kdc_conf()},
      {"KRB5CCNAME", ccache()},
      {"KRB5_KTNAME", "FILE:" + service_keytab()},
      {"KRB5_CLIENT_KTNAME", "FILE:" + client_keytab()},
      {"KRB5RCACHEDIR", rcache_dir()},
      {"AUTHRPC_REALM", options_.realm},
      {"AUTHRPC_KDC_PORT", std::to_string(port_)},
  };
}

void MiniKdc::set_env_for_process() const {
  for (const auto& [name, value] : env()) setenv(name.c_str(), value.c_str(), 1);
}

Result<CommandResult> MiniKdc::run(const std::vector<std::string>& argv,
                                   const std::string& stdin_data) const {
  return run_command(argv, env(), stdin_data);
}

Status MiniKdc::check_command(const std::vector<std::string>& argv,
                               const std::string& stdin_data) {
  auto r = run(argv, stdin_data);
  if (!r.ok()) return r.status();
  if (r->exit_code != 0) {
    return Status(Errc::kConfigError, "`" + join(argv) + "` exited with " +
                                          std::to_string(r->exit_code) + ": " + trimmed(r->err));
  }
  return {};
}

// QUERY never holds a secret (passwords go on stdin), so errors may show it.
Status MiniKdc::kadmin(const std::string& query, const std::string& stdin_data) {
  auto r = run({"kadmin.local", "-r", options_.realm, "-q", query}, stdin_data);
  if (!r.ok()) return r.status();
  if (r->exit_code != 0 || kadmin_reported_error(r->err)) {
    return Status(Errc::kConfigError, "kadmin.local -q '" + query + "' failed: " + trimmed(r->err));
  }
  return {};
}

KdcRequestCounts MiniKdc::kdc_request_counts() const { return KdcLog(kdc_log()).counts(); }

int MiniKdc::kdc_requests() const { return kdc_request_counts().total(); }

Status AddClientsAndService(MiniKdc& kdc, std::initializer_list<const char*> clients,
                            const std::string& service) {
  for (const char* client : clients) {
    if (Status s = kdc.add_principal(client); !s.ok()) return s;
    if (Status s = kdc.create_keytab(client, kdc.client_keytab()); !s.ok()) return s;
  }
  return kdc.create_service_keytab(service);
}

}  // namespace authrpc::testing
