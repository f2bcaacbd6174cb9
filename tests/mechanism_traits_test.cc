// Decisions the framework takes from what a mechanism declares
// (auth/mechanism_traits.h), never from its name: the server's and the
// client's policy checks, the negotiation's channel checks, authorization's
// doAs rule, the token service's "who may get a token", the registry's
// bookkeeping and the CLI's flag mapping. Each table runs built-in
// mechanisms and "custom", a mechanism defined here with the traits the case
// gives, through the same check: a plugged-in mechanism is treated exactly
// as a built-in that declares the same.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <asio/post.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>
#include <atomic>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <thread>

#include "authrpc/auth/authz/authz_policy.h"
#include "authrpc/auth/mechanism_registry.h"
#include "authrpc/auth/mechanisms/simple/simple.h"
#include "authrpc/auth/mechanisms/token/token_mechanism.h"
#include "authrpc/auth/mechanisms/x509/x509.h"
#include "authrpc/client/client.h"
#include "authrpc/client/client_policy.h"
#include "authrpc/components/jwt/jwt.h"
#include "authrpc/components/kerberos/kerberos.h"
#include "authrpc/rpc/messages.h"
#include "authrpc/security/tls_context.h"
#include "authrpc/server/server.h"
#include "authrpc/server/server_policy.h"
#include "authrpc/server/token_service.h"
#include "authrpc/tools/mechanism_flags.h"
#include "tests/testing/one_message_mechanism.h"
#include "tests/testing/test_server.h"
#include "tests/testing/test_support.h"
#include "tests/testing/tls_test_certs.h"

namespace authrpc {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using testing::Describe;
using ::testing::HasSubstr;

constexpr MechanismTraits kNoProof{.proves_identity = false};
constexpr MechanismTraits kProof{};
constexpr MechanismTraits kTlsOnly{.needs_tls = true};
constexpr MechanismTraits kCertificate{.needs_tls = true, .needs_client_certificate = true};
constexpr MechanismTraits kBearer{.bearer_secret = true};
constexpr MechanismTraits kIssuable{.may_be_issued_tokens = true};
constexpr MechanismTraits kDelegation{.delegation_token = true};

// Test mechanisms of any name and traits: the server believes the name the
// client sends ("alice"), like `simple`, and counts the sessions it starts.
using CustomServer = testing::OneMessageServer;
std::shared_ptr<ClientMechanism> CustomClient(std::string name, MechanismTraits traits) {
  return std::make_shared<testing::OneMessageClient>(std::move(name), "alice", traits);
}

// A CA, a server certificate for 127.0.0.1 and a client certificate ("alice").
struct Certs {
  std::filesystem::path dir;
  std::unique_ptr<testing::TestCa> ca;
  Certs() {
    dir = testing::TempDir("traits-certs");
    ca = std::make_unique<testing::TestCa>(dir, "ca");
    ca->issue({"server", "localhost", {"DNS:localhost", "IP:127.0.0.1"}});
    ca->issue({"client", "alice", {"email:alice@example.com"}, -3600, 86400, true});
  }
  ~Certs() {
    std::error_code ignored;
    std::filesystem::remove_all(dir, ignored);
  }
};

Certs& certs() {
  static Certs c;
  return c;
}

std::shared_ptr<security::TlsServerContext> ServerTls(security::ClientCertificates client_certs) {
  security::TlsServerOptions o;
  o.certificate_file = certs().ca->cert_file("server");
  o.private_key_file = certs().ca->key_file("server");
  o.ca_file = certs().ca->ca_file();
  o.client_certificates = client_certs;
  auto ctx = security::TlsServerContext::create(o);
  EXPECT_TRUE(ctx.ok()) << ctx.status().to_string();
  if (!ctx.ok()) return nullptr;
  return std::move(*ctx);
}

std::shared_ptr<security::TlsClientContext> ClientTls(bool with_certificate) {
  security::TlsClientOptions o;
  o.ca_file = certs().ca->ca_file();
  if (with_certificate) {
    o.certificate_file = certs().ca->cert_file("client");
    o.private_key_file = certs().ca->key_file("client");
  }
  auto ctx = security::TlsClientContext::create(o);
  EXPECT_TRUE(ctx.ok()) << ctx.status().to_string();
  if (!ctx.ok()) return nullptr;
  return std::move(*ctx);
}

// How a case's connection travels.
enum class Channel { kPlainTcp, kUnix, kTls, kTlsWithClientCertificate };

// Per channel, in the enum's order: its name, and where a policy check's
// listener or client points (nothing listens: the checks read the scheme;
// a tcp:// or tls:// one takes the port).
struct ChannelFacts {
  const char* name;
  const char* endpoint;
};
constexpr ChannelFacts kChannelFacts[] = {{"tcp", "tcp://127.0.0.1:"},
                                          {"unix", "unix:@traits-policy"},
                                          {"tls", "tls://127.0.0.1:"},
                                          {"tls+cert", "tls://127.0.0.1:"}};
const ChannelFacts& FactsOf(Channel c) { return kChannelFacts[static_cast<int>(c)]; }
const char* ChannelName(Channel c) { return FactsOf(c).name; }
// `port` "0" for a server's.
Endpoint PolicyEndpoint(Channel channel, const std::string& port) {
  const std::string uri = FactsOf(channel).endpoint;
  return *Endpoint::parse(channel == Channel::kUnix ? uri : uri + port);
}
bool IsTls(Channel channel) { return channel == Channel::kTls || channel == Channel::kTlsWithClientCertificate; }

// --- The server's policy check (server/server_policy.h) -----------------------

// A configuration check's verdict: `s` is OK if `refused` is null, else a
// configuration error whose message contains `refused`.
void ExpectVerdict(const Status& s, const char* refused) {
  if (refused == nullptr) {
    EXPECT_TRUE(s.ok()) << s.to_string();
  } else {
    EXPECT_EQ(s.code, Errc::kConfigError) << s.to_string();
    EXPECT_THAT(s.message, HasSubstr(refused));
  }
}

struct ServerPolicyCase {
  const char* name;
  std::function<std::shared_ptr<ServerMechanism>()> mechanism;
  SecurityRequirement authentication;
  Channel channel;
  const char* refused;  // nullptr: accepted
};

std::shared_ptr<ServerMechanism> Custom(MechanismTraits t) {
  return std::make_shared<CustomServer>("custom", t);
}

TEST(MechanismTraits, DecideTheServersPolicyCheck) {
  const ServerPolicyCase cases[] = {
      {"simple_when_required", [] { return std::make_shared<SimpleServerMechanism>(); },
       SecurityRequirement::kRequired, Channel::kPlainTcp, "mechanism 'simple' (no proof)"},
      {"no_proof_when_required", [] { return Custom(kNoProof); }, SecurityRequirement::kRequired,
       Channel::kPlainTcp, "mechanism 'custom' (no proof)"},
      {"no_proof_when_disabled", [] { return Custom(kNoProof); }, SecurityRequirement::kDisabled,
       Channel::kPlainTcp, nullptr},
      {"proof_when_disabled", [] { return Custom(kProof); }, SecurityRequirement::kDisabled, Channel::kPlainTcp,
       "authentication is disabled but mechanism 'custom'"},
      {"proof_when_required", [] { return Custom(kProof); }, SecurityRequirement::kRequired, Channel::kPlainTcp,
       nullptr},
      {"x509_without_client_certificates", [] { return std::make_shared<X509ServerMechanism>(); },
       SecurityRequirement::kOptional, Channel::kTls, "'x509' needs TLS with client certificates"},
      {"certificate_without_client_certificates", [] { return Custom(kCertificate); },
       SecurityRequirement::kOptional, Channel::kTls, "'custom' needs TLS with client certificates"},
      {"certificate_on_plaintext", [] { return Custom(kCertificate); }, SecurityRequirement::kOptional,
       Channel::kPlainTcp, "'custom' needs TLS with client certificates"},
      {"x509_with_client_certificates", [] { return std::make_shared<X509ServerMechanism>(); },
       SecurityRequirement::kOptional, Channel::kTlsWithClientCertificate, nullptr},
      {"certificate_with_client_certificates", [] { return Custom(kCertificate); },
       SecurityRequirement::kOptional, Channel::kTlsWithClientCertificate, nullptr},
      {"tls_only_on_plaintext", [] { return Custom(kTlsOnly); }, SecurityRequirement::kOptional,
       Channel::kPlainTcp, "'custom' needs TLS but encryption is disabled"},
      {"tls_only_on_tls", [] { return Custom(kTlsOnly); }, SecurityRequirement::kOptional, Channel::kTls, nullptr},
      {"bearer_on_plaintext_tcp", [] { return Custom(kBearer); }, SecurityRequirement::kOptional,
       Channel::kPlainTcp, "'custom' carries a bearer secret"},
      {"bearer_on_unix", [] { return Custom(kBearer); }, SecurityRequirement::kOptional, Channel::kUnix, nullptr},
      {"bearer_on_tls", [] { return Custom(kBearer); }, SecurityRequirement::kOptional, Channel::kTls, nullptr},
      // A delegation-token mechanism decides about plaintext itself, as
      // `token` does (tokens.allow_plaintext).
      {"delegation_token_on_plaintext", [] { return Custom(kDelegation); }, SecurityRequirement::kOptional,
       Channel::kPlainTcp, nullptr},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    ServerOptions o;
    o.mechanisms = {c.mechanism()};
    o.authentication = c.authentication;
    o.endpoints = {PolicyEndpoint(c.channel, "0")};
    if (IsTls(c.channel)) {
      o.tls = ServerTls(c.channel == Channel::kTlsWithClientCertificate ? security::ClientCertificates::kOptional
                                                                         : security::ClientCertificates::kNone);
    }
    ExpectVerdict(validate_server_policies(o), c.refused);
  }
}

// --- The client's policy check (client/client_policy.h) -----------------------

struct ClientPolicyCase {
  const char* name;
  std::function<std::shared_ptr<ClientMechanism>()> mechanism;
  SecurityRequirement authentication;
  Channel channel;
  const char* refused;
};

std::shared_ptr<ClientMechanism> CustomC(MechanismTraits t) {
  return CustomClient("custom", t);
}

TEST(MechanismTraits, DecideTheClientsPolicyCheck) {
  const ClientPolicyCase cases[] = {
      {"simple_when_required", [] { return std::make_shared<SimpleClientMechanism>("alice"); },
       SecurityRequirement::kRequired, Channel::kPlainTcp, "mechanism 'simple' (no proof)"},
      {"no_proof_when_required", [] { return CustomC(kNoProof); }, SecurityRequirement::kRequired,
       Channel::kPlainTcp, "mechanism 'custom' (no proof)"},
      {"proof_when_disabled", [] { return CustomC(kProof); }, SecurityRequirement::kDisabled, Channel::kPlainTcp,
       "authentication is disabled but mechanism 'custom'"},
      {"no_proof_when_disabled", [] { return CustomC(kNoProof); }, SecurityRequirement::kDisabled,
       Channel::kPlainTcp, nullptr},
      {"x509_without_a_certificate", [] { return std::make_shared<X509ClientMechanism>(); },
       SecurityRequirement::kOptional, Channel::kTls, "'x509' needs TLS with a client certificate"},
      {"certificate_without_a_certificate", [] { return CustomC(kCertificate); },
       SecurityRequirement::kOptional, Channel::kTls, "'custom' needs TLS with a client certificate"},
      {"certificate_with_a_certificate", [] { return CustomC(kCertificate); }, SecurityRequirement::kOptional,
       Channel::kTlsWithClientCertificate, nullptr},
      {"tls_only_on_plaintext", [] { return CustomC(kTlsOnly); }, SecurityRequirement::kOptional,
       Channel::kPlainTcp, "'custom' needs TLS"},
      {"tls_only_on_tls", [] { return CustomC(kTlsOnly); }, SecurityRequirement::kOptional, Channel::kTls,
       nullptr},
      {"bearer_on_plaintext_tcp", [] { return CustomC(kBearer); }, SecurityRequirement::kOptional,
       Channel::kPlainTcp, "'custom' carries a bearer secret"},
      {"bearer_on_unix", [] { return CustomC(kBearer); }, SecurityRequirement::kOptional, Channel::kUnix,
       nullptr},
      {"bearer_on_tls", [] { return CustomC(kBearer); }, SecurityRequirement::kOptional, Channel::kTls, nullptr},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    ClientOptions o;
    o.mechanisms = {c.mechanism()};
    o.authentication = c.authentication;
    o.endpoint = PolicyEndpoint(c.channel, "1");
    if (IsTls(c.channel)) o.tls = ClientTls(c.channel == Channel::kTlsWithClientCertificate);
    ExpectVerdict(validate_client_policies(o), c.refused);
  }
}

// --- The negotiation's channel check (auth/mechanism.h check_channel) ---------

Errc CodeOf(const Status& s) {
  return s.ok() ? Errc::kOk : static_cast<Errc>(s.code.value());
}

TEST(MechanismTraits, DecideWhichChannelsCarryASession) {
  struct Case {
    MechanismTraits traits;
    Channel channel;
    Errc server;  // kOk: the server starts the session
    Errc client;  // kOk: the client sends its first message
  };
  const Case cases[] = {
      {kProof, Channel::kPlainTcp, Errc::kOk, Errc::kOk},
      {kNoProof, Channel::kPlainTcp, Errc::kOk, Errc::kOk},
      {kBearer, Channel::kPlainTcp, Errc::kFailedPrecondition, Errc::kFailedPrecondition},
      {kBearer, Channel::kUnix, Errc::kOk, Errc::kOk},
      {kBearer, Channel::kTls, Errc::kOk, Errc::kOk},
      {kTlsOnly, Channel::kPlainTcp, Errc::kFailedPrecondition, Errc::kOk},
      {kTlsOnly, Channel::kUnix, Errc::kFailedPrecondition, Errc::kOk},
      {kTlsOnly, Channel::kTls, Errc::kOk, Errc::kOk},
      {kCertificate, Channel::kTls, Errc::kAuthenticationFailed, Errc::kOk},
      {kCertificate, Channel::kTlsWithClientCertificate, Errc::kOk, Errc::kOk},
      {kX509Traits, Channel::kPlainTcp, Errc::kAuthenticationFailed, Errc::kOk},
      {kDelegation, Channel::kPlainTcp, Errc::kOk, Errc::kOk},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(ChannelName(c.channel));
    ChannelInfo info;
    info.scheme = c.channel == Channel::kUnix ? Endpoint::Scheme::kUnix
                  : c.channel == Channel::kPlainTcp ? Endpoint::Scheme::kTcp
                                                    : Endpoint::Scheme::kTls;
    info.tls = c.channel == Channel::kTls || c.channel == Channel::kTlsWithClientCertificate;
    if (c.channel == Channel::kTlsWithClientCertificate) info.peer_certificate = "DER";
    EXPECT_EQ(CodeOf(check_channel("custom", c.traits, info, false)), c.server);
    EXPECT_EQ(CodeOf(check_channel("custom", c.traits, info, true)), c.client);
  }
}

// The same checks over real connections: a bearer secret never leaves the
// client on plaintext tcp:// and a server refuses it there before any
// session starts; a certificate mechanism without a certificate is refused
// by the framework; the identity carries the traits of its mechanism.
class Negotiation : public ::testing::Test {
 protected:
  // A server for `mechanism` listening on tls:// (optional encryption, so
  // plaintext tcp:// reaches the same port; client certificates optional)
  // and on a unix: socket, with a service that echoes the identity's traits.
  void Start(std::shared_ptr<CustomServer> mechanism) {
    mechanism_ = mechanism;
    Service probe("probe");
    probe.add_json("traits", [](CallContext& ctx, const json&) -> Result<json> {
      const MechanismTraits& t = ctx.identity().mechanism_traits;
      return json{{"proves_identity", t.proves_identity}, {"needs_tls", t.needs_tls},
                  {"needs_client_certificate", t.needs_client_certificate},
                  {"bearer_secret", t.bearer_secret}, {"delegation_token", t.delegation_token},
                  {"may_be_issued_tokens", t.may_be_issued_tokens}};
    });
    server_ = std::make_unique<testing::TestServer>();
    server_->tls(ServerTls(security::ClientCertificates::kOptional))
        .endpoint(testing::FreshEndpoint(testing::SocketKind::kUnix, "traits"))
        .encryption(SecurityRequirement::kOptional)
        .mechanism(mechanism)
        .blocking_threads(1)
        .service(std::move(probe));
    ASSERT_OK(server_->start());
    tls_ = server_->endpoints().at(0);
    unix_ = server_->endpoints().at(1);
  }
  void TearDown() override {
    server_.reset();
  }

  Result<std::unique_ptr<Client>> Connect(Channel channel, MechanismTraits traits) {
    ClientOptions o;
    o.mechanisms = {CustomClient("custom", traits)};
    o.connect_timeout = 10s;
    o.default_call_timeout = 10s;
    o.endpoint = channel == Channel::kUnix ? unix_ : tls_;
    if (channel == Channel::kPlainTcp) {
      // Optional encryption without a TLS context: plaintext, past the
      // client's startup check, up to the negotiation's.
      o.endpoint.scheme = Endpoint::Scheme::kTcp;
      o.encryption = SecurityRequirement::kOptional;
    } else if (channel != Channel::kUnix) {
      o.tls = ClientTls(channel == Channel::kTlsWithClientCertificate);
    }
    return Client::connect(std::move(o));
  }

  std::shared_ptr<CustomServer> mechanism_;
  std::unique_ptr<testing::TestServer> server_;
  Endpoint tls_, unix_;
};

TEST_F(Negotiation, FollowsTheTraitsOfAPluggedInMechanism) {
  struct Case {
    MechanismTraits traits;
    Channel channel;
    Errc expected;
    const char* message;
    // The client half's traits when they differ, to get past the client's
    // own checks to the server's.
    std::optional<MechanismTraits> client_traits;
  };
  const Case cases[] = {
      // Refused by the client: the secret never leaves.
      {kBearer, Channel::kPlainTcp, Errc::kFailedPrecondition, "custom: carries a bearer secret", {}},
      {kBearer, Channel::kUnix, Errc::kOk, "", {}},
      {kBearer, Channel::kTls, Errc::kOk, "", {}},
      // Refused by the server, before its mechanism starts a session.
      {kCertificate, Channel::kTls, Errc::kAuthenticationFailed,
       "custom: no verified client certificate", kProof},
      {kTlsOnly, Channel::kUnix, Errc::kFailedPrecondition, "custom: needs a TLS connection", kProof},
      {kCertificate, Channel::kTlsWithClientCertificate, Errc::kOk, "", {}},
      {kIssuable, Channel::kTls, Errc::kOk, "", {}},
      {kDelegation, Channel::kUnix, Errc::kOk, "", {}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(ChannelName(c.channel));
    Start(std::make_shared<CustomServer>("custom", c.traits));
    {
      auto client = Connect(c.channel, c.client_traits.value_or(c.traits));
      if (c.expected != Errc::kOk) {
        ASSERT_FALSE(client.ok());
        EXPECT_EQ(client.status().code, c.expected) << client.status().to_string();
        EXPECT_THAT(client.status().message, HasSubstr(c.message));
        EXPECT_EQ(mechanism_->started.load(), 0);
      } else {
        ASSERT_TRUE(client.ok()) << Describe(client);
        auto traits = (*client)->call_json("probe", "traits", json::object());
        ASSERT_TRUE(traits.ok()) << Describe(traits);
        EXPECT_EQ((*traits)["needs_tls"], c.traits.needs_tls);
        EXPECT_EQ((*traits)["needs_client_certificate"], c.traits.needs_client_certificate);
        EXPECT_EQ((*traits)["bearer_secret"], c.traits.bearer_secret);
        EXPECT_EQ((*traits)["delegation_token"], c.traits.delegation_token);
        EXPECT_EQ((*traits)["may_be_issued_tokens"], c.traits.may_be_issued_tokens);
        EXPECT_EQ((*traits)["proves_identity"], c.traits.proves_identity);
      }
    }
    server_.reset();
  }
}

// A client that does send a bearer mechanism's HELLO over plaintext tcp://
// (a raw socket) is refused before the server starts a session.
TEST_F(Negotiation, TheServerRefusesABearerSecretOverPlaintext) {
  Start(std::make_shared<CustomServer>("custom", kBearer));
  testing::RawConnection raw(tls_.port);
  ASSERT_TRUE(raw.connected());
  ASSERT_TRUE(raw.SendHello("custom", "alice"));
  auto frame = raw.ReadFrame();
  ASSERT_TRUE(frame.has_value());
  ASSERT_EQ(frame->type, wire::FrameType::kError);
  auto error = wire::parse_error(frame->body);
  ASSERT_TRUE(error.ok()) << Describe(error);
  EXPECT_EQ(errc_from_wire(error->code), Errc::kFailedPrecondition) << error->message;
  EXPECT_THAT(error->message, HasSubstr("bearer secret"));
  EXPECT_EQ(mechanism_->started.load(), 0);
}

// --- Authorization: no doAs over a delegation token ---------------------------

TEST(MechanismTraits, DecideWhetherAConnectionMayActAsAnother) {
  auto policy = AuthzPolicy::from_json(
      json{{"groups", {{"source", "static"}, {"static", json::object()}}},
           {"proxy_users", {{"svc", {{"users", {"bob"}}, {"hosts", {"*"}}}}}}});
  ASSERT_TRUE(policy.ok()) << Describe(policy);
  struct Case {
    const char* name;
    MechanismTraits traits;
    bool allowed;
  };
  const Case cases[] = {
      {"custom", kProof, true},
      {"custom", kIssuable, true},
      {"custom", kDelegation, false},
      {"kerberos", kKerberosTraits, true},
      {"token", kTokenTraits, false},
      // The name says nothing: a token mechanism under another name is
      // refused, one named "token" that is not one is not.
      {"token", kProof, true},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    Identity id;
    id.user = id.principal = "svc";
    id.mechanism = c.name;
    id.mechanism_traits = c.traits;
    id.peer_address = "127.0.0.1:5000";
    std::vector<std::string> groups;
    const Status s = (*policy)->establish(id, "bob", groups);
    EXPECT_EQ(s.ok(), c.allowed) << s.to_string();
    if (c.allowed) EXPECT_EQ(id.user, "bob");
    if (!c.allowed) EXPECT_THAT(s.message, HasSubstr("token-authenticated"));
  }
}

// --- The token service: who may get, renew and cancel tokens ------------------

class TokenIssue : public ::testing::Test {
 protected:
  void Start(std::optional<std::vector<std::string>> issue_mechanisms) {
    TokenServiceOptions t;
    t.store = TokenServiceOptions::Store::kMemory;
    t.issue_mechanisms = std::move(issue_mechanisms);
    t.log = null_log_sink();
    auto tokens = TokenService::open(std::move(t));
    ASSERT_TRUE(tokens.ok()) << Describe(tokens);
    tokens_ = std::move(*tokens);
    server_ = std::make_unique<testing::TestServer>();
    server_->endpoint(testing::FreshEndpoint(testing::SocketKind::kUnix, "traits-tokens"));
    for (const auto& [name, traits] : kMechanisms) {
      server_->mechanism(std::make_shared<CustomServer>(name, traits));
    }
    server_->blocking_threads(1).service(tokens_->service());
    ASSERT_OK(server_->start());
    endpoint_ = server_->endpoint();
  }
  void TearDown() override {
    server_.reset();
  }
  // token.<method> over a connection authenticated by `mechanism`.
  Status Call(const std::string& mechanism, const std::string& method) {
    MechanismTraits traits;
    for (const auto& [name, t] : kMechanisms) {
      if (name == mechanism) traits = t;
    }
    auto client = testing::ConnectWith(endpoint_, CustomClient(mechanism, traits));
    if (!client.ok()) return client.status();
    const json request = method == "get" ? json{{"renewer", ""}} : json{{"token", "not-a-token"}};
    auto r = (*client)->call_json("token", method, request);
    return r.ok() ? Status() : r.status();
  }

  static inline const std::pair<std::string, MechanismTraits> kMechanisms[] = {
      {"custom-issuable", kIssuable}, {"custom-plain", kProof}, {"custom-token", kDelegation}};
  std::unique_ptr<TokenService> tokens_;
  std::unique_ptr<testing::TestServer> server_;
  Endpoint endpoint_;
};

TEST_F(TokenIssue, FollowsTheTraitsOrTheConfiguredNames) {
  struct Case {
    std::optional<std::vector<std::string>> issue_mechanisms;
    const char* mechanism;
    const char* method;
    bool admitted;  // else PERMISSION_DENIED before the request is read
  };
  const std::vector<std::string> plain = {"custom-plain"};
  const std::vector<std::string> token = {"custom-token"};
  const Case cases[] = {
      {std::nullopt, "custom-issuable", "get", true},
      {std::nullopt, "custom-plain", "get", false},
      {std::nullopt, "custom-token", "get", false},
      {std::nullopt, "custom-issuable", "renew", true},
      {std::nullopt, "custom-plain", "renew", false},
      {std::nullopt, "custom-token", "cancel", true},
      {std::nullopt, "custom-plain", "cancel", false},
      // The configured names replace the traits' default ...
      {plain, "custom-plain", "get", true},
      {plain, "custom-issuable", "get", false},
      // ... and a delegation-token mechanism never gets a token, even named.
      {token, "custom-token", "get", false},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(std::string(c.mechanism) + " token." + c.method);
    Start(c.issue_mechanisms);
    const Status s = Call(c.mechanism, c.method);
    if (c.admitted) {
      EXPECT_NE(s.code, Errc::kPermissionDenied) << s.to_string();
    } else {
      EXPECT_EQ(s.code, Errc::kPermissionDenied) << s.to_string();
    }
    server_.reset();
  }
}

TEST(MechanismTraits, RefuseADelegationTokenMechanismAmongTheIssuers) {
  MechanismRegistry registry = MechanismRegistry::with_builtins();
  registry.register_token_server(
      "custom-token",
      [](const json&, const DelegationTokenHost&) -> Result<std::shared_ptr<ServerMechanism>> {
        return std::shared_ptr<ServerMechanism>(std::make_shared<CustomServer>("custom-token", kDelegation));
      },
      kDelegation);
  struct Case {
    std::vector<std::string> names;
    const char* refused;
  };
  const Case cases[] = {
      {{"custom-token"}, "must not contain \"custom-token\""},
      {{"kerberos", "token-scram"}, "must not contain \"token-scram\""},
      {{"kerberos", "custom-plain-unregistered"}, nullptr},
  };
  for (const auto& c : cases) {
    TokenServiceOptions o;
    o.issue_mechanisms = c.names;
    ExpectVerdict(check_issue_mechanisms(o, registry), c.refused);
  }
}

// --- The registry -------------------------------------------------------------

TEST(MechanismRegistry, KeepsWhatEachBuiltinDeclares) {
  const auto registry = MechanismRegistry::with_builtins();
  const std::pair<const char*, MechanismTraits> expected[] = {
      {"simple", kSimpleTraits},       {"kerberos", kKerberosTraits},
      {"kerberos-sasl", kKerberosTraits}, {"token", kTokenTraits},
      {"token-digest", kTokenTraits},   {"token-scram", kTokenTraits},
      {"x509", kX509Traits},           {"jwt", kJwtTraits},
  };
  EXPECT_EQ(registry.server_names().size(), std::size(expected));
  for (const auto& [name, traits] : expected) {
    SCOPED_TRACE(name);
    ASSERT_NE(registry.server(name), nullptr);
    ASSERT_NE(registry.client(name), nullptr);
    EXPECT_EQ(registry.server(name)->traits, traits);
    EXPECT_EQ(registry.client(name)->traits, traits);
  }
  // Those whose halves need no credentials to be made: the objects say the same.
  for (const char* name : {"simple", "token", "token-digest", "token-scram", "x509"}) {
    SCOPED_TRACE(name);
    auto client = registry.make_client(name, json::object());
    ASSERT_TRUE(client.ok()) << Describe(client);
    EXPECT_EQ((*client)->traits(), registry.client(name)->traits);
  }
  for (const char* name : {"simple", "x509"}) {
    auto server = registry.make_server(name, json::object());
    ASSERT_TRUE(server.ok()) << Describe(server);
    EXPECT_EQ((*server)->traits(), registry.server(name)->traits);
  }
}

TEST(MechanismRegistry, LendsTheTokenServiceToDelegationTokenMechanisms) {
  auto registry = MechanismRegistry::with_builtins();
  for (const char* name : {"token", "token-digest", "token-scram"}) {
    auto m = registry.make_server(name, json::object());
    EXPECT_EQ(m.code(), Errc::kConfigError) << name;
    EXPECT_THAT(m.status().message, HasSubstr("enable the token service"));
  }
  TokenServiceOptions t;
  t.store = TokenServiceOptions::Store::kMemory;
  t.log = null_log_sink();
  auto tokens = TokenService::open(std::move(t));
  ASSERT_TRUE(tokens.ok()) << Describe(tokens);
  ASSERT_OK((*tokens)->register_mechanism(registry));
  for (const char* name : {"token", "token-digest", "token-scram"}) {
    auto m = registry.make_server(name, json::object());
    ASSERT_TRUE(m.ok()) << name << ": " << Describe(m);
    EXPECT_EQ((*m)->name(), name);
    EXPECT_TRUE((*m)->traits().delegation_token);
  }
}

TEST(MechanismRegistry, RefusesAMechanismThatDeniesItsRegistration) {
  MechanismRegistry registry;
  registry.register_server(
      "custom",
      [](const json&) -> Result<std::shared_ptr<ServerMechanism>> {
        return std::shared_ptr<ServerMechanism>(std::make_shared<CustomServer>("custom", kProof));
      },
      kIssuable);
  registry.register_client(
      "custom",
      [](const json&) -> Result<std::shared_ptr<ClientMechanism>> {
        return std::shared_ptr<ClientMechanism>(CustomClient("custom", kBearer));
      },
      kBearer);
  auto server = registry.make_server("custom", json::object());
  EXPECT_EQ(server.code(), Errc::kInternal);
  EXPECT_THAT(server.status().message, HasSubstr("traits() differ"));
  auto client = registry.make_client("custom", json::object());
  EXPECT_TRUE(client.ok()) << Describe(client);
  EXPECT_EQ(registry.make_client("nothing", json::object()).code(), Errc::kMechanismUnavailable);
}

// --- The CLI's flags ----------------------------------------------------------

TEST(MechanismFlags, MapDeclaredFlagsToEachMechanismsOptions) {
  auto registry = MechanismRegistry::with_builtins();
  registry.register_client(
      "custom",
      [](const json&) -> Result<std::shared_ptr<ClientMechanism>> {
        return std::shared_ptr<ClientMechanism>(CustomClient("custom", kBearer));
      },
      kBearer,
      {{"--api-key-file", "key_file", "F  the key", true}, {"--keytab", "keytab", "F  a keytab"}});
  cli::MechanismFlags flags(registry);
  cli::FlagParser parser;
  flags.add_to(parser);
  // Every client's flags are options of the parser, and nothing else is.
  std::vector<std::string> args = {"--keytab", "k.keytab", "--user", "bob", "--api-key-file", "key"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  auto parsed = parser.parse(static_cast<int>(argv.size()), argv.data());
  ASSERT_TRUE(parsed.ok()) << parsed.status().to_string();
  std::vector<std::string> other = {"--server", "tcp://h:1"};
  std::vector<char*> other_argv;
  for (auto& a : other) other_argv.push_back(a.data());
  EXPECT_FALSE(parser.parse(static_cast<int>(other_argv.size()), other_argv.data()).ok());
  struct Case {
    const char* mechanism;
    json options;
    std::size_t credentials_files;
  };
  const Case cases[] = {
      {"simple", {{"user", "bob"}}, 0},
      {"kerberos", {{"keytab", "k.keytab"}}, 0},
      {"kerberos-sasl", {{"keytab", "k.keytab"}}, 0},
      {"token", json::object(), 1},
      {"token-scram", json::object(), 1},
      {"x509", json::object(), 0},
      // A plugged-in mechanism's flags, one shared with the built-ins.
      {"custom", {{"keytab", "k.keytab"}}, 1},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.mechanism);
    EXPECT_EQ(flags.options_for(c.mechanism), c.options);
    EXPECT_EQ(flags.credentials_files(c.mechanism).size(), c.credentials_files);
  }
  EXPECT_EQ(flags.credentials_files("custom").at(0).option, "key_file");
}

// --- The host's blocking executor ---------------------------------------------

TEST(MechanismHost, OneBlockingThreadPerIoContextOffTheIoThread) {
  asio::io_context a, b;
  MechanismHost& host_a = mechanism_host_of(a.get_executor());
  EXPECT_EQ(&host_a, &mechanism_host_of(a.get_executor()));
  EXPECT_NE(&host_a, &mechanism_host_of(b.get_executor()));
  const auto io_thread = std::this_thread::get_id();
  auto ran_on = testing::Await([&host_a]() -> asio::awaitable<std::thread::id> {
    co_return co_await asio::co_spawn(
        host_a.blocking_executor(),
        []() -> asio::awaitable<std::thread::id> { co_return std::this_thread::get_id(); },
        asio::use_awaitable);
  }());
  EXPECT_NE(ran_on, io_thread);
}

}  // namespace
}  // namespace authrpc
