// Unit tests for base/status.h and base/result.h: code names, wire mapping,
// retry advice, Status::to_string and Result<T>.
#include "authrpc/base/status.h"

#include <gtest/gtest.h>

#include <asio/error.hpp>
#include <memory>
#include <ostream>
#include <string>
#include <system_error>
#include <vector>

#include "authrpc/base/result.h"

namespace authrpc {
namespace {

struct CodeCase {
  Errc code;
  std::uint16_t wire;
  const char* name;
  RetryAdvice advice;
};

void PrintTo(const CodeCase& c, std::ostream* os) { *os << c.name; }

// Every code: its wire value, its name, and what a caller should do about it.
const std::vector<CodeCase>& all_codes() {
  static const std::vector<CodeCase> cases = {
      {Errc::kOk, 0, "OK", RetryAdvice::kNone},
      {Errc::kCancelled, 1, "CANCELLED", RetryAdvice::kGiveUp},
      {Errc::kUnknown, 2, "UNKNOWN", RetryAdvice::kGiveUp},
      {Errc::kInvalidArgument, 3, "INVALID_ARGUMENT", RetryAdvice::kGiveUp},
      {Errc::kDeadlineExceeded, 4, "DEADLINE_EXCEEDED", RetryAdvice::kRetry},
      {Errc::kNotFound, 5, "NOT_FOUND", RetryAdvice::kGiveUp},
      {Errc::kAlreadyExists, 6, "ALREADY_EXISTS", RetryAdvice::kGiveUp},
      {Errc::kPermissionDenied, 7, "PERMISSION_DENIED", RetryAdvice::kGiveUp},
      {Errc::kResourceExhausted, 8, "RESOURCE_EXHAUSTED", RetryAdvice::kRetry},
      {Errc::kFailedPrecondition, 9, "FAILED_PRECONDITION", RetryAdvice::kGiveUp},
      {Errc::kAborted, 10, "ABORTED", RetryAdvice::kRetry},
      {Errc::kOutOfRange, 11, "OUT_OF_RANGE", RetryAdvice::kGiveUp},
      {Errc::kUnimplemented, 12, "UNIMPLEMENTED", RetryAdvice::kGiveUp},
      {Errc::kInternal, 13, "INTERNAL", RetryAdvice::kGiveUp},
      {Errc::kUnavailable, 14, "UNAVAILABLE", RetryAdvice::kRetry},
      {Errc::kDataLoss, 15, "DATA_LOSS", RetryAdvice::kGiveUp},
      {Errc::kUnauthenticated, 16, "UNAUTHENTICATED", RetryAdvice::kReauthenticate},
      {Errc::kProtocolError, 100, "PROTOCOL_ERROR", RetryAdvice::kGiveUp},
      {Errc::kFrameTooLarge, 101, "FRAME_TOO_LARGE", RetryAdvice::kGiveUp},
      {Errc::kUnsupportedVersion, 102, "UNSUPPORTED_VERSION", RetryAdvice::kGiveUp},
      {Errc::kMechanismUnavailable, 103, "MECHANISM_UNAVAILABLE", RetryAdvice::kGiveUp},
      {Errc::kAuthenticationFailed, 104, "AUTHENTICATION_FAILED", RetryAdvice::kGiveUp},
      {Errc::kCredentialsExpired, 105, "CREDENTIALS_EXPIRED", RetryAdvice::kReauthenticate},
      {Errc::kNegotiationTimeout, 106, "NEGOTIATION_TIMEOUT", RetryAdvice::kRetry},
      {Errc::kServerBusy, 107, "SERVER_BUSY", RetryAdvice::kRetry},
      {Errc::kConnectionClosed, 108, "CONNECTION_CLOSED", RetryAdvice::kRetry},
      {Errc::kIdleTimeout, 109, "IDLE_TIMEOUT", RetryAdvice::kRetry},
      {Errc::kConfigError, 110, "CONFIG_ERROR", RetryAdvice::kGiveUp},
  };
  return cases;
}

class ErrcTableTest : public ::testing::TestWithParam<CodeCase> {};

TEST_P(ErrcTableTest, WireValueAndName) {
  const auto& c = GetParam();
  EXPECT_EQ(static_cast<std::uint16_t>(c.code), c.wire);
  EXPECT_EQ(errc_name(c.code), c.name);
  EXPECT_EQ(errc_from_wire(c.wire), c.code);
  EXPECT_EQ(make_error_code(c.code).message(), c.name);
}

TEST_P(ErrcTableTest, RetryAdvice) {
  const auto& c = GetParam();
  EXPECT_EQ(retry_advice(make_error_code(c.code)), c.advice)
      << c.name << " → " << to_string(retry_advice(make_error_code(c.code)));
}

TEST_P(ErrcTableTest, ToWireIsIdentityForAuthrpcCodes) {
  const auto& c = GetParam();
  EXPECT_EQ(to_wire_errc(make_error_code(c.code)), c.code);
}

INSTANTIATE_TEST_SUITE_P(AllCodes, ErrcTableTest, ::testing::ValuesIn(all_codes()),
                         [](const auto& tp) { return std::string(tp.param.name); });

TEST(ErrcTest, ErrorCodeBasics) {
  const std::error_code ec = Errc::kFrameTooLarge;  // implicit via is_error_code_enum
  EXPECT_EQ(ec, Errc::kFrameTooLarge);
  EXPECT_NE(ec, Errc::kProtocolError);
  EXPECT_EQ(ec.category(), authrpc_category());
  EXPECT_STREQ(authrpc_category().name(), "authrpc");
  EXPECT_EQ(ec.value(), 101);
  EXPECT_TRUE(static_cast<bool>(ec));
  // kOk converts to a "no error" code.
  EXPECT_FALSE(static_cast<bool>(make_error_code(Errc::kOk)));
}

TEST(ErrcTest, FromWireMapsUnknownValuesToUnknown) {
  for (const std::uint16_t v : {17, 18, 50, 99, 111, 200, 1000, 0x7FFF, 0xFFFF}) {
    EXPECT_EQ(errc_from_wire(v), Errc::kUnknown) << v;
  }
  EXPECT_EQ(errc_name(static_cast<Errc>(4242)), "UNKNOWN");
}

TEST(ErrcTest, EveryWireValueMapsToANamedCode) {
  for (std::uint32_t v = 0; v <= 0xFFFF; ++v) {
    const Errc e = errc_from_wire(static_cast<std::uint16_t>(v));
    const bool named = errc_name(e) != "UNKNOWN" || e == Errc::kUnknown;
    ASSERT_TRUE(named) << v;
  }
}

// ---------------------------------------------------------------------------
// System / asio codes

struct ForeignCase {
  const char* name;
  std::error_code code;
  Errc wire;
  RetryAdvice advice;
};

void PrintTo(const ForeignCase& c, std::ostream* os) { *os << c.name; }

class ForeignCodeTest : public ::testing::TestWithParam<ForeignCase> {};

TEST_P(ForeignCodeTest, WireAndAdvice) {
  const auto& c = GetParam();
  EXPECT_EQ(to_wire_errc(c.code), c.wire) << c.code.message();
  EXPECT_EQ(retry_advice(c.code), c.advice)
      << c.code.message() << " → " << to_string(retry_advice(c.code));
}

INSTANTIATE_TEST_SUITE_P(
    Table, ForeignCodeTest,
    ::testing::Values(
        ForeignCase{"none", std::error_code(), Errc::kOk, RetryAdvice::kNone},
        ForeignCase{"connection_refused", asio::error::connection_refused, Errc::kUnavailable,
                    RetryAdvice::kRetry},
        ForeignCase{"generic_connection_refused",
                    std::make_error_code(std::errc::connection_refused), Errc::kUnavailable,
                    RetryAdvice::kRetry},
        ForeignCase{"connection_reset", asio::error::connection_reset, Errc::kUnavailable,
                    RetryAdvice::kRetry},
        ForeignCase{"broken_pipe", asio::error::broken_pipe, Errc::kUnavailable,
                    RetryAdvice::kRetry},
        ForeignCase{"network_unreachable", asio::error::network_unreachable, Errc::kUnavailable,
                    RetryAdvice::kRetry},
        ForeignCase{"host_unreachable", asio::error::host_unreachable, Errc::kUnavailable,
                    RetryAdvice::kRetry},
        ForeignCase{"eof", asio::error::eof, Errc::kUnavailable, RetryAdvice::kRetry},
        ForeignCase{"try_again", std::make_error_code(std::errc::resource_unavailable_try_again),
                    Errc::kUnavailable, RetryAdvice::kRetry},
        ForeignCase{"timed_out", asio::error::timed_out, Errc::kDeadlineExceeded,
                    RetryAdvice::kRetry},
        ForeignCase{"operation_aborted", asio::error::operation_aborted, Errc::kCancelled,
                    RetryAdvice::kRetry},
        ForeignCase{"address_family_not_supported", asio::error::address_family_not_supported,
                    Errc::kUnknown, RetryAdvice::kGiveUp},
        ForeignCase{"invalid_argument", asio::error::invalid_argument, Errc::kUnknown,
                    RetryAdvice::kGiveUp},
        ForeignCase{"no_such_file", std::make_error_code(std::errc::no_such_file_or_directory),
                    Errc::kUnknown, RetryAdvice::kGiveUp},
        ForeignCase{"no_such_file_system",
                    std::error_code(ENOENT, std::system_category()), Errc::kUnknown,
                    RetryAdvice::kGiveUp},
        ForeignCase{"permission_denied", std::error_code(EACCES, std::system_category()),
                    Errc::kUnknown, RetryAdvice::kGiveUp}),
    [](const auto& tp) { return std::string(tp.param.name); });

TEST(RetryAdviceTest, Names) {
  EXPECT_EQ(to_string(RetryAdvice::kNone), "none");
  EXPECT_EQ(to_string(RetryAdvice::kRetry), "retry");
  EXPECT_EQ(to_string(RetryAdvice::kReauthenticate), "reauthenticate");
  EXPECT_EQ(to_string(RetryAdvice::kGiveUp), "give-up");
}

TEST(RetryAdviceTest, UnknownAuthrpcValueIsGiveUp) {
  EXPECT_EQ(retry_advice(make_error_code(static_cast<Errc>(555))), RetryAdvice::kGiveUp);
}

// ---------------------------------------------------------------------------
// Status

TEST(StatusTest, DefaultIsOk) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.to_string(), "OK");
  EXPECT_TRUE(Status(std::error_code()).ok());
  EXPECT_TRUE(Status(Errc::kOk, "ignored").ok());
}

TEST(StatusTest, ToString) {
  EXPECT_EQ(Status(Errc::kPermissionDenied, "user bob may not call x.y").to_string(),
            "PERMISSION_DENIED: user bob may not call x.y");
  EXPECT_EQ(Status(Errc::kDeadlineExceeded).to_string(), "DEADLINE_EXCEEDED");
  EXPECT_EQ(Status(Errc::kConfigError, "bad").to_string(), "CONFIG_ERROR: bad");
  const std::error_code refused = asio::error::connection_refused;
  EXPECT_EQ(Status(refused, "connect tcp://127.0.0.1:1").to_string(),
            refused.message() + ": connect tcp://127.0.0.1:1");
  EXPECT_EQ(Status(refused).to_string(), refused.message());
}

TEST(StatusTest, Fields) {
  Status s(Errc::kNotFound, "no method a.b");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code, Errc::kNotFound);
  EXPECT_EQ(s.message, "no method a.b");
}

// A domain's category as token_errors.h declares one: codes with names, each
// mapped onto the Errc that says what to do.
enum class FruitErrc { kBruised = 1, kMissing = 2 };

class FruitCategory final : public NamedErrorCategory {
 public:
  const char* name() const noexcept override { return "test.fruit"; }
  std::string message(int value) const override { return value == 1 ? "bruised fruit" : "no fruit"; }
  std::string_view code_name(int value) const noexcept override {
    return value == 1 ? "BRUISED" : "MISSING";
  }
  std::error_condition default_error_condition(int value) const noexcept override {
    const Errc e = value == 1 ? Errc::kInvalidArgument : Errc::kUnavailable;
    return {static_cast<int>(e), authrpc_category()};
  }
};

std::error_code fruit(FruitErrc e) {
  static const FruitCategory category;
  return {static_cast<int>(e), category};
}

TEST(StatusTest, ADomainCategoryKeepsItsKindAndNameAndTakesItsConditionsAdvice) {
  const Status bruised(fruit(FruitErrc::kBruised), "apple 3");
  EXPECT_EQ(bruised.to_string(), "BRUISED: apple 3") << "a named category prints the name, not message()";
  EXPECT_TRUE(bruised.is(fruit(FruitErrc::kBruised)));
  EXPECT_FALSE(bruised.is(fruit(FruitErrc::kMissing)));
  EXPECT_FALSE(bruised.is(Errc::kInvalidArgument)) << "is() is the exact kind, not its condition";
  EXPECT_EQ(to_wire_errc(bruised.code), Errc::kInvalidArgument);
  EXPECT_EQ(retry_advice(bruised.code), RetryAdvice::kGiveUp);
  const Status missing(fruit(FruitErrc::kMissing));
  EXPECT_EQ(missing.to_string(), "MISSING");
  EXPECT_EQ(to_wire_errc(missing.code), Errc::kUnavailable);
  EXPECT_EQ(retry_advice(missing.code), RetryAdvice::kRetry);

  const Result<int> r(fruit(FruitErrc::kMissing), "none left");
  EXPECT_TRUE(r.is(fruit(FruitErrc::kMissing)));
  EXPECT_EQ(r.status().to_string(), "MISSING: none left");
  EXPECT_FALSE(Result<int>(7).is(fruit(FruitErrc::kMissing))) << "a value is no failure";
  EXPECT_TRUE(Status(Errc::kNotFound, "x").is(Errc::kNotFound));
  EXPECT_FALSE(Status().is(Errc::kNotFound));
}

// ---------------------------------------------------------------------------
// Result<T>

TEST(ResultTest, DefaultIsUnknownError) {
  Result<int> r;
  EXPECT_FALSE(r.ok());
  EXPECT_FALSE(static_cast<bool>(r));
  EXPECT_EQ(r.code(), Errc::kUnknown);
}

TEST(ResultTest, HoldsAValue) {
  Result<std::string> r(std::string("value"));
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(static_cast<bool>(r));
  EXPECT_EQ(r.value(), "value");
  EXPECT_EQ(*r, "value");
  EXPECT_EQ(r->size(), 5u);
  EXPECT_TRUE(r.status().ok());
  EXPECT_FALSE(r.code());
  r.value() += "!";
  EXPECT_EQ(r.value(), "value!");
  const Result<std::string>& cr = r;
  EXPECT_EQ(cr.value(), "value!");
  EXPECT_EQ(cr->size(), 6u);
}

TEST(ResultTest, HoldsAnError) {
  Result<int> a(Errc::kNotFound, "missing");
  EXPECT_FALSE(a.ok());
  EXPECT_EQ(a.code(), Errc::kNotFound);
  EXPECT_EQ(a.status().message, "missing");
  EXPECT_EQ(a.status().to_string(), "NOT_FOUND: missing");

  Result<int> b(Status(Errc::kInternal, "boom"));
  EXPECT_EQ(b.code(), Errc::kInternal);
  EXPECT_EQ(b.status().message, "boom");

  Result<int> c = Status(asio::error::connection_refused, "x");
  EXPECT_EQ(c.code(), asio::error::connection_refused);
}

TEST(ResultTest, MoveOnlyValue) {
  Result<std::unique_ptr<int>> r(std::make_unique<int>(42));
  ASSERT_TRUE(r.ok());
  std::unique_ptr<int> p = std::move(r).value();
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(*p, 42);
}

TEST(ResultTest, Reassign) {
  Result<int> r = 5;
  EXPECT_TRUE(r.ok());
  r = Status(Errc::kAborted);
  EXPECT_EQ(r.code(), Errc::kAborted);
  r = 7;
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.value(), 7);
}

}  // namespace
}  // namespace authrpc
