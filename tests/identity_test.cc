// Identity::to_json is hand-written (it runs once per session for sys.whoami),
// so check that every field survives a round trip through a real JSON parser,
// whatever bytes it holds.
#include "authrpc/auth/identity.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace authrpc {
namespace {

TEST(IdentityTest, ToJsonRoundTripsEveryField) {
  const std::string samples[] = {
      "",
      "alice",
      "alice@EXAMPLE.COM",
      "quote\"in",
      "back\\slash",
      "new\nline\rcarriage\ttab",
      std::string("nul\0byte", 8),
      "\x01\x1f control",
      "\xc3\xa9t\xc3\xa9 (UTF-8)",
      "\"\\\"\\",
  };
  for (const auto& s : samples) {
    Identity id;
    id.user = s;
    id.principal = s + "@R";
    id.realm = s;
    id.mechanism = "simple";
    id.peer_address = s;
    id.real_user = s;
    const auto j = nlohmann::json::parse(id.to_json());
    EXPECT_EQ(j["user"], s);
    EXPECT_EQ(j["principal"], s + "@R");
    EXPECT_EQ(j["realm"], s);
    EXPECT_EQ(j["mechanism"], "simple");
    EXPECT_EQ(j["peer"], s);
    EXPECT_EQ(j["real_user"], s);
  }
}

TEST(IdentityTest, ToJsonWithoutRealUserHasNull) {
  Identity id;
  id.user = "bob";
  id.mechanism = "simple";
  const auto j = nlohmann::json::parse(id.to_json());
  EXPECT_TRUE(j["real_user"].is_null());
  EXPECT_EQ(j["user"], "bob");
}

}  // namespace
}  // namespace authrpc
