// ServerChild: the benchmark's server side, in a separate process so that the
// client and server never share an address space, an allocator or a lock.
//
// spawn() fork()s: it must run before the parent creates any thread (and
// after it has set the Kerberos environment, minibench/realm.h: the child
// inherits it). The child serves on loopback only —
//   authrpc/tcp     an authrpc::Server on tcp://127.0.0.1:0
//   authrpc/unix    the same Server on unix:@minibench-<pid>-authrpc
//   floor/tcp       a bare echo listener (see floor.h) on tcp://127.0.0.1:0
//   floor/unix      a bare echo listener on unix:@minibench-<pid>-floor
//   gss-floor/tcp   with gss_floor: a floor/gss listener (gss_floor.h) on
//                   tcp://127.0.0.1:0
//   gss-floor/unix  and on unix:@minibench-<pid>-gss-floor
//   authrpc/tls     with tls: the same Server on tls://127.0.0.1:0
//   floor/tls       with tls: a bare TLS echo listener (floor.h)
//   echo-floor/tcp, echo-floor/unix, with tls echo-floor/tls
//                   with echo_floors: echo floors for calls under load
//                   (echo_floor.h), on as many IO threads as the Server
//   authrpc-nometrics/tcp, authrpc-nometrics/unix
//                   with nometrics_server: a second authrpc::Server, the
//                   same but counting nothing, on IO threads of its own
// Each Server also serves minibench_stats.connections (its accepted
// connections, for the one-connection-per-session check) and
// minibench_stats.memory (its open connections and the child's malloc heap in
// use, for minibench idle); the authrpc Server also serves authrpc.bench.Echo
// (typed_calls.h, the typed calls rows).
// — and reports the bound endpoints over a pipe, one "<key> <uri>" line each
// (and a "skipped <mechanism> <why>" line for each optional mechanism it could
// not create), then "ready" (or one "error <message>" line, then exits 1). The Server has
// the requested number of IO threads; all floor listeners share one thread
// (see ServerChildOptions::floors_on_server_thread for which).
//
// The parent owns the child: the destructor (and stop()) sends SIGTERM and
// waits for it (SIGKILL after 5 s); the child exits at once on SIGTERM or
// SIGINT. It also gets SIGTERM if the parent dies (PR_SET_PDEATHSIG).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "authrpc/base/metrics.h"
#include "authrpc/base/result.h"
#include "authrpc/components/kerberos/kerberos_credentials.h"
#include "authrpc/rpc/endpoint.h"

namespace authrpc {
class Client;
}  // namespace authrpc

namespace minibench {

// A mechanism the child's authrpc Server enables.
struct ServerMechanismSpec {
  std::string name;  // registry name
  nlohmann::json options = nlohmann::json::object();
  // If it cannot be created, leave it out (see ServerChild::skipped())
  // instead of failing.
  bool optional = false;
};

struct ServerChildOptions {
  // `simple` is enabled as well: the child's own setup call uses it.
  std::vector<ServerMechanismSpec> mechanisms;
  // Set: floor/gss listeners too, accepting with these credentials (the
  // kerberos mechanism's: same keytab, principal and replay cache).
  std::optional<authrpc::security::KerberosCredentials::AcceptorOptions> gss_floor;
  std::size_t server_threads = 1;
  int cpu = -1;  // ≥ 0: pin the whole child (every thread) to this CPU
  // true: the floor listeners run on an IO thread of the authrpc Server (the
  // one that serves the child's own setup connection, a call to the child's
  // "minibench.start_floors"), so that with one server thread the floor and
  // authrpc are served by the same thread and the scheduler cannot place them
  // differently (a floor on its own thread can land on the client's CPU
  // while the server thread does not, or the reverse, which swings ratios
  // between 0.5 and 5). false: a thread of their own.
  bool floors_on_server_thread = true;
  // With a `token` mechanism: the token service's file store directory
  // (empty: a memory store). The child serves token.get/renew/cancel.
  std::string token_store_dir;
  // Set: the token store is ZooKeeper at this connect string instead.
  std::string token_zk_connect;
  // Set: a TLS endpoint and floor/tls, with this certificate chain and key.
  struct TlsFiles {
    std::string certificate;
    std::string private_key;
  };
  std::optional<TlsFiles> tls;
  // --in-process: the same server on threads of this process instead of a
  // child (shared allocator and scheduler accounting: less honest, for
  // comparison). They run until the process ends; end it with _exit().
  bool in_process = false;
  // Set: the server checks this authorization file (docs/AUTHZ.md) on every
  // session and call, as authrpc-server's `authorization.acl_file` does.
  std::string acl_file;
  // false: the Server counts nothing (ServerOptions::metrics null).
  bool metrics = true;
  // Set: the authrpc Server's ServerOptions::idle_timeout and
  // max_connections (minibench idle: a short idle timeout, and room for
  // every idle connection).
  std::optional<std::chrono::milliseconds> idle_timeout;
  std::optional<std::size_t> max_connections;
  // --metrics compare: also the authrpc-nometrics/* Server — the same
  // mechanisms (the same instances), options, IO and blocking threads and
  // pinning, metrics off — so that the cost of counting is measured in the
  // same process, against the same credentials, in the same run.
  bool nometrics_server = false;
  // Also the echo floors of calls under load (echo_floor.h): with one
  // server thread on the floors' thread (see floors_on_server_thread), with
  // more on server_threads threads of their own.
  bool echo_floors = false;
};

class ServerChild {
 public:
  static authrpc::Result<std::unique_ptr<ServerChild>> spawn(const ServerChildOptions& options);
  // A child serving something else (throughput's and storm's servers), under
  // the same rules: the child, with SIGTERM and SIGINT blocked and SIGPIPE
  // ignored, runs body(report_fd), which starts its servers and reports each
  // with report_endpoint() (or ends with fail_child()); then it reports
  // "ready" and serves until SIGTERM.
  static authrpc::Result<std::unique_ptr<ServerChild>> fork(const std::function<void(int report_fd)>& body);
  ~ServerChild();
  ServerChild(const ServerChild&) = delete;
  ServerChild& operator=(const ServerChild&) = delete;

  // Keyed "authrpc/tcp", "authrpc/unix", "floor/tcp", "floor/unix" and with
  // gss_floor "gss-floor/tcp", "gss-floor/unix".
  const std::map<std::string, authrpc::Endpoint>& endpoints() const noexcept { return endpoints_; }
  // Optional mechanisms the child could not create: name → why.
  const std::map<std::string, std::string>& skipped() const noexcept { return skipped_; }
  pid_t pid() const noexcept { return pid_; }  // -1 in process
  bool in_process() const noexcept { return in_process_; }
  // A reader of the authrpc server's accepted-connection total (its
  // minibench_stats.connections call) over one connection it opens now and
  // keeps; -1 if a call fails. Call it from one thread at a time. `server`:
  // the endpoint key of the server to read ("authrpc-nometrics/unix": the
  // metrics-off one).
  authrpc::Result<std::function<long()>> connection_counter(
      const std::string& server = "authrpc/unix") const;
  // What the server at endpoint key `server` has counted in its metrics
  // registry (counted_total); none: it has no registry (metrics off).
  authrpc::Result<std::optional<double>> counted(
      const std::string& server = "authrpc/unix") const;
  // minibench_stats.memory of the server at endpoint key `server`, read over
  // a connection opened for it: {"connections_active", "heap_in_use"}
  // (bytes malloc has handed out and not got back, all arenas: mallinfo2).
  authrpc::Result<nlohmann::json> memory(const std::string& server = "authrpc/unix") const;
  // SIGTERM, then wait. Idempotent.
  void stop() noexcept;

 private:
  explicit ServerChild(pid_t pid) : pid_(pid) {}
  // Forks a child that runs body(fd) and never returns (in_process: runs
  // body(fd), which starts a thread, here); reads the report on fd.
  static authrpc::Result<std::unique_ptr<ServerChild>> launch(const std::function<void(int fd)>& body,
                                                              bool in_process);
  // A plumbing client (simple, counting nothing) of endpoint `server`.
  authrpc::Result<std::unique_ptr<authrpc::Client>> client_of(const std::string& server) const;

  pid_t pid_;
  bool in_process_ = false;
  std::map<std::string, authrpc::Endpoint> endpoints_;
  std::map<std::string, std::string> skipped_;
};

// A child's report line "<key> <uri>" on `fd`.
void report_endpoint(int fd, const std::string& key, const authrpc::Endpoint& endpoint);
// Reports "error <why>" on `fd` and ends the child.
[[noreturn]] void fail_child(int fd, const std::string& why);

// Pins the calling thread, and the threads it starts later, to `cpu`.
bool pin_to_cpu(int cpu);

// What a metrics registry has counted, so that a run can show that --metrics
// reached the server and the clients (on: they counted; off: they had no
// registry): the sum of every authrpc_* counter child. Read by the child's
// minibench_stats.metrics and by run.cc for the clients' registry.
double counted_total(const authrpc::MetricsRegistry& registry);

}  // namespace minibench
