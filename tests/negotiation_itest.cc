// Negotiation of every built-in mechanism, as one table: client mechanisms ×
// server mechanisms × channel (plaintext tcp://, unix://, TLS, mutual TLS, a
// plaintext client of an optional-TLS server) → the outcome the client sees
// (the mechanism chosen and the user the server authenticated, or the Errc).
// Real components only: a real KDC (tests/kerberos_realm.h), real TLS with a
// throwaway CA (tests/test_tls.h), real Cyrus SASL plugins, a real
// SecretManager issuing delegation tokens, real Servers and Clients on
// loopback (tests/test_server.h). The negotiation logic itself (fallback
// order, refusals, pipelining) is tabled with test mechanisms in
// negotiation_test.cc; this table shows that the built-in mechanisms keep to it.
//
// A mechanism spec is a built-in name, or "name:variant" for a client whose
// credentials are wrong on purpose (see ClientMechanismFor).
#include <gtest/gtest.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "authrpc/auth/kerberos.h"
#include "authrpc/auth/kerberos_sasl.h"
#include "authrpc/auth/simple.h"
#include "authrpc/auth/token_mechanism.h"
#include "authrpc/auth/token_sasl.h"
#include "authrpc/auth/x509.h"
#include "authrpc/security/memory_token_store.h"
#include "authrpc/security/secret_manager.h"
#include "tests/kerberos_realm.h"
#include "tests/test_server.h"
#include "tests/test_support.h"
#include "tests/test_tls.h"

namespace authrpc {
namespace {

using testing::Describe;
using testing::TestServer;
using testing::TestTls;

// How the client reaches the server.
enum class Channel {
  kTcp,               // tcp://, encryption disabled on both sides
  kUnix,              // an abstract unix:// name
  kTls,               // tls://, encryption required, no client certificate
  kMutualTls,         // tls://, client certificate required and presented
  kTlsNoClientCert,   // tls://, client certificate optional and not presented
  kPlainToOptional,   // tls:// with encryption optional; the client speaks plaintext
};

const char* ChannelName(Channel c) {
  switch (c) {
    case Channel::kTcp: return "tcp";
    case Channel::kUnix: return "unix";
    case Channel::kTls: return "tls";
    case Channel::kMutualTls: return "mtls";
    case Channel::kTlsNoClientCert: return "tls_no_client_cert";
    case Channel::kPlainToOptional: return "plain_to_optional_tls";
  }
  return "?";
}

bool IsTls(Channel c) {
  return c == Channel::kTls || c == Channel::kMutualTls || c == Channel::kTlsNoClientCert;
}

struct Case {
  const char* name;
  std::vector<std::string> client;  // specs, in the client's order of preference
  std::vector<std::string> server;  // built-in names, most preferred first
  Channel channel;
  Errc expected;          // kOk, or the code of the client's error
  std::string mechanism;  // on success: negotiated (and seen by the server)
  std::string user;       // on success: authenticated, "@" stands for "@<realm>"
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name << " over " << ChannelName(c.channel); }

// The service delegation tokens of this suite are issued for.
constexpr const char* kTokenService = "negotiation-itest";

class NegotiationItest : public testing::KerberosSuite,
                         public ::testing::WithParamInterface<Case> {
 protected:
  static void SetUpTestSuite() {
    StartRealm();
    if (!setup_.ok()) return;
    auto secrets = security::SecretManager::open(std::make_shared<security::MemoryTokenStore>(), {});
    if (!secrets.ok()) {
      setup_ = Status(Errc::kInternal, "SecretManager::open failed");
      return;
    }
    secrets_ = std::move(*secrets);
    auto token = secrets_->issue({"alice@" + kdc_->realm(), "", "", kTokenService});
    auto other = secrets_->issue({"bob@" + kdc_->realm(), "", "", kTokenService});
    if (!token.ok() || !other.ok()) {
      setup_ = Status(Errc::kInternal, "issuing the suite's tokens failed");
      return;
    }
    token_ = std::make_unique<security::Token>(*token);
    // Alice's identifier with another token's password: what a client that
    // guessed the password would hold.
    forged_ = std::make_unique<security::Token>(*other);
    forged_->identifier = token_->identifier;
  }
  static void TearDownTestSuite() {
    token_.reset();
    forged_.reset();
    secrets_.reset();
    KerberosSuite::TearDownTestSuite();
  }

  static std::shared_ptr<ServerMechanism> ServerMechanismFor(const std::string& name) {
    if (name == "simple") return std::make_shared<SimpleServerMechanism>();
    if (name == "x509") return std::make_shared<X509ServerMechanism>();
    if (name == "kerberos") {
      auto m = KerberosServerMechanism::create(testing::KerberosServerOptionsFor(*kdc_));
      EXPECT_TRUE(m.ok()) << Describe(m);
      return m.ok() ? *m : nullptr;
    }
    if (name == "kerberos-sasl") {
      auto m = KerberosSaslServerMechanism::create(testing::KerberosServerOptionsFor(*kdc_));
      EXPECT_TRUE(m.ok()) << Describe(m);
      return m.ok() ? *m : nullptr;
    }
    if (name == "token") return std::make_shared<TokenServerMechanism>(secrets_);
    if (name == "token-digest" || name == "token-scram") {
      return std::make_shared<TokenSaslServerMechanism>(name, secrets_);
    }
    ADD_FAILURE() << "no server mechanism " << name;
    return nullptr;
  }

  // Variants: "kerberos:otherhost" expects a service principal the server
  // has no key for; "<token mechanism>:forged" holds alice's token with a
  // wrong password.
  static std::shared_ptr<ClientMechanism> ClientMechanismFor(const std::string& spec) {
    const auto colon = spec.find(':');
    const std::string name = spec.substr(0, colon);
    const std::string variant = colon == std::string::npos ? "" : spec.substr(colon + 1);
    if (name == "simple") return std::make_shared<SimpleClientMechanism>("bob");
    if (name == "x509") return std::make_shared<X509ClientMechanism>();
    if (name == "kerberos" || name == "kerberos-sasl") {
      KerberosClientOptions o = testing::CcacheClientOptions(*kdc_);
      if (variant == "otherhost") o.service_principal = testing::ServicePrincipal(*kdc_, "otherhost");
      if (name == "kerberos") {
        auto m = KerberosClientMechanism::create(o);
        EXPECT_TRUE(m.ok()) << Describe(m);
        return m.ok() ? *m : nullptr;
      }
      auto m = KerberosSaslClientMechanism::create(o);
      EXPECT_TRUE(m.ok()) << Describe(m);
      return m.ok() ? *m : nullptr;
    }
    TokenClientOptions o;
    o.token = variant == "forged" ? *forged_ : *token_;
    o.service = kTokenService;
    if (name == "token") return std::make_shared<TokenClientMechanism>(o);
    if (name == "token-digest" || name == "token-scram") {
      return std::make_shared<TokenSaslClientMechanism>(name, o);
    }
    ADD_FAILURE() << "no client mechanism " << spec;
    return nullptr;
  }

  static inline std::shared_ptr<security::SecretManager> secrets_;
  static inline std::unique_ptr<security::Token> token_;
  static inline std::unique_ptr<security::Token> forged_;
};

TEST_P(NegotiationItest, Negotiate) {
  const Case& c = GetParam();
  TestServer server;
  for (const auto& name : c.server) server.mechanism(ServerMechanismFor(name));
  switch (c.channel) {
    case Channel::kTcp: break;
    case Channel::kUnix: server.endpoint("unix:"); break;
    case Channel::kTls: server.tls(); break;
    case Channel::kMutualTls:
      server.tls(TestTls::shared().server(security::ClientCertificates::kRequired))
          .client_tls(TestTls::shared().client(/*with_certificate=*/true));
      break;
    case Channel::kTlsNoClientCert:
      server.tls(TestTls::shared().server(security::ClientCertificates::kOptional))
          .client_tls(TestTls::shared().client());
      break;
    case Channel::kPlainToOptional: server.tls().encryption(SecurityRequirement::kOptional); break;
  }
  ASSERT_OK(server.start());

  auto builder = server.client();
  for (const auto& spec : c.client) builder.mechanism(ClientMechanismFor(spec));
  if (c.channel == Channel::kPlainToOptional) {
    builder.encryption(SecurityRequirement::kDisabled).options([](ClientOptions& o) {
      o.endpoint.scheme = Endpoint::Scheme::kTcp;
    });
  }
  auto client = builder.connect();

  if (c.expected != Errc::kOk) {
    ASSERT_FALSE(client.ok()) << "connected with " << (*client)->mechanism();
    EXPECT_EQ(client.code(), make_error_code(c.expected)) << Describe(client);
    return;
  }
  ASSERT_TRUE(client.ok()) << Describe(client);
  std::string user = c.user;
  if (user.ends_with("@")) user += kdc_->realm();
  EXPECT_EQ((*client)->mechanism(), c.mechanism);
  EXPECT_EQ((*client)->authenticated_user(), user);
  EXPECT_EQ((*client)->tls_info().has_value(), IsTls(c.channel));
  auto who = (*client)->call_json("sys", "whoami", nlohmann::json::object());
  ASSERT_TRUE(who.ok()) << Describe(who);
  EXPECT_EQ((*who)["mechanism"], c.mechanism) << who->dump();
  EXPECT_EQ((*who)["user"], user) << who->dump();
}

constexpr Errc kOk = Errc::kOk;
constexpr Errc kUnavailable = Errc::kMechanismUnavailable;
constexpr Errc kRefused = Errc::kAuthenticationFailed;
const std::vector<std::string> kEveryTlsMechanism = {"simple",  "x509",         "kerberos",
                                                    "kerberos-sasl", "token", "token-digest",
                                                    "token-scram"};

INSTANTIATE_TEST_SUITE_P(
    Table, NegotiationItest,
    ::testing::Values(
        // Each mechanism with itself, on every channel it may run on.
        Case{"simple_tcp", {"simple"}, {"simple"}, Channel::kTcp, kOk, "simple", "bob"},
        Case{"simple_unix", {"simple"}, {"simple"}, Channel::kUnix, kOk, "simple", "bob"},
        Case{"simple_tls", {"simple"}, {"simple"}, Channel::kTls, kOk, "simple", "bob"},
        Case{"simple_plain_to_optional_tls", {"simple"}, {"simple"}, Channel::kPlainToOptional,
             kOk, "simple", "bob"},
        Case{"x509_mtls", {"x509"}, {"x509"}, Channel::kMutualTls, kOk, "x509", "alice"},
        Case{"kerberos_tcp", {"kerberos"}, {"kerberos"}, Channel::kTcp, kOk, "kerberos", "alice@"},
        Case{"kerberos_unix", {"kerberos"}, {"kerberos"}, Channel::kUnix, kOk, "kerberos", "alice@"},
        Case{"kerberos_tls", {"kerberos"}, {"kerberos"}, Channel::kTls, kOk, "kerberos", "alice@"},
        Case{"kerberos_sasl_tcp", {"kerberos-sasl"}, {"kerberos-sasl"}, Channel::kTcp, kOk,
             "kerberos-sasl", "alice@"},
        Case{"kerberos_sasl_unix", {"kerberos-sasl"}, {"kerberos-sasl"}, Channel::kUnix, kOk,
             "kerberos-sasl", "alice@"},
        Case{"kerberos_sasl_tls", {"kerberos-sasl"}, {"kerberos-sasl"}, Channel::kTls, kOk,
             "kerberos-sasl", "alice@"},
        Case{"token_unix", {"token"}, {"token"}, Channel::kUnix, kOk, "token", "alice@"},
        Case{"token_tls", {"token"}, {"token"}, Channel::kTls, kOk, "token", "alice@"},
        Case{"token_digest_tcp", {"token-digest"}, {"token-digest"}, Channel::kTcp, kOk,
             "token-digest", "alice@"},
        Case{"token_digest_tls", {"token-digest"}, {"token-digest"}, Channel::kTls, kOk,
             "token-digest", "alice@"},
        Case{"token_scram_tcp", {"token-scram"}, {"token-scram"}, Channel::kTcp, kOk,
             "token-scram", "alice@"},
        Case{"token_scram_unix", {"token-scram"}, {"token-scram"}, Channel::kUnix, kOk,
             "token-scram", "alice@"},
        // Where a mechanism may not run: a bearer token never crosses
        // plaintext tcp:// (the server does not opt in here); x509 needs a
        // verified client certificate.
        Case{"token_tcp", {"token"}, {"token"}, Channel::kTcp, Errc::kFailedPrecondition, "", ""},
        Case{"token_plain_to_optional_tls", {"token"}, {"token"}, Channel::kPlainToOptional,
             Errc::kFailedPrecondition, "", ""},
        Case{"x509_without_client_certificate", {"x509"}, {"x509"}, Channel::kTlsNoClientCert,
             Errc::kConfigError, "", ""},
        // Wrong credentials are refused, and never fall back to another mechanism.
        Case{"kerberos_unknown_service_key", {"kerberos:otherhost"}, {"kerberos"}, Channel::kTcp,
             kRefused, "", ""},
        Case{"token_forged", {"token:forged", "kerberos"}, {"token", "kerberos"}, Channel::kTls,
             kRefused, "", ""},
        Case{"token_digest_forged", {"token-digest:forged"}, {"token-digest"}, Channel::kTcp,
             kRefused, "", ""},
        Case{"token_scram_forged", {"token-scram:forged"}, {"token-scram"}, Channel::kTls,
             kRefused, "", ""},
        // Nothing in common.
        Case{"kerberos_vs_simple", {"kerberos"}, {"simple"}, Channel::kTcp, kUnavailable, "", ""},
        Case{"simple_vs_kerberos_token", {"simple"}, {"kerberos", "token"}, Channel::kTls,
             kUnavailable, "", ""},
        Case{"kerberos_sasl_vs_kerberos", {"kerberos-sasl"}, {"kerberos"}, Channel::kTcp,
             kUnavailable, "", ""},
        Case{"token_digest_vs_token_scram", {"token-digest"}, {"token-scram"}, Channel::kTcp,
             kUnavailable, "", ""},
        // Choice: the client's first choice when the server has it, else the
        // server's most preferred among those the client allows.
        Case{"client_preference_wins", {"kerberos", "simple"}, {"simple", "kerberos"},
             Channel::kTcp, kOk, "kerberos", "alice@"},
        Case{"token_refused_then_kerberos", {"token", "kerberos"}, {"kerberos-sasl", "kerberos"},
             Channel::kTls, kOk, "kerberos", "alice@"},
        Case{"fallback_follows_server_order", {"x509", "token-scram", "kerberos-sasl", "simple"},
             {"simple", "kerberos-sasl", "token-scram"}, Channel::kMutualTls, kOk, "simple", "bob"},
        Case{"every_mechanism_client_first_wins", kEveryTlsMechanism,
             {"token-scram", "token-digest", "token", "kerberos-sasl", "kerberos", "x509", "simple"},
             Channel::kMutualTls, kOk, "simple", "bob"},
        Case{"every_mechanism_x509_first", {"x509", "kerberos", "token"}, kEveryTlsMechanism,
             Channel::kMutualTls, kOk, "x509", "alice"}),
    [](const auto& tp) { return std::string(tp.param.name); });

}  // namespace
}  // namespace authrpc
