// The `jwt` mechanism with a real identity provider: Debian's Glewlwyd
// (an OAuth 2.0 / OIDC server) on loopback over HTTPS
// (tests/testing/glewlwyd_idp.h). The test obtains an access token with a
// client-credentials grant, as a service would, and authenticates with it
// to an authrpc server that fetches Glewlwyd's JWKS over HTTPS.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "authrpc/components/jwt/jwt.h"
#include "tests/testing/glewlwyd_idp.h"
#include "tests/testing/test_server.h"

namespace authrpc {
namespace {

using json = nlohmann::json;
using ::testing::HasSubstr;

Service GlewlwydIdentityService() {
  Service s("data");
  s.add_blocking("who", [](CallContext& ctx, std::string_view) -> Result<std::string> {
    const Identity& id = ctx.identity();
    json j = {{"user", id.user}, {"mechanism", id.mechanism}};
    for (const auto& [k, v] : id.attributes) j["attributes"][k] = v;
    return j.dump();
  });
  return s;
}

class JwtGlewlwydTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!testing::GlewlwydIdp::installed()) {
      if (const char* skip = std::getenv("AUTHRPC_SKIP_GLEWLWYD"); skip && std::string(skip) == "1") {
        GTEST_SKIP() << "glewlwyd not installed (AUTHRPC_SKIP_GLEWLWYD=1)";
      }
      FAIL() << "glewlwyd is not installed: run scripts/setup.sh (or set "
                "AUTHRPC_SKIP_GLEWLWYD=1 to skip)";
    }
    auto idp = testing::GlewlwydIdp::start(testing::TestTls::shared());
    ASSERT_TRUE(idp.ok()) << idp.status().to_string();
    idp_ = std::move(*idp);
    dir_ = testing::TempDir("jwt-glewlwyd");
  }
  void TearDown() override {
    std::error_code ec;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
  }

  std::shared_ptr<ServerMechanism> Server(const std::string& audience) {
    auto m = make_jwt_server({{"issuer", idp_->issuer()},
                              {"audience", audience},
                              {"jwks_url", idp_->jwks_url()},
                              {"jwks_ca_file", testing::TestTls::shared().ca_file()}});
    EXPECT_TRUE(m.ok()) << m.status().to_string();
    return m.ok() ? *m : nullptr;
  }
  std::string TokenFile(const std::string& token) {
    const std::string path = dir_ + "/token";
    std::ofstream(path) << token << "\n";
    return path;
  }

  std::unique_ptr<testing::GlewlwydIdp> idp_;
  std::string dir_;
};

TEST_F(JwtGlewlwydTest, AClientCredentialsTokenAuthenticates) {
  auto token = idp_->client_credentials_token(idp_->scope());
  ASSERT_TRUE(token.ok()) << token.status().to_string();
  testing::TestServer server;
  server.tls().mechanism(Server(idp_->audience())).service(GlewlwydIdentityService());
  ASSERT_TRUE(server.start().ok());
  auto jwt = make_jwt_client({{"token_file", TokenFile(*token)}});
  ASSERT_TRUE(jwt.ok()) << jwt.status().to_string();
  auto client = server.client().mechanism(*jwt).connect();
  ASSERT_TRUE(client.ok()) << client.status().to_string();
  auto who = (*client)->call("data", "who", "");
  ASSERT_TRUE(who.ok()) << who.status().to_string();
  const json j = json::parse(*who);
  EXPECT_EQ(j["mechanism"], "jwt");
  // A client-credentials token's sub is the client.
  EXPECT_EQ(j["user"], idp_->client_id());
  EXPECT_EQ(j["attributes"]["jwt.issuer"], idp_->issuer());
}

TEST_F(JwtGlewlwydTest, ATokenForAnotherAudienceIsRefused) {
  auto token = idp_->client_credentials_token(idp_->scope());
  ASSERT_TRUE(token.ok()) << token.status().to_string();
  testing::TestServer server;
  server.tls().mechanism(Server("some-other-service")).service(GlewlwydIdentityService());
  ASSERT_TRUE(server.start().ok());
  auto jwt = make_jwt_client({{"token_file", TokenFile(*token)}});
  ASSERT_TRUE(jwt.ok());
  auto client = server.client().mechanism(*jwt).connect();
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.code(), Errc::kAuthenticationFailed) << client.status().to_string();
  EXPECT_THAT(client.status().message, HasSubstr("not for this service"));
}

}  // namespace
}  // namespace authrpc
