// Integration tests for the `kerberos` mechanism (components/kerberos/kerberos.h)
// against a real MIT KDC started by the test (tests/testing/mini_kdc.h): real
// tickets, real keytabs, real replay cache, real Servers and Clients over
// loopback TCP and abstract Unix sockets. What holds alike for `kerberos` and
// `kerberos-sasl` (startup errors, missing tickets, the registry, a KDC that
// is down) is checked here for both, as typed tests; kerberos_sasl_itest has
// what is SASL's own.
//
// Realm layout (every suite): principals alice (keys in client_keytab()) and
// rpc/localhost (keys in service_keytab()); the shared suite also has
// rpc/otherhost in the KDC database but in no server keytab.
//
// MIT GSSAPI reads krb5.conf (and the default ccache, keytab and rcache
// directory) from the environment, so every suite calls
// set_env_for_process(); the tests still pass explicit keytab / ccache /
// replay-cache options wherever the mechanism has them.
//
// The clock-skew test runs the `authrpc` CLI (AUTHRPC_CLI_BIN) under Debian's
// `faketime` (package faketime, scripts/setup.sh); it is skipped if faketime
// is not installed.
#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <type_traits>
#include <vector>

#include "authrpc/auth/mechanism_registry.h"
#include "authrpc/auth/mechanisms/simple/simple.h"
#include "authrpc/base/log.h"
#include "authrpc/base/status.h"
#include "authrpc/client/client.h"
#include "authrpc/components/kerberos/kerberos.h"
#include "authrpc/components/kerberos/kerberos_sasl.h"
#include "authrpc/components/kerberos/kerberos_ticket_names.h"
#include "authrpc/rpc/endpoint.h"
#include "authrpc/rpc/messages.h"
#include "authrpc/rpc/wire.h"
#include "authrpc/server/server.h"
#include "tests/testing/kerberos_realm.h"
#include "tests/testing/kerberos_sessions.h"
#include "tests/testing/test_server.h"
#include "tests/testing/mini_kdc.h"
#include "tests/testing/test_support.h"
#include "tests/testing/test_programs.h"

namespace authrpc {
namespace {

using namespace std::chrono_literals;
using namespace authrpc::testing;  // the shared fixtures, tests/testing/
using Clock = std::chrono::steady_clock;
using ::testing::HasSubstr;

// --- realm and mechanisms ------------------------------------------------------

std::shared_ptr<ClientMechanism> Simple(const std::string& user = "bob") {
  return std::make_shared<SimpleClientMechanism>(user);
}

// --- servers and clients -----------------------------------------------------------

std::string UniqueAbstractName() { return "unix:@authrpc-kerberos-itest-" + UniqueSuffix(); }

// A MEMORY ccache name no earlier test (or earlier realm, with --gtest_repeat) used.
std::string UniqueMemoryCache() { return "MEMORY:authrpc-kerberos-itest-" + UniqueSuffix(); }

// --- raw frames (replay test) ---------------------------------------------------

// Preamble + HELLO(mechanism, token) on a fresh connection; the server's reply.
std::optional<RawFrame> SendHello(std::uint16_t port, const std::string& mechanism,
                                  const std::string& token) {
  RawConnection connection(port);
  if (!connection.connected() || !connection.SendHello(mechanism, token)) return std::nullopt;
  return connection.ReadFrame();
}

// --- the shared realm -------------------------------------------------------------

// One KDC for the suite: alice has a TGT in kdc->ccache(); rpc/otherhost exists
// in the KDC but in no server keytab.
class KerberosSharedRealm : public testing::KerberosSuite {
 protected:
  static void SetUpTestSuite() { StartRealm({.other_principals = {"rpc/otherhost"}}); }
};

class KerberosTest : public KerberosSharedRealm {
 protected:
  // A server enabling kerberos (the suite's keytab) and simple, on URI.
  static Result<RunningServer> StartKerberosServer(const std::string& uri = "tcp://127.0.0.1:0") {
    return testing::StartKerberosServer<KerberosServerMechanism>(KerberosServerOptionsFor(*kdc_), uri);
  }

  static std::shared_ptr<KerberosClientMechanism> CcacheClient() {
    return MakeKerberosClient<KerberosClientMechanism>(CcacheClientOptions(*kdc_));
  }

  // A server (StartKerberosServer), a ticket-cache client and the first
  // token that client sends it (alice's AP-REQ), for the tests that send
  // tokens by hand.
  struct HandSession {
    RunningServer server;
    std::shared_ptr<KerberosClientMechanism> mechanism;
    std::string token;
  };
  static Result<HandSession> StartHandSession() {
    auto server = StartKerberosServer();
    if (!server.ok()) return server.status();
    auto mechanism = CcacheClient();
    if (!mechanism) return Status(Errc::kInternal, "no ticket-cache client");
    auto token = FirstToken(*mechanism, TcpChannel(server->endpoint.port));
    if (!token.ok()) return token.status();
    return HandSession{std::move(*server), std::move(mechanism), std::move(*token)};
  }
};

// Case 1: kinit, then a ticket-cache client over TCP.
TEST_F(KerberosTest, TicketCacheClientOverTcp) {
  auto server = StartKerberosServer();
  ASSERT_TRUE(server.ok()) << Describe(server);
  auto mechanism = CcacheClient();
  ASSERT_TRUE(mechanism);
  EXPECT_EQ(mechanism->principal(), "alice@" + kdc_->realm());
  // Explicit service principal, connecting to 127.0.0.1.
  ExpectKerberosSession(server->endpoint, mechanism, *kdc_);

  // No service principal: the target is rpc@<host connected to>.
  KerberosClientOptions by_host;
  by_host.ccache = kdc_->ccache();
  auto host_based = KerberosClientMechanism::create(by_host);
  ASSERT_TRUE(host_based.ok()) << Describe(host_based);
  ExpectKerberosSession(ViaLocalhost(server->endpoint), *host_based, *kdc_);
}

// Case 1 over an abstract Unix socket: the target defaults to rpc@localhost.
TEST_F(KerberosTest, TicketCacheClientOverUnixSocket) {
  auto server = StartKerberosServer(UniqueAbstractName());
  ASSERT_TRUE(server.ok()) << Describe(server);
  ASSERT_EQ(server->endpoint.scheme, Endpoint::Scheme::kUnix);
  KerberosClientOptions o;
  o.ccache = kdc_->ccache();
  auto mechanism = KerberosClientMechanism::create(o);
  ASSERT_TRUE(mechanism.ok()) << Describe(mechanism);
  ExpectKerberosSession(server->endpoint, *mechanism, *kdc_);
}

// The default ticket cache (KRB5CCNAME), re-read on every session.
TEST_F(KerberosTest, DefaultTicketCacheFromEnvironment) {
  auto server = StartKerberosServer();
  ASSERT_TRUE(server.ok()) << Describe(server);
  KerberosClientOptions o;
  o.service_principal = ServicePrincipal(*kdc_);
  auto mechanism = KerberosClientMechanism::create(o);
  ASSERT_TRUE(mechanism.ok()) << Describe(mechanism);
  EXPECT_EQ((*mechanism)->principal(), "alice@" + kdc_->realm());
  ExpectKerberosSession(server->endpoint, *mechanism, *kdc_);
}

// Case 2: keytab login, no kinit and no ticket cache.
TEST_F(KerberosTest, ClientKeytabLogin) {
  auto server = StartKerberosServer();
  ASSERT_TRUE(server.ok()) << Describe(server);
  const auto before = kdc_->kdc_request_counts();
  auto mechanism = KerberosClientMechanism::create(KeytabClientOptions(*kdc_));
  ASSERT_TRUE(mechanism.ok()) << Describe(mechanism);
  EXPECT_EQ((*mechanism)->principal(), "alice@" + kdc_->realm());
  ExpectKerberosSession(server->endpoint, *mechanism, *kdc_);
  const auto after = kdc_->kdc_request_counts();
  EXPECT_GE(after.as - before.as, 1) << "a keytab login asks the KDC for a TGT";
  EXPECT_EQ(after.tgs - before.tgs, 1) << "one service ticket";
}

// Case 3: the first call travels behind HELLO, before AUTH_SUCCESS.
TEST_F(KerberosTest, PipelinedFirstCall) {
  auto server = StartKerberosServer();
  ASSERT_TRUE(server.ok()) << Describe(server);
  auto mechanism = CcacheClient();
  ASSERT_TRUE(mechanism);
  for (int i = 0; i < 3; ++i) {  // the first may need a TGS request, the others not
    SCOPED_TRACE("session " + std::to_string(i));
    auto client = Connect(server->endpoint, mechanism, /*wait_for_authentication=*/false);
    ASSERT_TRUE(client.ok()) << Describe(client);
    auto who = Whoami(**client);
    ASSERT_TRUE(who.ok()) << Describe(who);
    EXPECT_EQ((*who)["principal"], "alice@" + kdc_->realm());
    EXPECT_EQ((*who)["mechanism"], "kerberos");
    EXPECT_EQ((*client)->mechanism(), "kerberos");
  }
}

// Case 4: once the service ticket is cached, a session costs no KDC request.
TEST_F(KerberosTest, NoKdcTrafficPerSession) {
  auto server = StartKerberosServer();
  ASSERT_TRUE(server.ok()) << Describe(server);

  auto shared = CcacheClient();
  ASSERT_TRUE(shared);
  ASSERT_NO_FATAL_FAILURE(ExpectKerberosSession(server->endpoint, shared, *kdc_));  // warm-up
  const int before = kdc_->kdc_requests();
  const auto t0 = Clock::now();
  for (int i = 0; i < 20; ++i) {
    SCOPED_TRACE("session " + std::to_string(i));
    ASSERT_NO_FATAL_FAILURE(ExpectKerberosSession(server->endpoint, shared, *kdc_));
  }
  const auto t1 = Clock::now();
  EXPECT_EQ(kdc_->kdc_requests(), before) << "20 sessions with one ccache mechanism";
  RecordProperty("ccache_20_sessions_ms",
                 std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(t1 - t0).count()));

  // A new mechanism object per session reads the same ticket cache.
  for (int i = 0; i < 5; ++i) {
    SCOPED_TRACE("fresh mechanism " + std::to_string(i));
    auto fresh = CcacheClient();
    ASSERT_TRUE(fresh);
    ASSERT_NO_FATAL_FAILURE(ExpectKerberosSession(server->endpoint, fresh, *kdc_));
  }
  EXPECT_EQ(kdc_->kdc_requests(), before) << "new mechanism objects on the same ccache";

  // A keytab client keeps its tickets in its own memory cache.
  auto keytab = KerberosClientMechanism::create(KeytabClientOptions(*kdc_));
  ASSERT_TRUE(keytab.ok()) << Describe(keytab);
  ASSERT_NO_FATAL_FAILURE(ExpectKerberosSession(server->endpoint, *keytab, *kdc_));  // warm-up
  const int keytab_before = kdc_->kdc_requests();
  for (int i = 0; i < 20; ++i) {
    SCOPED_TRACE("keytab session " + std::to_string(i));
    ASSERT_NO_FATAL_FAILURE(ExpectKerberosSession(server->endpoint, *keytab, *kdc_));
  }
  EXPECT_EQ(kdc_->kdc_requests(), keytab_before) << "20 sessions with one keytab mechanism";
}

// MIT behaviour to know about: with a default client keytab (KRB5_CLIENT_KTNAME,
// which MiniKdc points at alice's keys) an empty ticket cache is filled from it
// by gss_acquire_cred, so "no ticket" is not CREDENTIALS_EXPIRED there.
TEST_F(KerberosTest, DefaultClientKeytabFillsAnEmptyCache) {
  KerberosClientOptions o;
  o.ccache = UniqueMemoryCache();
  o.service_principal = ServicePrincipal(*kdc_);
  auto mechanism = KerberosClientMechanism::create(o);
  ASSERT_TRUE(mechanism.ok()) << Describe(mechanism);
  EXPECT_EQ((*mechanism)->principal(), "alice@" + kdc_->realm());
  auto server = StartKerberosServer();
  ASSERT_TRUE(server.ok()) << Describe(server);
  ExpectKerberosSession(server->endpoint, *mechanism, *kdc_);
}

// Case 8: the client expects a principal the server has no key for.
// Observed and asserted: AUTHENTICATION_FAILED (retry advice: give up), from the
// server's gss_accept_sec_context ("Cannot decrypt ticket for rpc/otherhost@R
// using keytab key for rpc/localhost@R"), carried to the client in ERROR. A
// principal the KDC does not know fails on the client side, also
// AUTHENTICATION_FAILED ("Server ... not found in Kerberos database").
TEST_F(KerberosTest, WrongServicePrincipal) {
  auto server = StartKerberosServer();
  ASSERT_TRUE(server.ok()) << Describe(server);
  KerberosClientOptions o = CcacheClientOptions(*kdc_);
  o.service_principal = ServicePrincipal(*kdc_, "otherhost");
  auto mechanism = KerberosClientMechanism::create(o);
  ASSERT_TRUE(mechanism.ok()) << Describe(mechanism);

  ExpectConnectFails(server->endpoint, *mechanism, Errc::kAuthenticationFailed,
                     RetryAdvice::kGiveUp, "wrong_service_principal");

  // Pipelined: the first call reports the failure.
  auto pipelined = Connect(server->endpoint, *mechanism, /*wait_for_authentication=*/false);
  if (pipelined.ok()) {
    auto who = Whoami(**pipelined);
    ASSERT_FALSE(who.ok());
    EXPECT_EQ(who.code(), Code(Errc::kAuthenticationFailed)) << Describe(who);
  } else {
    EXPECT_EQ(pipelined.code(), Code(Errc::kAuthenticationFailed)) << Describe(pipelined);
  }

  // A principal the KDC does not know: the client cannot get a ticket.
  o.service_principal = ServicePrincipal(*kdc_, "nohost");
  auto unknown = KerberosClientMechanism::create(o);
  ASSERT_TRUE(unknown.ok()) << Describe(unknown);
  ExpectConnectFails(server->endpoint, *unknown, Errc::kAuthenticationFailed,
                     RetryAdvice::kGiveUp, "unknown_service_principal");

  ExpectServesSimple(server->endpoint);
  ExpectKerberosSession(server->endpoint, CcacheClient(), *kdc_);
}

// Case 10: the same AP-REQ twice — the replay cache refuses the second.
TEST_F(KerberosTest, ReplayedFirstTokenIsRefused) {
  auto session = StartHandSession();
  ASSERT_TRUE(session.ok()) << Describe(session);
  const auto& [server, mechanism, token] = *session;
  ASSERT_FALSE(token.empty());

  auto first = SendHello(server.endpoint.port, "kerberos", token);
  ASSERT_TRUE(first.has_value()) << "no reply to the first HELLO";
  ASSERT_EQ(static_cast<int>(first->type), 0x05) << "AUTH_SUCCESS expected";
  auto success = wire::parse_auth_success(first->body);
  ASSERT_TRUE(success.ok()) << Describe(success);
  EXPECT_FALSE(success->message.empty()) << "AP-REP for mutual authentication";

  auto second = SendHello(server.endpoint.port, "kerberos", token);
  ASSERT_TRUE(second.has_value()) << "no reply to the replayed HELLO";
  ASSERT_EQ(static_cast<int>(second->type), 0x06) << "ERROR expected";
  auto error = wire::parse_error(second->body);
  ASSERT_TRUE(error.ok()) << Describe(error);
  EXPECT_EQ(error->code, 104) << error->message;  // AUTHENTICATION_FAILED
  RecordProperty("replay_error", error->message);

  ExpectServesSimple(server.endpoint);
  ExpectKerberosSession(server.endpoint, mechanism, *kdc_);
}

// The RFC 4121 inner token of an InitialContextToken (RFC 2743 §3.1):
// without the `60` tag, its DER length, the mechanism OID and TOK_ID
// `01 00`, a bare AP-REQ (first byte `6e`). Empty if `token` is not one.
std::string BareApReq(const std::string& token) {
  const auto byte = [&](std::size_t i) { return static_cast<std::uint8_t>(token[i]); };
  if (token.size() < 2 || byte(0) != 0x60) return {};
  std::size_t at = 2;
  if (byte(1) & 0x80) at += byte(1) & 0x7f;  // long form: that many length bytes
  const std::string oid("\x06\x09\x2a\x86\x48\x86\xf7\x12\x01\x02\x02", 11);
  if (token.compare(at, oid.size(), oid) != 0) return {};
  at += oid.size();
  if (token.compare(at, 2, std::string("\x01\x00", 2)) != 0) return {};
  return token.substr(at + 2);
}

// A token that is no AP-REQ at all is
// AUTHENTICATION_FAILED (advice: give up), never CREDENTIALS_EXPIRED
// (advice: re-authenticate, which would send the same thing again). MIT
// hands an empty token to SPNEGO, which fails for want of a credential.
TEST_F(KerberosTest, MalformedTokensAreAuthenticationFailed) {
  auto session = StartHandSession();
  ASSERT_TRUE(session.ok()) << Describe(session);
  const auto& [server, mechanism, token] = *session;
  ASSERT_GT(token.size(), 100u);
  const std::string bare = BareApReq(token);
  ASSERT_FALSE(bare.empty()) << "not an InitialContextToken";
  ASSERT_EQ(static_cast<std::uint8_t>(bare[0]), 0x6e) << "not an AP-REQ inside";
  struct Case {
    const char* name;
    std::string token;
    const char* message;
  };
  const Case cases[] = {
      {"empty", "", "empty token"},
      {"not a GSS token", "hello, kerberos", "is not a Kerberos AP-REQ"},
      {"one zero byte", std::string(1, '\0'), "is not a Kerberos AP-REQ"},
      // MIT: "Unspecified GSS failure" (GSS_S_FAILURE), already AUTHENTICATION_FAILED.
      {"truncated to half", token.substr(0, token.size() / 2), "kerberos: accept"},
      {"one byte short", token.substr(0, token.size() - 1), "kerberos: accept"},
      {"SPNEGO's OID, nothing else", std::string("\x60\x08\x06\x06\x2b\x06\x01\x05\x05\x02", 10),
       "is not a Kerberos AP-REQ"},
      // PROTOCOL.md section 4: HELLO carries the whole InitialContextToken;
      // the AP-REQ without its header is refused (MIT: GSS_S_DEFECTIVE_TOKEN).
      {"a bare AP-REQ", bare, "is not a Kerberos AP-REQ"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    auto reply = SendHello(server.endpoint.port, "kerberos", c.token);
    ASSERT_TRUE(reply.has_value()) << "no reply";
    ASSERT_EQ(static_cast<int>(reply->type), 0x06) << "ERROR expected";
    auto error = wire::parse_error(reply->body);
    ASSERT_TRUE(error.ok()) << Describe(error);
    EXPECT_EQ(error->code, 104) << "AUTHENTICATION_FAILED expected: " << error->message;
    EXPECT_THAT(error->message, HasSubstr(c.message));
    RecordProperty(std::string("error_") + std::to_string(&c - cases), error->message);
  }
  ExpectServesSimple(server.endpoint);
  ExpectKerberosSession(server.endpoint, mechanism, *kdc_);
}

// The server names a client by the service ticket it presents once it has
// accepted that ticket (components/kerberos/kerberos_ticket_names.h). What that
// rests on, with real tokens: a client's tokens carry the same ticket bytes
// session after session (their authenticators differ), another client's carry
// another ticket; and sessions of two clients alternating on one server are
// each named right. (ReplayedFirstTokenIsRefused replays a token whose ticket
// the server knows by then: still refused.)
TEST_F(KerberosTest, AcceptedTicketsNameTheirClients) {
  const std::string carol = "carol-" + UniqueSuffix();  // new in each repetition
  const std::string carol_keytab = kdc_->dir() + "/" + carol + ".keytab";
  ASSERT_OK(kdc_->add_principal(carol));
  ASSERT_OK(kdc_->create_keytab(carol, carol_keytab));
  KerberosClientOptions carol_options;
  carol_options.principal = carol;
  carol_options.keytab = carol_keytab;
  carol_options.service_principal = ServicePrincipal(*kdc_);
  auto carol_client = KerberosClientMechanism::create(carol_options);
  ASSERT_TRUE(carol_client.ok()) << Describe(carol_client);
  auto alice_client = CcacheClient();
  ASSERT_TRUE(alice_client);

  const ChannelInfo info = TcpChannel(1);
  auto alice1 = FirstToken(*alice_client, info);
  auto alice2 = FirstToken(*alice_client, info);
  auto carol1 = FirstToken(**carol_client, info);
  ASSERT_TRUE(alice1.ok() && alice2.ok() && carol1.ok())
      << Describe(alice1) << Describe(alice2) << Describe(carol1);
  const auto ticket = KerberosTicketNames::ticket_of;
  ASSERT_FALSE(ticket(*alice1).empty());
  EXPECT_NE(*alice1, *alice2);
  EXPECT_EQ(ticket(*alice1), ticket(*alice2));
  ASSERT_FALSE(ticket(*carol1).empty());
  EXPECT_NE(ticket(*carol1), ticket(*alice1));

  auto server = StartKerberosServer();
  ASSERT_TRUE(server.ok()) << Describe(server);
  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    ExpectKerberosSession(server->endpoint, alice_client, *kdc_);
    auto client = Connect(server->endpoint, *carol_client);
    ASSERT_TRUE(client.ok()) << Describe(client);
    auto who = Whoami(**client);
    ASSERT_TRUE(who.ok()) << Describe(who);
    EXPECT_EQ((*who)["principal"], carol + "@" + kdc_->realm()) << who->dump();
  }
}

// The replay_cache_dir option decides where the replay cache lives, whatever
// KRB5RCACHEDIR says. (MIT's "dfl:" rcache type ignores its residual and always
// uses $KRB5RCACHEDIR/krb5_<euid>.rcache2; "file2:<path>" honours the path.)
TEST_F(KerberosTest, ReplayCacheDirOptionIsHonoured) {
  const std::string dir = kdc_->dir() + "/rcache-option";
  std::filesystem::create_directories(dir);
  KerberosServerOptions o = KerberosServerOptionsFor(*kdc_);
  o.replay_cache_dir = dir;
  auto kerberos = KerberosServerMechanism::create(o);
  ASSERT_TRUE(kerberos.ok()) << Describe(kerberos);
  auto server = StartServer({*kerberos});
  ASSERT_TRUE(server.ok()) << Describe(server);
  ExpectKerberosSession(server->endpoint, CcacheClient(), *kdc_);

  std::vector<std::string> in_option_dir, in_env_dir;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    in_option_dir.push_back(e.path().filename().string());
  }
  for (const auto& e : std::filesystem::directory_iterator(kdc_->rcache_dir())) {
    in_env_dir.push_back(e.path().filename().string());
  }
  EXPECT_FALSE(in_option_dir.empty())
      << "no replay cache file in replay_cache_dir " << dir << "; KRB5RCACHEDIR ("
      << kdc_->rcache_dir() << ") holds: " << ::testing::PrintToString(in_env_dir);
}

// Case 11: a client never falls back to a mechanism it does not allow.
TEST_F(KerberosTest, DowngradeRefused) {
  auto simple_only = StartServer({std::make_shared<SimpleServerMechanism>()});
  ASSERT_TRUE(simple_only.ok()) << Describe(simple_only);
  auto kerberos = KerberosServerMechanism::create(KerberosServerOptionsFor(*kdc_));
  ASSERT_TRUE(kerberos.ok()) << Describe(kerberos);
  auto kerberos_only = StartServer({*kerberos});
  ASSERT_TRUE(kerberos_only.ok()) << Describe(kerberos_only);

  auto client = Connect(simple_only->endpoint, CcacheClient());
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.code(), Code(Errc::kMechanismUnavailable)) << Describe(client);

  client = Connect(kerberos_only->endpoint, Simple("mallory"));
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.code(), Code(Errc::kMechanismUnavailable)) << Describe(client);

  // Both servers still serve what they enable.
  ExpectServesSimple(simple_only->endpoint);
  ExpectKerberosSession(kerberos_only->endpoint, CcacheClient(), *kdc_);

  // A client allowing both picks what the server offers.
  client = Connect(kerberos_only->endpoint, {Simple("mallory"), CcacheClient()});
  ASSERT_TRUE(client.ok()) << Describe(client);
  ExpectKerberosIdentity(**client, *kdc_, "kerberos");
}

// A realm for one test, with no ticket yet: for the tests that change the KDC.
Status PopulateOwnRealm(MiniKdc& kdc) { return PopulateRealm(kdc, {.kinit = ""}); }

// --- what holds for both mechanisms ------------------------------------------------

// `kerberos` (MIT GSSAPI) and `kerberos-sasl` (SASL GSSAPI through Cyrus) read
// the same options, register the same way and type their errors alike: the
// tests below run against each.
struct Gssapi {
  using Server = KerberosServerMechanism;
  using Client = KerberosClientMechanism;
  static constexpr std::string_view kName = kKerberosMechanism;
};
struct Sasl {
  using Server = KerberosSaslServerMechanism;
  using Client = KerberosSaslClientMechanism;
  static constexpr std::string_view kName = kKerberosSaslMechanism;
};
using BothMechanisms = ::testing::Types<Gssapi, Sasl>;
struct MechanismName {
  template <typename M>
  static std::string GetName(int) {
    return std::is_same_v<M, Gssapi> ? "Gssapi" : "Sasl";
  }
};

// The shared realm, for each mechanism.
template <typename M>
class KerberosMechanismsTest : public KerberosSharedRealm {};
TYPED_TEST_SUITE(KerberosMechanismsTest, BothMechanisms, MechanismName);

// Case 5: a keytab or principal the server cannot use fails create() — at
// startup — with CONFIG_ERROR naming the cause.
TYPED_TEST(KerberosMechanismsTest, StartupErrors) {
  const MiniKdc& kdc = *this->kdc_;
  struct Case {
    const char* name;
    KerberosServerOptions options;
    std::string message;
  };
  KerberosServerOptions missing = KerberosServerOptionsFor(kdc);
  missing.keytab = kdc.dir() + "/no-such.keytab";
  KerberosServerOptions wrong_keytab = KerberosServerOptionsFor(kdc);
  wrong_keytab.keytab = kdc.client_keytab();
  KerberosServerOptions not_in_keytab = KerberosServerOptionsFor(kdc);
  not_in_keytab.principal = ServicePrincipal(kdc, "otherhost");
  const Case cases[] = {
      {"missing keytab", missing, missing.keytab},
      {"a keytab with no key for the principal (alice's)", wrong_keytab, "rpc/localhost"},
      {"a principal the KDC knows but the keytab lacks", not_in_keytab, "rpc/otherhost"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    auto r = TypeParam::Server::create(c.options);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.code(), Code(Errc::kConfigError)) << Describe(r);
    EXPECT_THAT(r.status().message, HasSubstr(c.message));
  }

  auto good = TypeParam::Server::create(KerberosServerOptionsFor(kdc));
  ASSERT_TRUE(good.ok()) << Describe(good);
  EXPECT_EQ((*good)->name(), TypeParam::kName);
  EXPECT_EQ((*good)->principal(), ServicePrincipal(kdc));
}

// Case 6: no ticket and no keytab → CREDENTIALS_EXPIRED (run kinit), when the
// mechanism is created.
TYPED_TEST(KerberosMechanismsTest, ClientWithoutTicket) {
  const MiniKdc& kdc = *this->kdc_;
  // MIT fills an empty cache from the default client keytab (KRB5_CLIENT_KTNAME,
  // which MiniKdc points at alice's keys): a client without one needs none there.
  ScopedEnv no_client_keytab("KRB5_CLIENT_KTNAME", "FILE:" + kdc.dir() + "/none.keytab");
  struct Case {
    const char* name;
    std::string ccache;
    std::optional<std::string> default_ccache;
  };
  const Case cases[] = {
      {"missing ticket cache file", "FILE:" + kdc.dir() + "/no-such-ccache", std::nullopt},
      {"memory cache that exists only in name", UniqueMemoryCache(), std::nullopt},
      {"default cache (KRB5CCNAME) empty", "", "FILE:" + kdc.dir() + "/no-such-default-ccache"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    std::optional<ScopedEnv> default_ccache;
    if (c.default_ccache) default_ccache.emplace("KRB5CCNAME", *c.default_ccache);
    KerberosClientOptions o;
    o.ccache = c.ccache;
    o.service_principal = ServicePrincipal(kdc);
    auto r = TypeParam::Client::create(o);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.code(), Code(Errc::kCredentialsExpired)) << Describe(r);
    EXPECT_EQ(retry_advice(r.code()), RetryAdvice::kReauthenticate);
    this->RecordProperty(c.name, r.status().message);
  }
}

// Case 13: the registry builds both sides from JSON options; unknown keys,
// wrong types and unusable values are configuration errors, not silent
// defaults.
TYPED_TEST(KerberosMechanismsTest, ViaRegistry) {
  const MiniKdc& kdc = *this->kdc_;
  const std::string name(TypeParam::kName);
  const auto registry = MechanismRegistry::with_builtins();
  auto server_mechanism = registry.make_server(
      name, {{"keytab", kdc.service_keytab()},
             {"principal", ServicePrincipal(kdc)},
             {"replay_cache", true},
             {"replay_cache_dir", kdc.rcache_dir()}});
  ASSERT_TRUE(server_mechanism.ok()) << Describe(server_mechanism);
  EXPECT_EQ((*server_mechanism)->name(), name);
  auto host_based = registry.make_client(name, {{"ccache", kdc.ccache()}});
  ASSERT_TRUE(host_based.ok()) << Describe(host_based);
  EXPECT_EQ((*host_based)->name(), name);
  auto explicit_target = registry.make_client(
      name, {{"ccache", kdc.ccache()}, {"service_principal", ServicePrincipal(kdc)}});
  ASSERT_TRUE(explicit_target.ok()) << Describe(explicit_target);

  auto server = StartServer({*server_mechanism});
  ASSERT_TRUE(server.ok()) << Describe(server);
  ExpectKerberosSession(ViaLocalhost(server->endpoint), *host_based, kdc);
  ExpectKerberosSession(server->endpoint, *explicit_target, kdc);

  struct Bad {
    const char* name;
    bool server;  // else a client
    nlohmann::json options;
    std::string message;
  };
  const nlohmann::json service = {{"keytab", kdc.service_keytab()},
                                  {"principal", ServicePrincipal(kdc)}};
  const auto with = [&](const char* key, nlohmann::json value) {
    nlohmann::json options = service;
    options[key] = std::move(value);
    return options;
  };
  const Bad bad[] = {
      {"misspelt key", true, with("keytabb", "typo"), name + ": unknown option 'keytabb'"},
      {"a string for a bool", true, with("replay_cache", "yes"), "replay_cache"},
      {"missing keytab", true, with("keytab", kdc.dir() + "/no-such.keytab"), "no-such.keytab"},
      {"misspelt client key", false, {{"ccache", kdc.ccache()}, {"cache", "x"}}, "cache"},
      {"a number for a string", false, {{"ccache", 42}}, "ccache"},
      {"a keytab without a principal", false, {{"keytab", kdc.client_keytab()}},
       "needs a principal"},
  };
  for (const auto& c : bad) {
    SCOPED_TRACE(c.name);
    const Status status = c.server ? registry.make_server(name, c.options).status()
                                   : registry.make_client(name, c.options).status();
    ASSERT_FALSE(status.ok());
    EXPECT_EQ(status.code, Code(Errc::kConfigError)) << status.to_string();
    EXPECT_THAT(status.message, HasSubstr(c.message));
  }
}

// Case 12: the KDC is down when a service ticket is needed → UNAVAILABLE
// (retry); a target whose ticket is cached needs no KDC; the same mechanism
// works once the KDC is back. A realm of its own: the test stops its KDC.
template <typename M>
class KerberosKdcDownTest : public ::testing::Test {};
TYPED_TEST_SUITE(KerberosKdcDownTest, BothMechanisms, MechanismName);

TYPED_TEST(KerberosKdcDownTest, KdcDown) {
  using Server = typename TypeParam::Server;
  using Client = typename TypeParam::Client;
  MiniKdc kdc;
  ASSERT_OK(PopulateOwnRealm(kdc));
  kdc.set_env_for_process();
  const std::string other_keytab = kdc.dir() + "/otherhost.keytab";
  ASSERT_OK(kdc.add_principal("rpc/otherhost"));
  ASSERT_OK(kdc.create_keytab("rpc/otherhost", other_keytab));
  ASSERT_OK(kdc.kinit("alice", kdc.client_keytab()));

  auto local = testing::StartKerberosServer<Server>(KerberosServerOptionsFor(kdc));
  ASSERT_TRUE(local.ok()) << Describe(local);
  KerberosServerOptions other_options = KerberosServerOptionsFor(kdc);
  other_options.keytab = other_keytab;
  other_options.principal = ServicePrincipal(kdc, "otherhost");
  auto other = testing::StartKerberosServer<Server>(other_options);
  ASSERT_TRUE(other.ok()) << Describe(other);

  // A warm target (service ticket cached) for rpc/localhost; none yet for rpc/otherhost.
  auto warm = Client::create(CcacheClientOptions(kdc));
  ASSERT_TRUE(warm.ok()) << Describe(warm);
  ASSERT_NO_FATAL_FAILURE(ExpectKerberosSession(local->endpoint, *warm, kdc));
  KerberosClientOptions cold_options = CcacheClientOptions(kdc);
  cold_options.service_principal = ServicePrincipal(kdc, "otherhost");
  auto cold = Client::create(cold_options);
  ASSERT_TRUE(cold.ok()) << Describe(cold);

  const int old_port = kdc.port();
  ASSERT_OK(kdc.stop());

  ExpectConnectFails(other->endpoint, *cold, Errc::kUnavailable, RetryAdvice::kRetry, "kdc_down");

  ExpectKerberosSession(local->endpoint, *warm, kdc);

  ASSERT_OK(kdc.start());
  this->RecordProperty("kdc_port_before_after",
                 std::to_string(old_port) + " -> " + std::to_string(kdc.port()));
  ExpectKerberosSession(other->endpoint, *cold, kdc);
}

// --- tests that change the KDC: one realm per test ------------------------------

class KerberosKdcStateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_OK(PopulateOwnRealm(kdc_));
    kdc_.set_env_for_process();
  }

  Result<RunningServer> StartKerberosServer(KerberosServerOptions options,
                                            LogSink log = null_log_sink()) {
    return testing::StartKerberosServer<KerberosServerMechanism>(options, "tcp://127.0.0.1:0",
                                                                 std::move(log));
  }

  MiniKdc kdc_;
};

// Case 7: a TGT that has expired → CREDENTIALS_EXPIRED, at create() and at
// connect() for a mechanism created while the ticket was valid.
TEST_F(KerberosKdcStateTest, ExpiredTicket) {
  auto server = StartKerberosServer(KerberosServerOptionsFor(kdc_));
  ASSERT_TRUE(server.ok()) << Describe(server);
  ASSERT_OK(kdc_.set_ticket_lifetime(2s));
  // Ticket times have a resolution of one second: the TGT ends between
  // kinit_start + 1 s and kinit_end + 2 s.
  const auto kinit_start = Clock::now();
  ASSERT_OK(kdc_.kinit("alice", kdc_.client_keytab()));
  const auto kinit_end = Clock::now();

  auto mechanism = KerberosClientMechanism::create(CcacheClientOptions(kdc_));
  ASSERT_TRUE(mechanism.ok()) << Describe(mechanism);
  ASSERT_NO_FATAL_FAILURE(ExpectKerberosSession(server->endpoint, *mechanism, kdc_));
  ASSERT_LT(Clock::now() - kinit_start, 1s) << "too slow to use the ticket before it expires";

  std::this_thread::sleep_until(kinit_end + 2s + 1100ms);

  ScopedEnv no_client_keytab("KRB5_CLIENT_KTNAME", "FILE:" + kdc_.dir() + "/none.keytab");
  auto expired = KerberosClientMechanism::create(CcacheClientOptions(kdc_));
  ASSERT_FALSE(expired.ok());
  EXPECT_EQ(expired.code(), Code(Errc::kCredentialsExpired)) << Describe(expired);
  EXPECT_EQ(retry_advice(expired.code()), RetryAdvice::kReauthenticate);
  RecordProperty("expired_at_create", expired.status().message);

  {
    SCOPED_TRACE("an expired (cached) service ticket must not be used");
    ExpectConnectFails(server->endpoint, *mechanism, Errc::kCredentialsExpired,
                       RetryAdvice::kReauthenticate, "expired_at_connect");
  }

  ExpectServesSimple(server->endpoint);

  // kinit again: the same mechanism object works again.
  ASSERT_OK(kdc_.set_ticket_lifetime(1h));
  ASSERT_OK(kdc_.kinit("alice", kdc_.client_keytab()));
  ExpectKerberosSession(server->endpoint, *mechanism, kdc_);
}

// Case 9: the service key changes in the KDC, the server's keytab does not.
TEST_F(KerberosKdcStateTest, StaleServiceKeytab) {
  ASSERT_OK(kdc_.kinit("alice", kdc_.client_keytab()));
  auto server = StartKerberosServer(KerberosServerOptionsFor(kdc_));
  ASSERT_TRUE(server.ok()) << Describe(server);
  {
    auto before = KerberosClientMechanism::create(CcacheClientOptions(kdc_));
    ASSERT_TRUE(before.ok()) << Describe(before);
    ASSERT_NO_FATAL_FAILURE(ExpectKerberosSession(server->endpoint, *before, kdc_));
  }

  ASSERT_OK(kdc_.change_key("rpc/localhost"));
  ASSERT_OK(kdc_.kinit("alice", kdc_.client_keytab()));  // fresh ccache: no kvno 1 ticket
  auto mechanism = KerberosClientMechanism::create(CcacheClientOptions(kdc_));
  ASSERT_TRUE(mechanism.ok()) << Describe(mechanism);
  ExpectConnectFails(server->endpoint, *mechanism, Errc::kAuthenticationFailed,
                     RetryAdvice::kGiveUp, "stale_keytab");

  ExpectServesSimple(server->endpoint);

  // Appending the new key to the keytab fixes it without a restart.
  ASSERT_OK(kdc_.create_keytab("rpc/localhost", kdc_.service_keytab()));
  ExpectKerberosSession(server->endpoint, *mechanism, kdc_);
}

// --- clock skew: the authrpc CLI under faketime -----------------------------------

// Absolute path of PROGRAM found in PATH, or empty.
std::string FindInPath(const std::string& program) {
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/bin:/bin";
  std::size_t begin = 0;
  while (begin <= dirs.size()) {
    const std::size_t end = std::min(dirs.find(':', begin), dirs.size());
    const std::string candidate = dirs.substr(begin, end - begin) + "/" + program;
    if (end > begin && ::access(candidate.c_str(), X_OK) == 0) return candidate;
    begin = end + 1;
  }
  return {};
}

// A server LogSink that keeps every line, for assertions on the server side.
class CapturedLog {
 public:
  LogSink sink() {
    return [this](LogLevel, std::string_view message) {
      std::lock_guard lock(mutex_);
      lines_.emplace_back(message);
    };
  }
  // The first line containing NEEDLE, waiting up to TIMEOUT for it.
  std::optional<std::string> WaitFor(const std::string& needle, Clock::duration timeout = 5s) {
    const auto until = Clock::now() + timeout;
    for (;;) {
      {
        std::lock_guard lock(mutex_);
        for (const auto& line : lines_) {
          if (line.find(needle) != std::string::npos) return line;
        }
      }
      if (Clock::now() >= until) return std::nullopt;
      std::this_thread::sleep_for(5ms);
    }
  }
  std::vector<std::string> lines() const {
    std::lock_guard lock(mutex_);
    return lines_;
  }

 private:
  mutable std::mutex mutex_;
  std::vector<std::string> lines_;
};

struct SkewCase {
  const char* offset;        // faketime -f offset of the client's clock
  bool server_refuses;       // the service sees the AP-REQ and refuses it
  const char* krb5_message;  // MIT's text in the error the CLI prints
  const char* advice;        // what authrpc adds to it (components/kerberos/kerberos_errors.cc), or ""
};

// Case 14: the client's clock is off by more than the allowed skew (300 s).
// The service ticket is obtained with a correct clock first (an unskewed CLI
// call), so that no KDC is involved afterwards: a skewed client cannot ask the
// KDC for anything here, and its KRB5_CLIENT_KTNAME points nowhere so that it
// cannot log in again either. (MIT's kdc_timesync would otherwise learn the
// offset from the KDC's KRB_AP_ERR_SKEW and store it in the shared ccache.)
//  - Client 10 min ahead: the service's gss_accept_sec_context refuses the
//    authenticator (KRB5KRB_AP_ERR_SKEW) — what users hit. AUTHENTICATION_FAILED
//    on both sides: in the server's log and stats, and in the CLI's error.
//  - Client 10 min behind: the client's own library refuses the cached ticket
//    ("Ticket not yet valid", KRB5KRB_AP_ERR_TKT_NYV) and no token reaches the
//    server, which records no failure.
// In both cases the server keeps serving: the same CLI call without skew
// succeeds right after, with the same ticket cache and no KDC request.
//
// libfaketime's first clock_gettime() calls dlsym(), which allocates: in a CLI
// with clang's AddressSanitizer runtime linked in, that malloc runs inside the
// runtime's own start and waits on its allocator's lock for good (gcc's
// shared libasan, preloaded after it, does not). That tree checks the
// unskewed call only; the others run every case.
#if defined(__clang__) && defined(__has_feature)
#if __has_feature(address_sanitizer)
#define AUTHRPC_CLI_CANNOT_RUN_UNDER_FAKETIME 1
#endif
#endif
TEST_F(KerberosKdcStateTest, ClockSkewedClient) {
  const std::string faketime = FindInPath("faketime");
  if (faketime.empty()) {
    GTEST_SKIP() << "faketime not found in PATH: install the Debian package faketime "
                    "(scripts/setup.sh does) to run the clock-skew test";
  }
  ASSERT_OK(kdc_.kinit("alice", kdc_.client_keytab()));
  CapturedLog log;
  auto server = StartKerberosServer(KerberosServerOptionsFor(kdc_), log.sink());
  ASSERT_TRUE(server.ok()) << Describe(server);
  const std::string server_uri = "tcp://127.0.0.1:" + std::to_string(server->endpoint.port);

  // The CLI with kdc_.env() (KRB5CCNAME = kdc_.ccache(), where alice's TGT is),
  // optionally under faketime. libfaketime is LD_PRELOADed: an ASan build of
  // the CLI must be told not to insist on coming first.
  const char* asan = std::getenv("ASAN_OPTIONS");
  const std::string asan_options = "ASAN_OPTIONS=" + std::string(asan ? asan : "") +
                                   (asan && *asan ? ":" : "") + "verify_asan_link_order=0";
  auto cli = [&](const std::string& offset) {
    std::vector<std::string> argv = {"env", "KRB5_CLIENT_KTNAME=FILE:" + kdc_.dir() + "/none.keytab",
                                     asan_options};
    if (!offset.empty()) argv.insert(argv.end(), {faketime, "-f", offset});
    argv.insert(argv.end(), {AUTHRPC_CLI_BIN, "call", "--server", server_uri, "--auth", "kerberos",
                             "--service-principal", ServicePrincipal(kdc_), "--connect-timeout",
                             "5000", "sys", "whoami"});
    return kdc_.run(argv);
  };
  auto expect_alice = [&](const Result<CommandResult>& r) {
    ASSERT_TRUE(r.ok()) << Describe(r);
    ASSERT_EQ(r->exit_code, 0) << "stderr: " << r->err;
    const auto who = nlohmann::json::parse(r->out, nullptr, false);
    ASSERT_FALSE(who.is_discarded()) << "stdout is not JSON: " << r->out;
    EXPECT_EQ(who.value("principal", ""), "alice@" + kdc_.realm()) << r->out;
    EXPECT_EQ(who.value("mechanism", ""), "kerberos") << r->out;
  };

  {
    SCOPED_TRACE("no skew: gets and caches the service ticket");
    ASSERT_NO_FATAL_FAILURE(expect_alice(cli("")));
  }
#ifdef AUTHRPC_CLI_CANNOT_RUN_UNDER_FAKETIME
  GTEST_SKIP() << "the CLI has clang's AddressSanitizer runtime, which libfaketime's start deadlocks";
#endif
  const auto kdc_before = kdc_.kdc_request_counts();

  const SkewCase cases[] = {
      {"+10m", true, "Clock skew too great", "check NTP"},
      {"-10m", false, "Ticket not yet valid", ""},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(std::string("client clock ") + c.offset);
    const auto failures_before = server->server->stats().negotiation_failures;

    const auto r = cli(c.offset);
    ASSERT_TRUE(r.ok()) << Describe(r);
    EXPECT_EQ(r->exit_code, 3) << "stdout: " << r->out << "\nstderr: " << r->err;  // credentials
    EXPECT_TRUE(r->out.empty()) << r->out;
    EXPECT_THAT(r->err, ::testing::StartsWith("authrpc: AUTHENTICATION_FAILED: ")) << r->err;
    EXPECT_THAT(r->err, HasSubstr(c.krb5_message)) << r->err;
    EXPECT_THAT(r->err, HasSubstr(c.advice)) << r->err;
    EXPECT_THAT(r->err, ::testing::EndsWith("[give-up]\n")) << r->err;
    RecordProperty(std::string("cli_error_") + c.offset, r->err);

    if (c.server_refuses) {
      // The server's own status travels to the client in ERROR.
      EXPECT_THAT(r->err, HasSubstr("server: kerberos: accept: ")) << r->err;
      const auto line = log.WaitFor(c.krb5_message);
      ASSERT_TRUE(line.has_value()) << "the server logged no skew failure; its log:\n"
                                    << ::testing::PrintToString(log.lines());
      EXPECT_THAT(*line, HasSubstr("negotiation with 127.0.0.1:")) << *line;
      EXPECT_THAT(*line, HasSubstr("failed: AUTHENTICATION_FAILED: kerberos: accept: ")) << *line;
      EXPECT_THAT(*line, HasSubstr(c.advice)) << *line;
      EXPECT_EQ(server->server->stats().negotiation_failures, failures_before + 1);
      RecordProperty(std::string("server_log_") + c.offset, *line);
    }

    SCOPED_TRACE("the same call without skew, right after");
    ASSERT_NO_FATAL_FAILURE(expect_alice(cli("")));
    if (!c.server_refuses) {
      EXPECT_EQ(server->server->stats().negotiation_failures, failures_before)
          << ::testing::PrintToString(log.lines());
    }
  }

  const auto kdc_after = kdc_.kdc_request_counts();
  EXPECT_EQ(kdc_after.as, kdc_before.as) << "the skewed clients asked the KDC for a TGT";
  EXPECT_EQ(kdc_after.tgs, kdc_before.tgs) << "the skewed clients asked the KDC for a ticket";
}

}  // namespace
}  // namespace authrpc
