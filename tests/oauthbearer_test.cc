// parse_oauthbearer (components/jwt/oauthbearer.h): the `jwt` mechanism's first
// message, from a peer nobody knows yet. A table of messages → accepted (with
// what was read) or refused (with what the message says).
#include "authrpc/components/jwt/oauthbearer.h"

#include <gtest/gtest.h>

#include <string>

namespace authrpc {
namespace {
namespace oauthbearer_test {  // its own names in the unity sources

constexpr std::size_t kMaxBytes = 32 * 1024;
constexpr char kToken[] = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJhIn0.c2ln";

// "n,,\x01" + pairs, each followed by \x01, + "\x01".
std::string message(const std::string& pairs, const std::string& gs2 = "n,,") {
  return gs2 + "\x01" + pairs + "\x01";
}

std::string pairs_before_auth(int n) {
  std::string out;
  for (int i = 0; i < n; ++i) {
    std::string key = "x";
    for (int k = i; k > 0; k /= 26) key += static_cast<char>('a' + k % 26);
    out += key + "=1\x01";
  }
  return out + "auth=Bearer " + kToken + "\x01";
}

struct Case {
  const char* name;
  std::string text;
  bool accepted;
  const char* message_has = "";
};

const Case kCases[] = {
    {"formatted", format_oauthbearer(kToken, "db.example.com", "7000"), true},
    {"token_only", message(std::string("auth=Bearer ") + kToken + "\x01"), true},
    {"scheme_case_and_spaces", message(std::string("auth=bEaReR   ") + kToken + "\x01"), true},
    {"authzid", message(std::string("auth=Bearer ") + kToken + "\x01", "n,a=bob=2Cx,"), true},
    {"sixteen_pairs", message(pairs_before_auth(15)), true},
    // A thousand pairs would cost time quadratic in their number to check
    // for duplicates; a real client sends three.
    {"seventeen_pairs", message(pairs_before_auth(16)), false, "more than 16 pairs"},
    {"thousands_of_pairs", message(pairs_before_auth(3900)), false, "more than 16 pairs"},
    {"key_twice", message(std::string("host=a\x01host=b\x01") + "auth=Bearer " + kToken + "\x01"),
     false, "a key twice"},
    {"no_auth", message("host=a\x01"), false, "no auth pair"},
    {"not_bearer", message("auth=Basic YWxpY2U6cHc=\x01"), false, "not 'Bearer <token>'"},
    {"token_alphabet", message("auth=Bearer a b\x01"), false, "outside b64token"},
    {"control_bytes", message(std::string("host=\x1b[31m\x01") + "auth=Bearer " + kToken + "\x01"),
     false, "control bytes"},
    {"channel_binding", "p=tls-unique,,\x01" "auth=Bearer x\x01\x01", false, "channel binding"},
    {"bad_authzid", message(std::string("auth=Bearer ") + kToken + "\x01", "n,a=b=ZZ,"), false,
     "bad authzid"},
    {"unterminated", "n,,\x01" "auth=Bearer x", false, "not terminated"},
    {"trailing_bytes", message(std::string("auth=Bearer ") + kToken + "\x01") + "x", false,
     "bytes after the final separator"},
    {"over_the_size_limit", message(std::string(kMaxBytes, 'a') + "=1\x01"), false, "over the limit"},
};

class OAuthBearerTest : public ::testing::TestWithParam<Case> {};

TEST_P(OAuthBearerTest, ParsesOrRefuses) {
  const Case& c = GetParam();
  auto parsed = parse_oauthbearer(c.text, kMaxBytes);
  if (c.accepted) {
    ASSERT_TRUE(parsed.ok()) << parsed.status().to_string();
    EXPECT_EQ(parsed->token, kToken);
    return;
  }
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.code(), Errc::kAuthenticationFailed);
  EXPECT_NE(parsed.status().message.find(c.message_has), std::string::npos)
      << parsed.status().message;
  // Peer bytes are never quoted back.
  EXPECT_EQ(parsed.status().message.find('\x1b'), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(Table, OAuthBearerTest, ::testing::ValuesIn(kCases),
                         [](const auto& row) { return std::string(row.param.name); });

TEST(OAuthBearerTest, FieldsAreRead) {
  auto parsed = parse_oauthbearer(
      message(std::string("host=db\x01port=7000\x01") + "auth=Bearer " + kToken + "\x01",
              "n,a=bob=3Dx,"),
      kMaxBytes);
  ASSERT_TRUE(parsed.ok()) << parsed.status().to_string();
  EXPECT_EQ(parsed->authzid, "bob=x");
  EXPECT_EQ(parsed->host, "db");
  EXPECT_EQ(parsed->port, "7000");
}

}  // namespace oauthbearer_test
}  // namespace
}  // namespace authrpc
