// MechanismTraits: what the framework needs to know about a mechanism,
// declared by the mechanism itself (ServerMechanism::traits(),
// ClientMechanism::traits(), and the same value given to the registry) so
// that nothing outside the mechanism's module decides anything by its name.
// Read by the TLS/authentication policy checks (server and client), the
// client negotiation, authorization (doAs), the token service and minibench;
// carried by every negotiated Identity. docs/DESIGN.md "Mechanisms describe
// themselves".
#pragma once

namespace authrpc {

// The defaults describe a mechanism that proves who the client is and asks
// for nothing special: what every mechanism other than `simple` was taken to
// be before traits existed. A mechanism widens nothing by leaving a field at
// its default: tokens are issued only to mechanisms that say so.
struct MechanismTraits {
  // The server learns who the client is from a proof. False for a mechanism
  // whose client merely asserts a name: refused under authentication
  // `required`, and the only kind allowed under `disabled` (docs/TLS.md).
  bool proves_identity = true;
  // Only on a TLS connection (encryption not `disabled`).
  bool needs_tls = false;
  // Only on a TLS connection with a verified client certificate: the
  // identity comes from the certificate.
  bool needs_client_certificate = false;
  // The client's messages carry a secret that authenticates whoever
  // presents it (a password, an API key, a bearer token): the client never
  // starts it on a plaintext tcp:// connection (TLS or unix:// only), and a
  // server refuses it there.
  bool bearer_secret = false;
  // Authenticates with a delegation token (docs/TOKENS.md): such a
  // connection may not act as another user (doAs), is never issued a token,
  // and may cancel its own token.
  bool delegation_token = false;
  // Connections it authenticates may get and renew delegation tokens unless
  // the server lists its own `tokens.issue_mechanisms` (docs/CONFIG.md).
  bool may_be_issued_tokens = false;

  bool operator==(const MechanismTraits&) const = default;
};

}  // namespace authrpc
