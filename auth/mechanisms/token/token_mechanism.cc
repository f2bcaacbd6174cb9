#include "authrpc/auth/mechanisms/token/token_mechanism.h"

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

// One proof: HMAC-SHA256(password, label || T [|| client proof]) with T
// given as the message bytes it is made of (proofs() in the header).
std::array<std::uint8_t, kProofBytes> proof(const security::HmacSha256Key& password,
                                            std::string_view label, std::string_view hello_bytes,
                                            std::string_view server_nonce,
                                            std::string_view channel_binding,
                                            std::string_view client_proof = {}) {
  static_assert(kProofBytes == security::kHmacSha256Bytes);
  const char cb_length[2] = {static_cast<char>((channel_binding.size() >> 8) & 0xff),
                             static_cast<char>(channel_binding.size() & 0xff)};
  std::array<std::uint8_t, kProofBytes> out{};
  if (!password.mac({label, hello_bytes, server_nonce, std::string_view(cb_length, 2),
                     channel_binding, client_proof},
                    &out)) {
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

namespace {

// The head every version's HELLO starts with: the version byte, str16
// identifier (not empty), str16 service, the client nonce.
bool read_head(ByteReader& r, std::uint8_t version, std::string_view* identifier,
               std::string_view* service, std::string_view* nonce) {
  std::uint8_t v = 0;
  return r.u8(&v) && v == version &&
         r.str16(identifier, security::Token::kMaxIdentifierBytes) && !identifier->empty() &&
         r.str16(service, kMaxServiceBytes) && r.raw(kNonceBytes, nonce);
}

}  // namespace

std::optional<HelloView> HelloView::decode(std::string_view bytes) {
  ByteReader r(bytes);
  HelloView h;
  if (!read_head(r, kVersion, &h.identifier, &h.service, &h.nonce) || !r.i64(&h.time_ms) ||
      !r.raw(kProofBytes, &h.proof) || !r.at_end()) {
    return std::nullopt;
  }
  h.signed_bytes = bytes.substr(0, bytes.size() - kProofBytes);
  return h;
}

std::optional<Hello> Hello::decode(std::string_view bytes) {
  auto v = HelloView::decode(bytes);
  if (!v) return std::nullopt;
  Hello h;
  h.identifier = std::string(v->identifier);
  h.service = std::string(v->service);
  std::memcpy(h.nonce.data(), v->nonce.data(), kNonceBytes);
  h.time_ms = v->time_ms;
  std::memcpy(h.proof.data(), v->proof.data(), kProofBytes);
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

namespace {

// A version 2 HELLO's fields, as views into it.
bool parse_challenge_hello(std::string_view bytes, std::string_view* identifier,
                           std::string_view* service, std::string_view* nonce) {
  ByteReader r(bytes);
  return read_head(r, kChallengeVersion, identifier, service, nonce) && r.at_end();
}

}  // namespace

std::optional<ChallengeHello> ChallengeHello::decode(std::string_view bytes) {
  std::string_view identifier, service, nonce;
  if (!parse_challenge_hello(bytes, &identifier, &service, &nonce)) return std::nullopt;
  ChallengeHello h;
  h.identifier = std::string(identifier);
  h.service = std::string(service);
  std::memcpy(h.client_nonce.data(), nonce.data(), kNonceBytes);
  return h;
}

namespace {

// Version byte + fixed-size bytes: the shape of Challenge and Response.
template <std::size_t N>
std::string encode_fixed(std::uint8_t version, const std::array<std::uint8_t, N>& bytes) {
  std::string out(1, static_cast<char>(version));
  out.append(view(bytes.data(), N));
  return out;
}

template <std::size_t N>
bool decode_fixed(std::string_view in, std::uint8_t* version, std::array<std::uint8_t, N>* out) {
  if (in.size() != 1 + N) return false;
  *version = static_cast<std::uint8_t>(in[0]);
  if (*version != kChallengeVersion && *version != kTicketVersion) return false;
  std::memcpy(out->data(), in.data() + 1, N);
  return true;
}

}  // namespace

std::string Challenge::encode() const { return encode_fixed(version, server_nonce); }

std::optional<Challenge> Challenge::decode(std::string_view bytes) {
  Challenge c;
  if (!decode_fixed(bytes, &c.version, &c.server_nonce)) return std::nullopt;
  return c;
}

std::string Response::encode() const { return encode_fixed(version, proof); }

std::optional<Response> Response::decode(std::string_view bytes) {
  Response r;
  if (!decode_fixed(bytes, &r.version, &r.proof)) return std::nullopt;
  return r;
}

std::optional<TicketHelloView> TicketHelloView::decode(std::string_view bytes) {
  ByteReader r(bytes);
  TicketHelloView h;
  std::uint8_t ticket_bytes = 0;
  if (!read_head(r, kTicketVersion, &h.identifier, &h.service, &h.nonce) ||
      !r.u8(&ticket_bytes) || ticket_bytes > kMaxTicketBytes || !r.raw(ticket_bytes, &h.ticket)) {
    return std::nullopt;
  }
  if (ticket_bytes > 0) {
    h.signed_bytes = bytes.substr(0, bytes.size() - r.remaining());
    if (!r.raw(kProofBytes, &h.proof)) return std::nullopt;
  }
  if (!r.at_end()) return std::nullopt;
  return h;
}

std::string TicketSuccess::encode() const {
  std::string out;
  ByteWriter w(&out);
  w.u8(kTicketVersion);
  w.raw(view(proof.data(), proof.size()));
  w.u32(lifetime_ms);
  w.u8(static_cast<std::uint8_t>(std::min(ticket.size(), kMaxTicketBytes)));
  w.raw(std::string_view(ticket).substr(0, kMaxTicketBytes));
  return out;
}

std::optional<TicketSuccess> TicketSuccess::decode(std::string_view bytes) {
  ByteReader r(bytes);
  std::uint8_t version = 0;
  std::string_view proof, ticket;
  std::uint8_t ticket_bytes = 0;
  TicketSuccess s;
  if (!r.u8(&version) || version != kTicketVersion || !r.raw(kProofBytes, &proof) ||
      !r.u32(&s.lifetime_ms) || !r.u8(&ticket_bytes) || ticket_bytes > kMaxTicketBytes ||
      !r.raw(ticket_bytes, &ticket) || !r.at_end()) {
    return std::nullopt;
  }
  std::memcpy(s.proof.data(), proof.data(), kProofBytes);
  s.ticket = std::string(ticket);
  return s;
}

std::array<std::uint8_t, kProofBytes> client_proof(const SecretBytes& password, const Hello& hello,
                                                   std::string_view channel_binding) {
  const std::string bytes = hello.encode();
  return proof(security::HmacSha256Key(password.span()), kClientLabel,
               std::string_view(bytes).substr(0, bytes.size() - kProofBytes), {}, channel_binding);
}

std::array<std::uint8_t, kProofBytes> server_proof(const SecretBytes& password, const Hello& hello,
                                                   std::string_view channel_binding) {
  const std::string bytes = hello.encode();
  return proof(security::HmacSha256Key(password.span()), kServerLabel,
               std::string_view(bytes).substr(0, bytes.size() - kProofBytes), {}, channel_binding,
               view(hello.proof.data(), hello.proof.size()));
}

std::string encode_success(const std::array<std::uint8_t, kProofBytes>& proof,
                           std::uint8_t version) {
  std::string out;
  out.reserve(1 + proof.size());
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

Proofs proofs(const security::HmacSha256Key& password, std::string_view hello_bytes,
              std::string_view server_nonce, std::string_view channel_binding) {
  Proofs out;
  out.client = proof(password, kClientLabel, hello_bytes, server_nonce, channel_binding);
  out.server = proof(password, kServerLabel, hello_bytes, server_nonce, channel_binding,
                     view(out.client.data(), out.client.size()));
  return out;
}

}  // namespace token_wire

namespace {

// The session tickets one token holds (version 3), by endpoint URI: at most
// kPerEndpoint per endpoint (as many as the client's concurrent sessions to
// it, at most) and kEndpoints endpoints; newest first, as the newest are
// the least likely to have left the server's window. Thread-safe.
class TicketPool {
 public:
  std::optional<std::string> take(std::string_view endpoint, std::int64_t now_ms) {
    std::lock_guard lock(mu_);
    for (auto& e : entries_) {
      if (e.endpoint != endpoint) continue;
      while (!e.tickets.empty()) {
        auto [expires, ticket] = std::move(e.tickets.back());
        e.tickets.pop_back();
        if (expires > now_ms) return std::move(ticket);
      }
      return std::nullopt;
    }
    return std::nullopt;
  }

  void drop(std::string_view endpoint) {
    std::lock_guard lock(mu_);
    std::erase_if(entries_, [&](const Entry& e) { return e.endpoint == endpoint; });
  }

  void put(std::string_view endpoint, std::string ticket, std::int64_t expires_ms) {
    std::lock_guard lock(mu_);
    auto it = std::find_if(entries_.begin(), entries_.end(),
                           [&](const Entry& e) { return e.endpoint == endpoint; });
    if (it == entries_.end()) {
      if (entries_.size() == kEndpoints) entries_.erase(entries_.begin());
      it = entries_.insert(entries_.end(), Entry{std::string(endpoint), {}});
    }
    if (it->tickets.size() == kPerEndpoint) it->tickets.erase(it->tickets.begin());
    it->tickets.emplace_back(expires_ms, std::move(ticket));
  }

 private:
  static constexpr std::size_t kPerEndpoint = 64;
  static constexpr std::size_t kEndpoints = 64;
  struct Entry {
    std::string endpoint;
    std::vector<std::pair<std::int64_t, std::string>> tickets;  // (expires, ticket), oldest first
  };
  std::mutex mu_;
  std::vector<Entry> entries_;
};

}  // namespace

struct TokenClientMechanism::Prepared {
  explicit Prepared(security::Token t)
      : token(std::move(t)), key(token.password.span()), hello_head(encode_head(token)) {}

  // Version byte (set per session), str16 identifier, str16 service.
  static std::string encode_head(const security::Token& token) {
    std::string out;
    ByteWriter w(&out);
    w.u8(token_wire::kVersion);
    w.str16(token.identifier);
    w.str16(std::string_view(token.service).substr(0, token_wire::kMaxServiceBytes));
    return out;
  }

  const security::Token token;
  const security::HmacSha256Key key;  // token.password, prepared
  const std::string hello_head;
  // Tickets servers gave for this token (a re-read credentials file makes
  // new Prepared records, so a token no longer held takes its tickets along).
  mutable TicketPool tickets;
};

namespace {

Status auth_failed(std::string what) {
  return {Errc::kAuthenticationFailed, "token: " + std::move(what)};
}

// The one-message exchange is safe where a captured HELLO is useless
// elsewhere (a TLS channel binding) or cannot be captured by a stranger
// (unix://, same host). Anything else (plaintext tcp://, or a TLS channel
// whose exporter failed) takes the challenge. Each side decides from its
// own end; both ends of a real channel see the same (docs/PROTOCOL.md,
// "The `token` mechanism").
bool one_message_allowed(const ChannelInfo& channel) {
  return !channel.channel_binding.empty() || channel.scheme == Endpoint::Scheme::kUnix;
}

// A channel neither bound nor unix:// (plaintext tcp://, or a TLS
// connection without an exporter value) where the server has not opted in.
Status plaintext_refused() {
  return {Errc::kFailedPrecondition,
          "token: PLAINTEXT: this server refuses delegation tokens over plaintext tcp:// (no "
          "TLS channel binding: the exchange and the calls could be watched and reused); connect "
          "with tls:// or unix://, or the server must set tokens.allow_plaintext"};
}

// A peer address without its port ("192.0.2.1:5000" → "192.0.2.1",
// "[2001:db8::1]:5000" → "[2001:db8::1]"): what a session ticket is bound to.
std::string_view host_of(std::string_view peer_address) {
  const auto colon = peer_address.rfind(':');
  return colon == std::string_view::npos ? peer_address : peer_address.substr(0, colon);
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
        client_host_(one_message_allowed(channel) ? std::string_view()
                                                  : host_of(channel.peer_address)),
        one_message_(one_message_allowed(channel)) {}

  asio::awaitable<ServerStep> step(std::string_view client_message) override {
    if (token_) co_return respond(client_message);
    co_return hello(client_message);
  }

 private:
  ServerStep hello(std::string_view client_message) {
    if (!one_message_ && !mechanism_.options().allow_plaintext) {
      return ServerStep::failure(plaintext_refused());
    }
    const std::uint8_t version =
        client_message.empty() ? 0 : static_cast<std::uint8_t>(client_message.front());
    if (version == token_wire::kChallengeVersion) return challenge(client_message);
    if (version == token_wire::kTicketVersion) return ticket_hello(client_message);
    if (!one_message_ && version == token_wire::kVersion) {
      return ServerStep::failure(
          {Errc::kFailedPrecondition,
           "token: CHALLENGE_REQUIRED: over plaintext tcp:// this server accepts only the "
           "challenge exchange (HELLO version 2 or 3), which this client does not speak; update "
           "the client or connect with tls://"});
    }
    return one_message(client_message);
  }

  // Version 1: HELLO → AUTH_SUCCESS. Read in place: the transcript is the
  // HELLO's own bytes, the token the secret manager's own record.
  ServerStep one_message(std::string_view client_message) {
    auto hello = token_wire::HelloView::decode(client_message);
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
    auto token = mechanism_.secrets().retrieve(hello->identifier);
    if (!token.ok()) {
      return ServerStep::failure(token_status(token.status(), TokenUse::kAuthentication));
    }
    const security::IssuedToken& issued = **token;
    // Both proofs from one transcript; the server's covers the client's
    // expected proof, which equals the received one when it is used.
    const auto proofs =
        token_wire::proofs(issued.password_key(), hello->signed_bytes, {}, channel_binding_);
    if (CRYPTO_memcmp(proofs.client.data(), hello->proof.data(), proofs.client.size()) != 0) {
      return ServerStep::failure(forged(issued.id));
    }
    // A bound proof covers this connection's TLS exporter: it cannot arrive
    // on another connection, so only an unbound one (unix://) is remembered.
    if (channel_binding_.empty()) {
      switch (mechanism_.replay_cache().check_and_insert(
          now, hello->time_ms, issued.id.sequence_number, hello->proof)) {
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
    return ServerStep::success(token_identity(issued.id),
                               token_wire::encode_success(proofs.server, token_wire::kVersion));
  }

  // Version 3: with a ticket this server issued, unspent and unexpired,
  // HELLO → AUTH_SUCCESS as version 1 (the ticket stands in for the
  // challenge's nonce); without one, or with any other ticket, the challenge
  // as version 2. A ticket is spent only once the proof over it holds: a
  // stranger who saw it go by cannot spend it first.
  ServerStep ticket_hello(std::string_view client_message) {
    auto hello = token_wire::TicketHelloView::decode(client_message);
    if (!hello) return ServerStep::failure(auth_failed("MALFORMED: malformed token HELLO"));
    if (Status wrong = check_service(hello->service); !wrong.ok()) return ServerStep::failure(wrong);
    auto token = mechanism_.secrets().retrieve(hello->identifier);
    if (!token.ok()) {
      return ServerStep::failure(token_status(token.status(), TokenUse::kAuthentication));
    }
    version_ = token_wire::kTicketVersion;
    if (hello->ticket.empty()) return send_challenge(client_message, std::move(*token));
    const security::IssuedToken& issued = **token;
    const std::int64_t now = mechanism_.clock().now().time_since_epoch().count();
    std::uint64_t counter = 0;
    // Without the client's address (a ChannelInfo an embedder made without
    // one) no ticket is bound to anything: none is taken or issued.
    if (client_host_.empty() ||
        mechanism_.tickets().check(hello->ticket, issued.id.sequence_number, client_host_, now,
                                   &counter) != TokenTickets::Verdict::kValid) {
      return send_challenge(client_message, std::move(*token));
    }
    const auto proofs =
        token_wire::proofs(issued.password_key(), hello->signed_bytes, {}, channel_binding_);
    if (CRYPTO_memcmp(proofs.client.data(), hello->proof.data(), proofs.client.size()) != 0) {
      return ServerStep::failure(forged(issued.id));
    }
    // Spent before (a replay, or a client that kept a copy): challenged, so
    // a recorded HELLO (and calls behind it) never authenticates again.
    if (!mechanism_.tickets().redeem(counter)) return send_challenge(client_message, std::move(*token));
    return ServerStep::success(token_identity(issued.id), success(issued, proofs.server, now));
  }

  // Version 2, first half: HELLO → AUTH_CHALLENGE with a fresh server nonce.
  ServerStep challenge(std::string_view client_message) {
    std::string_view identifier, service, client_nonce;
    if (!token_wire::parse_challenge_hello(client_message, &identifier, &service, &client_nonce)) {
      return ServerStep::failure(auth_failed("MALFORMED: malformed token HELLO"));
    }
    if (Status wrong = check_service(service); !wrong.ok()) return ServerStep::failure(wrong);
    // Refuse an unusable token now rather than after a round trip.
    auto token = mechanism_.secrets().retrieve(identifier);
    if (!token.ok()) {
      return ServerStep::failure(token_status(token.status(), TokenUse::kAuthentication));
    }
    return send_challenge(client_message, std::move(*token));
  }

  ServerStep send_challenge(std::string_view client_message,
                            std::shared_ptr<const security::IssuedToken> token) {
    if (!token_wire::next_nonce(&challenge_.server_nonce)) {
      return ServerStep::failure({Errc::kInternal, "token: the CSPRNG failed"});
    }
    challenge_.version = version_;
    hello_bytes_ = std::string(client_message);  // T2 starts with it
    token_ = std::move(token);
    return ServerStep::challenge(challenge_.encode());
  }

  // Version 2 or 3, second half: AUTH_RESPONSE → AUTH_SUCCESS.
  ServerStep respond(std::string_view client_message) {
    auto response = token_wire::Response::decode(client_message);
    if (!response || response->version != version_) {
      return ServerStep::failure(auth_failed("MALFORMED: malformed token response"));
    }
    const std::string_view server_nonce(reinterpret_cast<const char*>(challenge_.server_nonce.data()),
                                        challenge_.server_nonce.size());
    const auto proofs =
        token_wire::proofs(token_->password_key(), hello_bytes_, server_nonce, channel_binding_);
    if (CRYPTO_memcmp(proofs.client.data(), response->proof.data(), proofs.client.size()) != 0) {
      return ServerStep::failure(forged(token_->id));
    }
    if (version_ == token_wire::kChallengeVersion) {
      return ServerStep::success(
          token_identity(token_->id),
          token_wire::encode_success(proofs.server, token_wire::kChallengeVersion));
    }
    return ServerStep::success(
        token_identity(token_->id),
        success(*token_, proofs.server, mechanism_.clock().now().time_since_epoch().count()));
  }

  // Version 3's AUTH_SUCCESS: the proof and a ticket for the next session.
  std::string success(const security::IssuedToken& token,
                      const std::array<std::uint8_t, token_wire::kProofBytes>& proof,
                      std::int64_t now) {
    token_wire::TicketSuccess out;
    out.proof = proof;
    // Only where a challenge is the alternative: elsewhere a session is one
    // message each way without one.
    std::optional<TokenTickets::Ticket> ticket;
    if (!one_message_ && !client_host_.empty()) {
      ticket = mechanism_.tickets().issue(token.id.sequence_number, client_host_, now);
    }
    if (ticket) {
      out.ticket.assign(reinterpret_cast<const char*>(ticket->data()), ticket->size());
      out.lifetime_ms = static_cast<std::uint32_t>(
          std::min<std::int64_t>(mechanism_.tickets().lifetime().count(), UINT32_MAX));
    }
    return out.encode();
  }

  Status check_service(std::string_view service) const {
    const auto& services = mechanism_.options().services;
    if (services.empty() || std::find(services.begin(), services.end(), service) != services.end()) {
      return {};
    }
    return auth_failed("WRONG_SERVICE: the token is for service '" + std::string(service) +
                       "', not this server");
  }

  Status forged(const security::TokenIdentifier& id) const {
    return auth_failed("FORGED: wrong proof for " + id.describe() +
                       (channel_binding_.empty() ? std::string() : " (or made for another channel)"));
  }

  TokenServerMechanism& mechanism_;
  std::string channel_binding_;
  const std::string client_host_;  // what a ticket is bound to; plaintext tcp only
  const bool one_message_;
  // Between AUTH_CHALLENGE and AUTH_RESPONSE (version 2 or 3): set once challenged.
  std::uint8_t version_ = token_wire::kChallengeVersion;
  std::shared_ptr<const security::IssuedToken> token_;
  std::string hello_bytes_;
  token_wire::Challenge challenge_;
};

// --- client ------------------------------------------------------------------

class TokenClientSession final : public ClientAuthSession {
 public:
  using Prepared = TokenClientMechanism::Prepared;

  TokenClientSession(Result<std::shared_ptr<const Prepared>> token, const ChannelInfo& channel,
                     security::TokenTime now, bool tickets)
      : token_(std::move(token)), channel_binding_(channel.channel_binding),
        now_(now),
        version_(one_message_allowed(channel) ? token_wire::kVersion
                 : tickets                     ? token_wire::kTicketVersion
                                               : token_wire::kChallengeVersion) {
    if (version_ == token_wire::kTicketVersion) endpoint_ = channel.server_uri;
  }

  // A ticket HELLO whose session did not end in our AUTH_SUCCESS check (the
  // server refused the mechanism or the HELLO, the connection broke) may
  // not have been spent by its issuer: send no more of the endpoint's.
  ~TokenClientSession() override {
    if (sent_ticket_ && !completed_ && token_.ok()) (*token_)->tickets.drop(endpoint_);
  }

  asio::awaitable<ClientStep> initial() override {
    if (!token_.ok()) co_return ClientStep::failure(token_.status());
    const Prepared& token = **token_;
    // The HELLO is built in place: its fixed head, then the nonce (and, in
    // version 1, the clock and the proof over the bytes before it; in
    // version 3, a ticket if the token holds one for this endpoint, and the
    // proof over it).
    std::string hello;
    hello.reserve(token.hello_head.size() + token_wire::kNonceBytes + 8 + 1 + TokenTickets::kBytes +
                  token_wire::kProofBytes);
    hello = token.hello_head;
    hello[0] = static_cast<char>(version_);
    std::array<std::uint8_t, token_wire::kNonceBytes> nonce{};
    if (!token_wire::next_nonce(&nonce)) {
      co_return ClientStep::failure({Errc::kInternal, "token: the CSPRNG failed"});
    }
    ByteWriter w(&hello);
    w.raw(token_wire::view(nonce.data(), nonce.size()));
    if (version_ == token_wire::kChallengeVersion) {
      hello_bytes_ = hello;  // T2 starts with it
      co_return ClientStep::send(std::move(hello), false);
    }
    if (version_ == token_wire::kTicketVersion) {
      auto ticket = token.tickets.take(endpoint_, now_.time_since_epoch().count());
      w.u8(ticket ? static_cast<std::uint8_t>(ticket->size()) : 0);
      if (!ticket) {
        hello_bytes_ = hello;  // the challenged transcript starts with it
        co_return ClientStep::send(std::move(hello), false);
      }
      w.raw(*ticket);
      sent_ticket_ = true;
    } else {
      w.i64(now_.time_since_epoch().count());
    }
    const auto proofs = token_wire::proofs(token.key, hello, {}, channel_binding_);
    w.raw(token_wire::view(proofs.client.data(), proofs.client.size()));
    expected_ = proofs.server;
    answered_ = true;
    // With a ticket the server may still challenge (it did not issue the
    // ticket, or it expired): the challenged transcript starts with the
    // whole HELLO.
    if (version_ == token_wire::kTicketVersion) hello_bytes_ = hello;
    co_return ClientStep::send(std::move(hello), true);
  }

  asio::awaitable<ClientStep> challenge(std::string_view server_message) override {
    // Version 2 and 3 are challenged once: version 3 also after a ticket
    // (answered_ then, but not challenged_).
    const bool may = version_ == token_wire::kChallengeVersion
                         ? !answered_
                         : version_ == token_wire::kTicketVersion && !challenged_;
    if (!token_.ok() || !may) {
      co_return ClientStep::failure({Errc::kProtocolError, "token: unexpected server challenge"});
    }
    auto challenge = token_wire::Challenge::decode(server_message);
    if (!challenge || challenge->version != version_) {
      co_return ClientStep::failure({Errc::kProtocolError, "token: malformed server challenge"});
    }
    const auto proofs = token_wire::proofs(
        (*token_)->key, hello_bytes_,
        token_wire::view(challenge->server_nonce.data(), challenge->server_nonce.size()),
        channel_binding_);
    // Our ticket was not taken: the endpoint's other tickets most likely
    // came from a server we no longer reach (a restart, another server
    // behind the address). Each ticket HELLO that misses its issuer stays
    // acceptable there until it expires (from this client's address only):
    // send no more of them.
    if (sent_ticket_) (*token_)->tickets.drop(endpoint_);
    expected_ = proofs.server;
    answered_ = true;
    challenged_ = true;
    co_return ClientStep::send(token_wire::Response{proofs.client, version_}.encode(), true);
  }

  asio::awaitable<Status> complete(std::string_view server_final_message) override {
    std::string_view proof;
    std::optional<token_wire::TicketSuccess> ticketed;
    if (version_ == token_wire::kTicketVersion) {
      ticketed = token_wire::TicketSuccess::decode(server_final_message);
      if (!ticketed) co_return auth_failed("the server's final message is malformed");
      proof = token_wire::view(ticketed->proof.data(), ticketed->proof.size());
    } else {
      if (server_final_message.size() != 1 + token_wire::kProofBytes ||
          static_cast<std::uint8_t>(server_final_message[0]) != version_) {
        co_return auth_failed("the server's final message is malformed");
      }
      proof = server_final_message.substr(1);
    }
    // Before the challenge there is nothing the server could have proved.
    if (!answered_) co_return auth_failed("the server skipped the challenge");
    if (CRYPTO_memcmp(proof.data(), expected_.data(), expected_.size()) != 0) {
      co_return auth_failed(
          "the server did not prove it knows the token's password (not the server that issued it?)");
    }
    completed_ = true;
    if (ticketed && !ticketed->ticket.empty() && ticketed->lifetime_ms > 0) {
      // Kept a little less than the server said: the ticket must still be
      // valid when the next HELLO arrives.
      const std::int64_t lifetime = ticketed->lifetime_ms;
      (*token_)->tickets.put(endpoint_, std::move(ticketed->ticket),
                             now_.time_since_epoch().count() + lifetime -
                                 std::min<std::int64_t>(1000, lifetime / 4));
    }
    co_return Status();
  }

 private:
  Result<std::shared_ptr<const Prepared>> token_;
  std::string channel_binding_;
  std::string endpoint_;  // the key of the token's tickets (version 3 only)
  security::TokenTime now_;
  const std::uint8_t version_;
  std::string hello_bytes_;  // version 2 and 3: what the challenged transcript starts with
  bool answered_ = false;    // a client proof has been sent
  bool challenged_ = false;  // the server challenged
  bool sent_ticket_ = false;  // the HELLO carried a ticket
  bool completed_ = false;    // the server's proof checked out
  std::array<std::uint8_t, token_wire::kProofBytes> expected_{};
};

}  // namespace

TokenServerMechanism::TokenServerMechanism(std::shared_ptr<const security::SecretManager> secrets,
                                           TokenServerOptions options)
    : secrets_(std::move(secrets)), options_(std::move(options)),
      clock_(secrets_->options().clock ? secrets_->options().clock
                                       : std::make_shared<security::SystemClock>()),
      replay_(options_.max_clock_skew.count(), options_.replay_cache_capacity,
              options_.replay_cache_per_token),
      tickets_(options_.session_tickets, options_.session_ticket_lifetime) {}

Status TokenServerMechanism::accepts(const ChannelInfo& channel) const {
  if (one_message_allowed(channel) || options_.allow_plaintext) return {};
  return plaintext_refused();
}

std::unique_ptr<ServerAuthSession> TokenServerMechanism::start(const ChannelInfo& channel) {
  return std::make_unique<TokenServerSession>(*this, channel);
}

TokenClientMechanism::TokenClientMechanism(TokenClientOptions options)
    : options_(std::move(options)),
      clock_(options_.clock ? options_.clock : std::make_shared<security::SystemClock>()) {
  if (options_.token) given_ = std::make_shared<const Prepared>(*options_.token);
}

Result<security::Token> TokenClientMechanism::find_token(const std::string& service) {
  auto found = find_prepared(service);
  if (!found.ok()) return found.status();
  return (*found)->token;
}

Result<std::shared_ptr<const TokenClientMechanism::Prepared>> TokenClientMechanism::find_prepared(
    const std::string& service) {
  if (given_) {
    if (!options_.service.empty() || given_->token.service == service) return given_;
    return Status(Errc::kUnauthenticated, "token: NOT_FOUND: the token given is for service '" +
                                              given_->token.service + "', not " + service);
  }
  const std::string path = security::CredentialsFile::locate(options_.token_file);
  if (path.empty()) {
    return Status(Errc::kUnauthenticated,
                  std::string("token: no credentials file (set ") + security::kTokenFileEnv +
                      " or the token_file option)");
  }
  // A credentials file that cannot be read is a client without credentials
  // (UNAUTHENTICATED: fetch a token), not the UNAVAILABLE a token store's
  // I/O error is on a server.
  auto unreadable = [](const Status& io) {
    return Status(Errc::kUnauthenticated,
                  "token: " + io.message + " (authrpc token fetch stores a token there)");
  };
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    return unreadable(security::io_error("cannot read credentials file " + path, errno));
  }
  FileStamp stamp{path, static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec,
                  static_cast<std::int64_t>(st.st_size), static_cast<std::uint64_t>(st.st_ino)};
  std::lock_guard lock(mu_);
  if (!(stamp == cached_stamp_)) {
    auto file = security::CredentialsFile::read(path);
    if (!file.ok()) {
      if (file.status().is(TokenErrc::kIoError)) return unreadable(file.status());
      return token_status(file.status(), TokenUse::kAuthentication);
    }
    cached_tokens_.clear();
    for (const auto& t : file->tokens()) cached_tokens_.push_back(std::make_shared<const Prepared>(t));
    cached_stamp_ = stamp;
  }
  for (const auto& t : cached_tokens_) {
    if (t->token.service == service) return t;
  }
  return Status(Errc::kUnauthenticated, "token: NOT_FOUND: no token for service " + service +
                                            " in " + path + " (authrpc token fetch)");
}

std::unique_ptr<ClientAuthSession> TokenClientMechanism::start(const ChannelInfo& channel) {
  const std::string& service = options_.service.empty() ? channel.server_uri : options_.service;
  return std::make_unique<TokenClientSession>(find_prepared(service), channel, clock_->now(),
                                              options_.tickets);
}

Identity token_identity(const security::TokenIdentifier& id) {
  Identity out;
  out.user = id.owner;
  out.principal = id.owner;
  if (auto at = out.principal.rfind('@'); at != std::string::npos) {
    out.realm = out.principal.substr(at + 1);
  }
  if (!id.real_user.empty()) out.real_user = id.real_user;
  return out;
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
        for (Status s : {o.check({"token_file", "service", "tickets"}),
                         o.read("token_file", t.token_file), o.read("service", t.service),
                         o.read("tickets", t.tickets)}) {
          if (!s.ok()) return s;
        }
        return std::shared_ptr<ClientMechanism>(std::make_shared<TokenClientMechanism>(std::move(t)));
      },
      kTokenTraits, {token_file_flag()});
}

}  // namespace authrpc
