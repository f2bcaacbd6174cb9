#include "tests/testing/session_driver.h"

#include <gtest/gtest.h>

#include "tests/testing/test_support.h"

namespace authrpc::testing {

DrivenSession DriveSession(ClientMechanism& client, ServerMechanism& server,
                           const ChannelInfo& client_channel, const ChannelInfo& server_channel,
                           std::size_t max_messages) {
  auto cs = client.start(client_channel);
  auto ss = server.start(server_channel);
  DrivenSession out;
  ClientStep step = Await(cs->initial());
  for (;;) {
    if (step.kind != ClientStep::Kind::kSend) {
      out.client = step.error;
      out.server = ServerStep::failure(step.error);
      return out;
    }
    if (out.sent.size() == max_messages) {
      out.client = Status(Errc::kProtocolError, "too many client messages");
      out.server = ServerStep::failure(out.client);
      return out;
    }
    out.sent.push_back(step.message);
    out.server = Await(ss->step(step.message));
    if (out.server.kind != ServerStep::Kind::kChallenge) break;
    if (step.final) out.challenged_last = true;
    step = Await(cs->challenge(out.server.message));
  }
  if (out.server.kind == ServerStep::Kind::kSuccess) {
    EXPECT_TRUE(step.final) << "the server succeeded before the client's last message";
    out.client = Await(cs->complete(out.server.message));
  }
  return out;
}

}  // namespace authrpc::testing
