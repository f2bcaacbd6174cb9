// Kerberos failures as Statuses (components/kerberos/kerberos_errors.h): how a
// failed GSSAPI call's major and minor codes are classified, what the kerberos
// mechanisms then report and what a caller is advised to do (an expired ticket:
// log in again), and KerberosCredentials' factories failing without a KDC.
// tests/kerberos_itest.cc checks the same against a real KDC.
#include "authrpc/components/kerberos/kerberos_errors.h"

#include <gssapi/gssapi_krb5.h>
#include <gtest/gtest.h>
#include <krb5/krb5.h>

#include <cctype>
#include <filesystem>
#include <string>

#include "authrpc/components/kerberos/kerberos_credentials.h"
#include "tests/testing/test_support.h"

namespace authrpc::security {
namespace {

using testing::Describe;
using testing::TempDir;

struct Case {
  const char* name;
  OM_uint32 major;
  krb5_error_code minor;
  KerberosErrc general;   // gss_status()
  KerberosErrc accepted;  // gss_accept_status()
  Errc reported;          // kerberos_status(gss_status())
  RetryAdvice advice;
};

const Case kCases[] = {
    {"expired ticket", GSS_S_FAILURE, KRB5KRB_AP_ERR_TKT_EXPIRED, KerberosErrc::kCredentialsExpired,
     KerberosErrc::kCredentialsExpired, Errc::kCredentialsExpired, RetryAdvice::kReauthenticate},
    {"revoked TGT", GSS_S_FAILURE, KRB5KDC_ERR_TGT_REVOKED, KerberosErrc::kCredentialsExpired,
     KerberosErrc::kCredentialsExpired, Errc::kCredentialsExpired, RetryAdvice::kReauthenticate},
    {"no ticket cache", GSS_S_NO_CRED, KRB5_FCC_NOFILE, KerberosErrc::kCredentialsExpired,
     KerberosErrc::kNotAnApReq, Errc::kCredentialsExpired, RetryAdvice::kReauthenticate},
    {"empty ticket cache", GSS_S_FAILURE, KRB5_CC_NOTFOUND, KerberosErrc::kCredentialsExpired,
     KerberosErrc::kCredentialsExpired, Errc::kCredentialsExpired, RetryAdvice::kReauthenticate},
    {"end of cache", GSS_S_FAILURE, KRB5_CC_END, KerberosErrc::kCredentialsExpired,
     KerberosErrc::kCredentialsExpired, Errc::kCredentialsExpired, RetryAdvice::kReauthenticate},
    {"no credentials, no mechanism code", GSS_S_NO_CRED, 0, KerberosErrc::kCredentialsExpired,
     KerberosErrc::kNotAnApReq, Errc::kCredentialsExpired, RetryAdvice::kReauthenticate},
    {"GSS credentials expired", GSS_S_CREDENTIALS_EXPIRED, 0, KerberosErrc::kCredentialsExpired,
     KerberosErrc::kCredentialsExpired, Errc::kCredentialsExpired, RetryAdvice::kReauthenticate},
    {"expired ticket inside a NO_CRED", GSS_S_NO_CRED, KRB5KRB_AP_ERR_TKT_EXPIRED,
     KerberosErrc::kCredentialsExpired, KerberosErrc::kCredentialsExpired, Errc::kCredentialsExpired,
     RetryAdvice::kReauthenticate},
    {"KDC unreachable", GSS_S_FAILURE, KRB5_KDC_UNREACH, KerberosErrc::kKdcUnavailable,
     KerberosErrc::kKdcUnavailable, Errc::kUnavailable, RetryAdvice::kRetry},
    {"realm unknown", GSS_S_FAILURE, KRB5_REALM_CANT_RESOLVE, KerberosErrc::kKdcUnavailable,
     KerberosErrc::kKdcUnavailable, Errc::kUnavailable, RetryAdvice::kRetry},
    {"garbage token", GSS_S_DEFECTIVE_TOKEN, 0, KerberosErrc::kFailed, KerberosErrc::kNotAnApReq,
     Errc::kAuthenticationFailed, RetryAdvice::kGiveUp},
    {"another mechanism's token", GSS_S_BAD_MECH, 0, KerberosErrc::kFailed,
     KerberosErrc::kNotAnApReq, Errc::kAuthenticationFailed, RetryAdvice::kGiveUp},
    {"defective credential", GSS_S_DEFECTIVE_CREDENTIAL, 0, KerberosErrc::kFailed,
     KerberosErrc::kNotAnApReq, Errc::kAuthenticationFailed, RetryAdvice::kGiveUp},
    {"clock skew", GSS_S_FAILURE, KRB5KRB_AP_ERR_SKEW, KerberosErrc::kFailed, KerberosErrc::kFailed,
     Errc::kAuthenticationFailed, RetryAdvice::kGiveUp},
    {"clock skew with NO_CRED", GSS_S_NO_CRED, KRB5KRB_AP_ERR_SKEW,
     KerberosErrc::kCredentialsExpired, KerberosErrc::kCredentialsExpired,
     Errc::kCredentialsExpired, RetryAdvice::kReauthenticate},
    {"replay", GSS_S_FAILURE, KRB5KRB_AP_ERR_REPEAT, KerberosErrc::kFailed,
     KerberosErrc::kFailed, Errc::kAuthenticationFailed, RetryAdvice::kGiveUp},
    {"unknown server principal", GSS_S_FAILURE, KRB5KDC_ERR_S_PRINCIPAL_UNKNOWN,
     KerberosErrc::kFailed, KerberosErrc::kFailed, Errc::kAuthenticationFailed,
     RetryAdvice::kGiveUp},
    {"unspecified failure", GSS_S_FAILURE, 0, KerberosErrc::kFailed, KerberosErrc::kFailed,
     Errc::kAuthenticationFailed, RetryAdvice::kGiveUp},
};

class KerberosErrorsTest : public ::testing::TestWithParam<Case> {};

TEST_P(KerberosErrorsTest, ClassifiesReportsAndAdvises) {
  const Case& c = GetParam();
  const auto minor = static_cast<OM_uint32>(c.minor);
  const Status general = gss_status(c.major, minor, "init");
  EXPECT_TRUE(general.is(c.general)) << general.code.message() << ": " << general.message;
  EXPECT_EQ(retry_advice(general.code), c.advice);
  EXPECT_TRUE(general.message.starts_with("init: ")) << general.message;

  const Status accepted = gss_accept_status(c.major, minor, "accept");
  EXPECT_TRUE(accepted.is(c.accepted)) << accepted.code.message() << ": " << accepted.message;

  const Status reported = kerberos_status(general);
  EXPECT_EQ(reported.code, make_error_code(c.reported)) << reported.to_string();
  EXPECT_EQ(reported.message, "kerberos: " + general.message);
  EXPECT_EQ(retry_advice(reported.code), c.advice);
  EXPECT_EQ(to_wire_errc(general.code), c.reported);

  const bool skew = c.minor == KRB5KRB_AP_ERR_SKEW;
  EXPECT_EQ(general.message.find("clocks differ") != std::string::npos, skew) << general.message;
}

INSTANTIATE_TEST_SUITE_P(Codes, KerberosErrorsTest, ::testing::ValuesIn(kCases),
                         [](const auto& param_info) {
                           std::string name;
                           for (const char* p = param_info.param.name; *p; ++p) {
                             name += std::isalnum(static_cast<unsigned char>(*p)) ? *p : '_';
                           }
                           return name;
                         });

TEST(KerberosErrors, SuccessIsOk) {
  EXPECT_TRUE(gss_status(GSS_S_COMPLETE, 0, "init").ok());
  EXPECT_TRUE(gss_status(GSS_S_CONTINUE_NEEDED, 0, "init").ok());
  EXPECT_TRUE(gss_accept_status(GSS_S_COMPLETE, 0, "accept").ok());
  EXPECT_TRUE(kerberos_status(Status()).ok());
}

TEST(KerberosErrors, NotAnApReqIsReportedAsSuch) {
  const Status s = kerberos_status(gss_accept_status(GSS_S_DEFECTIVE_TOKEN, 0, "accept"));
  EXPECT_EQ(s.code, make_error_code(Errc::kAuthenticationFailed));
  EXPECT_TRUE(s.message.starts_with(
      "kerberos: the client's token is not a Kerberos AP-REQ this server accepts (accept: "))
      << s.message;
}

TEST(KerberosErrors, AnotherCategoryKeepsItsCode) {
  const Status s = kerberos_status(Status(Errc::kConfigError, "bad"));
  EXPECT_EQ(s.code, make_error_code(Errc::kConfigError));
  EXPECT_EQ(s.message, "kerberos: bad");
}

// The factories, with no KDC and nothing to read: a client without a ticket
// cache is told to log in (kinit), not that authentication failed.
TEST(KerberosCredentialsErrors, MissingTicketCacheIsCredentialsExpired) {
  const std::string dir = TempDir("kerberos-errors");
  ASSERT_FALSE(dir.empty());
  KerberosCredentials::InitiatorOptions options;
  options.ccache = "FILE:" + dir + "/no-such-ccache";
  auto credentials = KerberosCredentials::initiator(options);
  ASSERT_FALSE(credentials.ok());
  EXPECT_TRUE(credentials.is(KerberosErrc::kCredentialsExpired)) << Describe(credentials);
  EXPECT_EQ(retry_advice(credentials.code()), RetryAdvice::kReauthenticate);
  EXPECT_EQ(kerberos_status(credentials.status()).code,
            make_error_code(Errc::kCredentialsExpired));
  EXPECT_EQ(credentials.status().message.rfind("no Kerberos ticket in ticket cache " + options.ccache +
                                                   ": run kinit (",
                                               0),
            0u)
      << Describe(credentials);
  std::filesystem::remove_all(dir);
}

// A client keytab that cannot be read is said to be one (MIT reports it as
// an empty ticket cache), UNAUTHENTICATED as other unreadable credentials
// files are.
TEST(KerberosCredentialsErrors, AClientKeytabThatCannotBeReadIsUnauthenticated) {
  KerberosCredentials::InitiatorOptions options;
  options.keytab = "/nonexistent-authrpc/client.keytab";
  options.principal = "alice@EXAMPLE.COM";
  auto credentials = KerberosCredentials::initiator(options);
  ASSERT_FALSE(credentials.ok());
  EXPECT_EQ(credentials.code(), make_error_code(Errc::kUnauthenticated)) << Describe(credentials);
  EXPECT_EQ(credentials.status().message,
            "cannot read keytab /nonexistent-authrpc/client.keytab: No such file or directory");
  EXPECT_EQ(retry_advice(credentials.code()), RetryAdvice::kReauthenticate);
}

TEST(KerberosCredentialsErrors, ClientKeytabWithoutPrincipalIsAConfigError) {
  KerberosCredentials::InitiatorOptions options;
  options.keytab = "/nonexistent.keytab";
  auto credentials = KerberosCredentials::initiator(options);
  ASSERT_FALSE(credentials.ok());
  EXPECT_EQ(credentials.code(), make_error_code(Errc::kConfigError)) << Describe(credentials);
}

TEST(KerberosCredentialsErrors, MissingKeytabFailsAtStartup) {
  const std::string dir = TempDir("kerberos-errors");
  ASSERT_FALSE(dir.empty());
  KerberosCredentials::AcceptorOptions options;
  options.keytab = dir + "/no-such.keytab";
  options.principal = "rpc/localhost@EXAMPLE.COM";
  auto credentials = KerberosCredentials::acceptor(options);
  ASSERT_FALSE(credentials.ok());
  EXPECT_EQ(credentials.code().category(), kerberos_category()) << Describe(credentials);
  EXPECT_NE(credentials.status().message.find("no-such.keytab"), std::string::npos)
      << Describe(credentials);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace authrpc::security
