// Integration tests for delegation tokens end to end, against a real MIT KDC
// (tests/testing/mini_kdc.h), real Servers and Clients on loopback, the real file
// token store, and the real authrpc-server and authrpc binaries:
//  - fetch over Kerberos (token.get), then authenticate with the token alone
//    while KRB5CCNAME points at an empty cache;
//  - expired, cancelled, forged, unknown-key and wrong-service tokens refused
//    with typed errors on both sides, and the server keeps serving;
//  - the `token` mechanism on each transport: TLS and unix:// (one message),
//    plaintext tcp:// refused unless the server opts in (then a challenge);
//  - a replayed HELLO refused; token.get over a token connection refused;
//    renew by a non-renewer refused;
//  - tokens valid after a server restart (file store);
//  - a crash test: authrpc-server SIGKILLed during a burst of token
//    operations, restarted on the same store: every acknowledged issue,
//    renew and cancel is there;
//  - the CLI: authrpc token fetch / renew / cancel / print;
//  - the interop mechanisms token-digest and token-scram (Cyrus DIGEST-MD5
//    and SCRAM-SHA-256, token id as user) over the wire, with their typed
//    refusals, the SCRAM verifier cache, and the CLI.
// Principals: alice (owner), yarn (renewer), mallory (neither), rpc/localhost.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <map>
#include <optional>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "authrpc/auth/mechanism_registry.h"
#include "authrpc/auth/mechanisms/token/token_mechanism.h"
#include "authrpc/client/client.h"
#include "authrpc/components/kerberos/kerberos.h"
#include "authrpc/components/kerberos/token_sasl.h"
#include "authrpc/security/clock.h"
#include "authrpc/security/credentials_file.h"
#include "authrpc/security/file_token_store.h"
#include "authrpc/security/tls_context.h"
#include "authrpc/server/server.h"
#include "authrpc/server/token_service.h"
#include "tests/testing/kerberos_realm.h"
#include "tests/testing/test_server.h"
#include "tests/testing/test_tls.h"
#include "tests/testing/mini_kdc.h"
#include "tests/testing/test_support.h"
#include "tests/testing/token_capture.h"
#include "tests/testing/token_sessions.h"
#include "tests/testing/test_programs.h"

namespace authrpc {
namespace {

using namespace std::chrono_literals;
using testing::Describe;
using testing::TempDir;
using security::Token;

struct Running {
  std::unique_ptr<TokenService> tokens;
  std::unique_ptr<testing::TestServer> server;
  Endpoint endpoint;
  std::vector<std::shared_ptr<ServerMechanism>> interop;  // token-digest, token-scram if asked for
};

// A mechanism name and its auth.options, as in the server's config file.
using MechanismConfig = std::pair<std::string, nlohmann::json>;

class TokenItest : public testing::TokenServiceSuite {
 protected:
  static void SetUpTestSuite() {
    StartRealmWithTls({.clients = {"alice", "yarn", "mallory"}, .kinit = ""});
  }

  void SetUp() override {
    KerberosSuite::SetUp();
    if (HasFatalFailure()) return;
    dir_ = TempDir("token-itest-case");
    ASSERT_FALSE(dir_.empty());
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // A server with kerberos + token (+ `interop` mechanisms, made as the
  // server's config file makes them) and the token service (file store in
  // store_dir unless memory), on tls (the default: `token` needs TLS or
  // unix:// unless the server opts in to plaintext), tcp or unix.
  Result<Running> Start(TokenServiceOptions t, const std::string& uri = "tls://127.0.0.1:0",
                        const std::vector<MechanismConfig>& interop = {}) {
    Running r;
    t.log = null_log_sink();
    if (t.store == TokenServiceOptions::Store::kFile && t.dir.empty()) t.dir = dir_ + "/store";
    auto opened = OpenTokenServer(std::move(t), uri);
    if (!opened.ok()) return opened.status();
    r.tokens = std::move(opened->tokens);
    r.server = std::move(opened->server);
    auto registry = MechanismRegistry::with_builtins();
    if (Status s = r.tokens->register_mechanism(registry); !s.ok()) return s;
    for (const auto& [name, options] : interop) {
      auto m = registry.make_server(name, options);
      if (!m.ok()) return m.status();
      r.interop.push_back(*m);
      r.server->mechanism(*m);
    }
    if (Status s = r.server->start(); !s.ok()) return s;
    r.endpoint = r.server->endpoint();
    return r;
  }

  // A token stamped for `ep`.
  static Result<Token> Fetch(const Endpoint& ep, const std::string& as, const std::string& renewer) {
    return FetchToken(ep, as, renewer, ep.to_string());
  }

  // token.<method> on `token`, called by the Kerberos principal `as`, ends
  // with `code`; a renewal that succeeds answers with the new renew_date.
  struct TokenCall {
    const char* as;
    const char* method;
    Errc code;
  };
  static void ExpectTokenCalls(const Endpoint& ep, const Token& token,
                               std::initializer_list<TokenCall> calls) {
    const nlohmann::json request = {{"token", *token.to_string()}};
    for (const TokenCall& c : calls) {
      SCOPED_TRACE(std::string(c.as) + " " + c.method);
      auto client = Connect(ep, KerberosAs(c.as));
      ASSERT_TRUE(client.ok()) << Describe(client);
      auto r = (*client)->call_json("token", c.method, request);
      EXPECT_EQ(r.code(), c.code == Errc::kOk ? std::error_code() : make_error_code(c.code))
          << Describe(r);
      if (c.code == Errc::kOk && std::string(c.method) == "renew") {
        EXPECT_TRUE(r->contains("renew_date"));
      }
    }
  }

  static std::shared_ptr<ClientMechanism> WithToken(const Token& t) {
    TokenClientOptions o;
    o.token = t;
    return std::make_shared<TokenClientMechanism>(o);
  }

  std::string dir_;
};

// Points KRB5CCNAME at an empty cache for the scope: the token alone must do.
class NoTicket {
 public:
  explicit NoTicket(const std::string& dir) : old_(std::getenv("KRB5CCNAME") ? std::getenv("KRB5CCNAME") : "") {
    ::setenv("KRB5CCNAME", ("FILE:" + dir + "/empty-ccache").c_str(), 1);
  }
  ~NoTicket() { ::setenv("KRB5CCNAME", old_.c_str(), 1); }

 private:
  std::string old_;
};

TEST_F(TokenItest, FetchOverKerberosThenConnectWithTheTokenOnly) {
  // Plaintext tcp:// only where the server opts in (a challenge exchange).
  for (const char* uri : {"tls://127.0.0.1:0", "unix:@authrpc-token-itest-fetch", "tcp://127.0.0.1:0"}) {
    SCOPED_TRACE(uri);
    TokenServiceOptions t;
    t.mechanism.allow_plaintext = std::string_view(uri).starts_with("tcp:");
    auto running = Start(t, uri);
    ASSERT_TRUE(running.ok()) << Describe(running);
    auto token = Fetch(running->endpoint, "alice", Principal("yarn"));
    ASSERT_TRUE(token.ok()) << Describe(token);
    // Through a credentials file, as a job would get it.
    security::CredentialsFile file;
    file.add(*token);
    const std::string path = dir_ + "/job.tokens";
    ASSERT_TRUE(file.write(path).ok());
    NoTicket no_ticket(dir_);
    TokenClientOptions o;
    o.token_file = path;
    auto client = Connect(running->endpoint, std::make_shared<TokenClientMechanism>(o));
    ASSERT_TRUE(client.ok()) << Describe(client);
    EXPECT_EQ((*client)->mechanism(), "token");
    auto who = (*client)->call_json("sys", "whoami", nlohmann::json::object());
    ASSERT_TRUE(who.ok()) << Describe(who);
    EXPECT_EQ((*who)["user"], Principal("alice"));
    EXPECT_EQ((*who)["mechanism"], "token");
    // token.get over a token-authenticated connection: refused.
    auto again = (*client)->call_json("token", "get", {{"renewer", ""}});
    ASSERT_FALSE(again.ok());
    EXPECT_EQ(again.code(), make_error_code(Errc::kPermissionDenied)) << Describe(again);
    // The same holds for renew; cancel by the owner over the token works.
    auto renew = (*client)->call_json("token", "renew", {{"token", *token->to_string()}});
    EXPECT_EQ(renew.code(), make_error_code(Errc::kPermissionDenied)) << Describe(renew);
    running->server->stop();
  }
}

TEST_F(TokenItest, BadTokensAreRefusedWithTypedErrorsAndTheServerKeepsServing) {
  auto clock = std::make_shared<security::ManualClock>(
      std::chrono::time_point_cast<std::chrono::milliseconds>(std::chrono::system_clock::now()));
  TokenServiceOptions t;
  t.secrets.clock = clock;
  t.mechanism.max_clock_skew = std::chrono::hours(24 * 365);  // the client uses the real clock
  auto running = Start(t);
  ASSERT_TRUE(running.ok()) << Describe(running);
  auto& secrets = running->tokens->secrets();
  const std::string service = running->endpoint.to_string();
  auto issue = [&](const std::string& owner) {
    auto tok = secrets.issue({Principal(owner), Principal("yarn"), "", service});
    EXPECT_TRUE(tok.ok());
    return *tok;
  };
  struct Case {
    const char* name;
    std::function<Token()> make;
    Errc code;
    const char* text;
  };
  TokenServiceOptions other_options;
  other_options.store = TokenServiceOptions::Store::kMemory;
  other_options.log = null_log_sink();
  auto other = TokenService::open(other_options);
  ASSERT_TRUE(other.ok());
  for (int i = 0; i < 3; ++i) ASSERT_TRUE((*other)->secrets().roll_master_key().ok());
  const std::vector<Case> cases = {
      {"expired", [&] { Token x = issue("alice"); clock->advance(25h); return x; },
       Errc::kCredentialsExpired, "EXPIRED"},
      {"cancelled", [&] { Token x = issue("alice"); EXPECT_TRUE(secrets.cancel(x, Principal("alice")).ok()); return x; },
       Errc::kCredentialsExpired, "CANCELLED"},
      {"forged", [&] { Token x = issue("alice"); x.password.data()[5] ^= 0x40; return x; },
       Errc::kAuthenticationFailed, "FORGED"},
      {"unknown key", [&] {
         auto x = (*other)->secrets().issue({Principal("alice"), "", "", service});
         return *x; },
       Errc::kUnavailable, "UNKNOWN_KEY"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    auto client = Connect(running->endpoint, WithToken(c.make()));
    ASSERT_FALSE(client.ok());
    EXPECT_EQ(client.code(), make_error_code(c.code)) << Describe(client);
    EXPECT_NE(client.status().message.find(c.text), std::string::npos) << Describe(client);
    auto good = Connect(running->endpoint, WithToken(issue("alice")));
    EXPECT_TRUE(good.ok()) << Describe(good);
  }
  running->server->stop();
}

TEST_F(TokenItest, WrongServiceIsRefusedOnBothSides) {
  TokenServiceOptions t;
  t.store = TokenServiceOptions::Store::kMemory;
  t.mechanism.services = {"tcp://db1.example.com:7000"};
  auto running = Start(t);
  ASSERT_TRUE(running.ok()) << Describe(running);
  auto token = running->tokens->secrets().issue({Principal("alice"), "", "", "tcp://db1.example.com:7000"});
  ASSERT_TRUE(token.ok());
  // Client side: it holds no token for the endpoint it connects to.
  auto client = Connect(running->endpoint, WithToken(*token));
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.code(), make_error_code(Errc::kUnauthenticated)) << Describe(client);
  // Server side: presented anyway (service override), for a service the server does not serve.
  Token elsewhere = *token;
  elsewhere.service = "tcp://db2.example.com:7000";
  TokenClientOptions o;
  o.token = elsewhere;
  o.service = "anything";
  client = Connect(running->endpoint, std::make_shared<TokenClientMechanism>(o));
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.code(), make_error_code(Errc::kAuthenticationFailed)) << Describe(client);
  EXPECT_NE(client.status().message.find("WRONG_SERVICE"), std::string::npos);
  // token.get refuses to stamp a service the server does not serve.
  auto k = Connect(running->endpoint, KerberosAs("alice"));
  ASSERT_TRUE(k.ok()) << Describe(k);
  auto r = (*k)->call_json("token", "get", {{"renewer", ""}, {"service", "tcp://db2.example.com:7000"}});
  EXPECT_EQ(r.code(), make_error_code(Errc::kInvalidArgument)) << Describe(r);
  running->server->stop();
}

// A passive observer's recording, played again: on unix:// to the same
// server (its replay cache), on tls:// to another connection (the bound
// proof), on plaintext tcp:// (opted in) to another connection (the
// server's challenge). Over plaintext tcp without the opt-in nothing is
// accepted at all, and a version 1 HELLO (what clients sent before the
// challenge existed) is refused even with it.
TEST_F(TokenItest, ReplayedExchangeIsRefusedOnEveryTransport) {
  struct Case {
    const char* uri;
    bool allow_plaintext;
    Errc code;
    const char* text;
  };
  const Case cases[] = {
      {"unix:@authrpc-token-itest-replay", false, Errc::kAuthenticationFailed, "REPLAY"},
      {"tls://127.0.0.1:0", false, Errc::kAuthenticationFailed, "FORGED"},
      {"tcp://127.0.0.1:0", true, Errc::kAuthenticationFailed, "FORGED"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.uri);
    TokenServiceOptions t;
    t.store = TokenServiceOptions::Store::kMemory;
    t.mechanism.allow_plaintext = c.allow_plaintext;
    auto running = Start(t, c.uri);
    ASSERT_TRUE(running.ok()) << Describe(running);
    auto token = Fetch(running->endpoint, "alice", "");
    ASSERT_TRUE(token.ok()) << Describe(token);
    auto capture = std::make_shared<testing::CapturingClient>(WithToken(*token));
    auto first = Connect(running->endpoint, capture);
    ASSERT_TRUE(first.ok()) << Describe(first);
    auto second = Connect(running->endpoint, std::make_shared<testing::ReplayingClient>(capture->sent()));
    ASSERT_FALSE(second.ok());
    EXPECT_EQ(second.code(), make_error_code(c.code)) << Describe(second);
    EXPECT_NE(second.status().message.find(c.text), std::string::npos) << Describe(second);
    running->server->stop();
  }
  TokenServiceOptions t;
  t.store = TokenServiceOptions::Store::kMemory;
  for (bool allow_plaintext : {false, true}) {
    SCOPED_TRACE(allow_plaintext ? "plaintext allowed" : "plaintext refused");
    t.mechanism.allow_plaintext = allow_plaintext;
    auto running = Start(t, "tcp://127.0.0.1:0");
    ASSERT_TRUE(running.ok()) << Describe(running);
    // (Not fetched: without the opt-in token.get is refused here too.)
    auto token = running->tokens->secrets().issue(
        {Principal("alice"), "", "", running->endpoint.to_string()});
    ASSERT_TRUE(token.ok()) << Describe(token);
    const std::string v1 = token_wire::make_hello(*token, "", security::SystemClock().now()).encode();
    auto replayed = Connect(running->endpoint, std::make_shared<testing::ReplayingClient>(
                                                   std::vector<std::string>{v1}));
    ASSERT_FALSE(replayed.ok());
    EXPECT_EQ(replayed.code(), make_error_code(Errc::kFailedPrecondition)) << Describe(replayed);
    EXPECT_NE(replayed.status().message.find(allow_plaintext ? "CHALLENGE_REQUIRED" : "PLAINTEXT"),
              std::string::npos)
        << Describe(replayed);
    running->server->stop();
  }
}

TEST_F(TokenItest, OnlyTheRenewerRenewsAndOwnerOrRenewerCancel) {
  TokenServiceOptions t;
  auto running = Start(t);
  ASSERT_TRUE(running.ok()) << Describe(running);
  auto token = Fetch(running->endpoint, "alice", Principal("yarn"));
  ASSERT_TRUE(token.ok()) << Describe(token);
  ExpectTokenCalls(running->endpoint, *token,
                   {{"mallory", "renew", Errc::kPermissionDenied},
                    {"alice", "renew", Errc::kPermissionDenied},
                    {"yarn", "renew", Errc::kOk},
                    {"mallory", "cancel", Errc::kPermissionDenied},
                    {"yarn", "cancel", Errc::kOk},
                    {"alice", "cancel", Errc::kFailedPrecondition}});
  running->server->stop();
}

// A token fetched with a short renewer name ("yarn") renews as
// yarn@REALM (compared as Hadoop does, through the principal mapping), and a
// renewer that can name no principal is refused at issue.
TEST_F(TokenItest, RenewerIsComparedByShortNameAndMalformedOnesAreRefused) {
  auto running = Start({});
  ASSERT_TRUE(running.ok()) << Describe(running);
  for (const std::string& renewer : {std::string("yarn"), Principal("yarn")}) {
    SCOPED_TRACE("renewer " + renewer);
    auto token = Fetch(running->endpoint, "alice", renewer);
    ASSERT_TRUE(token.ok()) << Describe(token);
    EXPECT_EQ(token->decode_identifier()->renewer, renewer) << "stored as given";
    ExpectTokenCalls(running->endpoint, *token,
                     {{"mallory", "renew", Errc::kPermissionDenied},
                      {"alice", "renew", Errc::kPermissionDenied},
                      {"yarn", "renew", Errc::kOk},
                      {"mallory", "cancel", Errc::kPermissionDenied},
                      {"yarn", "cancel", Errc::kOk}});
  }
  auto alice = Connect(running->endpoint, KerberosAs("alice"));
  ASSERT_TRUE(alice.ok()) << Describe(alice);
  for (const std::string& bad : {std::string("yarn@@") + kdc_->realm(), std::string("yarn@"),
                                 std::string("yarn/localhost"), std::string("yarn "),
                                 std::string("ya\nrn"), std::string("a//b@R")}) {
    SCOPED_TRACE("renewer '" + bad + "'");
    auto r = (*alice)->call_json("token", "get", {{"renewer", bad}});
    EXPECT_EQ(r.code(), make_error_code(Errc::kInvalidArgument)) << Describe(r);
  }
  // The connection and the server keep serving.
  auto ok = (*alice)->call_json("token", "get", {{"renewer", ""}});
  EXPECT_TRUE(ok.ok()) << Describe(ok);
  running->server->stop();
}

// Tokens outlive a restart (file store); a session captured before it does
// not authenticate after it, when the replay cache is empty (plaintext tcp
// included).
TEST_F(TokenItest, TokensSurviveAServerRestartButCapturedSessionsDoNot) {
  for (const char* uri : {"tls://127.0.0.1:0", "tcp://127.0.0.1:0"}) {
    SCOPED_TRACE(uri);
    TokenServiceOptions t;
    t.mechanism.allow_plaintext = true;  // used by the tcp row only
    Token token;
    std::vector<std::string> captured;
    {
      auto running = Start(t, uri);
      ASSERT_TRUE(running.ok()) << Describe(running);
      auto fetched = Fetch(running->endpoint, "alice", Principal("yarn"));
      ASSERT_TRUE(fetched.ok()) << Describe(fetched);
      token = *fetched;
      auto capture = std::make_shared<testing::CapturingClient>(WithToken(token));
      ASSERT_TRUE(Connect(running->endpoint, capture).ok());
      captured = capture->sent();
      running->server->stop();
    }
    auto running = Start(t, uri);  // same store directory, new process state
    ASSERT_TRUE(running.ok()) << Describe(running);
    token.service = running->endpoint.to_string();  // the port changed
    NoTicket no_ticket(dir_);
    auto client = Connect(running->endpoint, WithToken(token));
    ASSERT_TRUE(client.ok()) << Describe(client);
    EXPECT_EQ((*client)->authenticated_user(), Principal("alice"));
    auto replayed = Connect(running->endpoint, std::make_shared<testing::ReplayingClient>(captured));
    ASSERT_FALSE(replayed.ok());
    EXPECT_EQ(replayed.code(), make_error_code(Errc::kAuthenticationFailed)) << Describe(replayed);
    EXPECT_NE(replayed.status().message.find("FORGED"), std::string::npos) << Describe(replayed);
    running->server->stop();
    std::filesystem::remove_all(dir_ + "/store");
  }
}

// Session tickets over plaintext tcp:// (opted in), on real sockets: the
// first session is challenged and brings a ticket, the next is one message
// each way with its call pipelined behind it; its recorded HELLO does not
// authenticate again; after a restart on the same address the old ticket is
// challenged, and the calls pipelined behind it still run (sent again after
// the client's answer).
TEST_F(TokenItest, SessionTicketsSaveARoundTripAndSurviveARestart) {
  TokenServiceOptions t;
  t.mechanism.allow_plaintext = true;
  t.mechanism.session_tickets = 1 << 16;
  auto running = Start(t, "tcp://127.0.0.1:0");
  ASSERT_TRUE(running.ok()) << Describe(running);
  const Endpoint endpoint = running->endpoint;
  auto token = Fetch(endpoint, "alice", "");
  ASSERT_TRUE(token.ok()) << Describe(token);
  NoTicket no_ticket(dir_);  // no Kerberos ticket: the token alone
  TokenClientOptions o;
  o.token = *token;
  o.tickets = true;
  auto capture = std::make_shared<testing::CapturingClient>(std::make_shared<TokenClientMechanism>(o));
  // Connects without waiting for AUTH_SUCCESS and makes a call at once.
  auto session = [&](std::size_t messages) {
    auto client = testing::TestClient(endpoint).mechanism(capture).wait_for_authentication(false).connect();
    ASSERT_TRUE(client.ok()) << Describe(client);
    auto whoami = (*client)->call_json("sys", "whoami", nlohmann::json::object());
    ASSERT_TRUE(whoami.ok()) << Describe(whoami);
    EXPECT_EQ((*whoami)["user"], Principal("alice"));
    EXPECT_EQ(capture->sent().size(), messages);
  };
  {
    SCOPED_TRACE("first: challenged");
    session(2);
  }
  {
    SCOPED_TRACE("second: the ticket");
    session(1);
  }
  const std::vector<std::string> recorded = capture->sent();
  auto replayed = Connect(endpoint, std::make_shared<testing::ReplayingClient>(recorded));
  EXPECT_FALSE(replayed.ok()) << "a recorded ticket HELLO authenticated again";

  running->server->stop();
  running->server.reset();
  running->tokens.reset();  // the store is locked while open
  running = Start(t, endpoint.to_string());  // same store and address, new process state
  ASSERT_TRUE(running.ok()) << Describe(running);
  {
    SCOPED_TRACE("after a restart: the old ticket is challenged");
    session(2);
  }
  {
    SCOPED_TRACE("and the new one is taken");
    session(1);
  }
  running->server->stop();
}

// --- child processes -------------------------------------------------------------

// Starts authrpc-server with CONFIG and reads its endpoint from stdout.
Result<testing::ServerProcess> SpawnServer(const std::string& config) {
  return testing::SpawnServer(AUTHRPC_SERVER_BIN, config);
}

std::string WriteServerConfig(const std::string& dir, const std::string& realm) {
  const nlohmann::json config = {
      {"listen", {"tcp://127.0.0.1:0"}},
      {"log_level", "error"},
      {"stop_grace_ms", 1000},
      {"auth",
       {{"mechanisms", {"kerberos", "token"}},
        {"options", {{"kerberos", {{"principal", "rpc/localhost@" + realm}}}}}}},
      // Plaintext tcp:// for the token sessions below: the opt-in, by config.
      {"tokens", {{"store", "file"}, {"dir", dir + "/store"}, {"allow_plaintext", true}}}};
  const std::string path = dir + "/server.json";
  std::ofstream(path) << config.dump(2);
  return path;
}

TEST_F(TokenItest, CrashDuringABurstLosesNothingAcknowledged) {
  const std::string config = WriteServerConfig(dir_, kdc_->realm());
  auto child = SpawnServer(config);
  ASSERT_TRUE(child.ok()) << Describe(child);

  // The burst: issue, renew every token, cancel every third; record what the
  // server acknowledged.
  struct Acked {
    std::map<std::uint64_t, Token> issued;
    std::map<std::uint64_t, std::int64_t> renewed;  // seq → acknowledged renew date
    std::set<std::uint64_t> cancelled;
  };
  Acked acked;
  // A cancel the server carried out but whose reply the kill cut off is not
  // acknowledged, yet gone from the store: allowed for that one operation.
  std::optional<std::uint64_t> cancel_in_flight;
  std::atomic<bool> done{false};
  std::thread burst([&] {
    auto alice = Connect(child->endpoint, KerberosAs("alice"));
    auto yarn = Connect(child->endpoint, KerberosAs("yarn"));
    if (!alice.ok() || !yarn.ok()) return done.store(true);
    for (int i = 0; i < 100000; ++i) {
      auto r = (*alice)->call_json("token", "get", {{"renewer", Principal("yarn")}});
      if (!r.ok()) break;
      Token t = *Token::from_string((*r)["token"].get<std::string>());
      const std::uint64_t seq = (*r)["sequence_number"].get<std::uint64_t>();
      acked.issued.emplace(seq, t);
      const nlohmann::json req = {{"token", *t.to_string()}};
      auto renewed = (*yarn)->call_json("token", "renew", req);
      if (!renewed.ok()) break;
      acked.renewed[seq] = (*renewed)["renew_date_ms"].get<std::int64_t>();
      if (i % 3 == 0) {
        cancel_in_flight = seq;
        if (!(*alice)->call_json("token", "cancel", req).ok()) break;
        acked.cancelled.insert(seq);
        cancel_in_flight.reset();
      }
    }
    done.store(true);
  });
  // How long the burst runs before the crash is the load under test: the
  // kill must land in the middle of writes, at no chosen point.
  std::this_thread::sleep_for(1500ms);
  ASSERT_EQ(::kill(child->pid, SIGKILL), 0);
  ::waitpid(child->pid, nullptr, 0);
  burst.join();
  ASSERT_GT(acked.issued.size(), 3u) << "the burst made too little progress to test anything";

  // Restart on the same store: an acknowledged, uncancelled token works.
  auto again = SpawnServer(config);
  ASSERT_TRUE(again.ok()) << Describe(again);
  for (const auto& [seq, t] : acked.issued) {
    if (acked.cancelled.contains(seq)) continue;
    Token here = t;
    here.service = again->endpoint.to_string();
    auto c = Connect(again->endpoint, WithToken(here));
    EXPECT_TRUE(c.ok()) << "token " << seq << ": " << Describe(c);
    break;  // one connection is enough here; the store check below covers all
  }
  ::kill(again->pid, SIGTERM);
  ::waitpid(again->pid, nullptr, 0);

  // And the store holds every acknowledged change.
  auto store = security::FileTokenStore::open(dir_ + "/store");
  ASSERT_TRUE(store.ok()) << store.status().to_string();
  auto state = (*store)->load();
  ASSERT_TRUE(state.ok());
  std::map<std::uint64_t, std::int64_t> stored;
  for (const auto& t : state->tokens) stored[t.sequence_number] = t.renew_date.time_since_epoch().count();
  std::size_t checked = 0;
  for (const auto& [seq, t] : acked.issued) {
    if (acked.cancelled.contains(seq)) {
      EXPECT_FALSE(stored.contains(seq)) << "cancelled token " << seq << " came back";
      continue;
    }
    if (!stored.contains(seq) && cancel_in_flight == seq) continue;
    ASSERT_TRUE(stored.contains(seq)) << "acknowledged token " << seq << " lost";
    if (acked.renewed.contains(seq)) {
      EXPECT_GE(stored[seq], acked.renewed[seq]) << "renewal of " << seq << " lost";
    }
    ++checked;
  }
  EXPECT_GT(checked, 0u);
  std::printf("crash test: %zu issued, %zu renewed, %zu cancelled acknowledged before SIGKILL\n",
              acked.issued.size(), acked.renewed.size(), acked.cancelled.size());
}

// --- CLI ----------------------------------------------------------------------------

struct Cmd {
  int status = -1;
  std::string out;
};

Cmd RunCli(const std::string& args) {
  Cmd c;
  const std::string cmd = std::string(AUTHRPC_CLI_BIN) + " " + args + " 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return c;
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) c.out.append(buf, n);
  const int st = ::pclose(p);
  c.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return c;
}

TEST_F(TokenItest, CliFetchPrintUseRenewCancel) {
  auto running = Start({});  // tls://
  ASSERT_TRUE(running.ok()) << Describe(running);
  const std::string uri = running->endpoint.to_string() + " --ca " + testing::TestTls::shared().ca_file();
  const std::string file = dir_ + "/cli.tokens";
  const std::string kt = " --principal alice --keytab " + kdc_->client_keytab() +
                         " --service-principal rpc/localhost@" + kdc_->realm();
  const std::string yarn = " --principal yarn --keytab " + kdc_->client_keytab() +
                           " --service-principal rpc/localhost@" + kdc_->realm();
  for (const char* sub : {"fetch", "renew", "cancel", "print"}) {
    Cmd help = RunCli(std::string("token ") + sub + " --help");
    EXPECT_EQ(help.status, 0);
    EXPECT_NE(help.out.find(std::string("authrpc token ") + sub), std::string::npos);
  }
  // The short name, as a newcomer types it: renewing as yarn@REALM works.
  Cmd fetch = RunCli("token fetch --server " + uri + kt + " --renewer yarn -o " + file);
  ASSERT_EQ(fetch.status, 0) << fetch.out;
  struct stat st {};
  ASSERT_EQ(::stat(file.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  auto held = security::CredentialsFile::read(file);
  ASSERT_TRUE(held.ok());
  auto token = held->find(running->endpoint.to_string());
  ASSERT_TRUE(token.ok());
  const std::string secret = *token->to_string();

  Cmd print = RunCli("token print --token-file " + file);
  ASSERT_EQ(print.status, 0) << print.out;
  for (const char* field : {"owner:", "renewer:", "issue date:", "max date:", "sequence number:", "master key id:"}) {
    EXPECT_NE(print.out.find(field), std::string::npos) << field;
  }
  EXPECT_NE(print.out.find(Principal("alice")), std::string::npos);
  EXPECT_EQ(print.out.find(secret), std::string::npos) << "print showed the token string";
  EXPECT_EQ(fetch.out.find(secret), std::string::npos) << "fetch showed the token string";
  Cmd json = RunCli("token print --json --token-file " + file);
  ASSERT_EQ(json.status, 0);
  EXPECT_EQ(nlohmann::json::parse(json.out)[0]["owner"], Principal("alice"));

  {
    NoTicket no_ticket(dir_);
    Cmd who = RunCli("call --server " + uri + " --auth token --token-file " + file + " sys whoami");
    ASSERT_EQ(who.status, 0) << who.out;
    EXPECT_NE(who.out.find("\"mechanism\":\"token\""), std::string::npos) << who.out;
  }
  Cmd bad_renew = RunCli("token renew --server " + uri + kt + " --token-file " + file);
  EXPECT_EQ(bad_renew.status, 5);  // tools/cli_exit.h: permission denied
  EXPECT_NE(bad_renew.out.find("PERMISSION_DENIED"), std::string::npos) << bad_renew.out;
  Cmd renew = RunCli("token renew --server " + uri + yarn + " --token-file " + file);
  EXPECT_EQ(renew.status, 0) << renew.out;
  EXPECT_NE(renew.out.find("valid until"), std::string::npos) << renew.out;
  Cmd cancel = RunCli("token cancel --server " + uri + kt + " --token-file " + file);
  EXPECT_EQ(cancel.status, 0) << cancel.out;
  // The cancelled token no longer authenticates (re-add it to try).
  security::CredentialsFile again;
  again.add(*token);
  ASSERT_TRUE(again.write(file).ok());
  Cmd refused = RunCli("call --server " + uri + " --auth token --token-file " + file + " sys whoami");
  EXPECT_EQ(refused.status, 3);  // credentials
  EXPECT_NE(refused.out.find("CREDENTIALS_EXPIRED"), std::string::npos) << refused.out;
  EXPECT_NE(refused.out.find("CANCELLED"), std::string::npos) << refused.out;
  EXPECT_NE(refused.out.find("reauthenticate"), std::string::npos) << refused.out;
  Cmd usage = RunCli("token fetch --server " + uri);
  EXPECT_EQ(usage.status, 2);
  running->server->stop();
}

// The CLI against a plaintext tcp:// server that has not opted in: fetching
// a token over Kerberos is refused (its password would cross the network in
// the clear), and a token got elsewhere is refused too, each with advice a
// user can act on.
TEST_F(TokenItest, CliTokenOverPlaintextTcpSaysWhatToDo) {
  TokenServiceOptions t;
  t.store = TokenServiceOptions::Store::kMemory;
  auto running = Start(t, "tcp://127.0.0.1:0");
  ASSERT_TRUE(running.ok()) << Describe(running);
  const std::string uri = running->endpoint.to_string();
  const std::string file = dir_ + "/plain.tokens";
  Cmd fetch = RunCli("token fetch --server " + uri + " --principal alice --keytab " + kdc_->client_keytab() +
                     " --service-principal rpc/localhost@" + kdc_->realm() + " --renewer '' -o " + file);
  EXPECT_EQ(fetch.status, 1) << fetch.out;
  for (const char* hint : {"FAILED_PRECONDITION", "PLAINTEXT", "tls://", "allow_plaintext"}) {
    EXPECT_NE(fetch.out.find(hint), std::string::npos) << hint << " in: " << fetch.out;
  }
  auto token = running->tokens->secrets().issue({Principal("alice"), "", "", uri});
  ASSERT_TRUE(token.ok()) << Describe(token);
  security::CredentialsFile credentials;
  credentials.add(*token);
  ASSERT_TRUE(credentials.write(file).ok());
  NoTicket no_ticket(dir_);
  Cmd call = RunCli("call --server " + uri + " --auth token --token-file " + file + " sys whoami");
  EXPECT_EQ(call.status, 1) << call.out;
  for (const char* hint : {"FAILED_PRECONDITION", "PLAINTEXT", "tls://", "allow_plaintext"}) {
    EXPECT_NE(call.out.find(hint), std::string::npos) << hint << " in: " << call.out;
  }
  running->server->stop();
}

// --- interop mechanisms -------------------------------------------------------------

// token-digest and token-scram over the wire: the token fetched over
// Kerberos authenticates alone through Cyrus DIGEST-MD5 and SCRAM-SHA-256 on
// both sides; expired, cancelled, forged, unknown and unknown-key tokens are
// refused with the same typed errors as `token`; the server keeps serving.
TEST_F(TokenItest, InteropMechanismsOverTheWire) {
  auto clock = std::make_shared<security::ManualClock>(
      std::chrono::time_point_cast<std::chrono::milliseconds>(std::chrono::system_clock::now()));
  TokenServiceOptions t;
  t.store = TokenServiceOptions::Store::kMemory;
  t.secrets.clock = clock;
  t.mechanism.allow_plaintext = true;  // token.get over this tcp:// endpoint
  // DIGEST-MD5's digest-uri names a service and host: configured, not the defaults.
  const nlohmann::json digest_names = {{"sasl_service", "hdfs"}, {"server_fqdn", "db1.example.com"}};
  auto running = Start(t, "tcp://127.0.0.1:0",
                       {{"token-digest", digest_names}, {"token-scram", nlohmann::json::object()}});
  ASSERT_TRUE(running.ok()) << Describe(running);
  auto fetched = Fetch(running->endpoint, "alice", Principal("yarn"));
  ASSERT_TRUE(fetched.ok()) << Describe(fetched);
  auto& secrets = running->tokens->secrets();
  const std::string service = running->endpoint.to_string();
  auto issue = [&] {
    auto tok = secrets.issue({Principal("alice"), Principal("yarn"), "", service});
    EXPECT_TRUE(tok.ok());
    return *tok;
  };
  TokenServiceOptions other_options;
  other_options.store = TokenServiceOptions::Store::kMemory;
  other_options.log = null_log_sink();
  auto other = TokenService::open(other_options);
  ASSERT_TRUE(other.ok());
  auto other_keys = TokenService::open(other_options);
  ASSERT_TRUE(other_keys.ok());
  for (int i = 0; i < 3; ++i) ASSERT_TRUE((*other_keys)->secrets().roll_master_key().ok());

  auto connect = [&](std::string_view mech, const Token& token) {
    TokenSaslServerOptions names;
    if (mech == kTokenDigestMechanism) names = {"hdfs", "db1.example.com"};
    TokenClientOptions o;
    o.token = token;
    return Connect(running->endpoint, std::make_shared<TokenSaslClientMechanism>(mech, o, names));
  };
  for (std::string_view mech : {kTokenDigestMechanism, kTokenScramMechanism}) {
    SCOPED_TRACE(std::string(mech));
    NoTicket no_ticket(dir_);
    auto client = connect(mech, *fetched);
    ASSERT_TRUE(client.ok()) << Describe(client);
    EXPECT_EQ((*client)->mechanism(), mech);
    auto who = (*client)->call_json("sys", "whoami", nlohmann::json::object());
    ASSERT_TRUE(who.ok()) << Describe(who);
    EXPECT_EQ((*who)["user"], Principal("alice"));
    EXPECT_EQ((*who)["mechanism"], std::string(mech));
    // A token never begets a token, whichever mechanism carried it.
    auto again = (*client)->call_json("token", "get", {{"renewer", ""}});
    EXPECT_EQ(again.code(), make_error_code(Errc::kPermissionDenied)) << Describe(again);
  }

  // token-scram ran PBKDF2 once for the token, not once per session.
  const auto* scram = dynamic_cast<const TokenSaslServerMechanism*>(running->interop[1].get());
  ASSERT_NE(scram, nullptr);
  ASSERT_NE(scram->scram_cache(), nullptr);
  EXPECT_EQ(scram->scram_cache()->computed(), 1u);
  for (int i = 0; i < 3; ++i) {
    auto client = connect(kTokenScramMechanism, *fetched);
    ASSERT_TRUE(client.ok()) << Describe(client);
  }
  EXPECT_EQ(scram->scram_cache()->computed(), 1u);

  // The CLI, with the token from a credentials file.
  {
    security::CredentialsFile file;
    file.add(*fetched);
    const std::string path = dir_ + "/interop.tokens";
    ASSERT_TRUE(file.write(path).ok());
    NoTicket no_ticket(dir_);
    Cmd scram_cli = RunCli("call --server " + service + " --auth token-scram --token-file " + path + " sys whoami");
    ASSERT_EQ(scram_cli.status, 0) << scram_cli.out;
    EXPECT_NE(scram_cli.out.find("\"mechanism\":\"token-scram\""), std::string::npos) << scram_cli.out;
    Cmd digest_cli = RunCli("call --server " + service + " --auth token-digest --token-file " + path +
                            " --sasl-service hdfs --server-fqdn db1.example.com sys whoami");
    ASSERT_EQ(digest_cli.status, 0) << digest_cli.out;
    EXPECT_NE(digest_cli.out.find("\"mechanism\":\"token-digest\""), std::string::npos) << digest_cli.out;
    // Other SASL names than the server's: DIGEST-MD5's digest-uri does not match.
    Cmd wrong = RunCli("call --server " + service + " --auth token-digest --token-file " + path + " sys whoami");
    EXPECT_EQ(wrong.status, 3) << wrong.out;
    EXPECT_NE(wrong.out.find("AUTHENTICATION_FAILED"), std::string::npos) << wrong.out;
  }

  // An identifier this server never issued (its sequence number is beyond
  // this server's) under the same key id.
  for (int i = 0; i < 500; ++i) ASSERT_TRUE((*other)->secrets().issue({Principal("alice"), "", "", service}).ok());
  struct Case {
    const char* name;
    std::function<Token()> make;
    Errc code;
    const char* text;
  };
  const std::vector<Case> cases = {
      {"cancelled", [&] { Token x = issue(); EXPECT_TRUE(secrets.cancel(x, Principal("alice")).ok()); return x; },
       Errc::kCredentialsExpired, "CANCELLED"},
      {"forged", [&] { Token x = issue(); x.password.data()[5] ^= 0x40; return x; },
       Errc::kAuthenticationFailed, "FORGED"},
      {"unknown token", [&] { return *(*other)->secrets().issue({Principal("alice"), "", "", service}); },
       Errc::kCredentialsExpired, "UNKNOWN_TOKEN"},
      {"unknown key", [&] { return *(*other_keys)->secrets().issue({Principal("alice"), "", "", service}); },
       Errc::kUnavailable, "UNKNOWN_KEY"},
      {"expired", [&] { Token x = issue(); clock->advance(25h); return x; },
       Errc::kCredentialsExpired, "EXPIRED"},
  };
  for (std::string_view mech : {kTokenDigestMechanism, kTokenScramMechanism}) {
    for (const auto& c : cases) {
      SCOPED_TRACE(std::string(mech) + ": " + c.name);
      const Token bad = c.make();
      auto client = connect(mech, bad);
      ASSERT_FALSE(client.ok());
      EXPECT_EQ(client.code(), make_error_code(c.code)) << Describe(client);
      EXPECT_NE(client.status().message.find(c.text), std::string::npos) << Describe(client);
      EXPECT_EQ(client.status().message.find(token_sasl_password(bad)), std::string::npos);
      auto good = connect(mech, issue());
      EXPECT_TRUE(good.ok()) << Describe(good);
    }
  }
  running->server->stop();
}
}  // namespace
}  // namespace authrpc
