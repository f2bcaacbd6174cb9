#include "authrpc/auth/mechanism.h"

namespace authrpc {
namespace {

Status refused(Errc code, std::string_view mechanism, std::string_view why) {
  return {code, std::string(mechanism) + ": " + std::string(why)};
}

}  // namespace

// Runs for every session: no allocation unless it refuses.
Status check_channel(std::string_view mechanism, const MechanismTraits& traits,
                     const ChannelInfo& channel, bool client_side) {
  if (traits.bearer_secret && !channel.tls && channel.scheme != Endpoint::Scheme::kUnix) {
    return refused(Errc::kFailedPrecondition, mechanism,
                   "carries a bearer secret, never sent over plaintext tcp:// (use tls:// or unix:)");
  }
  if (client_side) return {};
  // The certificate first: the message the x509 mechanism itself gives.
  if (traits.needs_client_certificate && channel.peer_certificate.empty()) {
    return refused(Errc::kAuthenticationFailed, mechanism,
                   "no verified client certificate on this connection");
  }
  if (traits.needs_tls && !channel.tls) {
    return refused(Errc::kFailedPrecondition, mechanism, "needs a TLS connection");
  }
  return {};
}

Status server_accepts(const ServerMechanism& mechanism, const ChannelInfo& channel) {
  if (Status s = check_channel(mechanism.name(), mechanism.traits(), channel, false); !s.ok()) {
    return s;
  }
  return mechanism.accepts(channel);
}

}  // namespace authrpc
