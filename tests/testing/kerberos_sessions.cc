#include "tests/testing/kerberos_sessions.h"

#include <utility>

namespace authrpc::testing {

void ExpectKerberosIdentity(Client& client, const MiniKdc& kdc, std::string_view mechanism,
                            const std::string& principal) {
  auto who = Whoami(client);
  ASSERT_TRUE(who.ok()) << Describe(who);
  EXPECT_EQ(client.mechanism(), mechanism);  // known once negotiation is over
  const std::string full = principal + "@" + kdc.realm();
  EXPECT_EQ((*who)["principal"], full) << who->dump();
  EXPECT_EQ((*who)["user"], full) << who->dump();
  EXPECT_EQ((*who)["realm"], kdc.realm()) << who->dump();
  EXPECT_EQ((*who)["mechanism"], mechanism) << who->dump();
}

void ExpectKerberosSession(const Endpoint& endpoint, std::shared_ptr<ClientMechanism> mechanism,
                           const MiniKdc& kdc, bool wait_for_authentication) {
  ASSERT_TRUE(mechanism);
  const std::string name(mechanism->name());
  auto client = Connect(endpoint, std::move(mechanism), wait_for_authentication);
  ASSERT_TRUE(client.ok()) << Describe(client);
  ExpectKerberosIdentity(**client, kdc, name);
}

void ExpectConnectFails(const Endpoint& endpoint, std::shared_ptr<ClientMechanism> mechanism,
                        Errc errc, RetryAdvice advice, const std::string& property) {
  auto client = Connect(endpoint, std::move(mechanism));
  ASSERT_FALSE(client.ok()) << "connected";
  EXPECT_EQ(client.code(), Code(errc)) << Describe(client);
  EXPECT_EQ(retry_advice(client.code()), advice);
  if (!property.empty()) ::testing::Test::RecordProperty(property, client.status().message);
}

ChannelInfo TcpChannel(std::uint16_t port) {
  ChannelInfo info;
  info.scheme = Endpoint::Scheme::kTcp;
  info.server_host = "127.0.0.1";
  info.peer_address = "127.0.0.1:" + std::to_string(port);
  return info;
}

Result<std::string> FirstToken(ClientMechanism& mechanism, const ChannelInfo& channel) {
  auto session = mechanism.start(channel);
  ClientStep step = Await(session->initial());
  if (step.kind != ClientStep::Kind::kSend) return step.error;
  return std::move(step.message);
}

}  // namespace authrpc::testing
