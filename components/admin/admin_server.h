// AdminServer: the optional HTTP admin listener of a process that runs
// authrpc servers: /metrics (Prometheus text format 0.0.4, from a
// MetricsRegistry), /healthz (live: 200 while the process answers) and
// /readyz (200 only when every readiness check passes, else 503 with the
// failing checks' names and reasons). Plain HTTP, loopback by default:
// it carries no secrets but tells an attacker what a server does, so put it
// behind a firewall or keep it on 127.0.0.1 (docs/OPERATIONS.md).
//
// Owned by the application (authrpc-server creates one when its config has
// "admin"); runs its own few threads (libmicrohttpd, event-driven: a thread
// serves many connections and is busy only while it writes an answer, so
// idle peers do not hold it), independent of the Server's IO threads, so a
// busy server still answers probes. Which requests it answers, and how:
// components/admin/admin_request.h. Create it after the process has blocked the
// signals it waits for: libmicrohttpd's threads inherit the mask. Component
// `admin` (library authrpc_admin, prometheus-cpp core and libmicrohttpd); a
// program that does not link it has no HTTP listener.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "authrpc/base/log.h"
#include "authrpc/base/metrics.h"
#include "authrpc/base/result.h"

namespace authrpc {

class Server;

struct AdminOptions {
  // host:port to listen on: an IPv4 address, "localhost" (127.0.0.1) or
  // an IPv6 address in brackets ("[::1]:9464"); port 0 picks a free one
  // (see port()). A non-loopback address is allowed but logged at warning.
  std::string listen = "127.0.0.1:9464";
  // libmicrohttpd's polling threads, 1 to 16: each serves its share of the
  // connections, and is taken only while it renders an answer (/metrics, the
  // readiness checks).
  std::size_t threads = 2;
  // The DNS names this listener answers to, besides IP literals and
  // "localhost": those Prometheus or a probe use to reach it (e.g.
  // "node1.example.com"). A request whose Host names any other host is
  // refused (421), so that a web page cannot read it through DNS rebinding
  // (docs/SECURITY.md). Compared without regard to case, the port ignored;
  // letters, digits, '-' and dots only (CONFIG_ERROR otherwise).
  std::vector<std::string> hosts;
  // Required: what /metrics serves.
  std::shared_ptr<MetricsRegistry> metrics;
  // /readyz: name → check (ok, or why not ready). Run on each request, on a
  // libmicrohttpd thread: a check must be thread-safe and quick (the thread
  // serves no other connection meanwhile), and must not put a secret in its
  // message (the reason is served to anyone who asks).
  std::vector<std::pair<std::string, std::function<Status()>>> readiness;
  LogSink log = stderr_log_sink(LogLevel::kInfo);
};

// A readiness check that passes while `server` is serving (Server::serving()).
std::function<Status()> server_serving_check(const Server& server);

class AdminServer {
 public:
  // Binds and starts; CONFIG_ERROR for a bad address or host name (as
  // check() finds them), UNAVAILABLE for a failed bind (the message says
  // why: "Address already in use"), as the RPC listener's.
  static Result<std::unique_ptr<AdminServer>> start(AdminOptions options);
  // What start() would refuse in `options` before binding: CONFIG_ERROR
  // for a bad listen address or host name. Binds nothing.
  static Status check(const AdminOptions& options);
  ~AdminServer();  // stop()s
  AdminServer(const AdminServer&) = delete;
  AdminServer& operator=(const AdminServer&) = delete;

  std::uint16_t port() const;
  // Stops listening, waits for answers being written and closes every
  // connection. Idempotent.
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
