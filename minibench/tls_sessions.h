// The TLS session rows: floor/tls and, against it, <method>+tls/tcp for each
// method of kTlsRows the run has a client for, plus simple+tls-resume/tcp
// (a client that keeps its TLS session tickets and resumes) and, with
// TlsServers::cold, jwt-cold+tls/tcp (the server's verified-token cache off). Each session is
// connect + TLS handshake + negotiation + one sys.whoami + close, like the
// plaintext rows; the +tls rows use a client context without resumption so
// that every session pays a full handshake, as floor/tls does.
#pragma once

#include <asio/any_io_executor.hpp>
#include <asio/awaitable.hpp>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "authrpc/auth/mechanism.h"
#include "minibench/plan.h"
#include "minibench/report.h"
#include "authrpc/security/tls_context.h"

namespace minibench {

// Targets (same run): simple+tls ≤ 1.15 × floor/tls; simple+tls-resume ≤
// 0.8 × simple+tls; token+tls ≤ 1.2 × simple+tls; jwt+tls ≤ 1.1 ×
// simple+tls (a reconnecting client's token is answered from the server's
// verified-token cache, one SHA-256 and a lookup).
inline constexpr double kTlsSessionTarget = 1.15;
inline constexpr double kTlsResumeTarget = 0.8;
inline constexpr double kTokenTlsTarget = 1.2;
inline constexpr double kJwtTlsTarget = 1.10;

// Makes a throwaway CA and server certificate (scripts/certs.sh) in a new
// temporary directory, removed by the returned guard's destructor.
class ThrowawayCerts {
 public:
  static authrpc::Result<std::unique_ptr<ThrowawayCerts>> make();
  ~ThrowawayCerts();
  const std::string& dir() const { return dir_; }

 private:
  explicit ThrowawayCerts(std::string dir) : dir_(std::move(dir)) {}
  std::string dir_;
};

// A TLS client context that trusts `ca_file`; `resume`: it keeps session
// tickets and resumes with them.
authrpc::Result<std::shared_ptr<authrpc::security::TlsClientContext>> tls_client_context(
    const std::string& ca_file, bool resume);

asio::awaitable<authrpc::Status> run_tls_sessions(
    asio::any_io_executor ex, const BenchPlan& plan,
    const std::map<std::string, std::shared_ptr<authrpc::ClientMechanism>>& mechanisms,
    const std::function<long()>& kdc_events, Report& report);

}  // namespace minibench
