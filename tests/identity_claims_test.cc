// What a mechanism may vouch for beyond a name (auth/identity.h): groups
// that authorization adds to the user's own (Identity::groups), and an
// expiry after which the server serves no call (Identity::expires). A
// test-defined mechanism vouches for whatever its client says, so the
// framework's side is tested without a real identity provider (the `jwt`
// mechanism's own tests do that).
#include <gtest/gtest.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "authrpc/auth/authz/authorizer.h"
#include "authrpc/auth/authz/authz_policy.h"
#include "authrpc/auth/mechanism.h"
#include "tests/testing/one_message_mechanism.h"
#include "tests/testing/test_server.h"

namespace authrpc {
namespace {

// The test mechanism "vouching" believes what its client sends:
// "user|group,group|ttl_ms" (ttl 0: no expiry).
ServerStep Vouch(std::string_view m) {
  const auto bar1 = m.find('|'), bar2 = m.rfind('|');
  Identity id;
  id.user = id.principal = std::string(m.substr(0, bar1));
  for (std::string_view groups = m.substr(bar1 + 1, bar2 - bar1 - 1); !groups.empty();) {
    const auto comma = groups.find(',');
    id.groups.emplace_back(groups.substr(0, comma));
    groups = comma == std::string_view::npos ? "" : groups.substr(comma + 1);
  }
  if (const int ttl = std::stoi(std::string(m.substr(bar2 + 1))); ttl > 0) {
    id.expires = std::chrono::system_clock::now() + std::chrono::milliseconds(ttl);
  }
  return ServerStep::success(std::move(id));
}

std::shared_ptr<ServerMechanism> VouchingServer() {
  return std::make_shared<testing::OneMessageServer>("vouching", MechanismTraits{}, Vouch);
}
std::shared_ptr<ClientMechanism> VouchingClient(std::string message) {
  return std::make_shared<testing::OneMessageClient>("vouching", std::move(message));
}

Service PingService() {
  Service s("data");
  s.add_blocking("read", [](CallContext&, std::string_view) -> Result<std::string> {
    return std::string("ok");
  });
  return s;
}

std::shared_ptr<Authorizer> GroupAcl() {
  // No user has groups of the server's own: any group comes from the mechanism.
  auto policy = AuthzPolicy::from_json(nlohmann::json::parse(R"({
    "groups": {"source": "static", "static": {"carol": ["staff"]}},
    "default": "allow",
    "services": {"data": {"groups": ["idp-admins"]}},
    "proxy_users": {"svc": {"hosts": ["*"], "users": ["carol"]}}
  })"));
  EXPECT_TRUE(policy.ok()) << policy.status().to_string();
  return Authorizer::from_policy(*policy);
}

struct GroupCase {
  const char* name;
  const char* message;  // what the client vouches for
  const char* do_as;
  Errc expected;
};

class VouchedGroupsTest : public ::testing::TestWithParam<GroupCase> {};

TEST_P(VouchedGroupsTest, AGroupAclSeesTheMechanismsGroups) {
  const GroupCase& c = GetParam();
  testing::TestServer server;
  server.mechanism(VouchingServer()).service(PingService());
  server.options([](ServerOptions& o) { o.authorizer = GroupAcl(); });
  ASSERT_TRUE(server.start().ok());
  auto client = server.client()
                    .mechanism(VouchingClient(c.message))
                    .options([&c](ClientOptions& o) { o.do_as = c.do_as; })
                    .connect();
  ASSERT_TRUE(client.ok()) << client.status().to_string();
  auto r = (*client)->call("data", "read", "");
  if (c.expected == Errc::kOk) {
    EXPECT_TRUE(r.ok()) << r.status().to_string();
  } else {
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.code(), c.expected) << r.status().to_string();
  }
}

INSTANTIATE_TEST_SUITE_P(
    Table, VouchedGroupsTest,
    ::testing::Values(
        GroupCase{"vouched_group_allowed", "bob|idp-admins|0", "", Errc::kOk},
        GroupCase{"one_of_several", "bob|x,idp-admins,y|0", "", Errc::kOk},
        GroupCase{"other_group_denied", "bob|interns|0", "", Errc::kPermissionDenied},
        GroupCase{"no_group_denied", "bob||0", "", Errc::kPermissionDenied},
        // Acting for carol: carol's groups (the server's), not svc's vouched ones.
        GroupCase{"do_as_drops_vouched_groups", "svc|idp-admins|0", "carol",
                  Errc::kPermissionDenied}),
    [](const auto& row) { return std::string(row.param.name); });

TEST(AuthzPolicyGroupsTest, VouchedGroupsFollowTheServersWithoutDuplicates) {
  auto policy = AuthzPolicy::from_json(nlohmann::json::parse(
      R"({"groups": {"source": "static", "static": {"bob": ["staff", "ops"]}}})"));
  ASSERT_TRUE(policy.ok());
  Identity id;
  id.user = "bob";
  id.groups = {"ops", "idp-admins"};
  EXPECT_EQ((*policy)->groups_of(id), (std::vector<std::string>{"staff", "ops", "idp-admins"}));
}

TEST(SessionExpiryTest, NoCallIsServedAfterTheCredentialsExpire) {
  testing::TestServer server;
  server.mechanism(VouchingServer()).service(PingService());
  ASSERT_TRUE(server.start().ok());
  auto client = server.client().mechanism(VouchingClient("bob||600")).connect();
  ASSERT_TRUE(client.ok()) << client.status().to_string();
  ASSERT_TRUE((*client)->call("data", "read", "").ok());
  // The time under test: the credentials' life.
  std::this_thread::sleep_for(std::chrono::milliseconds(700));
  auto refused = (*client)->call("data", "read", "");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.code(), Errc::kCredentialsExpired) << refused.status().to_string();
  EXPECT_EQ(retry_advice(refused.code()), RetryAdvice::kReauthenticate);
  // The connection is gone: the next call fails too, never served.
  auto after = (*client)->call("data", "read", "");
  EXPECT_FALSE(after.ok());

  // A fresh session (new credentials) is served.
  auto again = server.client().mechanism(VouchingClient("bob||0")).connect();
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE((*again)->call("data", "read", "").ok());
}

}  // namespace
}  // namespace authrpc
