// Delegation tokens through Cyrus SASL, for interop (docs/TOKENS.md
// "Interop mechanisms"): `token-digest` is DIGEST-MD5 (as Hadoop), and
// `token-scram` is SCRAM-SHA-256 (as Kafka). The same tokens as the `token`
// mechanism: the user name is the token identifier in URL-safe base64 (no
// padding), the password is the token password in URL-safe base64.
//
// The server finds passwords through an in-process Cyrus auxprop plugin
// ("authrpc-token", no sasldb file) that asks the SecretManager
// (retrieve_password: known, not expired, not cancelled). Each server
// session hands the plugin its own context through its SASL_CB_GETOPT
// options, so that the plugin can tell the session why a token was refused
// (EXPIRED, CANCELLED, UNKNOWN_TOKEN, ...): the session reports that typed
// error instead of Cyrus's generic "user not found". A wrong password
// (a forged token) fails Cyrus's proof check: FORGED.
//
// token-scram keeps each token's SCRAM verifier
// (components/kerberos/scram_verifier_cache.h) and answers Cyrus's
// `authPassword` with it, so the server runs PBKDF2 once per token instead of
// once per session; validity is still checked with the SecretManager on every
// session.
//
// TokenSaslServerMechanism is created with the server's SecretManager (the
// token runtime, server/token_service.h); TokenSaslClientMechanism finds
// its token like TokenClientMechanism (a credentials file by service, or a
// token given).
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "authrpc/auth/mechanism.h"
#include "authrpc/auth/mechanisms/token/token_mechanism.h"
#include "authrpc/components/kerberos/scram_verifier_cache.h"
#include "authrpc/security/secret_manager.h"

namespace authrpc {

inline constexpr std::string_view kTokenDigestMechanism = "token-digest";
inline constexpr std::string_view kTokenScramMechanism = "token-scram";

class MechanismRegistry;
// Registers both halves of both. Client options {"token_file", "service",
// "sasl_service", "server_fqdn"} (flags --token-file, --sasl-service,
// --server-fqdn); server options {"sasl_service", "server_fqdn"} and, for
// token-scram, "scram_verifier_cache"; the server halves come from the
// server's token service (MechanismRegistry::provide_delegation_tokens).
void register_token_sasl(MechanismRegistry& registry);

// The SASL user name and password of a token (what a Hadoop or Kafka client
// would be configured with).
std::string token_sasl_user(const security::Token& token);
std::string token_sasl_password(const security::Token& token);

struct TokenSaslServerOptions {
  // SASL service name and server host name (DIGEST-MD5's digest-uri).
  std::string service = "authrpc";
  std::string server_fqdn = "localhost";
  // token-scram (server): how many tokens' SCRAM verifiers to keep; 0 turns
  // the cache off (Cyrus then runs PBKDF2 on every session).
  std::size_t scram_verifier_cache = 16384;
};

class TokenSaslServerMechanism final : public ServerMechanism {
 public:
  // `mechanism`: kTokenDigestMechanism or kTokenScramMechanism.
  TokenSaslServerMechanism(std::string_view mechanism,
                           std::shared_ptr<const security::SecretManager> secrets,
                           TokenSaslServerOptions options = {});
  std::string_view name() const noexcept override { return name_; }
  MechanismTraits traits() const noexcept override { return kTokenTraits; }
  std::unique_ptr<ServerAuthSession> start(const ChannelInfo& channel) override;
  // token-scram with the cache on: the verifier cache; else null.
  const ScramVerifierCache* scram_cache() const noexcept { return scram_cache_.get(); }

 private:
  std::string name_;
  std::string cyrus_mechanism_;
  std::shared_ptr<const security::SecretManager> secrets_;
  TokenSaslServerOptions options_;
  std::shared_ptr<ScramVerifierCache> scram_cache_;
};

class TokenSaslClientMechanism final : public ClientMechanism {
 public:
  TokenSaslClientMechanism(std::string_view mechanism, TokenClientOptions options,
                           TokenSaslServerOptions names = {});
  std::string_view name() const noexcept override { return name_; }
  MechanismTraits traits() const noexcept override { return kTokenTraits; }
  std::unique_ptr<ClientAuthSession> start(const ChannelInfo& channel) override;

 private:
  std::string name_;
  std::string cyrus_mechanism_;
  std::string service_;  // TokenClientOptions::service
  TokenSaslServerOptions names_;
  TokenClientMechanism tokens_;  // finds the token (file cache)
};

}  // namespace authrpc
