// AdminServer: the optional HTTP admin listener of a process that runs
// authrpc servers: /metrics (Prometheus text format 0.0.4, from a
// MetricsRegistry), /healthz (live: 200 while the process answers) and
// /readyz (200 only when every readiness check passes, else 503 with the
// failing checks' names and reasons). Plain HTTP, loopback by default:
// it carries no secrets but tells an attacker what a server does, so put it
// behind a firewall or keep it on 127.0.0.1 (docs/OPERATIONS.md).
//
// Owned by the application (authrpc-server creates one when its config has
// "admin"); runs its own few threads (civetweb), independent of the Server's
// IO threads, so a busy server still answers probes. Create it after the
// process has blocked the signals it waits for: civetweb's threads inherit
// the mask. Component `admin` (library authrpc_admin, prometheus-cpp core
// and civetweb); a program that does not link it has no HTTP listener.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "authrpc/security/base/log.h"
#include "authrpc/security/base/metrics.h"
#include "authrpc/security/base/result.h"

namespace authrpc {

class Server;

struct AdminOptions {
  // host:port to listen on: an IPv4 address or "localhost" (127.0.0.1);
  // port 0 picks a free one (see port()). IPv6 is written "[::1]:9464" but
  // refused (CONFIG_ERROR) when the civetweb library was built without it,
  // as Debian 12's is. A non-loopback address is allowed but logged at
  // warning.
  std::string listen = "127.0.0.1:9464";
  std::size_t threads = 2;  // civetweb's workers: 1 to 16
  // Required: what /metrics serves.
  std::shared_ptr<MetricsRegistry> metrics;
  // /readyz: name → check (ok, or why not ready). Run on each request, on a
  // civetweb thread: a check must be thread-safe and quick, and must not
  // put a secret in its message (the reason is served to anyone who asks).
  std::vector<std::pair<std::string, std::function<Status()>>> readiness;
  LogSink log = stderr_log_sink(LogLevel::kInfo);
};

// A readiness check that passes while `server` is serving (Server::serving()).
std::function<Status()> server_serving_check(const Server& server);

class AdminServer {
 public:
  // Binds and starts; CONFIG_ERROR for a bad address or a failed bind.
  static Result<std::unique_ptr<AdminServer>> start(AdminOptions options);
  ~AdminServer();  // stop()s
  AdminServer(const AdminServer&) = delete;
  AdminServer& operator=(const AdminServer&) = delete;

  std::uint16_t port() const;
  // Stops listening and waits for requests in progress. Idempotent.
  void stop();

  class Impl;

 private:
  explicit AdminServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The Prometheus text exposition (version 0.0.4) of a snapshot, written by
// prometheus-cpp's TextSerializer.
std::string prometheus_text(const MetricsSnapshot& snapshot);

}  // namespace authrpc
