#include "authrpc/auth/token_mechanism.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <mutex>

#include <nlohmann/json.hpp>

#include "authrpc/auth/mechanism_options.h"
#include "authrpc/auth/mechanism_registry.h"
#include "authrpc/security/byte_codec.h"
#include "authrpc/security/credentials_file.h"
#include "authrpc/security/hmac_sha256.h"
#include "authrpc/security/token_errors.h"

namespace authrpc {

using security::ByteReader;
using security::ByteWriter;
using security::SecretBytes;
using security::TokenErrc;
using security::token_status;
using security::TokenUse;

namespace token_wire {
namespace {

constexpr std::string_view kClientLabel{"authrpc token client\0", 21};
constexpr std::string_view kServerLabel{"authrpc token server\0", 21};

std::string_view view(const std::uint8_t* p, std::size_t n) {
  return {reinterpret_cast<const char*>(p), n};
}

// The bytes both proofs cover (docs/PROTOCOL.md): everything in HELLO but
// the proof, plus the channel binding.
std::string transcript(const Hello& h, std::string_view channel_binding) {
  std::string out;
  out.reserve(64 + h.identifier.size() + h.service.size() + channel_binding.size());
  ByteWriter w(&out);
  w.u8(kVersion);
  w.str16(h.identifier);
  w.str16(h.service);
  w.raw(view(h.nonce.data(), h.nonce.size()));
  w.i64(h.time_ms);
  w.str16(channel_binding);
  return out;
}

// Version 2: both nonces, no clock (the server's nonce makes it fresh).
std::string transcript(const ChallengeHello& h, const Challenge& c, std::string_view channel_binding) {
  std::string out;
  out.reserve(64 + h.identifier.size() + h.service.size() + channel_binding.size());
  ByteWriter w(&out);
  w.u8(kChallengeVersion);
  w.str16(h.identifier);
  w.str16(h.service);
  w.raw(view(h.client_nonce.data(), h.client_nonce.size()));
  w.raw(view(c.server_nonce.data(), c.server_nonce.size()));
  w.str16(channel_binding);
  return out;
}

std::array<std::uint8_t, kProofBytes> hmac(const SecretBytes& key, std::string_view label,
                                           std::string_view a, std::string_view b = {}) {
  static_assert(kProofBytes == security::kHmacSha256Bytes);
  std::array<std::uint8_t, kProofBytes> out{};
  if (!security::hmac_sha256(key.span(), {label, a, b}, &out)) {
    // Never a usable proof: random bytes match nothing.
    RAND_bytes(out.data(), static_cast<int>(out.size()));
  }
  return out;
}

// Client nonces come from the CSPRNG 64 at a time: one RAND_bytes call
// costs about as much as the two HMACs of a HELLO. Nonces are not secret
// (they travel in the clear); each is handed out once.
class NonceBatch {
 public:
  bool next(std::array<std::uint8_t, kNonceBytes>* out) {
    std::lock_guard lock(mu_);
    if (used_ == kNonces) {
      if (RAND_bytes(buffer_.data(), static_cast<int>(buffer_.size())) != 1) return false;
      used_ = 0;
    }
    std::memcpy(out->data(), buffer_.data() + used_ * kNonceBytes, kNonceBytes);
    ++used_;
    return true;
  }

 private:
  static constexpr std::size_t kNonces = 64;
  std::mutex mu_;
  std::array<std::uint8_t, kNonces * kNonceBytes> buffer_{};
  std::size_t used_ = kNonces;
};

NonceBatch& nonces() {
  static NonceBatch batch;
  return batch;
}

}  // namespace

bool next_nonce(std::array<std::uint8_t, kNonceBytes>* out) { return nonces().next(out); }

std::string Hello::encode() const {
  std::string out;
  ByteWriter w(&out);
  w.u8(kVersion);
  w.str16(identifier);
  w.str16(service);
  w.raw(view(nonce.data(), nonce.size()));
  w.i64(time_ms);
  w.raw(view(proof.data(), proof.size()));
  return out;
}

std::optional<Hello> Hello::decode(std::string_view bytes) {
  ByteReader r(bytes);
  std::uint8_t version = 0;
  std::string_view identifier, service, nonce, proof;
  Hello h;
  if (!r.u8(&version) || version != kVersion) return std::nullopt;
  if (!r.str16(&identifier, security::Token::kMaxIdentifierBytes) || identifier.empty()) {
    return std::nullopt;
  }
  if (!r.str16(&service, kMaxServiceBytes) || !r.raw(kNonceBytes, &nonce) || !r.i64(&h.time_ms) ||
      !r.raw(kProofBytes, &proof) || !r.at_end()) {
    return std::nullopt;
  }
  h.identifier = std::string(identifier);
  h.service = std::string(service);
  std::memcpy(h.nonce.data(), nonce.data(), kNonceBytes);
  std::memcpy(h.proof.data(), proof.data(), kProofBytes);
  return h;
}

std::string ChallengeHello::encode() const {
  std::string out;
  ByteWriter w(&out);
  w.u8(kChallengeVersion);
  w.str16(identifier);
  w.str16(service);
  w.raw(view(client_nonce.data(), client_nonce.size()));
  return out;
}

std::optional<ChallengeHello> ChallengeHello::decode(std::string_view bytes) {
  ByteReader r(bytes);
  std::uint8_t version = 0;
  std::string_view identifier, service, nonce;
  if (!r.u8(&version) || version != kChallengeVersion) return std::nullopt;
  if (!r.str16(&identifier, security::Token::kMaxIdentifierBytes) || identifier.empty()) {
    return std::nullopt;
  }
  if (!r.str16(&service, kMaxServiceBytes) || !r.raw(kNonceBytes, &nonce) || !r.at_end()) {
    return std::nullopt;
  }
  ChallengeHello h;
  h.identifier = std::string(identifier);
  h.service = std::string(service);
  std::memcpy(h.client_nonce.data(), nonce.data(), kNonceBytes);
  return h;
}

namespace {

// Version byte + fixed-size bytes: the shape of Challenge and Response.
template <std::size_t N>
std::string encode_fixed(const std::array<std::uint8_t, N>& bytes) {
  std::string out(1, static_cast<char>(kChallengeVersion));
  out.append(view(bytes.data(), N));
  return out;
}

template <std::size_t N>
bool decode_fixed(std::string_view in, std::array<std::uint8_t, N>* out) {
  if (in.size() != 1 + N || static_cast<std::uint8_t>(in[0]) != kChallengeVersion) return false;
  std::memcpy(out->data(), in.data() + 1, N);
  return true;
}

}  // namespace

std::string Challenge::encode() const { return encode_fixed(server_nonce); }

std::optional<Challenge> Challenge::decode(std::string_view bytes) {
  Challenge c;
  if (!decode_fixed(bytes, &c.server_nonce)) return std::nullopt;
  return c;
}

std::string Response::encode() const { return encode_fixed(proof); }

std::optional<Response> Response::decode(std::string_view bytes) {
  Response r;
  if (!decode_fixed(bytes, &r.proof)) return std::nullopt;
  return r;
}

std::array<std::uint8_t, kProofBytes> client_proof(const SecretBytes& password, const Hello& hello,
                                                   std::string_view channel_binding) {
  return hmac(password, kClientLabel, transcript(hello, channel_binding));
}

std::array<std::uint8_t, kProofBytes> server_proof(const SecretBytes& password, const Hello& hello,
                                                   std::string_view channel_binding) {
  return hmac(password, kServerLabel, transcript(hello, channel_binding),
              view(hello.proof.data(), hello.proof.size()));
}

std::string encode_success(const std::array<std::uint8_t, kProofBytes>& proof,
                           std::uint8_t version) {
  std::string out;
  out.push_back(static_cast<char>(version));
  out.append(view(proof.data(), proof.size()));
  return out;
}

Hello make_hello(const security::Token& token, std::string_view channel_binding,
                 security::TokenTime now) {
  Hello h;
  h.identifier = token.identifier;
  h.service = token.service.substr(0, kMaxServiceBytes);
  if (!next_nonce(&h.nonce)) h.nonce.fill(0);
  h.time_ms = now.time_since_epoch().count();
  h.proof = client_proof(token.password, h, channel_binding);
  return h;
}

Proofs proofs(const SecretBytes& password, const Hello& hello, std::string_view channel_binding) {
  const std::string t = transcript(hello, channel_binding);
  Proofs out;
  out.client = hmac(password, kClientLabel, t);
  out.server = hmac(password, kServerLabel, t, view(out.client.data(), out.client.size()));
  return out;
}

Proofs proofs(const SecretBytes& password, const ChallengeHello& hello, const Challenge& challenge,
              std::string_view channel_binding) {
  const std::string t = transcript(hello, challenge, channel_binding);
  Proofs out;
  out.client = hmac(password, kClientLabel, t);
  out.server = hmac(password, kServerLabel, t, view(out.client.data(), out.client.size()));
  return out;
}

}  // namespace token_wire

namespace {

Status auth_failed(std::string what) {
  return {Errc::kAuthenticationFailed, "token: " + std::move(what)};
}

// The one-message exchange is safe where a captured HELLO is useless
// elsewhere (a TLS channel binding) or cannot be captured by a stranger
// (unix://, same host). Anything else (plaintext tcp://, or a TLS channel
// whose exporter failed) takes the challenge. Both sides decide alike.
bool one_message_allowed(const ChannelInfo& channel) {
  return !channel.channel_binding.empty() || channel.scheme == Endpoint::Scheme::kUnix;
}

// |a − b| without overflow: the difference of two int64 fits in a uint64.
std::uint64_t distance(std::int64_t a, std::int64_t b) {
  return a >= b ? static_cast<std::uint64_t>(a) - static_cast<std::uint64_t>(b)
                : static_cast<std::uint64_t>(b) - static_cast<std::uint64_t>(a);
}

// --- server ------------------------------------------------------------------

class TokenServerSession final : public ServerAuthSession {
 public:
  TokenServerSession(TokenServerMechanism& mechanism, const ChannelInfo& channel)
      : mechanism_(mechanism), channel_binding_(channel.channel_binding),
        one_message_(one_message_allowed(channel)) {}

  asio::awaitable<ServerStep> step(std::string_view client_message) override {
    if (challenged_) co_return respond(client_message);
    co_return hello(client_message);
  }

 private:
  ServerStep hello(std::string_view client_message) {
    if (!one_message_ && !mechanism_.options().allow_plaintext) {
      return ServerStep::failure(
          {Errc::kFailedPrecondition,
           "token: PLAINTEXT: this server refuses delegation tokens over plaintext tcp:// (no "
           "TLS: the exchange and the calls could be watched and reused); connect with tls:// "
           "or unix://, or the server must set tokens.allow_plaintext"});
    }
    const std::uint8_t version =
        client_message.empty() ? 0 : static_cast<std::uint8_t>(client_message.front());
    if (version == token_wire::kChallengeVersion) return challenge(client_message);
    if (!one_message_ && version == token_wire::kVersion) {
      return ServerStep::failure(
          {Errc::kFailedPrecondition,
           "token: CHALLENGE_REQUIRED: over plaintext tcp:// this server accepts only the "
           "challenge exchange (HELLO version 2), which this client does not speak; update "
           "the client or connect with tls://"});
    }
    return one_message(client_message);
  }

  // Version 1: HELLO → AUTH_SUCCESS.
  ServerStep one_message(std::string_view client_message) {
    auto hello = token_wire::Hello::decode(client_message);
    if (!hello) return ServerStep::failure(auth_failed("MALFORMED: malformed token HELLO"));
    if (Status wrong = check_service(hello->service); !wrong.ok()) return ServerStep::failure(wrong);
    const std::int64_t now = mechanism_.clock().now().time_since_epoch().count();
    const auto skew = static_cast<std::uint64_t>(mechanism_.options().max_clock_skew.count());
    if (const std::uint64_t off = distance(hello->time_ms, now); off > skew) {
      return ServerStep::failure(auth_failed(
          "CLOCK_SKEW: the client's clock is " + std::to_string(off) + " ms " +
          (hello->time_ms > now ? "ahead of" : "behind") + " the server's (at most " +
          std::to_string(skew) + " ms allowed)"));
    }
    auto secret = mechanism_.secrets().retrieve_password(hello->identifier);
    if (!secret.ok()) {
      return ServerStep::failure(token_status(secret.status(), TokenUse::kAuthentication));
    }
    // Both proofs from one transcript; the server's covers the client's
    // expected proof, which equals the received one when it is used.
    const auto proofs = token_wire::proofs(secret->password, *hello, channel_binding_);
    if (CRYPTO_memcmp(proofs.client.data(), hello->proof.data(), proofs.client.size()) != 0) {
      return ServerStep::failure(forged(*secret));
    }
    // A bound proof covers this connection's TLS exporter: it cannot arrive
    // on another connection, so only an unbound one (unix://) is remembered.
    if (channel_binding_.empty()) {
      const std::string_view proof(reinterpret_cast<const char*>(hello->proof.data()),
                                   hello->proof.size());
      switch (mechanism_.replay_cache().check_and_insert(
          now, hello->time_ms, secret->identifier.sequence_number, proof)) {
        case TokenReplayCache::Verdict::kFresh:
          break;
        case TokenReplayCache::Verdict::kReplay:
          return ServerStep::failure(auth_failed("REPLAY: this HELLO was presented before"));
        case TokenReplayCache::Verdict::kTooOld:
          return ServerStep::failure(
              {Errc::kUnavailable,
               "token: REPLAY_WINDOW: this token presented more HELLOs than the server's replay "
               "cache keeps for one token, and this one is older than what it can vouch for; "
               "retry with a fresh HELLO"});
      }
    }
    return ServerStep::success(identity(*secret),
                               token_wire::encode_success(proofs.server, token_wire::kVersion));
  }

  // Version 2, first half: HELLO → AUTH_CHALLENGE with a fresh server nonce.
  ServerStep challenge(std::string_view client_message) {
    auto hello = token_wire::ChallengeHello::decode(client_message);
    if (!hello) return ServerStep::failure(auth_failed("MALFORMED: malformed token HELLO"));
    if (Status wrong = check_service(hello->service); !wrong.ok()) return ServerStep::failure(wrong);
    // Refuse an unusable token now rather than after a round trip.
    auto secret = mechanism_.secrets().retrieve_password(hello->identifier);
    if (!secret.ok()) {
      return ServerStep::failure(token_status(secret.status(), TokenUse::kAuthentication));
    }
    if (!token_wire::next_nonce(&challenge_.server_nonce)) {
      return ServerStep::failure({Errc::kInternal, "token: the CSPRNG failed"});
    }
    challenge_hello_ = std::move(*hello);
    secret_ = std::move(*secret);
    challenged_ = true;
    return ServerStep::challenge(challenge_.encode());
  }

  // Version 2, second half: AUTH_RESPONSE → AUTH_SUCCESS.
  ServerStep respond(std::string_view client_message) {
    auto response = token_wire::Response::decode(client_message);
    if (!response) return ServerStep::failure(auth_failed("MALFORMED: malformed token response"));
    const auto proofs =
        token_wire::proofs(secret_->password, challenge_hello_, challenge_, channel_binding_);
    if (CRYPTO_memcmp(proofs.client.data(), response->proof.data(), proofs.client.size()) != 0) {
      return ServerStep::failure(forged(*secret_));
    }
    return ServerStep::success(
        identity(*secret_), token_wire::encode_success(proofs.server, token_wire::kChallengeVersion));
  }

  Status check_service(const std::string& service) const {
    const auto& services = mechanism_.options().services;
    if (services.empty() || std::find(services.begin(), services.end(), service) != services.end()) {
      return {};
    }
    return auth_failed("WRONG_SERVICE: the token is for service '" + service + "', not this server");
  }

  Status forged(const security::TokenSecret& secret) const {
    return auth_failed("FORGED: wrong proof for " + secret.identifier.describe() +
                       (channel_binding_.empty() ? std::string() : " (or made for another channel)"));
  }

  Identity identity(const security::TokenSecret& secret) const {
    Identity id;
    id.user = secret.identifier.owner;
    id.principal = secret.identifier.owner;
    if (auto at = id.principal.rfind('@'); at != std::string::npos) {
      id.realm = id.principal.substr(at + 1);
    }
    if (!secret.identifier.real_user.empty()) id.real_user = secret.identifier.real_user;
    return id;
  }

  TokenServerMechanism& mechanism_;
  std::string channel_binding_;
  const bool one_message_;
  // Between AUTH_CHALLENGE and AUTH_RESPONSE (version 2).
  bool challenged_ = false;
  token_wire::ChallengeHello challenge_hello_;
  token_wire::Challenge challenge_;
  std::optional<security::TokenSecret> secret_;
};

// --- client ------------------------------------------------------------------

class TokenClientSession final : public ClientAuthSession {
 public:
  TokenClientSession(Result<security::Token> token, const ChannelInfo& channel,
                     security::TokenTime now)
      : token_(std::move(token)), channel_binding_(channel.channel_binding),
        one_message_(one_message_allowed(channel)), now_(now) {}

  asio::awaitable<ClientStep> initial() override {
    if (!token_.ok()) co_return ClientStep::failure(token_.status());
    if (!one_message_) {
      hello2_.identifier = token_->identifier;
      hello2_.service = token_->service.substr(0, token_wire::kMaxServiceBytes);
      if (!token_wire::next_nonce(&hello2_.client_nonce)) {
        co_return ClientStep::failure({Errc::kInternal, "token: the CSPRNG failed"});
      }
      co_return ClientStep::send(hello2_.encode(), false);
    }
    token_wire::Hello hello;
    hello.identifier = std::move(token_->identifier);
    hello.service = token_->service.substr(0, token_wire::kMaxServiceBytes);
    if (!token_wire::next_nonce(&hello.nonce)) {
      co_return ClientStep::failure({Errc::kInternal, "token: the CSPRNG failed"});
    }
    hello.time_ms = now_.time_since_epoch().count();
    const auto proofs = token_wire::proofs(token_->password, hello, channel_binding_);
    hello.proof = proofs.client;
    expected_ = proofs.server;
    token_ = Status(Errc::kInternal, "token: already used");  // wipes the password copy
    co_return ClientStep::send(hello.encode(), true);
  }

  asio::awaitable<ClientStep> challenge(std::string_view server_message) override {
    if (one_message_ || !token_.ok()) {
      co_return ClientStep::failure({Errc::kProtocolError, "token: unexpected server challenge"});
    }
    auto challenge = token_wire::Challenge::decode(server_message);
    if (!challenge) {
      co_return ClientStep::failure({Errc::kProtocolError, "token: malformed server challenge"});
    }
    const auto proofs = token_wire::proofs(token_->password, hello2_, *challenge, channel_binding_);
    expected_ = proofs.server;
    token_ = Status(Errc::kInternal, "token: already used");  // wipes the password copy
    co_return ClientStep::send(token_wire::Response{proofs.client}.encode(), true);
  }

  asio::awaitable<Status> complete(std::string_view server_final_message) override {
    const std::uint8_t version = one_message_ ? token_wire::kVersion : token_wire::kChallengeVersion;
    if (server_final_message.size() != 1 + token_wire::kProofBytes ||
        static_cast<std::uint8_t>(server_final_message[0]) != version) {
      co_return auth_failed("the server's final message is malformed");
    }
    // Before the challenge there is nothing the server could have proved.
    if (!one_message_ && token_.ok()) co_return auth_failed("the server skipped the challenge");
    if (CRYPTO_memcmp(server_final_message.data() + 1, expected_.data(), expected_.size()) != 0) {
      co_return auth_failed(
          "the server did not prove it knows the token's password (not the server that issued it?)");
    }
    co_return Status();
  }

 private:
  Result<security::Token> token_;
  std::string channel_binding_;
  const bool one_message_;
  security::TokenTime now_;
  token_wire::ChallengeHello hello2_;  // version 2 only
  std::array<std::uint8_t, token_wire::kProofBytes> expected_{};
};

}  // namespace

TokenServerMechanism::TokenServerMechanism(std::shared_ptr<const security::SecretManager> secrets,
                                           TokenServerOptions options)
    : secrets_(std::move(secrets)), options_(std::move(options)),
      clock_(secrets_->options().clock ? secrets_->options().clock
                                       : std::make_shared<security::SystemClock>()),
      replay_(options_.max_clock_skew.count(), options_.replay_cache_capacity,
              options_.replay_cache_per_token) {}

std::unique_ptr<ServerAuthSession> TokenServerMechanism::start(const ChannelInfo& channel) {
  return std::make_unique<TokenServerSession>(*this, channel);
}

TokenClientMechanism::TokenClientMechanism(TokenClientOptions options)
    : options_(std::move(options)),
      clock_(options_.clock ? options_.clock : std::make_shared<security::SystemClock>()) {}

Result<security::Token> TokenClientMechanism::find_token(const std::string& service) {
  if (options_.token) {
    if (!options_.service.empty() || options_.token->service == service) return *options_.token;
    return Status(Errc::kUnauthenticated, "token: NOT_FOUND: the token given is for service '" +
                                              options_.token->service + "', not " + service);
  }
  const std::string path = security::CredentialsFile::locate(options_.token_file);
  if (path.empty()) {
    return Status(Errc::kUnauthenticated,
                  std::string("token: no credentials file (set ") + security::kTokenFileEnv +
                      " or the token_file option)");
  }
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    return token_status(security::io_error("stat " + path, errno), TokenUse::kAuthentication);
  }
  FileStamp stamp{path, static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec,
                  static_cast<std::int64_t>(st.st_size), static_cast<std::uint64_t>(st.st_ino)};
  std::lock_guard lock(mu_);
  if (!(stamp == cached_stamp_)) {
    auto file = security::CredentialsFile::read(path);
    if (!file.ok()) return token_status(file.status(), TokenUse::kAuthentication);
    cached_tokens_ = file->tokens();
    cached_stamp_ = stamp;
  }
  for (const auto& t : cached_tokens_) {
    if (t.service == service) return t;
  }
  return Status(Errc::kUnauthenticated, "token: NOT_FOUND: no token for service " + service +
                                            " in " + path + " (authrpc token fetch)");
}

std::unique_ptr<ClientAuthSession> TokenClientMechanism::start(const ChannelInfo& channel) {
  const std::string service = options_.service.empty() ? channel.server_uri : options_.service;
  return std::make_unique<TokenClientSession>(find_token(service), channel, clock_->now());
}

MechanismFlag token_file_flag() {
  return {"--token-file", "token_file",
          "F  credentials file holding a token for --server (default: AUTHRPC_TOKEN_FILE)", true};
}

void register_token(MechanismRegistry& registry) {
  const std::string name(kTokenMechanism);
  registry.register_token_server(
      name,
      [](const nlohmann::json& json,
         const DelegationTokenHost& tokens) -> Result<std::shared_ptr<ServerMechanism>> {
        if (json.is_object() && !json.empty()) {
          return Status(Errc::kConfigError,
                        "token: the token mechanism's options live in the 'tokens' section");
        }
        return std::shared_ptr<ServerMechanism>(
            std::make_shared<TokenServerMechanism>(tokens.secrets, tokens.options));
      },
      kTokenTraits);
  registry.register_client(
      name,
      [](const nlohmann::json& json) -> Result<std::shared_ptr<ClientMechanism>> {
        MechanismOptions o(kTokenMechanism, json);
        TokenClientOptions t;
        for (Status s : {o.check({"token_file", "service"}), o.read("token_file", t.token_file),
                         o.read("service", t.service)}) {
          if (!s.ok()) return s;
        }
        return std::shared_ptr<ClientMechanism>(std::make_shared<TokenClientMechanism>(std::move(t)));
      },
      kTokenTraits, {token_file_flag()});
}

}  // namespace authrpc
