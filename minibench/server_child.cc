#include "minibench/server_child.h"

#include <asio/executor_work_guard.hpp>
#include <asio/io_context.hpp>
#include <asio/this_coro.hpp>
#include <fcntl.h>
#include <malloc.h>
#include <poll.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <future>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "authrpc/auth/authz/authorizer.h"
#include "authrpc/auth/mechanism_registry.h"
#include "authrpc/auth/mechanisms/simple/simple.h"
#include "authrpc/client/client.h"
#include "authrpc/server/token_service.h"
#include "minibench/echo_floor.h"
#include "minibench/floor.h"
#include "minibench/gss_floor.h"
#include "minibench/typed_calls.h"
#include "authrpc/security/tls_context.h"
#if AUTHRPC_HAVE_ZOOKEEPER
#include "authrpc/components/zookeeper/zk_store_factory.h"
#endif
#include "authrpc/server/server.h"
#include "authrpc/server/service.h"

namespace minibench {
namespace {

using authrpc::Endpoint;
using authrpc::Errc;
using authrpc::Status;
using authrpc::security::KerberosCredentials;

constexpr auto kStartTimeout = std::chrono::seconds(10);
constexpr auto kStopTimeout = std::chrono::seconds(5);

void write_line(int fd, const std::string& line) {
  const std::string text = line + "\n";
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += static_cast<std::size_t>(n);
  }
}

// In process (--in-process), fail_child throws this once the parent has been
// told, ending serve(); a forked child just exits.
struct ChildFailed {};
thread_local bool t_in_process = false;

// SIGTERM and SIGINT: a child blocks them before it starts any thread (so
// every thread inherits the mask) and then waits for one.
sigset_t stop_signals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  return signals;
}

void wait_for_stop() {
  const sigset_t signals = stop_signals();
  int received = 0;
  sigwait(&signals, &received);
}

Endpoint must_parse(const std::string& uri) { return *Endpoint::parse(uri); }

// One floor listener of the child: its report key and where it listens.
struct FloorSpec {
  std::string key;
  Endpoint endpoint;
  bool gss;
  bool tls = false;
  bool echo = false;  // an echo floor (echo_floor.h), with `tls` over TLS
};

// The floor listeners of a child with tag `tag`.
std::vector<FloorSpec> floor_specs(const std::string& tag, bool gss) {
  std::vector<FloorSpec> specs = {
      {"floor/tcp", must_parse("tcp://127.0.0.1:0"), false},
      {"floor/unix", must_parse("unix:@" + tag + "-floor"), false}};
  if (gss) {
    specs.push_back({"gss-floor/tcp", must_parse("tcp://127.0.0.1:0"), true});
    specs.push_back({"gss-floor/unix", must_parse("unix:@" + tag + "-gss-floor"), true});
  }
  return specs;
}

// What the floors are made of; starts them on `ex` into `floors`, in the
// order of `specs`.
struct FloorPlan {
  std::vector<FloorSpec> specs;
  std::shared_ptr<const KerberosCredentials> acceptor;  // for the gss floors
  std::shared_ptr<authrpc::security::TlsServerContext> tls;  // for floor/tls
  // The echo floors' threads when they have their own (empty: `ex`'s).
  std::vector<asio::any_io_executor> echo_executors;

  Status start(const asio::any_io_executor& ex,
               std::vector<std::unique_ptr<FloorServer>>& floors) const {
    for (const auto& spec : specs) {
      auto floor = spec.echo ? start_echo_floor_server(
                                   echo_executors.empty() ? std::vector{ex} : echo_executors,
                                   spec.endpoint, spec.tls ? tls : nullptr)
                   : spec.tls ? start_tls_floor_server(ex, spec.endpoint, tls)
                   : spec.gss ? start_gss_floor_server(ex, spec.endpoint, acceptor)
                              : FloorServer::start(ex, spec.endpoint);
      if (!floor.ok()) return floor.status();
      floors.push_back(std::move(*floor));
    }
    return {};
  }
};

// A service whose start_floors method starts the floor listeners on the IO
// thread that runs it (an async handler runs on its connection's IO thread).
authrpc::Service floor_starter(const FloorPlan& plan,
                               std::vector<std::unique_ptr<FloorServer>>& floors) {
  authrpc::Service service("minibench");
  service.add_async("start_floors",
                    [&plan, &floors](authrpc::CallContext&,
                                     std::string) -> asio::awaitable<authrpc::Result<std::string>> {
                      const auto ex = co_await asio::this_coro::executor;
                      if (Status s = plan.start(ex, floors); !s.ok()) co_return s;
                      co_return std::string();
                    });
  return service;
}

// minibench_stats.connections: the server's accepted-connection total, as
// decimal text. The parent reads it around each block over one connection it
// keeps open (ServerChild::connection_counter).
// minibench_stats.metrics: what the server's registry counted
// (counted_total), or "off" when it has none (ServerChild::counted).
authrpc::Service stats_service(const authrpc::Server& server) {
  authrpc::Service service("minibench_stats");
  service.add("connections", [&server](authrpc::CallContext&, std::string_view) {
    return authrpc::Result<std::string>(std::to_string(server.stats().connections_accepted));
  });
  service.add("memory", [&server](authrpc::CallContext&, std::string_view) {
    const struct mallinfo2 heap = ::mallinfo2();
    return authrpc::Result<std::string>(
        nlohmann::json{{"connections_active", server.stats().connections_active},
                       {"connections_parked", server.stats().connections_parked},
                       {"heap_in_use", heap.uordblks + heap.hblkhd}}
            .dump());
  });
  service.add("metrics", [&server](authrpc::CallContext&, std::string_view) {
    const auto& registry = server.metrics();
    return authrpc::Result<std::string>(
        registry ? std::to_string(static_cast<long long>(counted_total(*registry))) : "off");
  });
  return service;
}

// A client of the child's own services, authenticated with simple:
// minibench's plumbing, not a measured client (it counts nothing).
authrpc::Result<std::unique_ptr<authrpc::Client>> plumbing_client(const Endpoint& endpoint) {
  authrpc::ClientOptions options;
  options.endpoint = endpoint;
  options.mechanisms = {std::make_shared<authrpc::SimpleClientMechanism>("minibench")};
  options.metrics = nullptr;
  return authrpc::Client::connect(std::move(options));
}

// Calls minibench.start_floors on the server at `endpoint` and waits for it.
Status call_start_floors(const Endpoint& endpoint) {
  auto client = plumbing_client(endpoint);
  if (!client.ok()) return client.status();
  auto reply = (*client)->call("minibench", "start_floors", "");
  return reply.ok() ? Status() : reply.status();
}  // the setup client and its IO thread end here

// The delegation-token rows' token service (`token`, `token-digest`,
// `token-scram`), sharing its SecretManager with those mechanisms
// (server/token_service.h); null when no such mechanism is asked for.
std::unique_ptr<authrpc::TokenService> token_service(int fd, const ServerChildOptions& options,
                                                     authrpc::MechanismRegistry& registry) {
  if (std::none_of(options.mechanisms.begin(), options.mechanisms.end(), [&registry](const ServerMechanismSpec& m) {
        const auto* entry = registry.server(m.name);
        return entry != nullptr && entry->traits.delegation_token;
      })) {
    return nullptr;
  }
  authrpc::TokenServiceOptions t;
  if (!options.token_zk_connect.empty()) {
#if AUTHRPC_HAVE_ZOOKEEPER
    authrpc::security::ZkTokenStoreOptions zk;
    zk.connect = options.token_zk_connect;
    zk.root = "/minibench/" + std::to_string(::getpid());
    t.store = authrpc::TokenServiceOptions::Store::kShared;
    t.shared_store = authrpc::security::zookeeper_store(std::move(zk));
#else
    fail_child(fd, "token service: --zk-connect needs authrpc built with ZooKeeper support");
#endif
  } else if (options.token_store_dir.empty()) {
    t.store = authrpc::TokenServiceOptions::Store::kMemory;
  } else {
    t.dir = options.token_store_dir;
  }
  t.log = authrpc::stderr_log_sink(authrpc::LogLevel::kWarning);
  // The token/tcp row: plaintext tcp:// takes a session ticket or the
  // challenge exchange, which a server must opt in to (docs/TOKENS.md,
  // "Replay" and "Session tickets"; its clients are all on loopback).
  t.mechanism.allow_plaintext = true;
  t.mechanism.session_tickets = std::size_t{1} << 16;
  auto opened = authrpc::TokenService::open(std::move(t));
  if (!opened.ok()) fail_child(fd, "token service: " + opened.status().to_string());
  if (authrpc::Status s = (*opened)->register_mechanism(registry); !s.ok()) {
    fail_child(fd, "token service: " + s.to_string());
  }
  return std::move(*opened);
}

// The mechanisms asked for (an optional one that cannot be made is
// reported "skipped"), and simple, which the calls rows authenticate with,
// whether or not the sessions rows measure it.
void add_mechanisms(int fd, const ServerChildOptions& options, const authrpc::MechanismRegistry& registry,
                    authrpc::ServerOptions& server_options) {
  const auto simple_mechanism = std::make_shared<authrpc::SimpleServerMechanism>();
  bool simple = false;
  for (const auto& spec : options.mechanisms) {
    auto mechanism = registry.make_server(spec.name, spec.options);
    if (!mechanism.ok()) {
      std::string why = spec.name + " server: " + mechanism.status().to_string();
      std::replace(why.begin(), why.end(), '\n', ' ');  // one report line
      if (!spec.optional) fail_child(fd, why);
      write_line(fd, "skipped " + spec.name + " " + why);
      continue;
    }
    server_options.mechanisms.push_back(*mechanism);
    simple = simple || (*mechanism)->name() == simple_mechanism->name();
  }
  if (!simple) server_options.mechanisms.push_back(simple_mechanism);
}

// The floors to start (FloorPlan), the server's endpoints and TLS context
// (one for authrpc and floor/tls), and the echo floors' IO contexts: as
// many IO threads as the server — with one, the floors' thread (the
// server's own by default); with more, threads of their own, as the
// server's IO threads each accepting from one socket.
FloorPlan plan_floors(int fd, const ServerChildOptions& options, const std::string& tag,
                      authrpc::ServerOptions& server_options, std::vector<std::unique_ptr<asio::io_context>>& echo_ios) {
  FloorPlan floor_plan{floor_specs(tag, options.gss_floor.has_value()), nullptr, nullptr, {}};
  if (options.gss_floor) {
    auto acceptor = KerberosCredentials::acceptor(*options.gss_floor);
    if (!acceptor.ok()) fail_child(fd, "floor/gss: " + acceptor.status().message);
    floor_plan.acceptor = std::move(*acceptor);
  }
  server_options.endpoints = {must_parse("tcp://127.0.0.1:0"), must_parse("unix:@" + tag + "-authrpc")};
  if (options.tls) {
    authrpc::security::TlsServerOptions tls;
    tls.certificate_file = options.tls->certificate;
    tls.private_key_file = options.tls->private_key;
    auto context = authrpc::security::TlsServerContext::create(tls);
    if (!context.ok()) fail_child(fd, "TLS: " + context.status().message);
    floor_plan.tls = std::move(*context);
    server_options.tls = floor_plan.tls;
    server_options.encryption = authrpc::SecurityRequirement::kOptional;  // tcp:// and unix stay plaintext
    server_options.endpoints.push_back(must_parse("tls://127.0.0.1:0"));
    floor_plan.specs.push_back({"floor/tls", must_parse("tcp://127.0.0.1:0"), false, true});
  }
  if (!options.echo_floors) return floor_plan;
  floor_plan.specs.push_back({"echo-floor/tcp", must_parse("tcp://127.0.0.1:0"), false, false, true});
  floor_plan.specs.push_back({"echo-floor/unix", must_parse("unix:@" + tag + "-echo-floor"), false, false, true});
  if (options.tls) floor_plan.specs.push_back({"echo-floor/tls", must_parse("tcp://127.0.0.1:0"), false, true, true});
  if (options.server_threads > 1) {
    for (std::size_t i = 0; i < options.server_threads; ++i) {
      floor_plan.echo_executors.push_back(echo_ios.emplace_back(std::make_unique<asio::io_context>(1))->get_executor());
    }
  }
  return floor_plan;
}

// The rest of the server's options: authorization, threads, log, metrics
// and limits.
void finish_server_options(int fd, const ServerChildOptions& options, authrpc::ServerOptions& server_options) {
  if (!options.acl_file.empty()) {
    auto authorizer = authrpc::Authorizer::from_file(options.acl_file);
    if (!authorizer.ok()) fail_child(fd, "--acl: " + authorizer.status().to_string());
    server_options.authorizer = *authorizer;
  }
  server_options.io_threads = options.server_threads;
  server_options.blocking_threads = 1;  // sys.* handlers run inline
  server_options.log = authrpc::stderr_log_sink(authrpc::LogLevel::kWarning);
  if (!options.metrics) server_options.metrics = nullptr;
  if (options.idle_timeout) server_options.idle_timeout = *options.idle_timeout;
  if (options.max_connections) server_options.max_connections = *options.max_connections;
}

// The metrics-off twin: only its endpoints and its registry differ.
std::unique_ptr<authrpc::Server> start_twin(int fd, const authrpc::ServerOptions& server_options,
                                            const std::string& tag) {
  authrpc::ServerOptions twin = server_options;
  twin.metrics = nullptr;
  twin.endpoints = {must_parse("tcp://127.0.0.1:0"), must_parse("unix:@" + tag + "-authrpc-nometrics")};
  auto nometrics = std::make_unique<authrpc::Server>(std::move(twin));
  if (Status s = nometrics->add_service(stats_service(*nometrics)); !s.ok()) fail_child(fd, s.to_string());
  if (Status s = nometrics->start(); !s.ok()) fail_child(fd, "metrics-off server: " + s.to_string());
  return nometrics;
}

// Starts the floors: through a call to the server, on its IO thread, or on
// `floor_io`, run by `floor_thread`.
void start_floors(int fd, const ServerChildOptions& options, const FloorPlan& floor_plan, const Endpoint& server,
                  std::vector<std::unique_ptr<FloorServer>>& floors, asio::io_context& floor_io,
                  std::thread& floor_thread) {
  if (options.floors_on_server_thread) {
    // The call's reply orders the IO thread's writes to `floors` before this.
    if (Status s = call_start_floors(server); !s.ok()) fail_child(fd, "starting the floors: " + s.to_string());
    return;
  }
  if (Status s = floor_plan.start(floor_io.get_executor(), floors); !s.ok()) fail_child(fd, s.to_string());
  floor_thread = std::thread([&floor_io] {
    auto work = asio::make_work_guard(floor_io);
    floor_io.run();
  });
}

// The report on `fd`: each endpoint by name, then "ready".
void report_endpoints(int fd, const ServerChildOptions& options, const authrpc::Server& server,
                      const authrpc::Server* nometrics, const FloorPlan& floor_plan,
                      const std::vector<std::unique_ptr<FloorServer>>& floors) {
  const auto bound = server.bound_endpoints();
  write_line(fd, "authrpc/tcp " + bound.at(0).to_string());
  write_line(fd, "authrpc/unix " + bound.at(1).to_string());
  if (options.tls) write_line(fd, "authrpc/tls " + bound.at(2).to_string());
  if (nometrics) {
    const auto twin = nometrics->bound_endpoints();
    write_line(fd, "authrpc-nometrics/tcp " + twin.at(0).to_string());
    write_line(fd, "authrpc-nometrics/unix " + twin.at(1).to_string());
  }
  for (std::size_t i = 0; i < floor_plan.specs.size(); ++i) {
    write_line(fd, floor_plan.specs[i].key + " " + floors.at(i)->endpoint().to_string());
  }
  write_line(fd, "ready");
  ::close(fd);
}

// The server side: builds the server and floors, reports them on `fd`, then
// calls `wait()` (which returns when it is time to exit, or never). Throws
// ChildFailed after reporting an error. In a forked child it runs with the
// parent's memory image but only the forking thread, so it builds everything
// it needs from scratch; with --in-process it runs on a thread of its own.
void serve(int fd, const ServerChildOptions& options, const std::function<void()>& wait) {
  const sigset_t signals = stop_signals();
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);  // before any thread starts
  std::signal(SIGPIPE, SIG_IGN);
  if (options.cpu >= 0 && !pin_to_cpu(options.cpu)) fail_child(fd, "cannot pin to CPU " + std::to_string(options.cpu));

  // Unique per server: --in-process may run two (the jwt-cold row's) in
  // this process, and their abstract unix names must differ.
  static std::atomic<int> servers{0};
  const int index = servers++;
  const std::string tag =
      "minibench-" + std::to_string(::getpid()) + (index > 0 ? "-" + std::to_string(index) : std::string());
  auto registry = authrpc::MechanismRegistry::with_builtins();
  const std::unique_ptr<authrpc::TokenService> tokens = token_service(fd, options, registry);
  authrpc::ServerOptions server_options;
  add_mechanisms(fd, options, registry, server_options);
  std::vector<std::unique_ptr<asio::io_context>> echo_ios;
  const FloorPlan floor_plan = plan_floors(fd, options, tag, server_options, echo_ios);
  finish_server_options(fd, options, server_options);
  const std::unique_ptr<authrpc::Server> nometrics =
      options.nometrics_server ? start_twin(fd, server_options, tag) : nullptr;
  authrpc::Server server(std::move(server_options));
  std::vector<std::unique_ptr<FloorServer>> floors;  // written on the IO thread that starts them
  if (tokens) {
    if (Status s = server.add_service(tokens->service()); !s.ok()) fail_child(fd, s.to_string());
  }
  if (Status s = server.add_service(stats_service(server)); !s.ok()) fail_child(fd, s.to_string());
  if (Status s = server.add_service(typed_echo_service()); !s.ok()) fail_child(fd, s.to_string());
  if (options.floors_on_server_thread) {
    if (Status s = server.add_service(floor_starter(floor_plan, floors)); !s.ok()) fail_child(fd, s.to_string());
  }
  if (Status s = server.start(); !s.ok()) fail_child(fd, s.to_string());
  asio::io_context floor_io{1};
  std::thread floor_thread;
  start_floors(fd, options, floor_plan, server.bound_endpoints().at(0), floors, floor_io, floor_thread);
  std::vector<std::thread> echo_threads;  // run until the process exits
  for (auto& io : echo_ios) {
    echo_threads.emplace_back([io = io.get()] {
      auto work = asio::make_work_guard(*io);
      io->run();
    });
  }
  report_endpoints(fd, options, server, nometrics.get(), floor_plan, floors);
  wait();
  // Nothing to flush or hand over (every benchmark connection is closed), so
  // the kernel's cleanup at exit is the whole shutdown; Server::stop() would
  // also wait on the floors' pending accepts when they share its thread.
  ::_exit(0);
}

// --in-process: serve() on a detached thread of this process that never
// returns once the server is up; the process ends with _exit (main.cc).
void start_in_process(int fd, const ServerChildOptions& options) {
  std::thread([fd, options] {
    t_in_process = true;
    try {
      serve(fd, options, [] {
        std::promise<void> never;
        never.get_future().wait();
      });
    } catch (const ChildFailed&) {
      ::close(fd);
    }
  }).detach();
}

// Reads the child's report; false with `error` set on failure or timeout.
bool read_report(int fd, std::map<std::string, Endpoint>& endpoints,
                 std::map<std::string, std::string>& skipped, std::string& error) {
  const auto deadline = std::chrono::steady_clock::now() + kStartTimeout;
  std::string buffer;
  for (;;) {
    std::size_t eol;
    while ((eol = buffer.find('\n')) != std::string::npos) {
      const std::string line = buffer.substr(0, eol);
      buffer.erase(0, eol + 1);
      if (line == "ready") return true;
      if (line.starts_with("error ")) {
        error = "server child: " + line.substr(6);
        return false;
      }
      const auto space = line.find(' ');
      if (line.starts_with("skipped ")) {
        const auto end = line.find(' ', 8);
        skipped[line.substr(8, end - 8)] = end == std::string::npos ? "" : line.substr(end + 1);
        continue;
      }
      auto endpoint = Endpoint::parse(space == std::string::npos ? "" : line.substr(space + 1));
      if (!endpoint.ok()) {
        error = "server child sent '" + line + "'";
        return false;
      }
      endpoints[line.substr(0, space)] = *endpoint;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      error = "server child did not report its endpoints within 10 s";
      return false;
    }
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) < 0 && errno != EINTR) {
      error = "poll on the server child's pipe failed";
      return false;
    }
    char chunk[512];
    const ssize_t n = ::read(fd, chunk, sizeof chunk);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) {
      error = "server child exited before reporting its endpoints";
      return false;
    }
    buffer.append(chunk, static_cast<std::size_t>(n));
  }
}

}  // namespace

authrpc::Result<std::unique_ptr<authrpc::Client>> ServerChild::client_of(const std::string& server) const {
  const auto endpoint = endpoints_.find(server);
  if (endpoint == endpoints_.end()) {
    return Status(Errc::kNotFound, "the server child has no " + server + " endpoint");
  }
  return plumbing_client(endpoint->second);
}

authrpc::Result<std::function<long()>> ServerChild::connection_counter(
    const std::string& server) const {
  auto client = client_of(server);
  if (!client.ok()) return client.status();
  std::shared_ptr<authrpc::Client> shared(std::move(*client));
  return std::function<long()>([shared]() -> long {
    auto reply = shared->call("minibench_stats", "connections", "");
    return reply.ok() ? std::atol(reply->c_str()) : -1;
  });
}

authrpc::Result<std::optional<double>> ServerChild::counted(const std::string& server) const {
  auto client = client_of(server);
  if (!client.ok()) return client.status();
  auto reply = (*client)->call("minibench_stats", "metrics", "");
  if (!reply.ok()) return reply.status();
  if (*reply == "off") return std::optional<double>();
  return std::optional<double>(std::atof(reply->c_str()));
}

authrpc::Result<nlohmann::json> ServerChild::memory(const std::string& server) const {
  auto client = client_of(server);
  if (!client.ok()) return client.status();
  return (*client)->call_json("minibench_stats", "memory", nlohmann::json::object());
}

double counted_total(const authrpc::MetricsRegistry& registry) {
  double total = 0;
  for (const auto& family : registry.snapshot()) {
    // process_* and the gauges say nothing about what the run did.
    if (family.type != authrpc::MetricType::kCounter || !family.name.starts_with("authrpc_")) {
      continue;
    }
    for (const auto& sample : family.samples) total += sample.value;
  }
  return total;
}

bool pin_to_cpu(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return ::sched_setaffinity(0, sizeof set, &set) == 0;
}

void report_endpoint(int fd, const std::string& key, const Endpoint& endpoint) {
  write_line(fd, key + " " + endpoint.to_string());
}

void fail_child(int fd, const std::string& why) {
  write_line(fd, "error " + why);
  if (t_in_process) throw ChildFailed{};
  ::_exit(1);
}

authrpc::Result<std::unique_ptr<ServerChild>> ServerChild::spawn(
    const ServerChildOptions& options) {
  if (options.in_process) {
    return launch([&options](int fd) { start_in_process(fd, options); }, true);
  }
  return launch([&options](int fd) { serve(fd, options, wait_for_stop); }, false);
}

authrpc::Result<std::unique_ptr<ServerChild>> ServerChild::fork(const std::function<void(int)>& body) {
  return launch([&body](int fd) {
    const sigset_t signals = stop_signals();
    pthread_sigmask(SIG_BLOCK, &signals, nullptr);  // before any thread starts
    std::signal(SIGPIPE, SIG_IGN);
    body(fd);
    write_line(fd, "ready");
    ::close(fd);
    wait_for_stop();
    ::_exit(0);  // no orderly teardown: connections may be mid-stream
  }, false);
}

authrpc::Result<std::unique_ptr<ServerChild>> ServerChild::launch(
    const std::function<void(int)>& body, bool in_process) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    return Status(std::error_code(errno, std::system_category()), "pipe");
  }
  pid_t pid = -1;
  if (in_process) {
    body(fds[1]);  // starts the thread that reports on fds[1] and closes it
  } else {
    std::fflush(stdout);
    std::fflush(stderr);
    const pid_t parent = ::getpid();
    pid = ::fork();
    if (pid < 0) {
      const int e = errno;
      ::close(fds[0]);
      ::close(fds[1]);
      return Status(std::error_code(e, std::system_category()), "fork");
    }
    if (pid == 0) {
      ::close(fds[0]);
      ::prctl(PR_SET_PDEATHSIG, SIGTERM);
      if (::getppid() != parent) ::_exit(1);  // the parent died before prctl
      body(fds[1]);
      ::_exit(0);
    }
    ::close(fds[1]);
  }
  std::unique_ptr<ServerChild> child(new ServerChild(pid));  // stops a forked child on every return
  child->in_process_ = in_process;
  std::string error;
  const bool ok = read_report(fds[0], child->endpoints_, child->skipped_, error);
  ::close(fds[0]);
  if (!ok) return Status(Errc::kUnavailable, error);
  return child;
}

ServerChild::~ServerChild() { stop(); }

void ServerChild::stop() noexcept {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGTERM);
  const auto deadline = std::chrono::steady_clock::now() + kStopTimeout;
  int status = 0;
  pid_t done = 0;
  while ((done = ::waitpid(pid_, &status, WNOHANG)) == 0 &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  if (done == 0) {
    std::fprintf(stderr, "minibench: server child %d ignored SIGTERM; killing it\n", pid_);
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, &status, 0);
  } else if (done > 0 && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
    std::fprintf(stderr, "minibench: server child %d ended abnormally (status %d)\n", pid_, status);
  }
  pid_ = -1;
}

}  // namespace minibench
