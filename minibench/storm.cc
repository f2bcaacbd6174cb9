#include "minibench/storm.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "authrpc/auth/mechanisms/simple/simple.h"
#include "authrpc/client/client.h"
#include "minibench/server_child.h"
#include "minibench/stats.h"
#include "authrpc/base/log.h"
#include "authrpc/tools/cli_exit.h"
#include "authrpc/tools/flag_parser.h"
#include "authrpc/rpc/messages.h"
#include "authrpc/server/server.h"
#include "authrpc/server/service.h"

namespace minibench {

const char* const kStormHelp = R"(  storm [--connections N] [--addresses A] [--slow] [-n N] [--warmup W]
        [--max-seconds S] [--server-threads K] [--max-unauthenticated M]
        [--per-address P] [--hello-delay-ms D]
             legitimate `simple` sessions (connect + negotiation + one
             sys.whoami call + close, sequential) measured quietly, then
             while an attacker thread keeps N (default 10000) silent
             connections open from A (default 16) source addresses
             127.0.0.2... and re-opens each the server closes; --slow: each
             drips one byte a second instead. Prints p50/p99 of both phases
             and their ratio, the attacker's connection rate and the
             server's shed/refused counts. n sessions per phase (default
             1000), W untimed first (default 50); the storm phase ends after
             S seconds (default 60) even if unfinished. The server (child
             process, tcp://127.0.0.1, K IO threads, default 1) keeps its
             default limits unless --max-unauthenticated/--per-address are
             given. The attacker runs in processes of its own, each
             raising RLIMIT_NOFILE to its hard limit (several when N needs
             more). --hello-delay-ms D: each legitimate session waits D ms
             after connecting before it sends its preamble and HELLO (a slow
             network or client), and ends at AUTH_SUCCESS; use a small -n
             (each takes D).
)";

namespace {

using authrpc::Endpoint;
using authrpc::Result;
using authrpc::Status;
using authrpc::Errc;

struct StormArgs {
  std::size_t connections = 10'000;
  std::size_t addresses = 16;
  bool slow = false;
  std::size_t n = 1000;
  std::size_t warmup = 50;
  int max_seconds = 60;
  std::size_t server_threads = 1;
  std::optional<std::size_t> max_unauthenticated;
  std::optional<std::size_t> per_address;
  std::chrono::milliseconds hello_delay{0};
};

// ---------------------------------------------------------------------------
// The server child.

// The server's options; the child's and the parent's report alike.
authrpc::ServerOptions server_options(const StormArgs& args) {
  authrpc::ServerOptions o;
  o.endpoints = {*Endpoint::parse("tcp://127.0.0.1:0")};
  o.mechanisms = {std::make_shared<authrpc::SimpleServerMechanism>()};
  o.io_threads = args.server_threads;
  o.log = authrpc::stderr_log_sink(authrpc::LogLevel::kError);
  if (args.max_unauthenticated) o.max_unauthenticated = *args.max_unauthenticated;
  if (args.per_address) o.max_unauthenticated_per_address = *args.per_address;
  return o;
}

// The child's body (ServerChild::fork): the server, reported as "authrpc/tcp".
void run_server(int report_fd, const StormArgs& args) {
  auto* server = new authrpc::Server(server_options(args));  // serves until the child ends
  authrpc::Service stats("storm");
  stats.add("stats", [server](authrpc::CallContext&, std::string_view) -> Result<std::string> {
    const auto s = server->stats();
    return nlohmann::json{{"accepted", s.connections_accepted},
                          {"shed", s.connections_shed},
                          {"shed_per_address", s.connections_shed_per_address},
                          {"refused_busy", s.connections_refused_busy},
                          {"out_of_descriptors", s.accept_out_of_descriptors},
                          {"unauthenticated", s.connections_unauthenticated},
                          {"negotiation_failures", s.negotiation_failures}}
        .dump();
  });
  (void)server->add_service(std::move(stats));
  if (Status s = server->start(); !s.ok()) fail_child(report_fd, s.to_string());
  report_endpoint(report_fd, "authrpc/tcp", server->bound_endpoints().at(0));
}

// ---------------------------------------------------------------------------
// The attacker: one thread, one epoll loop, `connections` non-blocking
// sockets from `addresses` source addresses; each one the server closes (or
// that fails to connect) is opened again at once.

// The attacker processes' counters and switches, in memory shared with the
// parent (lock-free atomics work across processes).
struct AttackShared {
  std::atomic<bool> go{false}, stop{false};
  std::atomic<std::uint64_t> opened{0}, connected{0}, closed_by_server{0}, failed{0};
};

class Attacker {
 public:
  Attacker(std::uint16_t port, std::size_t connections, std::size_t first, std::size_t addresses,
           bool slow, AttackShared& shared)
      : port_(port), first_(first), addresses_(addresses), slow_(slow), sockets_(connections),
        opened_(shared.opened), connected_(shared.connected),
        closed_by_server_(shared.closed_by_server), failed_(shared.failed), stop_(shared.stop) {
    std::string hello;
    wire_bytes_ = std::string(reinterpret_cast<const char*>(authrpc::wire::make_preamble().data()),
                              authrpc::wire::kPreambleSize);
    authrpc::wire::append_hello(hello, {authrpc::wire::kNoFeatures, "simple", "mallory"});
    wire_bytes_ += hello;
  }

  // Until the shared stop switch is set.
  void run() {
    epoll_ = ::epoll_create1(EPOLL_CLOEXEC);
    for (std::uint32_t i = 0; i < sockets_.size() && !stop_; ++i) open(i);
    std::vector<epoll_event> events(1024);
    auto next_drip = std::chrono::steady_clock::now() + std::chrono::seconds(1);
    while (!stop_) {
      const int n = ::epoll_wait(epoll_, events.data(), static_cast<int>(events.size()), 10);
      for (int k = 0; k < n; ++k) on_event(events[k].data.u32, events[k].events);
      if (slow_ && std::chrono::steady_clock::now() >= next_drip) {
        drip();
        next_drip += std::chrono::seconds(1);
      }
    }
    for (auto& s : sockets_) {
      if (s.fd >= 0) ::close(s.fd);
    }
    ::close(epoll_);
  }

 private:
  struct Socket {
    int fd = -1;
    bool connected = false;
    std::size_t sent = 0;  // slow mode: bytes of wire_bytes_ dripped so far
  };

  void open(std::uint32_t i) {
    Socket& s = sockets_[i];
    s = Socket{};
    s.fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (s.fd < 0) {
      ++failed_;
      return;
    }
    const int one = 1;
    ::setsockopt(s.fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof one);
    sockaddr_in from{};
    from.sin_family = AF_INET;
    from.sin_addr.s_addr = htonl(0x7f000002u + static_cast<std::uint32_t>((first_ + i) % addresses_));
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(port_);
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ++opened_;
    if (::bind(s.fd, reinterpret_cast<sockaddr*>(&from), sizeof from) != 0 ||
        (::connect(s.fd, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0 && errno != EINPROGRESS)) {
      ++failed_;
      ::close(s.fd);
      s.fd = -1;
      return;
    }
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP;
    ev.data.u32 = i;
    ::epoll_ctl(epoll_, EPOLL_CTL_ADD, s.fd, &ev);
  }

  void reopen(std::uint32_t i) {
    ::close(sockets_[i].fd);
    open(i);
  }

  void on_event(std::uint32_t i, std::uint32_t events) {
    Socket& s = sockets_[i];
    if (s.fd < 0) return;
    if (!s.connected && (events & EPOLLOUT) != 0) {
      int error = 0;
      socklen_t len = sizeof error;
      ::getsockopt(s.fd, SOL_SOCKET, SO_ERROR, &error, &len);
      if (error != 0) {
        ++failed_;
        reopen(i);
        return;
      }
      s.connected = true;
      ++connected_;
      epoll_event ev{};
      ev.events = EPOLLIN | EPOLLRDHUP;
      ev.data.u32 = i;
      ::epoll_ctl(epoll_, EPOLL_CTL_MOD, s.fd, &ev);
    }
    if ((events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) == 0) return;
    char buf[512];
    for (;;) {
      const ssize_t n = ::recv(s.fd, buf, sizeof buf, MSG_DONTWAIT);
      if (n > 0) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) &&
          (events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) == 0) {
        return;
      }
      break;
    }
    if (s.connected) ++closed_by_server_;
    else ++failed_;
    reopen(i);
  }

  void drip() {
    for (auto& s : sockets_) {
      if (s.fd < 0 || !s.connected || s.sent + 1 >= wire_bytes_.size()) continue;
      if (::send(s.fd, wire_bytes_.data() + s.sent, 1, MSG_NOSIGNAL | MSG_DONTWAIT) == 1) ++s.sent;
    }
  }

  const std::uint16_t port_;
  const std::size_t first_;  // this process's first socket in the whole storm
  const std::size_t addresses_;
  const bool slow_;
  std::string wire_bytes_;
  std::vector<Socket> sockets_;
  int epoll_ = -1;
  std::atomic<std::uint64_t>&opened_, &connected_, &closed_by_server_, &failed_;
  std::atomic<bool>& stop_;
};

// Forks the attacker processes, each holding at most what its descriptor
// limit (raised to the hard limit) allows; they wait for `go`. Forked before
// this process starts any thread.
std::vector<pid_t> spawn_attackers(const StormArgs& args, std::uint16_t port, AttackShared& shared) {
  rlimit limit{};
  ::getrlimit(RLIMIT_NOFILE, &limit);
  const std::size_t per_process = std::max<std::size_t>(1, static_cast<std::size_t>(limit.rlim_max) - 256);
  std::vector<pid_t> pids;
  for (std::size_t first = 0; first < args.connections; first += per_process) {
    const std::size_t count = std::min(per_process, args.connections - first);
    std::fflush(stdout);
    const pid_t pid = ::fork();
    if (pid < 0) break;
    if (pid == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      const rlimit raised{limit.rlim_max, limit.rlim_max};
      ::setrlimit(RLIMIT_NOFILE, &raised);
      while (!shared.go && !shared.stop) ::usleep(1000);
      Attacker attacker(port, count, first, args.addresses, args.slow, shared);
      attacker.run();
      ::_exit(0);
    }
    pids.push_back(pid);
  }
  std::printf("storm: the attacker runs in %zu process(es) of at most %zu connections each "
              "(RLIMIT_NOFILE raised to the hard limit %llu in each)\n",
              pids.size(), per_process, static_cast<unsigned long long>(limit.rlim_max));
  return pids;
}

// ---------------------------------------------------------------------------
// Measuring.

struct Phase {
  std::vector<double> us;  // sorted once done
  std::size_t failures = 0;
  std::string first_failure;
  double seconds = 0;
};

// A `simple` session that sends its preamble and HELLO `delay` after its
// connection is made, up to AUTH_SUCCESS (raw: the Client speaks at once).
Status delayed_session(const Endpoint& endpoint, std::chrono::milliseconds delay) {
  auto system_error = [](const char* what) {
    return Status(std::error_code(errno, std::system_category()), what);
  };
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return system_error("socket");
  const std::unique_ptr<const int, void (*)(const int*)> closer(&fd, [](const int* f) { ::close(*f); });
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(endpoint.port);
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0) return system_error("connect");
  std::this_thread::sleep_for(delay);
  std::string out(reinterpret_cast<const char*>(authrpc::wire::make_preamble().data()),
                  authrpc::wire::kPreambleSize);
  authrpc::wire::append_hello(out, {authrpc::wire::kNoFeatures, "simple", "alice"});
  if (::send(fd, out.data(), out.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(out.size())) {
    return system_error("send");
  }
  std::string in;
  authrpc::wire::FrameHeader header;
  bool have_header = false;
  const auto until = Clock::now() + std::chrono::seconds(10);
  while (!have_header || in.size() < authrpc::wire::kFrameHeaderSize + header.body_size()) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now());
    pollfd p{fd, POLLIN, 0};
    if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) <= 0) {
      return Status(Errc::kDeadlineExceeded, "no answer to HELLO within 10 s");
    }
    char buf[4096];
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) return Status(Errc::kConnectionClosed, "the server closed before answering HELLO");
    in.append(buf, static_cast<std::size_t>(n));
    if (!have_header && in.size() >= authrpc::wire::kFrameHeaderSize) {
      if (!authrpc::wire::decode_frame_header(reinterpret_cast<const std::uint8_t*>(in.data()),
                                              1 << 20, header)) {
        return Status(Errc::kProtocolError, "bad frame header");
      }
      have_header = true;
    }
  }
  if (header.type == authrpc::wire::FrameType::kAuthSuccess) return Status();
  if (header.type == authrpc::wire::FrameType::kError) {
    auto error = authrpc::wire::parse_error(
        std::string_view(in).substr(authrpc::wire::kFrameHeaderSize, header.body_size()));
    if (error.ok()) return Status(authrpc::errc_from_wire(error->code), error->message);
  }
  return Status(Errc::kProtocolError, "unexpected answer to HELLO");
}

Phase run_sessions(const Endpoint& endpoint, std::size_t warmup, std::size_t n,
                   std::chrono::steady_clock::time_point give_up,
                   std::chrono::milliseconds hello_delay) {
  Phase phase;
  authrpc::ClientOptions o;
  o.endpoint = endpoint;
  o.mechanisms = {std::make_shared<authrpc::SimpleClientMechanism>("alice")};
  o.connect_timeout = std::chrono::seconds(10);
  o.wait_for_authentication = false;
  const auto began = Clock::now();
  for (std::size_t i = 0; i < warmup + n && Clock::now() < give_up; ++i) {
    const auto start = Clock::now();
    Status failed;
    if (hello_delay.count() > 0) {
      failed = delayed_session(endpoint, hello_delay);
    } else {
      auto client = authrpc::Client::connect(o);
      if (!client.ok()) {
        failed = client.status();
      } else if (auto reply = (*client)->call("sys", "whoami", {}); !reply.ok()) {
        failed = reply.status();
      }
    }
    const double us = std::chrono::duration<double, std::micro>(Clock::now() - start).count();
    if (i < warmup) continue;
    if (!failed.ok()) {
      if (phase.failures++ == 0) phase.first_failure = failed.to_string();
      continue;
    }
    phase.us.push_back(us);
  }
  phase.seconds = std::chrono::duration<double>(Clock::now() - began).count();
  std::sort(phase.us.begin(), phase.us.end());
  return phase;
}

void print_phase(const char* name, const Phase& p) {
  std::printf("%-14s %6zu %10.0f %10.0f %10.0f %10.0f %9zu\n", name, p.us.size(),
              percentile(p.us, 0.5), percentile(p.us, 0.99), percentile(p.us, 0.999),
              p.us.empty() ? 0.0 : p.us.back(), p.failures);
}

// Reads argv: nullopt to go on; else the exit status (help printed: 0).
std::optional<int> parse_storm_args(int argc, char** argv, StormArgs& args) {
  using authrpc::cli::count;
  constexpr std::size_t kAny = SIZE_MAX;
  // An optional count: set when given.
  const auto optional = [](std::optional<std::size_t>* out, std::size_t min) {
    return [out, min](std::string_view v) {
      std::size_t n = 0;
      if (auto s = count(&n, min, kAny)(v); !s.ok()) return s;
      *out = n;
      return Status();
    };
  };
  std::size_t max_seconds = static_cast<std::size_t>(args.max_seconds), hello_delay_ms = 0;
  authrpc::cli::FlagParser parser;
  parser.value("--connections", count(&args.connections, 1, kAny))
      .value("--addresses", count(&args.addresses, 1, 250))
      .flag("--slow", &args.slow)
      .value("-n", count(&args.n, 1, kAny))
      .value("--warmup", count(&args.warmup, 0, kAny))
      .value("--max-seconds", count(&max_seconds, 1, INT_MAX))
      .value("--server-threads", count(&args.server_threads, 1, kAny))
      .value("--max-unauthenticated", optional(&args.max_unauthenticated, 1))
      .value("--per-address", optional(&args.per_address, 0))
      .value("--hello-delay-ms", count(&hello_delay_ms, 0, kAny));
  const std::string help = std::string("usage: minibench storm [options]\n") + kStormHelp;
  if (auto code = authrpc::cli::parse_or_exit(parser, argc, argv, help, "minibench", "minibench storm --help",
                                              "storm: ")) {
    return code;
  }
  args.max_seconds = static_cast<int>(max_seconds);
  args.hello_delay = std::chrono::milliseconds(hello_delay_ms);
  return std::nullopt;
}

}  // namespace

int run_storm(int argc, char** argv) {
  StormArgs args;
  if (auto code = parse_storm_args(argc, argv, args)) return *code;
  auto server = ServerChild::fork([&args](int report_fd) { run_server(report_fd, args); });  // before any thread
  if (!server.ok()) {
    std::fprintf(stderr, "minibench storm: %s\n", server.status().to_string().c_str());
    return 1;
  }
  std::signal(SIGPIPE, SIG_IGN);
  const Endpoint endpoint = (*server)->endpoints().at("authrpc/tcp");
  const authrpc::ServerOptions options = server_options(args);
  auto* shared = static_cast<AttackShared*>(::mmap(nullptr, sizeof(AttackShared), PROT_READ | PROT_WRITE,
                                                   MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  if (shared == MAP_FAILED) return 1;
  new (shared) AttackShared;
  const std::vector<pid_t> attackers = spawn_attackers(args, endpoint.port, *shared);
  std::printf("storm: server pid %d on %s, %zu IO thread(s), max_unauthenticated %s, per address %s\n",
              static_cast<int>((*server)->pid()), endpoint.to_string().c_str(), args.server_threads,
              std::to_string(options.max_unauthenticated).c_str(),
              std::to_string(options.max_unauthenticated_per_address).c_str());

  const auto forever = Clock::now() + std::chrono::hours(1);
  const Phase quiet = run_sessions(endpoint, args.warmup, args.n, forever, args.hello_delay);

  const auto storm_began = Clock::now();
  shared->go = true;
  // Let the storm build: every socket opened, and a second of churn.
  while (shared->opened < args.connections &&
         Clock::now() < storm_began + std::chrono::seconds(args.max_seconds)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::this_thread::sleep_for(std::chrono::seconds(1));
  const std::uint64_t opened_before = shared->opened;
  const auto measured_from = Clock::now();
  const Phase storm = run_sessions(endpoint, args.warmup, args.n,
                                   storm_began + std::chrono::seconds(args.max_seconds),
                                   args.hello_delay);
  const double storm_seconds = std::chrono::duration<double>(Clock::now() - measured_from).count();
  const std::uint64_t opened_during = shared->opened - opened_before;
  shared->stop = true;
  for (const pid_t pid : attackers) ::waitpid(pid, nullptr, 0);

  std::string stats = "(unavailable)";
  {
    authrpc::ClientOptions o;
    o.endpoint = endpoint;
    o.mechanisms = {std::make_shared<authrpc::SimpleClientMechanism>("alice")};
    if (auto client = authrpc::Client::connect(o); client.ok()) {
      if (auto reply = (*client)->call("storm", "stats", {}); reply.ok()) stats = *reply;
    }
  }

  std::printf("\n%-14s %6s %10s %10s %10s %10s %9s\n", "row", "n", "p50 µs", "p99 µs", "p99.9 µs",
              "max µs", "failures");
  const bool delayed = args.hello_delay.count() > 0;
  print_phase(delayed ? "quiet/delayed" : "quiet/simple", quiet);
  print_phase(delayed ? "storm/delayed" : "storm/simple", storm);
  auto rate = [](const Phase& p) {
    const std::size_t all = p.us.size() + p.failures;
    return all == 0 ? 0.0 : 100.0 * static_cast<double>(p.us.size()) / static_cast<double>(all);
  };
  std::printf("sessions that succeeded: quiet %zu of %zu (%.0f%%), storm %zu of %zu (%.0f%%)%s\n",
              quiet.us.size(), quiet.us.size() + quiet.failures, rate(quiet), storm.us.size(),
              storm.us.size() + storm.failures, rate(storm),
              delayed ? (", HELLO " + std::to_string(args.hello_delay.count()) +
                         " ms after connecting").c_str()
                      : "");
  const double p50 = percentile(quiet.us, 0.5), p99 = percentile(quiet.us, 0.99);
  std::printf("ratio storm/quiet: p50 %.2f, p99 %.2f\n",
              p50 > 0 ? percentile(storm.us, 0.5) / p50 : 0.0,
              p99 > 0 ? percentile(storm.us, 0.99) / p99 : 0.0);
  if (quiet.failures > 0) std::printf("quiet: first failure: %s\n", quiet.first_failure.c_str());
  if (storm.failures > 0) std::printf("storm: first failure: %s\n", storm.first_failure.c_str());
  std::printf("attacker: %zu %s connections from %zu addresses; during the measured %.1f s it "
              "opened %llu (%.0f/s); in all opened %llu, connected %llu, closed by the server "
              "%llu, failed to connect %llu\n",
              args.connections, args.slow ? "slow-drip" : "silent", args.addresses, storm_seconds,
              static_cast<unsigned long long>(opened_during),
              storm_seconds > 0 ? static_cast<double>(opened_during) / storm_seconds : 0.0,
              static_cast<unsigned long long>(shared->opened.load()),
              static_cast<unsigned long long>(shared->connected.load()),
              static_cast<unsigned long long>(shared->closed_by_server.load()),
              static_cast<unsigned long long>(shared->failed.load()));
  std::printf("server: %s\n", stats.c_str());
  return quiet.us.empty() || storm.us.empty() ? 1 : 0;
}

}  // namespace minibench
