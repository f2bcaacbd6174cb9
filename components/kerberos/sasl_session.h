// Cyrus SASL connections. A sasl::ServerSession or sasl::ClientSession owns
// one sasl_conn_t (sasl_dispose() on destruction) and the callbacks Cyrus
// calls for it. SASL mechanism modules (components/kerberos/kerberos_sasl.cc;
// DIGEST-MD5 and SCRAM for delegation tokens later) create one per AuthSession
// and drive it step by step; the negotiation code never sees Cyrus.
//
// Every step returns a typed result: SASL result codes map onto Errc — and
// so onto authrpc's retry advice — through sasl_errc(); the message is
// Cyrus's sasl_errdetail() plus the failure a plugin logged during the step
// (GSSAPI logs the reason an acceptor refused a token only there). Cyrus's
// messages name users and GSS-API errors, never passwords or keys.
//
// Callbacks are per connection, never process-wide: options
// (SASL_CB_GETOPT, e.g. "auxprop_plugin" for a token store), the log (kept for
// error messages, never sent to syslog), the proxy policy (server: the
// authorization identity must be the authenticated one) and the authorization
// identity (client) come from the config given at creation. A mechanism that
// needs more from its callbacks (a client authname and secret for SCRAM) adds
// it to the config of its own sessions.
//
// Not thread-safe: one call at a time. A session may change threads between
// calls (start on a helper thread, continue on the IO thread).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "authrpc/base/result.h"
#include "authrpc/base/status.h"

namespace authrpc::sasl {

// Cyrus's sasl_security_properties_t.
struct SecurityProperties {
  unsigned min_ssf = 0;
  // 0: no SASL security layer (authrpc leaves confidentiality to TLS).
  unsigned max_ssf = 0;
  unsigned max_buffer = 0;  // maxbufsize; 0 when there is no security layer
  unsigned flags = 0;       // SASL_SEC_* bits the mechanism must have
};

// Answers to SASL_CB_GETOPT for one connection, by option name
// ({"auxprop_plugin", "authrpc-token"}). Options not listed fall back to
// Cyrus's defaults (and an `authrpc.conf`, if the system has one).
using OptionMap = std::map<std::string, std::string, std::less<>>;

struct ServerConfig {
  std::string service;      // the service name ("rpc" of rpc/host@REALM)
  std::string server_fqdn;  // the host ("host" of rpc/host@REALM)
  std::string user_realm;   // empty: none
  unsigned flags = 0;       // sasl_server_new flags: SASL_SUCCESS_DATA, ...
  SecurityProperties security;
  OptionMap options;
  // SASL_GSS_CREDS: GSSAPI acceptor credentials (a gss_cred_id_t), not owned;
  // they must outlive the session. Null: Cyrus acquires its own.
  void* gss_credentials = nullptr;
};

struct ClientConfig {
  std::string service;
  std::string server_fqdn;
  unsigned flags = 0;  // sasl_client_new flags
  SecurityProperties security;
  OptionMap options;
  // SASL_CB_USER: the identity to act as; empty means the authenticated one.
  std::string authorization_id;
  // SASL_GSS_CREDS: GSSAPI initiator credentials, not owned. Null: Cyrus
  // acquires the default ones itself.
  void* gss_credentials = nullptr;
  // SASL_CB_AUTHNAME and SASL_CB_PASS, for password mechanisms (DIGEST-MD5,
  // SCRAM: components/kerberos/token_sasl.h). Offered only when
  // authentication_id is set; the password is wiped when the session is freed.
  std::string authentication_id;
  std::string password;
};

// What one step produced.
struct Output {
  bool done = false;  // Cyrus returned SASL_OK: this side has finished
  std::string message;  // for the peer; may be empty
};

// Server side of one SASL exchange.
class ServerSession {
 public:
  // Initialises the library if needed (sasl_library.h), then sasl_server_new.
  static Result<std::unique_ptr<ServerSession>> create(ServerConfig config);
  ~ServerSession();
  ServerSession(const ServerSession&) = delete;
  ServerSession& operator=(const ServerSession&) = delete;

  // sasl_server_start with the client's initial response (empty: none).
  Result<Output> start(std::string_view mechanism, std::string_view client_initial);
  // sasl_server_step with the client's next message.
  Result<Output> step(std::string_view client_message);
  bool done() const noexcept;

  // Once done: SASL_AUTHUSER (who authenticated) and SASL_USERNAME (who they
  // act as), as the mechanism and Cyrus's canonicalisation left them.
  std::string authentication_id() const;
  std::string authorization_id() const;

  struct Impl;

 private:
  explicit ServerSession(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Client side of one SASL exchange.
class ClientSession {
 public:
  static Result<std::unique_ptr<ClientSession>> create(ClientConfig config);
  ~ClientSession();
  ClientSession(const ClientSession&) = delete;
  ClientSession& operator=(const ClientSession&) = delete;

  // sasl_client_start for exactly this mechanism: its initial response.
  Result<Output> start(std::string_view mechanism);
  // sasl_client_step with the server's next message.
  Result<Output> step(std::string_view server_message);
  bool done() const noexcept;

  struct Impl;

 private:
  explicit ClientSession(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The authrpc code for a SASL result code (SASL_BADAUTH, SASL_NOMEM, ...):
// credentials refused → AUTHENTICATION_FAILED (give up), expired →
// CREDENTIALS_EXPIRED (re-authenticate), transient → UNAVAILABLE or
// RESOURCE_EXHAUSTED (retry), a peer breaking the exchange → PROTOCOL_ERROR,
// local setup → CONFIG_ERROR. SASL_OK and SASL_CONTINUE map to kOk.
Errc sasl_errc(int sasl_code) noexcept;

}  // namespace authrpc::sasl
