// Fuzz target: delegation tokens as a server receives them (security/token.h,
// security/base64url.h, auth/mechanisms/token/token_mechanism.h,
// components/kerberos/token_sasl.h). The first byte picks the mode:
//   0  TokenIdentifier::decode; what decodes must encode to the same bytes;
//   1  Token::decode (binary form), same round trip;
//   2  Token::from_string (URL-safe base64 form, the credentials file's and
//      the SASL mechanisms' text), same round trip;
//   3  token_wire::Hello::decode, same round trip;
//   4  the server half of the `token` mechanism, driven with HELLOs built
//      from the input and — when the input asks — signed with the realm's
//      real token password (fuzz_support.h), so that every check after the
//      proof (clock window, replay cache, services) is reached: up to four
//      sessions on one TokenServerMechanism, each step() run on an
//      io_context as a connection would;
//   5  the same server half, the rest of the input being the raw client
//      token;
//   6  session tickets (version 3, plaintext tcp opted in): a real client
//      half and a server half with a small ticket window, up to eight
//      sessions, each chosen by the input: a genuine one (must succeed), the
//      last ticket HELLO played again, or with a byte flipped, or a raw
//      message from the input, or a ticket HELLO the server never saw
//      played from another address — none of the last four may succeed.
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>

#include <asio/io_context.hpp>

#include "authrpc/auth/mechanisms/token/token_mechanism.h"
#include "authrpc/security/base64url.h"
#include "authrpc/security/token.h"
#include "tests/fuzz/fuzz_support.h"

namespace authrpc::fuzz {
namespace {

void require(bool ok, const char* what) {
  if (!ok) fail(what);
}

void identifier(std::string_view data) {
  auto id = security::TokenIdentifier::decode(data);
  if (!id.ok()) return;
  (void)id->describe();
  auto bytes = id->encode();
  require(bytes.ok() && *bytes == data, "TokenIdentifier re-encodes differently");
}

void binary_token(std::string_view data) {
  auto token = security::Token::decode(data);
  if (!token.ok()) return;
  (void)token->describe();
  auto bytes = token->encode();
  require(bytes.ok() && *bytes == data, "Token re-encodes differently");
}

void text_token(std::string_view data) {
  if (auto raw = security::base64url_decode(data)) {
    require(security::base64url_encode(*raw) == data, "base64url has two text forms");
  }
  auto token = security::Token::from_string(data);
  if (!token.ok()) return;
  auto text = token->to_string();
  require(text.ok() && *text == data, "Token string re-encodes differently");
}

void hello(std::string_view data) {
  auto h = token_wire::Hello::decode(data);
  if (!h) return;
  require(h->encode() == data, "token HELLO re-encodes differently");
}

// Takes n bytes (fewer if the input is shorter).
std::string_view take(std::string_view& data, std::size_t n) {
  auto out = data.substr(0, n);
  data.remove_prefix(out.size());
  return out;
}

std::uint64_t take_u64(std::string_view& data) {
  std::uint64_t v = 0;
  for (char c : take(data, 8)) v = v << 8 | static_cast<std::uint8_t>(c);
  return v;
}

ServerStep step(TokenServerMechanism& mechanism, const ChannelInfo& channel,
                std::string_view client_message) {
  asio::io_context io;
  auto session = mechanism.start(channel);
  return run(io, session->step(client_message));
}

void server_sessions(std::string_view data, bool raw) {
  const TokenRealm& realm = token_realm();
  if (data.empty()) return;
  const auto options_byte = static_cast<std::uint8_t>(data[0]);
  data.remove_prefix(1);
  TokenServerOptions options;
  options.replay_cache_capacity = 1 + (options_byte & 7);  // small: reach the kTooOld verdict
  options.max_clock_skew = std::chrono::milliseconds(((options_byte >> 3) & 7) * 10'000);
  if (options_byte & 0x80) options.services = {std::string(TokenRealm::kService)};
  TokenServerMechanism mechanism(realm.secrets, options);
  ChannelInfo channel;
  channel.peer_address = "127.0.0.1:40000";
  // A TLS channel (bound proofs) or a unix one (the replay cache); plaintext
  // tcp is refused before the HELLO is read (PLAINTEXT), so it reaches nothing.
  if (options_byte & 0x40) {
    channel.scheme = Endpoint::Scheme::kTls;
    channel.tls = true;
    channel.channel_binding = std::string(TokenRealm::kChannelBinding);
  } else {
    channel.scheme = Endpoint::Scheme::kUnix;
  }

  if (raw) {
    (void)step(mechanism, channel, data);
    return;
  }
  for (int session = 0; session < 4 && !data.empty(); ++session) {
    const auto flags = static_cast<std::uint8_t>(data[0]);
    data.remove_prefix(1);
    token_wire::Hello h;
    // bit 0: the realm's identifier, else one from the input (u8 length).
    if (flags & 1) {
      h.identifier = realm.token.identifier;
    } else {
      const std::size_t n = data.empty() ? 0 : static_cast<std::uint8_t>(data[0]);
      take(data, 1);
      h.identifier = std::string(take(data, n));
    }
    // bit 1: the token's service, else one from the input (u8 length).
    if (flags & 2) {
      h.service = realm.token.service;
    } else {
      const std::size_t n = data.empty() ? 0 : static_cast<std::uint8_t>(data[0]);
      take(data, 1);
      h.service = std::string(take(data, n));
    }
    const auto nonce = take(data, token_wire::kNonceBytes);
    std::memcpy(h.nonce.data(), nonce.data(), nonce.size());
    // bit 2: the client's clock is the server's plus an offset from the
    // input (wrapping, as any i64 on the wire may); else an absolute time.
    const std::uint64_t time = take_u64(data);
    const auto now = static_cast<std::uint64_t>(realm.clock->now().time_since_epoch().count());
    h.time_ms = static_cast<std::int64_t>((flags & 4) ? now + time : time);
    // bit 3: prove with the token's real password (bit 4: bound to the
    // server's channel binding), else a proof from the input.
    if (flags & 8) {
      const std::string_view binding = (flags & 16) ? channel.channel_binding : std::string_view();
      h.proof = token_wire::client_proof(realm.token.password, h, binding);
    } else {
      const auto proof = take(data, token_wire::kProofBytes);
      std::memcpy(h.proof.data(), proof.data(), proof.size());
    }
    std::string encoded = h.encode();
    // bit 5: one byte of the encoding flipped (its position from the input).
    if ((flags & 32) && !data.empty()) {
      encoded[static_cast<std::uint8_t>(data[0]) % encoded.size()] ^= 0x01;
      data.remove_prefix(1);
    }
    const ServerStep result = step(mechanism, channel, encoded);
    if (result.kind == ServerStep::Kind::kChallenge) fail("the token mechanism never challenges");
    if (result.kind == ServerStep::Kind::kSuccess) {
      require(result.identity.user == "alice@EXAMPLE.COM", "token success for the wrong user");
      require((flags & 8) != 0, "token success without the password");
      require(result.message.size() == 1 + token_wire::kProofBytes, "bad final message");
    }
    // bit 6: replay the same HELLO at once, on another connection: over TLS
    // that connection's channel binding differs (the replay cache is for
    // unix, where the channel is the same).
    if (flags & 64) {
      ChannelInfo replay_channel = channel;
      if (!replay_channel.channel_binding.empty()) replay_channel.channel_binding.back() ^= 0x01;
      const ServerStep again = step(mechanism, replay_channel, encoded);
      require(again.kind != ServerStep::Kind::kSuccess || result.kind != ServerStep::Kind::kSuccess,
              "a replayed token HELLO was accepted twice");
    }
  }
}

// Runs the client half against the server half to the end; the server's
// last step, and the client's first message if it was its last (a ticket
// HELLO).
ServerStep genuine_session(TokenClientMechanism& client, TokenServerMechanism& server,
                           const ChannelInfo& channel, std::string* ticket_hello) {
  asio::io_context io;
  auto cs = client.start(channel);
  auto ss = server.start(channel);
  ClientStep c = run(io, cs->initial());
  if (c.kind != ClientStep::Kind::kSend) fail("the client failed to start");
  if (c.final) *ticket_hello = c.message;
  ServerStep s = run(io, ss->step(c.message));
  while (s.kind == ServerStep::Kind::kChallenge) {
    c = run(io, cs->challenge(s.message));
    if (c.kind != ClientStep::Kind::kSend) fail("the client refused a challenge");
    s = run(io, ss->step(c.message));
  }
  if (s.kind == ServerStep::Kind::kSuccess) {
    require(run(io, cs->complete(s.message)).ok(), "the client refused the server's proof");
  }
  return s;
}

void ticket_sessions(std::string_view data) {
  const TokenRealm& realm = token_realm();
  TokenServerOptions options;
  options.allow_plaintext = true;
  options.session_tickets = 64;
  TokenServerMechanism server(realm.secrets, options);
  TokenClientOptions co;
  co.token = realm.token;
  co.clock = realm.clock;
  co.tickets = true;
  TokenClientMechanism client(co);
  ChannelInfo channel;
  channel.scheme = Endpoint::Scheme::kTcp;
  channel.peer_address = "127.0.0.1:40000";
  channel.server_uri = realm.token.service;
  std::string ticket_hello;
  for (int session = 0; session < 8 && !data.empty(); ++session) {
    const auto flags = static_cast<std::uint8_t>(data[0]);
    data.remove_prefix(1);
    if ((flags & 3) == 0) {
      const ServerStep s = genuine_session(client, server, channel, &ticket_hello);
      require(s.kind == ServerStep::Kind::kSuccess, "a genuine ticket session failed");
      continue;
    }
    if ((flags & 3) == 1 && (flags & 4) != 0) {
      // A ticket HELLO the server never saw (its ticket unspent), played
      // by someone at another address: the ticket is bound to the client's.
      asio::io_context io;
      const ClientStep c = run(io, client.start(channel)->initial());
      if (c.kind != ClientStep::Kind::kSend || !c.final) continue;
      ChannelInfo elsewhere = channel;
      elsewhere.peer_address = "192.0.2.99:40000";
      require(step(server, elsewhere, c.message).kind != ServerStep::Kind::kSuccess,
              "an unspent ticket HELLO succeeded from another address");
      continue;
    }
    std::string message;
    if ((flags & 3) == 3) {
      const std::size_t n = data.empty() ? 0 : static_cast<std::uint8_t>(data[0]);
      take(data, 1);
      message = std::string(take(data, n));
    } else {
      if (ticket_hello.empty()) continue;
      message = ticket_hello;
      if ((flags & 3) == 2 && !data.empty()) {
        message[static_cast<std::uint8_t>(data[0]) % message.size()] ^= 0x01;
        data.remove_prefix(1);
      }
    }
    const ServerStep s = step(server, channel, message);
    require(s.kind != ServerStep::Kind::kSuccess, "a replayed, altered or made-up ticket HELLO succeeded");
  }
}

}  // namespace

int fuzz_input(std::uint8_t first, std::string_view data) {
  switch (first % 7) {
    case 0: identifier(data); break;
    case 1: binary_token(data); break;
    case 2: text_token(data); break;
    case 3: hello(data); break;
    case 4: server_sessions(data, false); break;
    case 5: server_sessions(data, true); break;
    case 6: ticket_sessions(data); break;
  }
  return 0;
}

}  // namespace authrpc::fuzz
