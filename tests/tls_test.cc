// TLS: contexts, the TLS transport, policies (client × server matrix and the
// combinations refused at startup), typed failures with the server still
// serving, session resumption, and `openssl s_client` probing what the server
// refuses. Real sockets on loopback, servers and clients from
// tests/testing/test_server.h, certificates made per run by tests/testing/test_tls.h (plus
// odd ones from the same CA, and a CA nobody trusts).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "authrpc/auth/mechanism_registry.h"
#include "authrpc/auth/mechanisms/simple/simple.h"
#include "authrpc/auth/mechanisms/x509/x509.h"
#include "authrpc/client/client.h"
#include "authrpc/rpc/tls_errors.h"
#include "authrpc/security/tls_context.h"
#include "authrpc/server/server.h"
#include "authrpc/server/server_config.h"
#include "tests/testing/test_server.h"
#include "tests/testing/test_support.h"
#include "tests/testing/test_tls.h"
#include "tests/testing/tls_test_certs.h"

namespace authrpc {
namespace {

using namespace std::chrono_literals;
using security::ClientCertificates;
using security::TlsClientContext;
using security::TlsClientOptions;
using security::TlsServerContext;
using security::TlsServerOptions;
using security::TlsVersion;
using testing::Describe;
using testing::TestCa;
using testing::TestClient;
using testing::TestServer;
using testing::TestTls;

// The suite's CA (tests/testing/test_tls.h) with the odd certificates the failure
// cases serve, and a second CA that no client trusts.
const TestTls& Tls() {
  static const TestTls& tls = [] () -> const TestTls& {
    const TestTls& t = TestTls::shared();
    t.issue({"expired", "localhost", {"DNS:localhost", "IP:127.0.0.1"}, -7200, -60});
    t.issue({"other-name", "other.example", {"DNS:other.example"}});
    return t;
  }();
  return tls;
}

struct RogueCa {
  std::string dir = testing::TempDir("tls-test-rogue");
  TestCa ca{dir, "rogue-ca"};
  RogueCa() { ca.issue({"rogue-server", "localhost", {"DNS:localhost", "IP:127.0.0.1"}}); }
  ~RogueCa() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
};

// A server context serving `leaf` of the suite's CA, or "rogue-server" of
// the CA nobody trusts.
std::shared_ptr<TlsServerContext> ServerContext(
    const std::string& leaf = "server", ClientCertificates client_certs = ClientCertificates::kNone,
    TlsVersion min_version = TlsVersion::kTls13) {
  if (leaf != "rogue-server") return Tls().server(client_certs, min_version, leaf);
  static const RogueCa rogue;
  TlsServerOptions o;
  o.certificate_file = rogue.ca.cert_file(leaf);
  o.private_key_file = rogue.ca.key_file(leaf);
  o.ca_file = Tls().ca_file();
  o.client_certificates = client_certs;
  o.min_version = min_version;
  auto ctx = TlsServerContext::create(o);
  EXPECT_TRUE(ctx.ok()) << ctx.status().to_string();
  return ctx.ok() ? std::move(*ctx) : nullptr;
}

// A new client context (its own session cache) trusting the suite's CA.
std::shared_ptr<TlsClientContext> ClientContext(bool with_certificate = false) {
  return Tls().client(with_certificate);
}

Endpoint Parse(const std::string& uri) {
  auto ep = Endpoint::parse(uri);
  EXPECT_TRUE(ep.ok()) << Describe(ep);
  return ep.ok() ? *ep : Endpoint{};
}

// A started TLS-only server (simple) with `ctx`, or null after a test failure.
std::unique_ptr<TestServer> StartTls(std::shared_ptr<TlsServerContext> ctx,
                                     SecurityRequirement encryption = SecurityRequirement::kRequired,
                                     std::chrono::milliseconds negotiation_timeout = 5s) {
  auto server = std::make_unique<TestServer>();
  server->tls(std::move(ctx)).encryption(encryption).blocking_threads(1).options(
      [negotiation_timeout](ServerOptions& o) { o.negotiation_timeout = negotiation_timeout; });
  const Status s = server->start();
  EXPECT_TRUE(s.ok()) << s.to_string();
  return s.ok() ? std::move(server) : nullptr;
}

Endpoint WithScheme(Endpoint ep, Endpoint::Scheme scheme) {
  ep.scheme = scheme;
  return ep;
}

// A `simple` client (alice) of `ep` over TLS with `ctx`.
TestClient TlsClientOf(const Endpoint& ep, std::shared_ptr<TlsClientContext> ctx) {
  TestClient c(WithScheme(ep, Endpoint::Scheme::kTls));
  c.simple("alice").tls(std::move(ctx));
  return c;
}
TestClient TlsClientOf(const TestServer& server, std::shared_ptr<TlsClientContext> ctx) {
  return TlsClientOf(server.endpoint(), std::move(ctx));
}

std::string Whoami(Client& c) {
  auto r = c.call("sys", "whoami", "");
  EXPECT_TRUE(r.ok()) << Describe(r);
  return r.ok() ? nlohmann::json::parse(*r).value("user", "") : "";
}

// The server still serves a well-behaved TLS client.
void ExpectStillServing(const TestServer& server) {
  auto c = TlsClientOf(server, ClientContext()).connect();
  ASSERT_TRUE(c.ok()) << "server stopped serving: " << Describe(c);
  EXPECT_EQ(Whoami(**c), "alice");
}

// A blocking loopback TCP socket with a receive timeout, for bytes no TLS
// client sends (testing::RawConnection speaks authrpc frames; this reads a
// reply to its end).
class RawSocket {
 public:
  explicit RawSocket(std::uint16_t port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    timeval tv{5, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  }
  ~RawSocket() { ::close(fd_); }
  void Send(std::string_view bytes) {
    ASSERT_EQ(::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(bytes.size()));
  }
  // Everything until EOF (or the timeout: then `timed_out`).
  std::string ReadToEnd(bool* timed_out) {
    std::string out;
    char buf[4096];
    *timed_out = false;
    for (;;) {
      const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n > 0) {
        out.append(buf, static_cast<std::size_t>(n));
        continue;
      }
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) *timed_out = true;
      return out;
    }
  }

 private:
  int fd_ = -1;
};

// --- Basics ----------------------------------------------------------------

TEST(TlsContext, RefusesAKeyThatDoesNotMatchTheCertificate) {
  TlsServerOptions o;
  o.certificate_file = Tls().cert_file("server");
  o.private_key_file = Tls().key_file("client");
  auto ctx = TlsServerContext::create(o);
  ASSERT_FALSE(ctx.ok());
  EXPECT_EQ(ctx.code(), Errc::kConfigError);
  EXPECT_THAT(ctx.status().message, ::testing::HasSubstr("mismatch"));
}

TEST(TlsContext, RefusesMissingFilesAndAClientWithoutCaBundle) {
  TlsServerOptions s;
  s.certificate_file = Tls().dir() + "/missing.pem";
  s.private_key_file = Tls().key_file("server");
  auto server = TlsServerContext::create(s);
  ASSERT_FALSE(server.ok());
  EXPECT_EQ(server.code(), Errc::kConfigError);
  EXPECT_THAT(server.status().message, ::testing::HasSubstr("missing.pem"));
  auto client = TlsClientContext::create(TlsClientOptions{});
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.code(), Errc::kConfigError);
  EXPECT_THAT(client.status().message, ::testing::HasSubstr("CA bundle"));
}

TEST(Tls, CallsTravelOverTls13AndTheStreamReportsItsParameters) {
  auto server = StartTls(ServerContext());
  ASSERT_TRUE(server);
  EXPECT_EQ(server->endpoint().scheme, Endpoint::Scheme::kTls);
  auto client = TlsClientOf(*server, ClientContext()).connect();
  ASSERT_TRUE(client.ok()) << Describe(client);
  EXPECT_EQ(Whoami(**client), "alice");
  const auto info = (*client)->tls_info();
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->version, "TLSv1.3");
  EXPECT_EQ(info->channel_binding.size(), 32u);
  EXPECT_FALSE(info->peer_certificate.empty()) << "the verified server certificate";
}

TEST(Tls, LargePayloadsSpanManyRecordsBothWays) {
  auto server = StartTls(ServerContext());
  ASSERT_TRUE(server);
  auto client = TlsClientOf(*server, ClientContext()).connect();
  ASSERT_TRUE(client.ok()) << Describe(client);
  std::string payload(3 * 1024 * 1024 + 17, '\0');
  for (std::size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<char>(i * 131 + 7);
  std::vector<std::future<Result<std::string>>> calls;
  for (int i = 0; i < 4; ++i) calls.push_back((*client)->call_future("sys", "echo", payload));
  for (auto& f : calls) {
    auto r = f.get();
    ASSERT_TRUE(r.ok()) << Describe(r);
    EXPECT_TRUE(*r == payload);
  }
}

TEST(Tls, EachConnectionHasItsOwnChannelBinding) {
  auto server = StartTls(ServerContext());
  ASSERT_TRUE(server);
  auto ctx = ClientContext();
  auto a = TlsClientOf(*server, ctx).connect();
  auto b = TlsClientOf(*server, ctx).connect();
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE((*a)->tls_info()->channel_binding, (*b)->tls_info()->channel_binding);
}

TEST(Tls, AReconnectingClientResumesItsSession) {
  auto server = StartTls(ServerContext());
  ASSERT_TRUE(server);
  auto ctx = ClientContext();
  {
    auto first = TlsClientOf(*server, ctx).connect();
    ASSERT_TRUE(first.ok()) << Describe(first);
    EXPECT_FALSE((*first)->tls_info()->resumed);
    EXPECT_EQ(Whoami(**first), "alice");  // the ticket arrives with the first response
  }
  EXPECT_EQ(ctx->cached_sessions(), 1u);
  auto second = TlsClientOf(*server, ctx).connect();
  ASSERT_TRUE(second.ok()) << Describe(second);
  EXPECT_TRUE((*second)->tls_info()->resumed);
  EXPECT_EQ(Whoami(**second), "alice");
  // Another server (another ticket key) falls back to a full handshake.
  auto other = StartTls(ServerContext());
  ASSERT_TRUE(other);
  auto third = TlsClientOf(*other, ctx).connect();
  ASSERT_TRUE(third.ok()) << Describe(third);
  EXPECT_FALSE((*third)->tls_info()->resumed);
}

TEST(Tls, Tls12IsAcceptedOnlyWhereConfigured) {
  TlsClientOptions co;
  co.ca_file = Tls().ca_file();
  co.min_version = TlsVersion::kTls12;
  auto made = TlsClientContext::create(co);
  ASSERT_TRUE(made.ok()) << made.status().to_string();
  std::shared_ptr<TlsClientContext> ctx12 = std::move(*made);
  SSL_CTX_set_max_proto_version(ctx12->native(), TLS1_2_VERSION);  // a TLS 1.2-only client

  auto strict = StartTls(ServerContext());
  ASSERT_TRUE(strict);
  auto refused = TlsClientOf(*strict, ctx12).connect();
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code, TlsErrc::kProtocolVersion) << Describe(refused);

  auto lenient = StartTls(ServerContext("server", ClientCertificates::kNone, TlsVersion::kTls12));
  ASSERT_TRUE(lenient);
  auto ok = TlsClientOf(*lenient, ctx12).connect();
  ASSERT_TRUE(ok.ok()) << Describe(ok);
  EXPECT_EQ((*ok)->tls_info()->version, "TLSv1.2");
  EXPECT_EQ((*ok)->tls_info()->channel_binding.size(), 32u);
}

// --- Client certificates (x509) --------------------------------------------

struct X509Case {
  std::string name;
  security::X509UserFrom rule;
  std::string user;
};

class X509Mapping : public ::testing::TestWithParam<X509Case> {};

TEST_P(X509Mapping, TheVerifiedClientCertificateBecomesTheIdentity) {
  TestServer server;
  server.tls(ServerContext("server", ClientCertificates::kRequired))
      .mechanism(std::make_shared<X509ServerMechanism>(GetParam().rule))
      .authentication(SecurityRequirement::kRequired);
  ASSERT_OK(server.start());
  auto client = server.client()
                    .tls(ClientContext(true))
                    .mechanism(std::make_shared<X509ClientMechanism>())
                    .authentication(SecurityRequirement::kRequired)
                    .connect();
  ASSERT_TRUE(client.ok()) << Describe(client);
  auto who = (*client)->call("sys", "whoami", "");
  ASSERT_TRUE(who.ok()) << Describe(who);
  const auto id = nlohmann::json::parse(*who);
  EXPECT_EQ(id.value("user", ""), GetParam().user);
  EXPECT_EQ(id.value("mechanism", ""), "x509");
  EXPECT_EQ(id.value("principal", ""), "CN=alice");
}

INSTANTIATE_TEST_SUITE_P(
    Tls, X509Mapping,
    ::testing::Values(X509Case{"cn", security::X509UserFrom::kCommonName, "alice"},
                      X509Case{"san_email", security::X509UserFrom::kSanEmail, "alice@example.com"},
                      X509Case{"san_email_local", security::X509UserFrom::kSanEmailLocal, "alice"}),
    [](const auto& p) { return p.param.name; });

TEST(X509, WithoutAClientCertificateTheMechanismRefusesAndNamesWhy) {
  TestServer server;
  server.tls(ServerContext("server", ClientCertificates::kOptional))
      .mechanism(std::make_shared<X509ServerMechanism>());
  ASSERT_OK(server.start());
  // The client check (x509 needs a client certificate) is bypassed by
  // offering the mechanism through a context that has none: refused locally.
  auto local =
      server.client().tls(ClientContext(false)).mechanism(std::make_shared<X509ClientMechanism>()).connect();
  ASSERT_FALSE(local.ok());
  EXPECT_EQ(local.status().code, Errc::kConfigError);
  // A client that has a certificate but the mapping finds no such SAN.
  TestServer server2;
  server2.tls(ServerContext("server", ClientCertificates::kRequired))
      .mechanism(std::make_shared<X509ServerMechanism>(security::X509UserFrom::kSanDns));
  ASSERT_OK(server2.start());
  auto refused =
      server2.client().tls(ClientContext(true)).mechanism(std::make_shared<X509ClientMechanism>()).connect();
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code, Errc::kAuthenticationFailed) << Describe(refused);
  EXPECT_THAT(refused.status().message, ::testing::HasSubstr("san-dns"));
}

// --- Policies --------------------------------------------------------------

struct MatrixCase {
  std::string name;
  SecurityRequirement client;
  SecurityRequirement server;
  bool ok;
  bool tls;                  // when ok: whether the connection is TLS
  std::error_code error;     // when !ok: the client's error
};

class PolicyMatrix : public ::testing::TestWithParam<MatrixCase> {};

TEST_P(PolicyMatrix, ClientPolicyTimesServerPolicy) {
  const auto& c = GetParam();
  TestServer server;
  if (c.server != SecurityRequirement::kDisabled) server.tls(ServerContext());
  server.encryption(c.server).blocking_threads(1);
  ASSERT_OK(server.start());

  // A plaintext client dials the TLS port (tcp:// scheme), a TLS one the
  // plaintext port (tls:// scheme).
  const auto scheme_for = [](SecurityRequirement p) {
    return p == SecurityRequirement::kDisabled ? Endpoint::Scheme::kTcp : Endpoint::Scheme::kTls;
  };
  auto client = TestClient(WithScheme(server.endpoint(), scheme_for(c.client)))
                    .simple("alice")
                    .tls(ClientContext())
                    .encryption(c.client)
                    .connect();
  if (c.ok) {
    ASSERT_TRUE(client.ok()) << Describe(client);
    EXPECT_EQ((*client)->tls_info().has_value(), c.tls);
    EXPECT_EQ(Whoami(**client), "alice");
  } else {
    ASSERT_FALSE(client.ok());
    EXPECT_EQ(client.status().code, c.error) << Describe(client);
    // The server counts the failure on its own thread, perhaps after the
    // client has seen the ERROR.
    EXPECT_TRUE(c.server == SecurityRequirement::kDisabled ||
                testing::Eventually([&] { return server.stats().negotiation_failures >= 1; }, 5s));
  }
  // Whatever happened, the server goes on serving clients that fit its policy.
  auto after = TestClient(WithScheme(server.endpoint(), scheme_for(c.server)))
                   .simple("alice")
                   .tls(ClientContext())
                   .encryption(c.server)
                   .connect();
  ASSERT_TRUE(after.ok()) << Describe(after);
  EXPECT_EQ(Whoami(**after), "alice");
}

const std::error_code kNotTls = make_error_code(TlsErrc::kNotTls);
const std::error_code kTlsRequiredByServer = make_error_code(Errc::kFailedPrecondition);

INSTANTIATE_TEST_SUITE_P(
    Tls, PolicyMatrix,
    ::testing::Values(
        MatrixCase{"disabled_disabled", SecurityRequirement::kDisabled, SecurityRequirement::kDisabled, true, false, {}},
        MatrixCase{"disabled_optional", SecurityRequirement::kDisabled, SecurityRequirement::kOptional, true, false, {}},
        MatrixCase{"disabled_required", SecurityRequirement::kDisabled, SecurityRequirement::kRequired, false, false,
                   kTlsRequiredByServer},
        MatrixCase{"optional_disabled", SecurityRequirement::kOptional, SecurityRequirement::kDisabled, true, false, {}},
        MatrixCase{"optional_optional", SecurityRequirement::kOptional, SecurityRequirement::kOptional, true, true, {}},
        MatrixCase{"optional_required", SecurityRequirement::kOptional, SecurityRequirement::kRequired, true, true, {}},
        MatrixCase{"required_disabled", SecurityRequirement::kRequired, SecurityRequirement::kDisabled, false, false, kNotTls},
        MatrixCase{"required_optional", SecurityRequirement::kRequired, SecurityRequirement::kOptional, true, true, {}},
        MatrixCase{"required_required", SecurityRequirement::kRequired, SecurityRequirement::kRequired, true, true, {}}),
    [](const auto& p) { return p.param.name; });

TEST(TlsPolicy, APlaintextClientOnATlsOnlyPortGetsOneFixedErrorAndNothingElse) {
  auto server = StartTls(ServerContext());
  ASSERT_TRUE(server);
  RawSocket s(server->endpoint().port);
  s.Send(std::string("ARPC\x01\x00\x00\x00", 8));
  bool timed_out = false;
  const std::string reply = s.ReadToEnd(&timed_out);
  EXPECT_FALSE(timed_out);
  EXPECT_THAT(reply, ::testing::HasSubstr("requires TLS"));
  ExpectStillServing(*server);
}

struct StartupCase {
  std::string name;
  std::function<void(ServerOptions&)> server;  // set: a server case
  std::function<void(ClientOptions&)> client;  // set: a client case
  std::string message;
};

class ImpossibleCombinations : public ::testing::TestWithParam<StartupCase> {};

// A mechanism that proves something (anything but `simple`), for policy checks.
class ProvingServerMechanism final : public ServerMechanism {
 public:
  std::string_view name() const noexcept override { return "proving"; }
  std::unique_ptr<ServerAuthSession> start(const ChannelInfo&) override { return nullptr; }
};
class ProvingClientMechanism final : public ClientMechanism {
 public:
  std::string_view name() const noexcept override { return "proving"; }
  std::unique_ptr<ClientAuthSession> start(const ChannelInfo&) override { return nullptr; }
};
// The needs of the x509 mechanism, as it declares them, on a mechanism of
// another name: the policy check reads the traits, not the name.
class CertificateServerMechanism final : public ServerMechanism {
 public:
  std::string_view name() const noexcept override { return "certificate"; }
  MechanismTraits traits() const noexcept override { return kX509Traits; }
  std::unique_ptr<ServerAuthSession> start(const ChannelInfo&) override { return nullptr; }
};

TEST_P(ImpossibleCombinations, AreRefusedBeforeAnyConnection) {
  const auto& c = GetParam();
  if (c.server) {
    TestServer server;
    server.tls(ServerContext()).options(c.server);
    const Status s = server.start();
    EXPECT_EQ(s.code, Errc::kConfigError) << s.to_string();
    EXPECT_THAT(s.message, ::testing::HasSubstr(c.message));
    EXPECT_TRUE(server.endpoints().empty());
  } else {
    auto client = TlsClientOf(Parse("tls://127.0.0.1:1"), ClientContext()).options(c.client).connect();
    ASSERT_FALSE(client.ok());
    EXPECT_EQ(client.status().code, Errc::kConfigError) << Describe(client);
    EXPECT_THAT(client.status().message, ::testing::HasSubstr(c.message));
  }
}

INSTANTIATE_TEST_SUITE_P(
    Tls, ImpossibleCombinations,
    ::testing::Values(
        StartupCase{"server_required_with_plaintext_endpoint",
                    [](ServerOptions& o) {
                      o.encryption = SecurityRequirement::kRequired;
                      o.endpoints.push_back(Parse("tcp://127.0.0.1:0"));
                    },
                    {}, "not a TLS endpoint"},
        StartupCase{"server_required_with_unix_endpoint",
                    [](ServerOptions& o) {
                      o.encryption = SecurityRequirement::kRequired;
                      o.endpoints = {Parse("unix:@authrpc-tls-test-policy")};
                    },
                    {}, "not a TLS endpoint"},
        StartupCase{"server_disabled_with_tls_endpoint",
                    [](ServerOptions& o) { o.encryption = SecurityRequirement::kDisabled; }, {},
                    "encryption is disabled"},
        StartupCase{"server_tls_endpoint_without_context", [](ServerOptions& o) { o.tls.reset(); },
                    {}, "need a TLS context"},
        StartupCase{"server_authentication_required_with_simple",
                    [](ServerOptions& o) { o.authentication = SecurityRequirement::kRequired; }, {},
                    "'simple'"},
        StartupCase{"server_authentication_disabled_with_a_proving_mechanism",
                    [](ServerOptions& o) {
                      o.authentication = SecurityRequirement::kDisabled;
                      o.mechanisms.push_back(std::make_shared<ProvingServerMechanism>());
                    },
                    {}, "authentication is disabled"},
        StartupCase{"server_x509_without_client_certificates",
                    [](ServerOptions& o) {
                      o.mechanisms = {std::make_shared<X509ServerMechanism>()};
                    },
                    {}, "x509"},
        StartupCase{"server_client_certificate_mechanism_without_client_certificates",
                    [](ServerOptions& o) {
                      o.mechanisms = {std::make_shared<CertificateServerMechanism>()};
                    },
                    {}, "'certificate' needs TLS with client certificates"},
        StartupCase{"client_disabled_with_tls_endpoint", {},
                    [](ClientOptions& o) { o.encryption = SecurityRequirement::kDisabled; },
                    "encryption is disabled"},
        StartupCase{"client_required_without_context", {},
                    [](ClientOptions& o) { o.tls.reset(); }, "no TLS context"},
        StartupCase{"client_required_on_unix", {},
                    [](ClientOptions& o) {
                      o.encryption = SecurityRequirement::kRequired;
                      o.endpoint = Parse("unix:@authrpc-tls-test-nowhere");
                    },
                    "Unix socket"},
        StartupCase{"client_authentication_required_with_simple", {},
                    [](ClientOptions& o) { o.authentication = SecurityRequirement::kRequired; }, "'simple'"},
        StartupCase{"client_authentication_disabled_with_a_proving_mechanism", {},
                    [](ClientOptions& o) {
                      o.authentication = SecurityRequirement::kDisabled;
                      o.mechanisms = {std::make_shared<ProvingClientMechanism>()};
                    },
                    "authentication is disabled"}),
    [](const auto& p) { return p.param.name; });

// --- Configuration file ------------------------------------------------------

nlohmann::json TlsConfig() {
  return {{"listen", {"tls://127.0.0.1:0"}},
          {"encryption", "required"},
          {"tls",
           {{"certificate", Tls().cert_file("server")},
            {"private_key", Tls().key_file("server")},
            {"ca", Tls().ca_file()},
            {"client_certificates", "optional"},
            {"min_version", "1.2"}}},
          {"auth", {{"mechanisms", {"x509", "simple"}}}}};
}

TEST(TlsConfig, AServerConfiguredFromJsonServesTlsAndX509) {
  const auto registry = MechanismRegistry::with_builtins();
  auto options = server_options_from_json(TlsConfig(), registry);
  ASSERT_TRUE(options.ok()) << Describe(options);
  ASSERT_TRUE(options->tls);
  EXPECT_EQ(options->tls->options().min_version, TlsVersion::kTls12);
  TestServer server;
  server.options([configured = *options](ServerOptions& o) {
    o = configured;  // the configuration as read, with the builder's quiet log
    o.log = null_log_sink();
    o.io_threads = 1;
  });
  ASSERT_OK(server.start());
  auto client =
      server.client().tls(ClientContext(true)).mechanism(std::make_shared<X509ClientMechanism>()).connect();
  ASSERT_TRUE(client.ok()) << Describe(client);
  EXPECT_EQ(Whoami(**client), "alice");
}

struct BadConfigCase {
  std::string name;
  std::function<void(nlohmann::json&)> change;
  std::string message;
};

class TlsBadConfig : public ::testing::TestWithParam<BadConfigCase> {};

TEST_P(TlsBadConfig, IsRefusedNamingTheKey) {
  nlohmann::json config = TlsConfig();
  GetParam().change(config);
  auto options = server_options_from_json(config, MechanismRegistry::with_builtins());
  TestServer server;
  if (options.ok()) server.options([configured = *options](ServerOptions& o) { o = configured; });
  const Status s = options.ok() ? server.start() : options.status();
  EXPECT_EQ(s.code, Errc::kConfigError) << s.to_string();
  EXPECT_THAT(s.message, ::testing::HasSubstr(GetParam().message));
}

INSTANTIATE_TEST_SUITE_P(
    Tls, TlsBadConfig,
    ::testing::Values(
        BadConfigCase{"unknown_tls_key", [](auto& c) { c["tls"]["cert"] = "x"; }, "tls.cert"},
        BadConfigCase{"bad_policy", [](auto& c) { c["encryption"] = "maybe"; }, "'encryption'"},
        BadConfigCase{"bad_min_version", [](auto& c) { c["tls"]["min_version"] = "1.1"; },
                      "tls.min_version"},
        BadConfigCase{"missing_key_file", [](auto& c) { c["tls"]["private_key"] = "/nonexistent.key"; },
                      "nonexistent.key"},
        BadConfigCase{"plaintext_listener_with_required",
                      [](auto& c) { c["listen"].push_back("tcp://127.0.0.1:0"); }, "not a TLS endpoint"},
        BadConfigCase{"authentication_required_with_simple",
                      [](auto& c) { c["authentication"] = "required"; }, "'simple'"}),
    [](const auto& p) { return p.param.name; });

// --- Failures: typed, and the server goes on serving ------------------------

struct FailureCase {
  std::string name;
  std::string server_leaf;
  ClientCertificates client_certs;
  std::string dial_host;  // "" = 127.0.0.1
  std::error_code expected;
};

class TlsFailures : public ::testing::TestWithParam<FailureCase> {};

TEST_P(TlsFailures, FailWithTheirOwnErrorAndTheServerKeepsServing) {
  const auto& c = GetParam();
  auto server = StartTls(ServerContext(c.server_leaf, c.client_certs));
  ASSERT_TRUE(server);
  Endpoint dial = server->endpoint();
  if (!c.dial_host.empty()) dial.host = c.dial_host;
  auto client = TlsClientOf(dial, ClientContext()).connect();
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.status().code, c.expected) << Describe(client);
  EXPECT_EQ(retry_advice(client.status().code), RetryAdvice::kGiveUp);
  if (c.server_leaf == "server") {
    // The failure was the client's: the server served the others all along.
    auto good = TlsClientOf(*server, ClientContext(true)).connect();
    ASSERT_TRUE(good.ok()) << Describe(good);
    EXPECT_EQ(Whoami(**good), "alice");
  } else {
    EXPECT_TRUE(server->stats().connections_accepted >= 1);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Tls, TlsFailures,
    ::testing::Values(
        FailureCase{"expired_certificate", "expired", ClientCertificates::kNone, "",
                    make_error_code(TlsErrc::kCertificateExpired)},
        FailureCase{"unknown_ca", "rogue-server", ClientCertificates::kNone, "",
                    make_error_code(TlsErrc::kUnknownCa)},
        FailureCase{"ip_not_in_certificate", "other-name", ClientCertificates::kNone, "",
                    make_error_code(TlsErrc::kNameMismatch)},
        FailureCase{"dns_name_not_in_certificate", "other-name", ClientCertificates::kNone,
                    "localhost", make_error_code(TlsErrc::kNameMismatch)},
        FailureCase{"missing_client_certificate", "server", ClientCertificates::kRequired, "",
                    make_error_code(TlsErrc::kCertificateRequired)}),
    [](const auto& p) { return p.param.name; });

TEST(TlsFailures, GarbageInsteadOfAClientHelloEndsThatConnectionOnly) {
  auto server = StartTls(ServerContext(), SecurityRequirement::kRequired);
  ASSERT_TRUE(server);
  for (const std::string& garbage :
       {std::string("\x16\x03\x01\x00\x10" "0123456789abcdef", 21), std::string(64, '\x16'),
        std::string("GET / HTTP/1.1\r\n\r\n")}) {
    RawSocket s(server->endpoint().port);
    s.Send(garbage);
    bool timed_out = false;
    s.ReadToEnd(&timed_out);
    EXPECT_FALSE(timed_out) << "the server must close the connection";
  }
  EXPECT_GE(server->stats().negotiation_failures, 3u);
  ExpectStillServing(*server);
}

TEST(TlsFailures, AStalledHandshakeIsClosedByTheNegotiationTimeout) {
  auto server = StartTls(ServerContext(), SecurityRequirement::kRequired, 300ms);
  ASSERT_TRUE(server);
  RawSocket s(server->endpoint().port);
  s.Send(std::string("\x16\x03\x01", 3));  // the start of a record, then silence
  const auto start = std::chrono::steady_clock::now();
  bool timed_out = false;
  s.ReadToEnd(&timed_out);
  EXPECT_FALSE(timed_out);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 3s);
  EXPECT_TRUE(testing::Eventually([&] { return server->stats().negotiation_failures >= 1; }, 2s));
  ExpectStillServing(*server);
}

TEST(TlsFailures, AServerThatNeverAnswersTheClientHelloTimesTheClientOut) {
  // A listener that accepts and never speaks.
  const testing::SilentListener silent;
  ASSERT_NE(silent.port(), 0);
  Endpoint ep = Parse("tls://127.0.0.1:" + std::to_string(silent.port()));
  auto client = TlsClientOf(ep, ClientContext())
                    .options([](ClientOptions& o) { o.connect_timeout = 300ms; })
                    .connect();
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.status().code, Errc::kDeadlineExceeded) << Describe(client);
}

// --- openssl s_client against the server --------------------------------------

// Runs `openssl s_client` with `args` against 127.0.0.1:port; its output.
std::string SClient(std::uint16_t port, const std::string& args, int* exit_code) {
  const std::string cmd = "timeout 10 openssl s_client -connect 127.0.0.1:" + std::to_string(port) +
                          " -CAfile " + Tls().ca_file() + " " + args + " </dev/null 2>&1";
  std::string out;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return out;
  std::array<char, 4096> buf;
  while (std::fgets(buf.data(), buf.size(), p) != nullptr) out += buf.data();
  const int status = ::pclose(p);
  *exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return out;
}

bool HaveOpenssl() { return std::system("openssl version >/dev/null 2>&1") == 0; }

struct SClientCase {
  std::string name;
  TlsVersion server_min;
  std::string args;
  bool accepted;
};

class OpensslSClient : public ::testing::TestWithParam<SClientCase> {};

TEST_P(OpensslSClient, ProbesWhatTheServerAcceptsAndRefuses) {
  if (!HaveOpenssl()) GTEST_SKIP() << "openssl command not installed";
  const auto& c = GetParam();
  auto server = StartTls(ServerContext("server", ClientCertificates::kNone, c.server_min));
  ASSERT_TRUE(server);
  int code = -1;
  const std::string out = SClient(server->endpoint().port, c.args, &code);
  if (c.accepted) {
    EXPECT_THAT(out, ::testing::HasSubstr("Verify return code: 0 (ok)")) << out;
    EXPECT_THAT(out, ::testing::Not(::testing::HasSubstr("Cipher is (NONE)"))) << out;
  } else {
    // Refused by the server (an alert), not by the client's own settings.
    EXPECT_THAT(out, ::testing::AnyOf(::testing::HasSubstr("alert protocol version"),
                                      ::testing::HasSubstr("alert handshake failure")))
        << out;
    EXPECT_THAT(out, ::testing::HasSubstr("Cipher is (NONE)")) << out;
  }
  ExpectStillServing(*server);
}

// SECLEVEL=0 lets the s_client offer what OpenSSL 3 would not send by
// itself, so that the refusal shown is the server's.
INSTANTIATE_TEST_SUITE_P(
    Tls, OpensslSClient,
    ::testing::Values(
        SClientCase{"tls13_accepted", TlsVersion::kTls13, "-tls1_3", true},
        SClientCase{"tls12_refused_by_default", TlsVersion::kTls13,
                    "-tls1_2 -cipher DEFAULT:@SECLEVEL=0", false},
        SClientCase{"tls12_accepted_when_allowed", TlsVersion::kTls12, "-tls1_2", true},
        SClientCase{"tls11_refused", TlsVersion::kTls12, "-tls1_1 -cipher DEFAULT:@SECLEVEL=0", false},
        SClientCase{"tls10_refused", TlsVersion::kTls12, "-tls1 -cipher DEFAULT:@SECLEVEL=0", false},
        SClientCase{"cbc_sha1_refused", TlsVersion::kTls12,
                    "-tls1_2 -cipher ECDHE-ECDSA-AES128-SHA:@SECLEVEL=0", false},
        SClientCase{"static_rsa_and_3des_refused", TlsVersion::kTls12,
                    "-tls1_2 -cipher AES128-GCM-SHA256:DES-CBC3-SHA:@SECLEVEL=0", false},
        SClientCase{"null_and_export_refused", TlsVersion::kTls12,
                    "-tls1_2 -cipher NULL:EXPORT:@SECLEVEL=0", false}),
    [](const auto& p) { return p.param.name; });

}  // namespace
}  // namespace authrpc
