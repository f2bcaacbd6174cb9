// The `token` mechanism: authentication with a delegation token
// (docs/TOKENS.md, wire format in docs/PROTOCOL.md "The token mechanism").
//
// Two exchanges, chosen by the transport (docs/TOKENS.md, "Replay"):
//  - one message each way (version 1), over TLS and unix://: the client's
//    HELLO carries the token identifier, the service it was fetched for, a
//    client nonce, the client's clock and a proof HMAC-SHA256(password,
//    transcript); the server looks the password up in its SecretManager
//    (memory only, constant-time comparison), checks the proof and the clock
//    window, and answers AUTH_SUCCESS with its own proof, which the client
//    checks in complete(). Over TLS both proofs cover the channel binding
//    (ChannelInfo), unique per connection, so a captured HELLO is worthless
//    on any other connection of any server; over unix:// (no binding) the
//    server's replay cache refuses a second use in this process.
//  - a challenge (version 2), over plaintext tcp://, only where the server
//    opts in (TokenServerOptions::allow_plaintext): the server contributes a
//    fresh nonce that the client's proof must cover, so nothing a passive
//    observer records authenticates again, on this server or another.
//  - version 3, the same over plaintext tcp:// with session tickets, where
//    both ends opt in (TokenServerOptions::session_tickets,
//    TokenClientOptions::tickets): each AUTH_SUCCESS carries a single-use
//    ticket (TokenTickets, bound to the token and the client's address)
//    that the client's next HELLO to the same endpoint proves over instead
//    of a challenge nonce: one message each way. A ticket this server
//    process did not issue for this token and address, or saw spent, or
//    that expired, is answered with the challenge; so is a HELLO without
//    one. Calls pipelined behind a ticket HELLO that is challenged are
//    dropped by the server and sent again by the client.
// The password is already a random 32-byte HMAC: no key stretching.
//
// TokenServerMechanism is created by the server's token runtime
// (server/token_service.h), which shares its SecretManager with the token
// service. TokenClientMechanism finds its token in a credentials file by
// service (the endpoint URI it connects to), or is given one.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "authrpc/auth/delegation_token_host.h"
#include "authrpc/auth/mechanism.h"
#include "authrpc/auth/mechanisms/token/token_replay_cache.h"
#include "authrpc/auth/mechanisms/token/token_tickets.h"
#include "authrpc/security/clock.h"
#include "authrpc/security/secret_manager.h"
#include "authrpc/security/token.h"

namespace authrpc {

inline constexpr std::string_view kTokenMechanism = "token";
// Authenticates with a delegation token; shared by the interop mechanisms
// (components/kerberos/token_sasl.h).
inline constexpr MechanismTraits kTokenTraits{.delegation_token = true};

class MechanismRegistry;
struct MechanismFlag;
// Registers both halves: the client reads {"token_file", "service"} (flag
// --token-file); the server half comes from the server's token service
// (MechanismRegistry::provide_delegation_tokens) and takes no options of its
// own (they are the 'tokens' section's).
void register_token(MechanismRegistry& registry);
// --token-file, which every token mechanism's client declares.
MechanismFlag token_file_flag();
// The identity a delegation token vouches for: its owner as user and
// principal (the realm from owner@REALM), and the real user of a token
// issued to a proxy. Shared by the token mechanisms (token, token-digest,
// token-scram).
Identity token_identity(const security::TokenIdentifier& id);

// The messages of the `token` mechanism, encoded and decoded (and signed)
// here so that tests can build hostile ones and fuzzers can decode without a
// server. Every decode() refuses trailing bytes and another version.
namespace token_wire {

inline constexpr std::uint8_t kVersion = 1;           // one message each way
inline constexpr std::uint8_t kChallengeVersion = 2;  // server challenge
inline constexpr std::uint8_t kTicketVersion = 3;     // challenge or session ticket
inline constexpr std::size_t kMaxTicketBytes = 64;
inline constexpr std::size_t kNonceBytes = 16;
inline constexpr std::size_t kProofBytes = 32;
inline constexpr std::size_t kMaxServiceBytes = 1024;

// Version 1 HELLO read in place: views into the message (the server's
// per-session decode, and Hello::decode's).
struct HelloView {
  std::string_view identifier;
  std::string_view service;
  std::string_view nonce;  // kNonceBytes
  std::int64_t time_ms = 0;
  std::string_view signed_bytes;  // the message up to its proof: T without str16(cb)
  std::string_view proof;         // kProofBytes

  static std::optional<HelloView> decode(std::string_view bytes);
};

// Version 1 HELLO.
struct Hello {
  std::string identifier;  // TokenIdentifier bytes
  std::string service;     // the token's service, as the client holds it
  std::array<std::uint8_t, kNonceBytes> nonce{};
  std::int64_t time_ms = 0;  // client clock, ms since the epoch
  std::array<std::uint8_t, kProofBytes> proof{};

  std::string encode() const;
  static std::optional<Hello> decode(std::string_view bytes);
};

// Version 3 HELLO read in place: version 2's fields, then a ticket (empty:
// none, the client asks to be challenged) and, with a ticket, the proof.
struct TicketHelloView {
  std::string_view identifier;
  std::string_view service;
  std::string_view nonce;         // kNonceBytes
  std::string_view ticket;        // 0 … kMaxTicketBytes
  std::string_view signed_bytes;  // with a ticket: the message up to its proof
  std::string_view proof;         // kProofBytes with a ticket, else empty

  static std::optional<TicketHelloView> decode(std::string_view bytes);
};
// Version 3 AUTH_SUCCESS: the server proof and the client's next ticket
// (empty when the server issues none), valid for lifetime_ms.
struct TicketSuccess {
  std::array<std::uint8_t, kProofBytes> proof{};
  std::uint32_t lifetime_ms = 0;
  std::string ticket;

  std::string encode() const;
  static std::optional<TicketSuccess> decode(std::string_view bytes);
};

// Version 2: HELLO (ChallengeHello), AUTH_CHALLENGE (Challenge),
// AUTH_RESPONSE (Response), AUTH_SUCCESS (encode_success with the version).
// Challenge and Response are version 3's too, with that version byte.
struct ChallengeHello {
  std::string identifier;
  std::string service;
  std::array<std::uint8_t, kNonceBytes> client_nonce{};

  std::string encode() const;
  static std::optional<ChallengeHello> decode(std::string_view bytes);
};
struct Challenge {
  std::array<std::uint8_t, kNonceBytes> server_nonce{};
  std::uint8_t version = kChallengeVersion;  // 2 or 3

  std::string encode() const;
  static std::optional<Challenge> decode(std::string_view bytes);
};
struct Response {
  std::array<std::uint8_t, kProofBytes> proof{};
  std::uint8_t version = kChallengeVersion;  // 2 or 3

  std::string encode() const;
  static std::optional<Response> decode(std::string_view bytes);
};

// HMAC-SHA256(password, "authrpc token client\0" || transcript).
std::array<std::uint8_t, kProofBytes> client_proof(const security::SecretBytes& password,
                                                   const Hello& hello,
                                                   std::string_view channel_binding);
// HMAC-SHA256(password, "authrpc token server\0" || transcript || client proof).
std::array<std::uint8_t, kProofBytes> server_proof(const security::SecretBytes& password,
                                                   const Hello& hello,
                                                   std::string_view channel_binding);
// Both proofs from one transcript (what each side computes per session).
struct Proofs {
  std::array<std::uint8_t, kProofBytes> client{};
  std::array<std::uint8_t, kProofBytes> server{};  // covers `client`
};
// The transcript is made of the messages' own bytes, so neither side copies
// it: version 1, T = `hello_bytes` (the HELLO up to its proof:
// HelloView::signed_bytes) || str16(cb); version 2, T2 = `hello_bytes` (the
// whole HELLO) || `server_nonce` || str16(cb); version 3 as version 1 with
// a ticket, as version 2 when challenged. `password` is the token's
// password prepared for HMAC (IssuedToken::password_key() on the server).
Proofs proofs(const security::HmacSha256Key& password, std::string_view hello_bytes,
              std::string_view server_nonce, std::string_view channel_binding);
// A fresh nonce from the CSPRNG (drawn in batches); false if it fails.
bool next_nonce(std::array<std::uint8_t, kNonceBytes>* out);
// AUTH_SUCCESS's message: version byte + server proof.
std::string encode_success(const std::array<std::uint8_t, kProofBytes>& proof,
                           std::uint8_t version = kVersion);

// A complete version 1 HELLO for token, made at time `now`.
Hello make_hello(const security::Token& token, std::string_view channel_binding,
                 security::TokenTime now);

}  // namespace token_wire

class TokenServerMechanism final : public ServerMechanism {
 public:
  TokenServerMechanism(std::shared_ptr<const security::SecretManager> secrets,
                       TokenServerOptions options = {});
  std::string_view name() const noexcept override { return kTokenMechanism; }
  MechanismTraits traits() const noexcept override { return kTokenTraits; }
  // Plaintext tcp:// (no channel binding, not unix://) only with
  // allow_plaintext: FAILED_PRECONDITION `PLAINTEXT` otherwise.
  Status accepts(const ChannelInfo& channel) const override;
  std::unique_ptr<ServerAuthSession> start(const ChannelInfo& channel) override;

  const TokenServerOptions& options() const noexcept { return options_; }
  const security::SecretManager& secrets() const noexcept { return *secrets_; }
  TokenReplayCache& replay_cache() noexcept { return replay_; }
  TokenTickets& tickets() noexcept { return tickets_; }
  const security::Clock& clock() const noexcept { return *clock_; }

 private:
  std::shared_ptr<const security::SecretManager> secrets_;
  const TokenServerOptions options_;
  std::shared_ptr<const security::Clock> clock_;
  TokenReplayCache replay_;
  TokenTickets tickets_;
};

struct TokenClientOptions {
  // Credentials file; empty: CredentialsFile::locate("") ($AUTHRPC_TOKEN_FILE).
  std::string token_file;
  // The service to look up; empty: the endpoint URI the client connects to.
  std::string service;
  // A token to use instead of the file (programs that hold one in memory).
  std::optional<security::Token> token;
  std::shared_ptr<const security::Clock> clock;  // null: SystemClock
  // Over plaintext tcp://, speak version 3: keep the session tickets the
  // server gives and use them (one round trip instead of two, where the
  // server issues tickets: tokens.session_tickets). Off (the default):
  // version 2, which servers older than version 3 speak too (they refuse a
  // version 3 HELLO as MALFORMED).
  bool tickets = false;
};

class TokenClientMechanism final : public ClientMechanism {
 public:
  explicit TokenClientMechanism(TokenClientOptions options);
  std::string_view name() const noexcept override { return kTokenMechanism; }
  MechanismTraits traits() const noexcept override { return kTokenTraits; }
  std::unique_ptr<ClientAuthSession> start(const ChannelInfo& channel) override;

  // The token this mechanism would present for `service`: the given one, or
  // the file's (re-read when the file changes). NOT_FOUND-typed errors map
  // to UNAUTHENTICATED.
  Result<security::Token> find_token(const std::string& service);

  // A token with its password prepared for HMAC and its HELLO's fixed head
  // (version, identifier, service) encoded once, shared by the sessions
  // that present it: a session copies neither (defined in the .cc).
  struct Prepared;

 private:
  TokenClientOptions options_;
  std::shared_ptr<const security::Clock> clock_;
  std::mutex mu_;  // guards the cache below
  struct FileStamp {
    std::string path;
    std::int64_t mtime_ns = -1;
    std::int64_t size = -1;
    std::uint64_t inode = 0;
    bool operator==(const FileStamp&) const = default;
  };
  // The token for `service`, as find_token() finds it.
  Result<std::shared_ptr<const Prepared>> find_prepared(const std::string& service);

  std::shared_ptr<const Prepared> given_;  // options_.token, prepared
  FileStamp cached_stamp_;
  std::vector<std::shared_ptr<const Prepared>> cached_tokens_;
};

}  // namespace authrpc
