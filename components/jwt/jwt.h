// The `jwt` mechanism: OAuth 2.0 / OpenID Connect bearer access tokens,
// JWS-signed JWTs (RFC 7519, RFC 9068) issued by an identity provider
// (Keycloak, Okta, Azure AD, Dex, Glewlwyd, ...), so that a service accepts
// its IdP's tokens without a Kerberos realm. One round trip: the client's
// token travels in HELLO as an RFC 7628 OAUTHBEARER message
// (components/jwt/oauthbearer.h), the server answers AUTH_SUCCESS or a typed
// error.
//
// Server half: verifies the signature against the issuer's JWKS (a file,
// or an https:// URL refreshed on a schedule and when a token names an
// unknown key; components/jwt/jwt_key_source.h), then iss, aud, exp/nbf/iat,
// required claims (components/jwt/jwt_verifier.h); the principal comes from a
// configured claim, groups from another (Identity::groups, for ACLs), and the
// session ends at the token's exp (Identity::expires) unless configured
// otherwise. Client half: the token from a file, an environment variable or
// a command (components/jwt/jwt_credential_source.h). A bearer token is a
// secret: never sent or accepted without TLS, except on unix:// when both
// sides opt in.
// docs/JWT.md (walkthrough), docs/CONFIG.md (options), docs/PROTOCOL.md.
#pragma once

#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string_view>

#include "authrpc/auth/mechanism.h"

namespace authrpc {

inline constexpr std::string_view kJwtMechanism = "jwt";
// A bearer secret: TLS (or unix:// with allow_plaintext_unix) only.
inline constexpr MechanismTraits kJwtTraits{.bearer_secret = true};

class MechanismRegistry;
// Registers both halves with their options (docs/CONFIG.md "jwt") and the
// client flags --jwt-file, --jwt-env, --jwt-command.
void register_jwt(MechanismRegistry& registry);

// The halves from their JSON options, for programs that build their own
// mechanism lists. CONFIG_ERROR naming the option for bad options.
Result<std::shared_ptr<ServerMechanism>> make_jwt_server(const nlohmann::json& options);
Result<std::shared_ptr<ClientMechanism>> make_jwt_client(const nlohmann::json& options);

}  // namespace authrpc
