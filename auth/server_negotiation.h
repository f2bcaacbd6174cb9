// Server side of connection negotiation (docs/PROTOCOL.md, "Negotiation"):
// HELLO → [MECHANISMS → HELLO] → (AUTH_CHALLENGE ↔ AUTH_RESPONSE)* →
// AUTH_SUCCESS | ERROR. Called by the server connection right after the
// preamble; does not log — the caller decides what to report.
#pragma once

#include <asio/awaitable.hpp>
#include <functional>
#include <string>
#include <memory>
#include <vector>

#include "authrpc/auth/mechanism.h"
#include "authrpc/rpc/frame_channel.h"

namespace authrpc {

// Runs negotiation. On success AUTH_SUCCESS is queued (not yet flushed, so the
// first responses leave with it) and the identity is returned. On failure an
// ERROR frame is queued and the error is returned; the caller closes the
// connection. A client that gives up with an ERROR of its own (e.g.
// MECHANISM_UNAVAILABLE after MECHANISMS: no mechanism it allows) ends it
// with that code, prefixed "the client gave up: ". REQUEST frames pipelined behind a refused HELLO are dropped
// unexecuted; REQUEST frames behind an accepted one stay buffered for the
// caller. With `spent`, a successful session is handed to the caller
// instead of being destroyed here: ending a GSSAPI context costs ~15k
// instructions, better spent after the first reply has left.
//
// `hooks` (optional) adds steps between the mechanism's success and
// AUTH_SUCCESS: `authorize` may rewrite the identity (principal mapping,
// proxy users) or refuse it, its Status then being sent as the ERROR; then
// `admit` may refuse the final identity the same way (the server's
// connection limits). A HELLO asking to act as another user (do_as) without
// an `authorize` hook is refused with PERMISSION_DENIED.
//
// The out fields are filled with or without `authorize`: pass hooks to learn
// which mechanism a failed negotiation used (metrics, logs, audit).
struct ServerNegotiationHooks {
  std::function<Status(Identity& id, std::string_view do_as)> authorize;
  std::function<Status(const Identity& id)> admit;
  std::string mechanism;            // out: the mechanism chosen, once known
  int mechanism_index = -1;         // out: its index in `mechanisms`; -1 while none
  bool refused_by_authorize = false;  // out: failure came from `authorize`
};

// On success `identity` (the caller's, e.g. the connection's own: an
// Identity is a dozen strings, not moved through the coroutines' results)
// holds who the client is; on failure it is left as it was.
asio::awaitable<Status> negotiate_server(
    FrameChannel& channel, const std::vector<std::shared_ptr<ServerMechanism>>& mechanisms,
    const ChannelInfo& info, Identity& identity, ServerNegotiationHooks* hooks = nullptr,
    std::unique_ptr<ServerAuthSession>* spent = nullptr);

}  // namespace authrpc
