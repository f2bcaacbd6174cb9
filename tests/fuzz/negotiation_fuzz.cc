// Fuzz target: server-side negotiation as a connection runs it
// (auth/server_negotiation.h) — the preamble, then HELLO → [MECHANISMS →
// HELLO] → (AUTH_CHALLENGE ↔ AUTH_RESPONSE)* through a FrameChannel, with
// the real server halves of every mechanism that needs no keytab: simple,
// token (a real SecretManager, tokens/fuzz_support.h's realm), token-digest
// and token-scram (Cyrus SASL with the in-process token auxprop plugin), and
// x509 (the client certificate, if any, comes from the input).
//
// Input: a flags byte (bit 0: TLS channel binding; bit 1: a u16-length-
// prefixed DER client certificate follows; bit 2: a unix:// peer; bit 3: an
// authorize hook that lets alice act as others), the read chunk sizes
// (fuzz_support.h, take_chunks), then the client's bytes.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <asio/io_context.hpp>

#include "authrpc/auth/mechanisms/simple/simple.h"
#include "authrpc/auth/mechanisms/token/token_mechanism.h"
#include "authrpc/auth/mechanisms/x509/x509.h"
#include "authrpc/auth/server_negotiation.h"
#include "authrpc/components/kerberos/token_sasl.h"
#include "authrpc/rpc/frame_channel.h"
#include "authrpc/rpc/wire.h"
#include "tests/fuzz/fuzz_support.h"

namespace authrpc::fuzz {
namespace {

// The shared mechanisms; `token` is made per input (below) because its
// replay cache remembers proofs, which would make runs depend on history.
struct Mechanisms {
  std::shared_ptr<ServerMechanism> simple = std::make_shared<SimpleServerMechanism>();
  std::shared_ptr<ServerMechanism> x509 = std::make_shared<X509ServerMechanism>();
  std::shared_ptr<ServerMechanism> digest = std::make_shared<TokenSaslServerMechanism>(
      kTokenDigestMechanism, token_realm().secrets);
  // No verifier cache: a cached verifier would make later inputs skip PBKDF2.
  std::shared_ptr<ServerMechanism> scram = std::make_shared<TokenSaslServerMechanism>(
      kTokenScramMechanism, token_realm().secrets, TokenSaslServerOptions{.scram_verifier_cache = 0});
};

const Mechanisms& mechanisms() {
  static const Mechanisms* m = new Mechanisms();  // lives for the process
  return *m;
}

asio::awaitable<int> serve(FrameChannel& channel,
                           std::vector<std::shared_ptr<ServerMechanism>> offered,
                           ChannelInfo info, bool with_hooks) {
  std::uint8_t preamble[wire::kPreambleSize];
  if (!(co_await channel.read_exact(preamble, sizeof preamble)).ok()) co_return 0;
  if (!wire::check_preamble(preamble).ok()) co_return 0;
  ServerNegotiationHooks hooks;
  hooks.authorize = [](Identity& id, std::string_view do_as) -> Status {
    if (do_as.empty()) return {};
    if (id.user != "alice@EXAMPLE.COM") return {Errc::kPermissionDenied, "not a proxy user"};
    id.real_user = id.user;
    id.user = std::string(do_as);
    return {};
  };
  std::unique_ptr<ServerAuthSession> spent;
  Identity identity;
  const Status status = co_await negotiate_server(channel, offered, info, identity,
                                                  with_hooks ? &hooks : nullptr, &spent);
  if (status.ok() && identity.user.empty()) fail("negotiation succeeded without a user");
  co_return status.ok() ? 1 : 0;
}

}  // namespace

int fuzz_input(std::uint8_t flags, std::string_view data) {

  ChannelInfo info;
  info.peer_address = "127.0.0.1:40000";
  if (flags & 1) {
    info.tls = true;
    info.scheme = Endpoint::Scheme::kTls;
    info.channel_binding = std::string(TokenRealm::kChannelBinding);
  }
  if (flags & 2) {
    if (data.size() < 2) return 0;
    const std::size_t n = std::size_t{static_cast<std::uint8_t>(data[0])} << 8 |
                          static_cast<std::uint8_t>(data[1]);
    data.remove_prefix(2);
    if (data.size() < n) return 0;
    info.peer_certificate = std::string(data.substr(0, n));
    data.remove_prefix(n);
  }
  const auto scheme = (flags & 4) ? Endpoint::Scheme::kUnix : info.scheme;
  if (flags & 4) info.peer_address = "unix";
  auto chunks = take_chunks(data);

  const auto& m = mechanisms();
  TokenServerOptions token_options;
  token_options.replay_cache_capacity = 64;
  auto token = std::make_shared<TokenServerMechanism>(token_realm().secrets, token_options);
  std::vector<std::shared_ptr<ServerMechanism>> offered = {m.simple, token, m.digest, m.scram,
                                                           m.x509};

  asio::io_context io;
  auto channel = std::make_shared<FrameChannel>(
      std::make_unique<InputStream>(io.get_executor(), data, std::move(chunks), scheme), 64 * 1024);
  run(io, serve(*channel, std::move(offered), std::move(info), (flags & 8) != 0));
  channel->close();
  return 0;
}

}  // namespace authrpc::fuzz
