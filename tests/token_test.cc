// Unit tests for the delegation-token encodings: security/token.h (identifier
// and token, binary and string forms), security/base64url.h,
// security/secret_bytes.h, security/token_errors.h, security/credentials_file.h,
// and tamper detection through a real SecretManager.
#include "authrpc/security/token.h"

#include <gtest/gtest.h>
#include <openssl/hmac.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include "authrpc/security/base64url.h"
#include "authrpc/security/clock.h"
#include "authrpc/security/credentials_file.h"
#include "authrpc/security/memory_token_store.h"
#include "authrpc/security/secret_bytes.h"
#include "authrpc/security/secret_manager.h"
#include "authrpc/security/token_errors.h"
#include "tests/testing/scoped_temp_dir.h"

namespace authrpc::security {
namespace {

using std::chrono::hours;
using std::chrono::milliseconds;

TokenTime at(std::int64_t ms) { return TokenTime(milliseconds(ms)); }

std::string hex(std::string_view bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out.push_back(digits[c >> 4]);
    out.push_back(digits[c & 15]);
  }
  return out;
}

TokenIdentifier sample_identifier() {
  TokenIdentifier id;
  id.kind = "authrpc-delegation";
  id.owner = "alice@EXAMPLE.COM";
  id.renewer = "yarn";
  id.real_user = "oozie";
  id.issue_date = at(1'700'000'000'000);
  id.max_date = at(1'700'604'800'000);
  id.sequence_number = 42;
  id.master_key_id = 7;
  return id;
}

// ---------------------------------------------------------------------------
// Identifier

struct IdentifierCase {
  const char* name;
  TokenIdentifier id;
};
void PrintTo(const IdentifierCase& c, std::ostream* os) { *os << c.name; }

std::vector<IdentifierCase> identifier_cases() {
  std::vector<IdentifierCase> cases;
  cases.push_back({"typical", sample_identifier()});
  auto minimal = sample_identifier();
  minimal.renewer.clear();
  minimal.real_user.clear();
  minimal.sequence_number = 0;
  minimal.master_key_id = 0;
  minimal.issue_date = minimal.max_date = at(0);
  cases.push_back({"minimal", minimal});
  auto longest = sample_identifier();
  longest.kind.assign(TokenIdentifier::kMaxFieldBytes, 'k');
  longest.owner.assign(TokenIdentifier::kMaxFieldBytes, 'o');
  longest.renewer.assign(TokenIdentifier::kMaxFieldBytes, 'r');
  longest.real_user.assign(TokenIdentifier::kMaxFieldBytes, 'u');
  longest.sequence_number = ~std::uint64_t{0};
  longest.master_key_id = ~std::uint32_t{0};
  cases.push_back({"longest", longest});
  auto binary = sample_identifier();
  binary.owner = std::string("a\0b\xff\xc3\xa9", 6);
  binary.issue_date = at(-5000);  // before the epoch: times are signed
  binary.max_date = at(-1);
  cases.push_back({"binary_names_and_negative_times", binary});
  return cases;
}

class IdentifierRoundTrip : public ::testing::TestWithParam<IdentifierCase> {};

TEST_P(IdentifierRoundTrip, DecodeOfEncodeIsIdentity) {
  const auto& id = GetParam().id;
  auto bytes = id.encode();
  ASSERT_TRUE(bytes.ok()) << bytes.status().to_string();
  auto back = TokenIdentifier::decode(*bytes);
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(*back, id);
  // The encoding is canonical: encoding again gives the same bytes.
  EXPECT_EQ(*back->encode(), *bytes);
}

TEST_P(IdentifierRoundTrip, PeekedSequenceNumberIsTheDecodedOne) {
  const auto& id = GetParam().id;
  auto bytes = *id.encode();
  EXPECT_EQ(TokenIdentifier::peek_sequence_number(bytes), id.sequence_number);
  EXPECT_EQ(TokenIdentifier::peek_sequence_number(std::string_view(bytes).substr(0, 12)), std::nullopt);
}

TEST_P(IdentifierRoundTrip, EveryTruncationIsMalformed) {
  auto bytes = *GetParam().id.encode();
  for (std::size_t n = 0; n < bytes.size(); ++n) {
    auto r = TokenIdentifier::decode(std::string_view(bytes).substr(0, n));
    ASSERT_TRUE(r.is(TokenErrc::kMalformed)) << "prefix of " << n << ": " << r.status().to_string();
  }
}

TEST_P(IdentifierRoundTrip, TrailingBytesAreMalformed) {
  auto bytes = *GetParam().id.encode();
  for (std::string extra : {std::string(1, '\0'), std::string("x"), std::string(100, 'y')}) {
    EXPECT_TRUE(TokenIdentifier::decode(bytes + extra).is(TokenErrc::kMalformed));
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, IdentifierRoundTrip, ::testing::ValuesIn(identifier_cases()),
                         [](const auto& tp) { return std::string(tp.param.name); });

// The layout of docs/TOKENS.md §1, byte by byte.
TEST(TokenIdentifier, LayoutMatchesTheDocumentation) {
  TokenIdentifier id;
  id.kind = "k";
  id.owner = "ab";
  id.renewer = "";
  id.real_user = "r";
  id.issue_date = at(0x0102030405060708);
  id.max_date = at(0x1112131415161718);
  id.sequence_number = 0x2122232425262728;
  id.master_key_id = 0x31323334;
  EXPECT_EQ(hex(*id.encode()),
            "01"                  // version
            "0001" "6b"           // kind "k"
            "0002" "6162"         // owner "ab"
            "0000"                // renewer ""
            "0001" "72"           // real user "r"
            "0102030405060708"    // issue date, ms
            "1112131415161718"    // max date, ms
            "2122232425262728"    // sequence number
            "31323334");          // master key id
}

TEST(TokenIdentifier, UnknownVersionsAreTyped) {
  auto bytes = *sample_identifier().encode();
  for (int v : {0, 2, 3, 0x7f, 0xff}) {
    bytes[0] = static_cast<char>(v);
    auto r = TokenIdentifier::decode(bytes);
    EXPECT_TRUE(r.is(TokenErrc::kUnsupportedVersion)) << v << ": " << r.status().to_string();
  }
}

TEST(TokenIdentifier, DecodeRejectsGarbage) {
  struct Case {
    const char* name;
    std::string bytes;
    TokenErrc want;
  };
  auto good = *sample_identifier().encode();
  std::string over_long_kind = good;
  over_long_kind[1] = '\x04';  // kind length 0x0412 > 1024
  over_long_kind[2] = '\x12';
  std::string empty_kind = "\x01";
  empty_kind += std::string("\x00\x00", 2) + good.substr(3 + 18);  // kind "" (was 18 bytes)
  TokenIdentifier backwards = sample_identifier();
  std::string backwards_bytes = *backwards.encode();
  // Swap issue and max date in place: max < issue.
  auto issue_at = backwards_bytes.size() - 28;
  std::string issue = backwards_bytes.substr(issue_at, 8), max = backwards_bytes.substr(issue_at + 8, 8);
  backwards_bytes.replace(issue_at, 8, max);
  backwards_bytes.replace(issue_at + 8, 8, issue);
  const std::vector<Case> cases = {
      {"empty", "", TokenErrc::kMalformed},
      {"version_only", "\x01", TokenErrc::kMalformed},
      {"text", "hello, world", TokenErrc::kUnsupportedVersion},
      {"all_ones", std::string(64, '\xff'), TokenErrc::kUnsupportedVersion},
      {"zeros_after_version", "\x01" + std::string(40, '\0'), TokenErrc::kMalformed},
      {"over_long_field", over_long_kind, TokenErrc::kMalformed},
      {"empty_kind", empty_kind, TokenErrc::kMalformed},
      {"max_before_issue", backwards_bytes, TokenErrc::kMalformed},
  };
  for (const auto& c : cases) {
    auto r = TokenIdentifier::decode(c.bytes);
    EXPECT_TRUE(r.is(c.want)) << c.name << ": " << r.status().to_string();
  }
}

TEST(TokenIdentifier, EncodeRefusesWhatDecodeWouldRefuse) {
  struct Case {
    const char* name;
    void (*change)(TokenIdentifier&);
  };
  const std::vector<Case> cases = {
      {"no_kind", [](TokenIdentifier& id) { id.kind.clear(); }},
      {"no_owner", [](TokenIdentifier& id) { id.owner.clear(); }},
      {"long_owner", [](TokenIdentifier& id) { id.owner.assign(TokenIdentifier::kMaxFieldBytes + 1, 'o'); }},
      {"long_renewer", [](TokenIdentifier& id) { id.renewer.assign(70000, 'r'); }},
      {"long_real_user", [](TokenIdentifier& id) { id.real_user.assign(2000, 'u'); }},
      {"max_before_issue", [](TokenIdentifier& id) { id.max_date = id.issue_date - milliseconds(1); }},
  };
  for (const auto& c : cases) {
    auto id = sample_identifier();
    c.change(id);
    EXPECT_TRUE(id.encode().is(TokenErrc::kInvalidArgument)) << c.name;
  }
}

TEST(TokenIdentifier, DescribeNamesFieldsAndTimes) {
  auto text = sample_identifier().describe();
  EXPECT_EQ(text,
            "authrpc-delegation token 42 (owner alice@EXAMPLE.COM, real user oozie, renewer yarn, "
            "key 7, max 2023-11-21T22:13:20.000Z)");
  EXPECT_EQ(format_token_time(at(-1)), "1969-12-31T23:59:59.999Z");
}

// ---------------------------------------------------------------------------
// Password, token, string form

TEST(TokenPassword, IsHmacSha256OfTheIdentifier) {
  // RFC 4231, test case 2.
  SecretBytes key(std::string_view("Jefe"));
  auto password = token_password(key, "what do ya want for nothing?");
  EXPECT_EQ(hex(password.view()), "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  EXPECT_TRUE(token_password(SecretBytes(), "x").empty()) << "no key, no password";
}

Token sample_token() {
  Token t;
  t.identifier = *sample_identifier().encode();
  t.password = token_password(SecretBytes(std::string_view("0123456789abcdef0123456789abcdef")), t.identifier);
  t.kind = "authrpc-delegation";
  t.service = "tcp://db1.example.com:7000";
  return t;
}

void expect_same(const Token& a, const Token& b) {
  EXPECT_EQ(a.identifier, b.identifier);
  EXPECT_TRUE(a.password.equals(b.password));
  EXPECT_EQ(a.kind, b.kind);
  EXPECT_EQ(a.service, b.service);
}

TEST(Token, BinaryAndStringRoundTrips) {
  auto token = sample_token();
  auto bytes = token.encode();
  ASSERT_TRUE(bytes.ok());
  auto back = Token::decode(*bytes);
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  expect_same(*back, token);

  auto text = token.to_string();
  ASSERT_TRUE(text.ok());
  for (char c : *text) {
    ASSERT_TRUE(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_') << "'" << c << "'";
  }
  EXPECT_EQ(*text, base64url_encode(*bytes));
  auto parsed = Token::from_string(*text);
  ASSERT_TRUE(parsed.ok()) << parsed.status().to_string();
  expect_same(*parsed, token);
}

TEST(Token, LayoutMatchesTheDocumentation) {
  Token t;
  t.identifier = *sample_identifier().encode();
  t.password = SecretBytes(std::string_view("\xaa\xbb"));
  t.kind = "K";
  t.service = "S";
  auto bytes = *t.encode();
  EXPECT_EQ(hex(bytes), "01" "00" + hex(std::string(1, static_cast<char>(t.identifier.size()))) +
                            hex(t.identifier) + "0002aabb" "00014b" "000153");
}

TEST(Token, EveryTruncationAndTrailingByteIsRejected) {
  auto bytes = *sample_token().encode();
  for (std::size_t n = 0; n < bytes.size(); ++n) {
    auto r = Token::decode(std::string_view(bytes).substr(0, n));
    ASSERT_TRUE(r.is(TokenErrc::kMalformed)) << n << ": " << r.status().to_string();
  }
  EXPECT_TRUE(Token::decode(bytes + "x").is(TokenErrc::kMalformed));
  auto text = *sample_token().to_string();
  for (std::size_t n = 0; n < text.size(); ++n) {
    auto r = Token::from_string(std::string_view(text).substr(0, n));
    ASSERT_TRUE(r.is(TokenErrc::kMalformed)) << n << ": " << r.status().to_string();
  }
}

TEST(Token, GarbageAndUnknownVersionsAreTyped) {
  auto bytes = *sample_token().encode();
  std::string v2 = bytes;
  v2[0] = 2;
  EXPECT_TRUE(Token::decode(v2).is(TokenErrc::kUnsupportedVersion));
  EXPECT_TRUE(Token::from_string(base64url_encode(v2)).is(TokenErrc::kUnsupportedVersion));
  // The identifier inside is checked too.
  Token inner = sample_token();
  inner.identifier[0] = 9;
  EXPECT_TRUE(Token::decode(*inner.encode()).is(TokenErrc::kUnsupportedVersion));
  inner.identifier = "\x01garbage";
  EXPECT_TRUE(Token::decode(*inner.encode()).is(TokenErrc::kMalformed));

  auto text = *sample_token().to_string();
  for (std::string bad : {std::string(""), std::string("!!!!"), text + "=", text + "==", " " + text,
                          text + "\n", text.substr(0, 10) + "+" + text.substr(11),
                          text.substr(0, 10) + "/" + text.substr(11), std::string(200000, 'A')}) {
    auto r = Token::from_string(bad);
    EXPECT_TRUE(r.is(TokenErrc::kMalformed)) << bad.substr(0, 40) << ": " << r.status().to_string();
  }
}

TEST(Token, EncodeRefusesEmptyOrOverLongFields) {
  Token t = sample_token();
  t.password = SecretBytes();
  EXPECT_TRUE(t.encode().is(TokenErrc::kInvalidArgument));
  t = sample_token();
  t.identifier.clear();
  EXPECT_TRUE(t.to_string().is(TokenErrc::kInvalidArgument));
  t = sample_token();
  t.service.assign(5000, 's');
  EXPECT_TRUE(t.encode().is(TokenErrc::kInvalidArgument));
}

TEST(Token, DescribeNeverShowsThePassword) {
  auto token = sample_token();
  auto text = token.describe();
  EXPECT_NE(text.find("token 42"), std::string::npos) << text;
  EXPECT_NE(text.find(token.service), std::string::npos) << text;
  EXPECT_EQ(text.find(hex(token.password.view())), std::string::npos);
  EXPECT_EQ(text.find(base64url_encode(token.password.view())), std::string::npos);
  EXPECT_EQ(text.find(token.password.view()), std::string::npos);
}

// ---------------------------------------------------------------------------
// base64url

TEST(Base64Url, Rfc4648VectorsWithoutPadding) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", ""},          {"f", "Zg"},         {"fo", "Zm8"},          {"foo", "Zm9v"},
      {"foob", "Zm9vYg"}, {"fooba", "Zm9vYmE"}, {"foobar", "Zm9vYmFy"},
      {"\xfb\xff", "-_8"}, {std::string("\0\0\0", 3), "AAAA"}, {"\xff\xff\xfe", "___-"},
  };
  for (const auto& [bytes, text] : cases) {
    EXPECT_EQ(base64url_encode(bytes), text) << hex(bytes);
    auto back = base64url_decode(text);
    ASSERT_TRUE(back.has_value()) << text;
    EXPECT_EQ(*back, bytes) << text;
  }
}

TEST(Base64Url, EveryLengthRoundTripsAndEveryTextIsCanonical) {
  std::string bytes;
  for (int n = 0; n < 200; ++n) {
    auto text = base64url_encode(bytes);
    EXPECT_EQ(text.size(), (4 * bytes.size() + 2) / 3);
    EXPECT_EQ(base64url_decode(text), bytes);
    bytes.push_back(static_cast<char>(n * 37 + 11));
  }
  // "Zh" decodes to the same byte as "Zg" in lax decoders; here only "Zg" is valid.
  EXPECT_FALSE(base64url_decode("Zh").has_value());
  EXPECT_FALSE(base64url_decode("Zm9vY").has_value()) << "length 1 mod 4";
  EXPECT_FALSE(base64url_decode("Zm9v\n").has_value());
}

// ---------------------------------------------------------------------------
// SecretBytes and errors

TEST(SecretBytes, RandomEqualsCopyMove) {
  auto a = SecretBytes::random(32);
  auto b = SecretBytes::random(32);
  ASSERT_EQ(a.size(), 32u);
  EXPECT_FALSE(a.equals(b)) << "two CSPRNG draws";
  SecretBytes c = a;
  EXPECT_TRUE(c.equals(a));
  SecretBytes d = std::move(c);
  EXPECT_TRUE(d.equals(a));
  EXPECT_TRUE(c.empty());  // NOLINT(bugprone-use-after-move): moved-from is empty
  c = d;
  EXPECT_TRUE(c.equals(a));
  EXPECT_FALSE(c.equals(SecretBytes(a.view().substr(0, 31)))) << "sizes differ";
  c.reset(4);
  EXPECT_EQ(hex(c.view()), "00000000");
}

TEST(TokenErrors, NamesMessagesAndStatusText) {
  const std::error_code ec = TokenErrc::kExpired;
  EXPECT_EQ(ec.category(), token_category());
  EXPECT_STREQ(token_category().name(), "authrpc.token");
  EXPECT_EQ(ec.message(), "token expired");
  for (int v = 1; v <= static_cast<int>(TokenErrc::kIoError); ++v) {
    auto e = static_cast<TokenErrc>(v);
    EXPECT_NE(token_errc_name(e), "UNKNOWN") << v;
    EXPECT_EQ(make_error_code(e).message().find("unknown token error"), std::string::npos) << v;
  }
  EXPECT_EQ(Status(TokenErrc::kForged, "token 3: password does not match").to_string(),
            "FORGED: token 3: password does not match");
  EXPECT_EQ(Status().to_string(), "OK");
  EXPECT_EQ(io_error("open x", ENOENT).to_string(), "IO_ERROR: open x: No such file or directory");
}

// Every TokenErrc: its name, the Errc (and so the retry advice) it carries as
// it stands — which is what a token service call answers — and the Errc a
// token presented to authenticate is refused with.
TEST(TokenErrors, EveryKindMapsOntoAnErrcWithTheRightAdviceInEachUse) {
  struct Case {
    TokenErrc kind;
    const char* name;
    Errc as_is;
    RetryAdvice as_is_advice;
    Errc at_authentication;
    RetryAdvice authentication_advice;
  };
  const Case cases[] = {
      {TokenErrc::kMalformed, "MALFORMED", Errc::kInvalidArgument, RetryAdvice::kGiveUp,
       Errc::kAuthenticationFailed, RetryAdvice::kGiveUp},
      {TokenErrc::kUnsupportedVersion, "UNSUPPORTED_VERSION", Errc::kInvalidArgument, RetryAdvice::kGiveUp,
       Errc::kAuthenticationFailed, RetryAdvice::kGiveUp},
      {TokenErrc::kUnknownToken, "UNKNOWN_TOKEN", Errc::kFailedPrecondition, RetryAdvice::kGiveUp,
       Errc::kCredentialsExpired, RetryAdvice::kReauthenticate},
      {TokenErrc::kUnknownKey, "UNKNOWN_KEY", Errc::kUnavailable, RetryAdvice::kRetry,
       Errc::kUnavailable, RetryAdvice::kRetry},
      {TokenErrc::kForged, "FORGED", Errc::kPermissionDenied, RetryAdvice::kGiveUp,
       Errc::kAuthenticationFailed, RetryAdvice::kGiveUp},
      {TokenErrc::kExpired, "EXPIRED", Errc::kFailedPrecondition, RetryAdvice::kGiveUp,
       Errc::kCredentialsExpired, RetryAdvice::kReauthenticate},
      {TokenErrc::kCancelled, "CANCELLED", Errc::kFailedPrecondition, RetryAdvice::kGiveUp,
       Errc::kCredentialsExpired, RetryAdvice::kReauthenticate},
      {TokenErrc::kPermissionDenied, "PERMISSION_DENIED", Errc::kPermissionDenied, RetryAdvice::kGiveUp,
       Errc::kAuthenticationFailed, RetryAdvice::kGiveUp},
      {TokenErrc::kInvalidArgument, "INVALID_ARGUMENT", Errc::kInvalidArgument, RetryAdvice::kGiveUp,
       Errc::kAuthenticationFailed, RetryAdvice::kGiveUp},
      {TokenErrc::kNotFound, "NOT_FOUND", Errc::kUnauthenticated, RetryAdvice::kReauthenticate,
       Errc::kUnauthenticated, RetryAdvice::kReauthenticate},
      {TokenErrc::kStoreCorrupt, "STORE_CORRUPT", Errc::kDataLoss, RetryAdvice::kGiveUp,
       Errc::kUnavailable, RetryAdvice::kRetry},
      {TokenErrc::kStoreLocked, "STORE_LOCKED", Errc::kFailedPrecondition, RetryAdvice::kGiveUp,
       Errc::kUnavailable, RetryAdvice::kRetry},
      {TokenErrc::kIoError, "IO_ERROR", Errc::kUnavailable, RetryAdvice::kRetry,
       Errc::kUnavailable, RetryAdvice::kRetry},
      {TokenErrc::kStoreUnavailable, "STORE_UNAVAILABLE", Errc::kUnavailable, RetryAdvice::kRetry,
       Errc::kUnavailable, RetryAdvice::kRetry},
  };
  ASSERT_EQ(std::size(cases), static_cast<std::size_t>(TokenErrc::kStoreUnavailable));
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_EQ(token_errc_name(c.kind), c.name);
    const Status s(c.kind, "token 7 (owner alice)");
    EXPECT_TRUE(s.is(c.kind));
    EXPECT_EQ(s.to_string(), std::string(c.name) + ": token 7 (owner alice)");
    EXPECT_EQ(to_wire_errc(s.code), c.as_is);
    EXPECT_EQ(s.code.default_error_condition(),
              std::error_condition(static_cast<int>(c.as_is), authrpc_category()));
    EXPECT_EQ(retry_advice(s.code), c.as_is_advice);
    EXPECT_EQ(token_authentication_errc(c.kind), c.at_authentication);

    const Status service = token_status(s, TokenUse::kService);
    EXPECT_EQ(service.code, make_error_code(c.as_is));
    EXPECT_EQ(service.message, std::string("token: ") + c.name + ": token 7 (owner alice)");
    const Status auth = token_status(s, TokenUse::kAuthentication, "token-digest");
    EXPECT_EQ(auth.code, make_error_code(c.at_authentication));
    EXPECT_EQ(retry_advice(auth.code), c.authentication_advice);
    EXPECT_EQ(auth.message, std::string("token-digest: ") + c.name + ": token 7 (owner alice)");
  }
  EXPECT_TRUE(token_status({}, TokenUse::kAuthentication).ok());
  // A failure from outside the token code keeps its own code.
  const Status closed =
      token_status(Status(Errc::kConnectionClosed, "peer left"), TokenUse::kAuthentication);
  EXPECT_EQ(closed.code, make_error_code(Errc::kConnectionClosed));
}

TEST(TokenErrors, ResultsCarryTheKind) {
  const Result<Token> bad = Token::decode("");
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(bad.is(TokenErrc::kMalformed));
  EXPECT_FALSE(bad.is(TokenErrc::kForged));
  EXPECT_FALSE(bad.is(Errc::kInvalidArgument)) << "is() names the exact kind, not its condition";
  EXPECT_EQ(to_wire_errc(bad.code()), Errc::kInvalidArgument);
}

// ---------------------------------------------------------------------------
// Tamper detection through a real secret manager: flipping any bit pattern
// of any byte of the identifier or password is refused.

class TokenTamper : public ::testing::Test {
 protected:
  void SetUp() override {
    SecretManagerOptions options;
    options.clock = clock_;
    auto m = SecretManager::open(store_, options);
    ASSERT_TRUE(m.ok()) << m.status().to_string();
    manager_ = std::move(*m);
    auto t = manager_->issue({"alice", "yarn", "oozie", "tcp://db1:7000"});
    ASSERT_TRUE(t.ok()) << t.status().to_string();
    token_ = *t;
    ASSERT_TRUE(manager_->verify(token_).ok());
  }

  std::shared_ptr<ManualClock> clock_ = std::make_shared<ManualClock>(at(1'700'000'000'000));
  std::shared_ptr<MemoryTokenStore> store_ = std::make_shared<MemoryTokenStore>();
  std::unique_ptr<SecretManager> manager_;
  Token token_;
};

TEST_F(TokenTamper, EveryIdentifierByteFlipIsRejected) {
  std::set<TokenErrc> seen;
  for (std::size_t i = 0; i < token_.identifier.size(); ++i) {
    for (int mask : {0x01, 0x80, 0xff}) {
      Token bad = token_;
      bad.identifier[i] = static_cast<char>(bad.identifier[i] ^ mask);
      auto r = manager_->verify(bad);
      ASSERT_FALSE(r.ok()) << "byte " << i << " ^ " << mask << " accepted";
      seen.insert(static_cast<TokenErrc>(r.code().value()));
      // Without the password (SASL servers look the password up), a changed
      // identifier must not map to the real token's password either.
      auto p = manager_->retrieve_password(bad.identifier);
      if (p.ok()) {
        ASSERT_FALSE(p->password.equals(token_.password)) << "byte " << i << " ^ " << mask;
      }
    }
  }
  // Each way of failing shows up: bad encoding, another token, another key, forged.
  EXPECT_TRUE(seen.contains(TokenErrc::kMalformed));
  EXPECT_TRUE(seen.contains(TokenErrc::kUnsupportedVersion));
  EXPECT_TRUE(seen.contains(TokenErrc::kForged));
  EXPECT_TRUE(seen.contains(TokenErrc::kUnknownKey));
}

TEST_F(TokenTamper, EveryPasswordByteFlipIsForged) {
  for (std::size_t i = 0; i < token_.password.size(); ++i) {
    for (int mask : {0x01, 0x80, 0xff}) {
      Token bad = token_;
      bad.password.data()[i] ^= static_cast<std::uint8_t>(mask);
      auto r = manager_->verify(bad);
      ASSERT_TRUE(r.is(TokenErrc::kForged)) << "byte " << i << ": " << r.status().to_string();
    }
  }
  Token shorter = token_;
  shorter.password = SecretBytes(token_.password.view().substr(0, 31));
  EXPECT_TRUE(manager_->verify(shorter).is(TokenErrc::kForged));
}

TEST_F(TokenTamper, EveryStringCharacterChangeIsRejected) {
  auto text = *token_.to_string();
  for (std::size_t i = 0; i < text.size(); ++i) {
    std::string bad = text;
    bad[i] = bad[i] == 'A' ? 'B' : 'A';
    auto parsed = Token::from_string(bad);
    if (!parsed.ok()) continue;
    // Kind and service are not signed: only identifier and password matter.
    if (parsed->identifier == token_.identifier && parsed->password.equals(token_.password)) continue;
    ASSERT_FALSE(manager_->verify(*parsed).ok()) << "character " << i;
  }
}

TEST_F(TokenTamper, ErrorTextNeverShowsSecrets) {
  auto state = *store_->load();
  ASSERT_EQ(state.keys.size(), 1u);
  const std::string secrets[] = {hex(token_.password.view()), base64url_encode(token_.password.view()),
                                 std::string(token_.password.view()), hex(state.keys[0].secret.view()),
                                 *token_.to_string()};
  std::vector<Status> failures;
  Token forged = token_;
  forged.password.data()[0] ^= 1;
  failures.push_back(manager_->verify(forged).status());
  failures.push_back(manager_->renew(token_, "mallory").status());
  failures.push_back(manager_->cancel(token_, "mallory"));
  clock_->advance(hours(24 * 30));
  failures.push_back(manager_->verify(token_).status());
  for (const auto& s : failures) {
    ASSERT_FALSE(s.ok());
    for (const auto& secret : secrets) {
      EXPECT_EQ(s.to_string().find(secret), std::string::npos) << s.to_string();
    }
  }
}

// ---------------------------------------------------------------------------
// Credentials file

class CredentialsFileTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(dir_.ok()); }

  void write_text(const std::string& text) { std::ofstream(path_) << text; }

  authrpc::testing::ScopedTempDir dir_{"creds"};
  const std::string path_ = dir_.file("tokens.json");
};

Token token_for(std::string service, std::uint64_t seq) {
  Token t = sample_token();
  auto id = sample_identifier();
  id.sequence_number = seq;
  t.identifier = *id.encode();
  t.service = std::move(service);
  return t;
}

TEST_F(CredentialsFileTest, WriteReadRoundTripIsPrivate) {
  mode_t old = ::umask(0);  // the file is 0600 whatever the umask
  CredentialsFile file;
  file.add(token_for("tcp://b:1", 1));
  file.add(token_for("tcp://a:1", 2));
  file.add(token_for("unix:/run/x.sock", 3));
  file.add(token_for("tcp://b:1", 4));  // replaces the first
  auto s = file.write(path_);
  ::umask(old);
  ASSERT_TRUE(s.ok()) << s.to_string();
  struct stat st {};
  ASSERT_EQ(::stat(path_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_FALSE(std::filesystem::exists(path_ + ".tmp"));

  auto back = CredentialsFile::read(path_);
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  ASSERT_EQ(back->tokens().size(), 3u);
  EXPECT_EQ(back->tokens()[0].service, "tcp://a:1");
  auto b = back->find("tcp://b:1");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->decode_identifier()->sequence_number, 4u);
  expect_same(*b, token_for("tcp://b:1", 4));
  EXPECT_TRUE(back->find("tcp://c:1").is(TokenErrc::kNotFound));
  EXPECT_TRUE(back->remove("tcp://a:1"));
  EXPECT_FALSE(back->remove("tcp://a:1"));

  // Rewriting an existing, too-open file leaves it 0600 as well.
  ASSERT_EQ(::chmod(path_.c_str(), 0644), 0);
  ASSERT_TRUE(back->write(path_).ok());
  ASSERT_EQ(::stat(path_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(CredentialsFile::read(path_)->tokens().size(), 2u);
}

TEST_F(CredentialsFileTest, LocateFlagThenEnvironment) {
  const char* saved = std::getenv(kTokenFileEnv);
  std::string saved_value = saved ? saved : "";
  ::unsetenv(kTokenFileEnv);
  EXPECT_EQ(CredentialsFile::locate(""), "");
  EXPECT_EQ(CredentialsFile::locate("/x/flag.json"), "/x/flag.json");
  ::setenv(kTokenFileEnv, "/x/env.json", 1);
  EXPECT_EQ(CredentialsFile::locate(""), "/x/env.json");
  EXPECT_EQ(CredentialsFile::locate("/x/flag.json"), "/x/flag.json");
  if (saved) {
    ::setenv(kTokenFileEnv, saved_value.c_str(), 1);
  } else {
    ::unsetenv(kTokenFileEnv);
  }
}

TEST_F(CredentialsFileTest, BadFilesAreTyped) {
  auto good = *token_for("tcp://a:1", 1).to_string();
  struct Case {
    const char* name;
    std::string text;
    TokenErrc want;
  };
  const std::vector<Case> cases = {
      {"empty", "", TokenErrc::kMalformed},
      {"not_json", "tokens: yes", TokenErrc::kMalformed},
      {"array", "[]", TokenErrc::kMalformed},
      {"no_version", R"({"tokens": {}})", TokenErrc::kMalformed},
      {"version_2", R"({"version": 2, "tokens": {}})", TokenErrc::kUnsupportedVersion},
      {"no_tokens", R"({"version": 1})", TokenErrc::kMalformed},
      {"token_not_string", R"({"version": 1, "tokens": {"tcp://a:1": 5}})", TokenErrc::kMalformed},
      {"token_garbage", R"({"version": 1, "tokens": {"tcp://a:1": "AAAA"}})", TokenErrc::kMalformed},
      {"wrong_service", R"({"version": 1, "tokens": {"tcp://b:1": ")" + good + R"("}})", TokenErrc::kMalformed},
  };
  for (const auto& c : cases) {
    write_text(c.text);
    auto r = CredentialsFile::read(path_);
    EXPECT_TRUE(r.is(c.want)) << c.name << ": " << r.status().to_string();
    EXPECT_EQ(r.status().to_string().find(good), std::string::npos) << c.name;
  }
  write_text(R"({"version": 1, "tokens": {"tcp://a:1": ")" + good + R"("}})");
  EXPECT_TRUE(CredentialsFile::read(path_).ok());
  EXPECT_TRUE(CredentialsFile::read(dir_.file("missing.json")).is(TokenErrc::kIoError));
}

}  // namespace
}  // namespace authrpc::security
