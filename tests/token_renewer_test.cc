// The renewer of a delegation token (server/token_renewer.h): which names
// token.get refuses, and how token.renew/cancel compare a caller with the
// renewer (Hadoop: short names through the principal mapping).
#include "authrpc/server/token_renewer.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>

#include "tests/testing/test_support.h"

namespace authrpc {
namespace {

using testing::Describe;

TEST(CheckRenewer, RefusesNamesThatCanNameNoPrincipal) {
  struct Case {
    std::string renewer;
    bool ok;
  };
  const std::string long_name(1025, 'a');
  for (const Case& c : std::vector<Case>{
           {"", true},  // nobody may renew
           {"yarn", true},
           {"yarn@EXAMPLE.COM", true},
           {"yarn/rm1.example.com@EXAMPLE.COM", true},
           {"a\\/b@EXAMPLE.COM", true},  // an escaped '/' is part of the name
           {std::string(1024, 'a'), true},
           {"a@@B", false},
           {"a@B@C", false},
           {"yarn@", false},
           {"@EXAMPLE.COM", false},
           {"yarn/", false},
           {"/host@R", false},
           {"a//b@R", false},
           {"yarn/host", false},  // a service without a realm
           {"yarn ", false},
           {" yarn", false},
           {"ya rn@R", false},
           {"yarn\t", false},
           {"yarn\n", false},
           {std::string("ya\0rn", 5), false},
           {"yarn\x7f", false},
           {"yarn\\", false},
           {long_name, false},
       }) {
    const Status s = check_renewer(c.renewer);
    EXPECT_EQ(s.ok(), c.ok) << "'" << c.renewer << "': " << s.to_string();
    if (!c.ok) {
      EXPECT_EQ(s.code, make_error_code(Errc::kInvalidArgument)) << s.to_string();
      for (const char ch : s.message) EXPECT_GE(static_cast<unsigned char>(ch), 0x20) << "unescaped byte";
    }
  }
}

class RenewerMatcherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::TempDir("renewer");
    ASSERT_FALSE(dir_.empty());
    std::ofstream(dir_ + "/krb5.conf") << "[libdefaults]\n  default_realm = EXAMPLE.COM\n";
    const char* old = std::getenv("KRB5_CONFIG");
    old_ = old ? old : "";
    had_ = old != nullptr;
    ::setenv("KRB5_CONFIG", (dir_ + "/krb5.conf").c_str(), 1);
  }
  void TearDown() override {
    if (had_) {
      ::setenv("KRB5_CONFIG", old_.c_str(), 1);
    } else {
      ::unsetenv("KRB5_CONFIG");
    }
    std::filesystem::remove_all(dir_);
  }
  std::string dir_, old_;
  bool had_ = false;
};

TEST_F(RenewerMatcherTest, ByDefaultShortNamesOfTheDefaultRealmMatch) {
  auto m = RenewerMatcher::create();
  ASSERT_TRUE(m.ok()) << Describe(m);
  struct Case {
    const char* caller;
    const char* renewer;
    bool match;
  };
  for (const Case& c : {Case{"yarn@EXAMPLE.COM", "yarn", true},
                        Case{"yarn@EXAMPLE.COM", "yarn@EXAMPLE.COM", true},
                        Case{"yarn/rm1@EXAMPLE.COM", "yarn", true},  // Hadoop's DEFAULT: first component
                        Case{"yarn@OTHER.ORG", "yarn", false},      // another realm: no rule
                        Case{"yarn@OTHER.ORG", "yarn@OTHER.ORG", true},  // but the same name
                        Case{"mallory@EXAMPLE.COM", "yarn", false},
                        Case{"yarn@EXAMPLE.COM", "", false},  // nobody may renew
                        Case{"", "", false}}) {
    EXPECT_EQ((*m)->is_renewer(c.caller, c.renewer), c.match) << c.caller << " vs " << c.renewer;
  }
}

TEST_F(RenewerMatcherTest, AnAuthorizersRulesReplaceTheDefault) {
  auto m = RenewerMatcher::create();
  ASSERT_TRUE(m.ok()) << Describe(m);
  auto policy = AuthzPolicy::from_json(
      {{"auth_to_local",
        {{"rules", nlohmann::json::array({"RULE:[2:$1@$0](rm@EXAMPLE\\.COM)s/.*/yarn/", "DEFAULT"})}}}});
  ASSERT_TRUE(policy.ok()) << Describe(policy);
  EXPECT_FALSE((*m)->is_renewer("rm/host1@EXAMPLE.COM", "yarn"));
  (*m)->use_authorizer(Authorizer::from_policy(*policy));
  EXPECT_TRUE((*m)->is_renewer("rm/host1@EXAMPLE.COM", "yarn"));
  EXPECT_TRUE((*m)->is_renewer("yarn@EXAMPLE.COM", "yarn"));
  EXPECT_FALSE((*m)->is_renewer("nm/host1@EXAMPLE.COM", "yarn"));
  // An authorizer without auth_to_local: back to DEFAULT.
  auto plain = AuthzPolicy::from_json(nlohmann::json::object());
  ASSERT_TRUE(plain.ok()) << Describe(plain);
  (*m)->use_authorizer(Authorizer::from_policy(*plain));
  EXPECT_TRUE((*m)->is_renewer("yarn@EXAMPLE.COM", "yarn"));
  EXPECT_FALSE((*m)->is_renewer("rm/host1@EXAMPLE.COM", "yarn"));
}

}  // namespace
}  // namespace authrpc
