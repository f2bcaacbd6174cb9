// prepare(): the plan stage of `minibench [sessions|calls]`. It selects the
// methods (methods.h), spawns the server children, fetches the token rows'
// token and fills the BenchPlan; PreparedRun owns what must outlive the
// measurement. describe() prints the run's header lines. Called by main.cc;
// run.h measures what it prepared.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "authrpc/base/result.h"
#include "authrpc/client/client.h"
#include "minibench/args.h"
#include "minibench/plan.h"
#include "minibench/realm.h"

namespace minibench {

class ServerChild;
class ThrowawayCerts;
class BenchJwtIssuer;

// A sessions/calls run made ready by prepare(): the plan, and what must
// outlive the measurement (the server children, the realm, the throwaway
// certificates, the JWT issuer's files, the token directory).
struct PreparedRun {
  PreparedRun() = default;
  PreparedRun(const PreparedRun&) = delete;
  PreparedRun& operator=(const PreparedRun&) = delete;
  ~PreparedRun();

  BenchPlan plan;
  std::unique_ptr<BenchRealm> realm;  // null: no Kerberos method
  std::unique_ptr<ServerChild> child;  // null: --server
  std::unique_ptr<ServerChild> cold_child;  // the <method>-cold+tls/tcp row's server
  std::unique_ptr<ThrowawayCerts> tls_certs;
  std::unique_ptr<BenchJwtIssuer> jwt_issuer;
  std::string token_dir;  // the token rows' credentials file and store; removed at the end
  // Where the token is fetched (and --token-ops run): the server's first
  // endpoint, plaintext or TLS.
  std::optional<authrpc::ClientOptions> token_server;

  const KerberosSetup* kerberos() const { return realm ? &realm->setup() : nullptr; }
};

// Selects the methods, spawns the server children (before any thread),
// fetches the token rows' token and fills the plan. On failure `usage` says
// whether the options do not fit (a usage error) or the run cannot be made.
authrpc::Result<std::unique_ptr<PreparedRun>> prepare(const Args& args, bool& usage);

// The header lines on stdout: methods, server, floors, client, Kerberos,
// metrics and sizes.
void describe(const Args& args, const PreparedRun& run);

}  // namespace minibench
