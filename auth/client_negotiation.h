// Client side of connection negotiation (docs/PROTOCOL.md, "Negotiation").
// Called by the client connection on a fresh channel. The client proposes its
// first allowed mechanism optimistically in HELLO; if the server refuses, it
// picks the first mechanism of the server's list that it also allows — and
// never one it does not allow.
#pragma once

#include <asio/awaitable.hpp>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "authrpc/auth/mechanism.h"
#include "authrpc/rpc/frame_channel.h"

namespace authrpc {

struct ClientNegotiationResult {
  std::string mechanism;
  std::string server_user;  // the name the server authenticated us as
  std::uint32_t server_features = 0;  // AUTH_SUCCESS features (wire::kFeature*)
};

// Events the connection needs in order to pipeline calls behind negotiation.
enum class NegotiationEvent {
  kFinalMessageQueued,      // the client's last message is queued: calls may follow it
  kMechanismRefused,        // the server dropped anything pipelined: hold calls again
  kFinalMessageChallenged,  // the same: the server challenged the last message
};

// Queues the preamble and HELLO, then runs negotiation until AUTH_SUCCESS
// (verified through the mechanism's complete()) or a failure. On failure the
// channel is closed. A non-empty `do_as` asks the server to let the
// authenticated user act as that user (proxy user); an AUTH_SUCCESS that does
// not confirm it fails with PERMISSION_DENIED. With `spent`, a successful
// session is handed to the caller instead of being destroyed here: ending a
// GSSAPI context is costly (docs/PERFORMANCE.md, "Measured costs behind the
// code"), better spent after the first response has been delivered.
asio::awaitable<Result<ClientNegotiationResult>> negotiate_client(
    FrameChannel& channel, const std::vector<std::shared_ptr<ClientMechanism>>& allowed,
    const ChannelInfo& info, const std::function<void(NegotiationEvent)>& on_event,
    std::string do_as = {}, std::unique_ptr<ClientAuthSession>* spent = nullptr);

}  // namespace authrpc
