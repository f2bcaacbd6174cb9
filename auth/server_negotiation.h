// Server side of connection negotiation (docs/PROTOCOL.md, "Negotiation"):
// HELLO → [MECHANISMS → HELLO] → (AUTH_CHALLENGE ↔ AUTH_RESPONSE)* →
// AUTH_SUCCESS | ERROR. Called by the server connection right after the
// preamble; does not log — the caller decides what to report.
#pragma once

#include <asio/awaitable.hpp>
#include <memory>
#include <vector>

#include "auth/mechanism.h"
#include "rpc/frame_channel.h"

namespace authrpc {

// Runs negotiation. On success AUTH_SUCCESS is queued (not yet flushed, so the
// first responses leave with it) and the identity is returned. On failure an
// ERROR frame is queued and the error is returned; the caller closes the
// connection. REQUEST frames pipelined behind a refused HELLO are dropped
// unexecuted; REQUEST frames behind an accepted one stay buffered for the
// caller. With `spent`, a successful session is handed to the caller instead
// of being destroyed here: ending a GSSAPI context costs ~15k instructions,
// better spent after the first reply has left.
asio::awaitable<Result<Identity>> negotiate_server(
    FrameChannel& channel, const std::vector<std::shared_ptr<ServerMechanism>>& mechanisms,
    const ChannelInfo& info, std::unique_ptr<ServerAuthSession>* spent = nullptr);

}  // namespace authrpc
