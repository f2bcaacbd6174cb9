// DriveSession: one authentication session between a client mechanism and a
// server mechanism in this process, no socket between them: each client
// message goes to the server session, each challenge back, until one side
// ends it. For unit tests of mechanisms that drive sessions step by step
// (token_mechanism_test, token_sasl_test); library authrpc_test_support.
// Test code: a server that succeeds before the client's last message fails
// the current test.
#pragma once

#include <string>
#include <vector>

#include "authrpc/auth/mechanism.h"
#include "authrpc/base/status.h"

namespace authrpc::testing {

struct DrivenSession {
  // The server's last step; a failure carrying the client's error when the
  // client gave up first.
  ServerStep server;
  // The client's error, or complete()'s result on the server's success.
  Status client;
  // What the client sent, in order (for replays); its size is the number of
  // round trips.
  std::vector<std::string> sent;
  // The server challenged the client's last (final) message.
  bool challenged_last = false;
};

// Runs a session of `client` on `client_channel` against `server` on
// `server_channel`; gives up (PROTOCOL_ERROR) after `max_messages` client
// messages.
DrivenSession DriveSession(ClientMechanism& client, ServerMechanism& server,
                           const ChannelInfo& client_channel, const ChannelInfo& server_channel,
                           std::size_t max_messages = 8);

}  // namespace authrpc::testing
