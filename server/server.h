// Server: listens on one or more endpoints, negotiates authentication on each
// connection and dispatches calls to registered services. Owns its IO threads
// (one event loop per thread; each thread accepts and serves its own
// connections) and a pool for blocking handlers.
//
// Lifecycle: construct → add_service()… → start() → stop(). Services are
// fixed once started. All methods are thread-safe except add_service(), which
// must precede start().
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "authrpc/auth/mechanism.h"
#include "authrpc/base/log.h"
#include "authrpc/base/metrics.h"
#include "authrpc/base/result.h"
#include "authrpc/rpc/endpoint.h"
#include "authrpc/rpc/security_requirement.h"
#include "authrpc/rpc/shm_options.h"
#include "authrpc/rpc/transport.h"
#include "authrpc/server/service.h"

namespace authrpc {
namespace security {
class TlsServerContext;
}
class AuditLog;    // server/audit_log.h
class Authorizer;  // auth/authz/authorizer.h

struct ServerOptions {
  std::vector<Endpoint> endpoints;
  // Enabled mechanisms, most preferred first. Empty: refused by start().
  std::vector<std::shared_ptr<ServerMechanism>> mechanisms;
  std::size_t io_threads = 0;         // 0: std::thread::hardware_concurrency()
  std::size_t blocking_threads = 8;   // pool for add_blocking() handlers
  std::chrono::milliseconds negotiation_timeout{10'000};
  std::chrono::milliseconds idle_timeout{300'000};  // 0: never
  // Connections in all, authenticated or not; past it new ones get
  // SERVER_BUSY (once the unauthenticated ones have been shed).
  std::size_t max_connections = 10'000;
  std::size_t max_frame_size = 16 * 1024 * 1024;
  // Before authentication (docs/CONFIG.md, "Before authentication"): at most
  // this many connections still negotiating, in all and per source address
  // (IPv4 address, IPv6 /64; unix:// peers are exempt from the per-address
  // limit; 0: no per-address limit). A new connection over the per-address
  // limit sheds its address's oldest unauthenticated one; over the total,
  // the oldest of the address holding the most; it is not refused.
  std::size_t max_unauthenticated = 1024;
  std::size_t max_unauthenticated_per_address = 64;
  // Connections per source address, authenticated or not (same address as
  // above, unix:// exempt; 0: no limit): past it the address's oldest
  // unauthenticated one is shed, or, all authenticated, the new one gets
  // SERVER_BUSY. And authenticated connections per Identity::user (0: no
  // limit): one more is refused SERVER_BUSY instead of AUTH_SUCCESS
  // (docs/CONFIG.md, "Connection limits").
  std::size_t max_connections_per_address = 1000;
  std::size_t max_connections_per_user = 0;
  // The largest frame accepted before AUTH_SUCCESS (header included):
  // Kerberos AP-REQs with large PACs reach ~48 KB; max_frame_size applies
  // after.
  std::size_t max_negotiation_frame_size = 64 * 1024;
  // Reading pauses while this many response bytes wait to be sent.
  std::size_t max_pending_output = 64 * 1024 * 1024;
  // Streaming calls open at once on one connection; one more is
  // RESOURCE_EXHAUSTED (the connection goes on serving).
  std::size_t max_streams_per_connection = 100;
  // Reading pauses while a connection's streaming calls hold this many
  // bytes their handlers have not read (each holds at most about its window).
  std::size_t max_stream_bytes_per_connection = 64 * 1024 * 1024;
  // What the server holds for its peers in all: response bytes waiting to
  // be sent and stream bytes not yet read, over every connection. Past it,
  // each connection holding more than a mebibyte of it stops reading until
  // its own share has drained (docs/SECURITY.md, "Memory across
  // connections").
  std::size_t max_buffered_bytes = 256 * 1024 * 1024;
  // Bytes of a client's messages a streaming call buffers at most (its
  // receive window, docs/DATAPLANE.md).
  std::uint32_t stream_window = 8 * 1024 * 1024;
  // Shared memory for streaming calls on unix:// connections (docs/SHM.md,
  // "Integration"): off by default; a client's offer is refused then.
  ShmOptions shm;
  // stop() waits this long for in-flight calls before closing connections.
  std::chrono::milliseconds stop_grace{30'000};
  ListenOptions listen;
  // TLS (docs/TLS.md): the context tls:// endpoints use, shared by all their
  // connections. Encryption policy unset: required if an endpoint is tls://,
  // else disabled. Authentication policy: whether `simple` (no proof) is
  // refused (required), allowed (optional) or the only one (disabled).
  std::shared_ptr<security::TlsServerContext> tls;
  std::optional<SecurityRequirement> encryption;
  SecurityRequirement authentication = SecurityRequirement::kOptional;
  LogSink log = stderr_log_sink(LogLevel::kInfo);
  // Authorization (docs/AUTHZ.md): principal mapping, groups, service and
  // method ACLs, proxy users; reloadable. Null: names stay as the mechanism
  // gave them, every authenticated user may call every method, and a client
  // asking to act as another user is refused.
  std::shared_ptr<Authorizer> authorizer;
  // Null: no audit log.
  std::shared_ptr<AuditLog> audit_log;
  // Where the server counts (docs/OPERATIONS.md lists every metric): by
  // default the process's registry, shared with its clients and exposed by
  // the admin listener. Null: nothing is counted.
  std::shared_ptr<MetricsRegistry> metrics = default_metrics_registry();
};

struct ServerStats {
  std::uint64_t connections_accepted = 0;
  std::uint64_t connections_active = 0;
  // Authenticated connections quiet a while, waiting for input with no
  // coroutine (docs/DESIGN.md, "Idle connections park").
  std::uint64_t connections_parked = 0;
  std::uint64_t connections_refused_busy = 0;
  // Of those, refused for max_connections_per_address.
  std::uint64_t connections_refused_per_address = 0;
  // Refused at authentication for max_connections_per_user (SERVER_BUSY
  // instead of AUTH_SUCCESS; not in connections_refused_busy).
  std::uint64_t connections_refused_per_user = 0;
  std::uint64_t connections_unauthenticated = 0;  // negotiating now
  // Unauthenticated connections closed to make room for a newer one, and
  // how many of those for the per-address limit.
  std::uint64_t connections_shed = 0;
  std::uint64_t connections_shed_per_address = 0;
  // accept() failures for want of a file descriptor (EMFILE, ENFILE); the
  // connection is then answered SERVER_BUSY through a reserve descriptor.
  std::uint64_t accept_out_of_descriptors = 0;
  std::uint64_t negotiation_failures = 0;
  std::uint64_t protocol_errors = 0;
  std::uint64_t calls_ok = 0;
  std::uint64_t calls_failed = 0;
  // What the connections hold for their peers now (ServerOptions::
  // max_buffered_bytes), and how often one stopped reading for the total.
  std::uint64_t buffered_bytes = 0;
  std::uint64_t reads_paused_for_memory = 0;
};

class Server {
 public:
  explicit Server(ServerOptions options);
  ~Server();  // stop()s if running
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Registers a service. The name "sys" is reserved for built-ins
  // (sys.whoami, sys.echo, sys.reload_authz, sys.stats). Fails after start() or for a
  // duplicate name.
  Status add_service(Service service);

  // Validates the options, binds every endpoint and starts serving. A bind
  // failure or invalid option fails here, before any connection is accepted.
  Status start();
  // The endpoints actually bound (port 0 resolved), after start().
  std::vector<Endpoint> bound_endpoints() const;
  // Graceful stop: stop accepting, send GOAWAY, let in-flight calls finish
  // (up to stop_grace), then close connections (handlers see cancelled()),
  // abandon coroutine handlers still running 250 ms later, wait for
  // blocking handlers, join threads. Idempotent.
  void stop();
  // Blocks until stop() has completed (from any thread).
  void wait();

  ServerStats stats() const;
  // Between a successful start() and stop(): accepting and serving.
  bool serving() const;
  // ServerOptions::metrics (may be null).
  const std::shared_ptr<MetricsRegistry>& metrics() const;

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace authrpc
