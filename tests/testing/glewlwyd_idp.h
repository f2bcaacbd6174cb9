// GlewlwydIdp: a real OAuth 2.0 / OpenID Connect identity provider for tests
// (library authrpc_test_support) — Debian 12's glewlwyd, run as a child
// process on a free 127.0.0.1 port, serving HTTPS with TestTls's "server"
// certificate, its state in a sqlite3 database in a temp dir.
//
// start() writes everything glewlwyd needs, with no manual step: an RS256
// signing key made with OpenSSL, the database from the package's own init SQL
// plus one OIDC plugin instance ("oidc": issuer, JWT access tokens signed with
// that key, the client-credentials grant, resource indicators allowed) and one
// confidential client (client_id/secret, scope "authrpc"), and the config file.
// It then waits until the JWKS answers over HTTPS. The destructor stops the
// process by PID (SIGTERM, SIGKILL after 5 s) and removes the dir. A suite
// owns one instance (~0.5 s to start); its const methods may be called from
// any thread.
//
// An access token from client_credentials_token() is a JWS whose header has
// alg RS256, typ at+jwt and kid (an id glewlwyd derives from the key, the
// same in its JWKS; not the RFC 7638 thumbprint), and whose claims are iss
// (= issuer()), sub (= client_id(): no user is involved), client_id, aud
// (= the resource asked for, audience() by default), scope (the granted
// scopes, space-separated), iat, nbf (= iat), exp (= iat + 3600), jti and
// type ("access_token"). docs/TESTING.md shows a decoded one.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <string_view>

#include "authrpc/base/result.h"
#include "authrpc/base/status.h"

namespace authrpc::testing {

class TestTls;

class GlewlwydIdp {
 public:
  // True if glewlwyd, its OIDC plugin, its sqlite3 init SQL and the sqlite3
  // program are installed (scripts/setup.sh installs them).
  static bool installed();

  // A running IdP serving HTTPS with `tls`'s "server" certificate; `tls` must
  // outlive it. Errors: kFailedPrecondition (not installed), kUnavailable
  // (glewlwyd exited or did not answer; the message names its log file).
  static Result<std::unique_ptr<GlewlwydIdp>> start(const TestTls& tls);

  ~GlewlwydIdp();
  GlewlwydIdp(const GlewlwydIdp&) = delete;
  GlewlwydIdp& operator=(const GlewlwydIdp&) = delete;

  // https://127.0.0.1:PORT/api/oidc: the `iss` of its tokens and the base of
  // its endpoints (discovery at issuer() + "/.well-known/openid-configuration").
  std::string issuer() const;
  std::string jwks_url() const;   // issuer() + "/jwks", public keys only
  std::string token_url() const;  // issuer() + "/token"
  // The resource its tokens name in `aud` unless another is asked for:
  // "https://rpc.authrpc.test/". other_audience() is a second resource the
  // client may ask for, for "token meant for another service" cases.
  static std::string audience();
  static std::string other_audience();
  // The one scope the client may be granted.
  static std::string scope();
  static std::string client_id();
  // The client's secret (client_secret_basic), for tests that build their
  // own token request; random per instance.
  const std::string& client_secret() const { return client_secret_; }
  // The CA file to trust for its HTTPS endpoints (TestTls's CA).
  std::string ca_file() const;
  // The PEM public key its tokens are signed with.
  const std::string& signing_public_key_pem() const { return signing_public_pem_; }

  // An access token for `scope` (space-separated) with `aud` = `resource`
  // (audience() if empty), from a client-credentials grant over HTTPS.
  // Errors: kAuthenticationFailed (client refused), kInvalidArgument (glewlwyd
  // refused the scope or resource; its `error` is in the message),
  // kUnavailable (not reachable).
  Result<std::string> client_credentials_token(std::string_view scope, std::string_view resource = {}) const;

  // Stops glewlwyd (SIGTERM, then SIGKILL after 5 s) and waits for it;
  // idempotent. The destructor calls it.
  Status stop();

  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  const std::string& dir() const { return dir_; }
  std::string log_file() const;

 private:
  explicit GlewlwydIdp(const TestTls& tls);
  Status prepare();     // keys and database, once
  Status start_once();  // config, process, wait until the JWKS answers
  bool lost_the_port() const;

  const TestTls& tls_;
  std::string dir_;
  std::string client_secret_;
  std::string signing_private_pem_;
  std::string signing_public_pem_;
  int port_ = 0;
  pid_t pid_ = -1;
};

}  // namespace authrpc::testing
