// What the token service's integration tests (token_itest against a server's
// own store, zk_token_itest against a fleet's ZooKeeper) share to run
// sessions against the realm of tests/testing/kerberos_realm.h (library
// authrpc_test_kerberos): TLS contexts both ends trust, Kerberos clients
// logging in from the realm's keytab, tokens fetched with token.get, and a
// server with `kerberos`, `token` and the token service. Test code:
// failures fail the current test.
#pragma once

#include <memory>
#include <string>

#include "authrpc/auth/mechanism.h"
#include "authrpc/base/result.h"
#include "authrpc/base/status.h"
#include "authrpc/client/client.h"
#include "authrpc/rpc/endpoint.h"
#include "authrpc/security/tls_context.h"
#include "authrpc/security/token.h"
#include "authrpc/server/token_service.h"
#include "tests/testing/kerberos_realm.h"
#include "tests/testing/test_server.h"

namespace authrpc::testing {

// A KerberosSuite whose clients talk to a token service.
class TokenServiceSuite : public KerberosSuite {
 protected:
  // StartRealm(options), then the suite's TLS contexts; setup_ says whether
  // both worked.
  static void StartRealmWithTls(KerberosRealmOptions options);

  // name@REALM.
  static std::string Principal(const std::string& name);
  // A `kerberos` client logging in as `user` from the realm's client keytab.
  static std::shared_ptr<ClientMechanism> KerberosAs(const std::string& user);
  // A client of `ep` with `m`, over TLS with the suite's context for tls://.
  static Result<std::unique_ptr<Client>> Connect(const Endpoint& ep,
                                                 std::shared_ptr<ClientMechanism> m);
  // token.get on `ep` as `as`, naming `renewer`, and stamped for `service`
  // unless that is empty.
  static Result<security::Token> FetchToken(const Endpoint& ep, const std::string& as,
                                            const std::string& renewer,
                                            const std::string& service);
  // The token service opened with `options`, and a server on `uri` with
  // `kerberos` (the realm's service keytab) and the service's mechanism and
  // service, not yet started; TLS with the suite's context for tls://.
  struct TokenServer {
    std::unique_ptr<TokenService> tokens;
    std::unique_ptr<TestServer> server;
  };
  static Result<TokenServer> OpenTokenServer(TokenServiceOptions options, const std::string& uri);

  static inline std::shared_ptr<security::TlsServerContext> server_tls_;
  static inline std::shared_ptr<security::TlsClientContext> client_tls_;
};

}  // namespace authrpc::testing
