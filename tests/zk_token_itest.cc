// A fleet of authrpc servers sharing delegation tokens through one real
// ZooKeeper (tests/testing/mini_zk.h), with tokens fetched over Kerberos from a real
// KDC (tests/testing/mini_kdc.h):
//  - issue on A, authenticate on B, renew on B, cancel on C: then refused
//    by all three;
//  - a master key rolled on A is picked up by B and C;
//  - ZooKeeper restarted under the fleet: tokens keep working, new ones are
//    issued;
//  - a `token` session captured on A does not authenticate on B (TLS: the
//    bound proof; plaintext tcp opted in: the server's challenge; plaintext
//    tcp by default: refused outright);
//  - an authrpc-server process SIGKILLed during a burst of issues: every
//    acknowledged token validates on another server, and every token node in
//    ZooKeeper is whole (a fresh store loads them all).
// Skipped (with the reason) only where ZooKeeper is not installed.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "authrpc/auth/mechanisms/token/token_mechanism.h"
#include "authrpc/client/client.h"
#include "authrpc/components/kerberos/kerberos.h"
#include "authrpc/components/zookeeper/zk_store_factory.h"
#include "authrpc/components/zookeeper/zk_token_store.h"
#include "authrpc/security/tls_context.h"
#include "authrpc/server/server.h"
#include "authrpc/server/token_service.h"
#include "tests/testing/kerberos_realm.h"
#include "tests/testing/test_server.h"
#include "tests/testing/test_tls.h"
#include "tests/testing/mini_kdc.h"
#include "tests/testing/mini_zk.h"
#include "tests/testing/test_support.h"
#include "tests/testing/token_capture.h"
#include "tests/testing/token_sessions.h"
#include "tests/testing/test_programs.h"

namespace authrpc {
namespace {

using namespace std::chrono_literals;
using authrpc::testing::MiniZk;
using security::Token;

constexpr const char* kDigest = "authrpc:fleet-secret";

using testing::Describe;

// ZooKeeper watches can take a while on a loaded machine: a longer default.
bool Eventually(const std::function<bool()>& done, std::chrono::milliseconds limit = 10s) {
  return testing::Eventually(done, limit);
}

struct Running {
  std::unique_ptr<TokenService> tokens;
  std::unique_ptr<testing::TestServer> server;
  Endpoint endpoint;
};

class ZkTokenItest : public testing::TokenServiceSuite {
 protected:
  static void SetUpTestSuite() {
    if (!MiniZk::available()) return;
    zk_ = std::make_unique<MiniZk>();
    setup_error_ = zk_->start();
    StartRealmWithTls({.clients = {"alice", "yarn"}, .kinit = ""});
    if (!setup_.ok() && setup_error_.empty()) setup_error_ = setup_.to_string();
  }
  static void TearDownTestSuite() {
    KerberosSuite::TearDownTestSuite();
    zk_.reset();
  }

  void SetUp() override {
    if (!MiniZk::available()) GTEST_SKIP() << "ZooKeeper is not installed (scripts/setup.sh installs it)";
    ASSERT_EQ(setup_error_, "");
    kdc_->set_env_for_process();
    root_ = "/authrpc-itest/" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name());
    dir_ = testing::TempDir("zk-itest");
    ASSERT_FALSE(dir_.empty());
  }
  void TearDown() override {
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }

  security::ZkTokenStoreOptions ZkOptions() const {
    security::ZkTokenStoreOptions z;
    z.connect = zk_->connect_string();
    z.root = root_;
    z.digest = security::SecretBytes(std::string_view(kDigest));
    z.session_timeout = 4s;
    return z;
  }

  TokenServiceOptions FleetOptions() const {
    TokenServiceOptions t;
    t.store = TokenServiceOptions::Store::kShared;
    t.shared_store = security::zookeeper_store(ZkOptions());
    t.log = null_log_sink();
    return t;
  }

  // A server with kerberos + token and the token service on the fleet's
  // root, on tls:// unless told otherwise (`token` needs TLS or unix://
  // unless the server opts in to plaintext).
  Result<Running> Start(const std::string& uri = "tls://127.0.0.1:0", bool allow_plaintext = false,
                        std::shared_ptr<MetricsRegistry> metrics = default_metrics_registry()) {
    Running r;
    TokenServiceOptions t = FleetOptions();
    t.mechanism.allow_plaintext = allow_plaintext;
    t.metrics = std::move(metrics);
    auto opened = OpenTokenServer(std::move(t), uri);
    if (!opened.ok()) return opened.status();
    r.tokens = std::move(opened->tokens);
    r.server = std::move(opened->server);
    if (Status s = r.server->start(); !s.ok()) return s;
    r.endpoint = r.server->endpoint();
    return r;
  }

  // A token for any server of the fleet (no service stamp).
  static Result<Token> Fetch(const Endpoint& ep, const std::string& as, const std::string& renewer) {
    return FetchToken(ep, as, renewer, "");
  }
  // Authenticates to `ep` with the token alone (stamped for that endpoint).
  static Result<std::unique_ptr<Client>> WithToken(const Endpoint& ep, Token t,
                                                   testing::CapturingClient** capture = nullptr) {
    t.service = ep.to_string();
    TokenClientOptions o;
    o.token = std::move(t);
    std::shared_ptr<ClientMechanism> m = std::make_shared<TokenClientMechanism>(o);
    if (capture != nullptr) {
      auto c = std::make_shared<testing::CapturingClient>(std::move(m));
      *capture = c.get();
      m = std::move(c);
    }
    return Connect(ep, std::move(m));
  }

  static inline std::unique_ptr<MiniZk> zk_;
  static inline std::string setup_error_;
  std::string root_;
  std::string dir_;
};

TEST_F(ZkTokenItest, IssueOnARenewOnBCancelOnCThenRefusedEverywhere) {
  std::vector<Running> fleet;
  for (int i = 0; i < 3; ++i) {
    auto r = Start();
    ASSERT_TRUE(r.ok()) << Describe(r);
    fleet.push_back(std::move(*r));
  }
  Running& a = fleet[0];
  Running& b = fleet[1];
  Running& c = fleet[2];
  auto token = Fetch(a.endpoint, "alice", Principal("yarn"));
  ASSERT_TRUE(token.ok()) << Describe(token);

  auto on_b = WithToken(b.endpoint, *token);
  ASSERT_TRUE(on_b.ok()) << Describe(on_b);
  EXPECT_EQ((*on_b)->authenticated_user(), Principal("alice"));
  EXPECT_EQ((*on_b)->mechanism(), "token");

  auto yarn = Connect(b.endpoint, KerberosAs("yarn"));
  ASSERT_TRUE(yarn.ok()) << Describe(yarn);
  auto renewed = (*yarn)->call_json("token", "renew", {{"token", *token->to_string()}});
  ASSERT_TRUE(renewed.ok()) << Describe(renewed);

  auto alice = Connect(c.endpoint, KerberosAs("alice"));
  ASSERT_TRUE(alice.ok()) << Describe(alice);
  auto cancelled = (*alice)->call_json("token", "cancel", {{"token", *token->to_string()}});
  ASSERT_TRUE(cancelled.ok()) << Describe(cancelled);

  for (auto* server : {&a, &b, &c}) {
    Result<std::unique_ptr<Client>> refused = Status(Errc::kInternal, "not tried");
    EXPECT_TRUE(Eventually([&] {
      refused = WithToken(server->endpoint, *token);
      return !refused.ok();
    })) << server->endpoint.to_string();
    EXPECT_EQ(refused.code(), make_error_code(Errc::kCredentialsExpired)) << Describe(refused);
    EXPECT_NE(refused.status().message.find("CANCELLED"), std::string::npos) << Describe(refused);
  }
  for (auto& r : fleet) r.server->stop();
}

// The token service times its ZooKeeper store's calls under
// store="zookeeper" and counts its operations.
TEST_F(ZkTokenItest, StoreCallsAreTimedAsZookeeper) {
  auto metrics = std::make_shared<MetricsRegistry>();
  auto r = Start("tls://127.0.0.1:0", false, metrics);
  ASSERT_TRUE(r.ok()) << Describe(r);
  auto token = Fetch(r->endpoint, "alice", Principal("yarn"));
  ASSERT_TRUE(token.ok()) << Describe(token);
  EXPECT_EQ(metrics->value("authrpc_token_operations_total", {{"operation", "get"}, {"outcome", "ok"}}), 1);
  std::map<std::string, std::uint64_t> calls;
  for (const auto& family : metrics->snapshot()) {
    if (family.name != "authrpc_token_store_operation_seconds") continue;
    for (const auto& sample : family.samples) {
      ASSERT_EQ(sample.labels.size(), 2u);
      EXPECT_EQ(sample.labels[0].second, "zookeeper");
      calls[sample.labels[1].second] = sample.histogram.count;
    }
  }
  EXPECT_EQ(calls["load"], 1u);
  EXPECT_EQ(calls["add_token"], 1u);
  EXPECT_GE(calls["allocate_sequence_number"], 1u);
  r->server->stop();
}

// An observer records a client's `token` session with server A and plays
// it to server B of the same fleet (B validates every token A issued): it
// must not authenticate on B, plaintext tcp included.
TEST_F(ZkTokenItest, SessionCapturedOnADoesNotAuthenticateOnB) {
  struct Case {
    const char* uri;
    bool allow_plaintext;
    Errc code;  // of the replay on B
    const char* text;
  };
  const Case cases[] = {
      {"tls://127.0.0.1:0", false, Errc::kAuthenticationFailed, "FORGED"},
      {"tcp://127.0.0.1:0", true, Errc::kAuthenticationFailed, "FORGED"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.uri);
    auto a = Start(c.uri, c.allow_plaintext), b = Start(c.uri, c.allow_plaintext);
    ASSERT_TRUE(a.ok() && b.ok()) << Describe(a) << Describe(b);
    auto token = Fetch(a->endpoint, "alice", "");
    ASSERT_TRUE(token.ok()) << Describe(token);
    ASSERT_TRUE(Eventually([&] { return b->tokens->secrets().verify(*token).ok(); }));
    // A fleet shares one service name: the recorded HELLO names it, and B
    // accepts it (no `services` list), so only the proof can stop a replay.
    testing::CapturingClient* capture = nullptr;
    auto on_a = WithToken(a->endpoint, *token, &capture);
    ASSERT_TRUE(on_a.ok()) << Describe(on_a);
    ASSERT_NE(capture, nullptr);
    auto replayed = Connect(b->endpoint, std::make_shared<testing::ReplayingClient>(capture->sent()));
    ASSERT_FALSE(replayed.ok());
    EXPECT_EQ(replayed.code(), make_error_code(c.code)) << Describe(replayed);
    EXPECT_NE(replayed.status().message.find(c.text), std::string::npos) << Describe(replayed);
    // The genuine client still gets in on B.
    EXPECT_TRUE(WithToken(b->endpoint, *token).ok());
    a->server->stop();
    b->server->stop();
  }
  // Plaintext tcp without the opt-in: no token is issued there, and one
  // issued elsewhere is not accepted; the client is told why.
  auto a = Start("tcp://127.0.0.1:0");
  ASSERT_TRUE(a.ok()) << Describe(a);
  auto fetched = Fetch(a->endpoint, "alice", "");
  ASSERT_FALSE(fetched.ok());
  EXPECT_EQ(fetched.code(), make_error_code(Errc::kFailedPrecondition)) << Describe(fetched);
  auto token = a->tokens->secrets().issue({Principal("alice"), "", "", a->endpoint.to_string()});
  ASSERT_TRUE(token.ok()) << Describe(token);
  auto refused = WithToken(a->endpoint, *token);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.code(), make_error_code(Errc::kFailedPrecondition)) << Describe(refused);
  EXPECT_NE(refused.status().message.find("PLAINTEXT"), std::string::npos) << Describe(refused);
  a->server->stop();
}

TEST_F(ZkTokenItest, KeyRolledOnAIsUsedByAll) {
  std::vector<Running> fleet;
  for (int i = 0; i < 3; ++i) {
    auto r = Start();
    ASSERT_TRUE(r.ok()) << Describe(r);
    fleet.push_back(std::move(*r));
  }
  ASSERT_TRUE(Fetch(fleet[0].endpoint, "alice", "").ok());  // the first key
  ASSERT_TRUE(fleet[0].tokens->secrets().roll_master_key().ok());
  std::uint32_t current = 0;
  for (const auto& k : fleet[0].tokens->secrets().master_keys()) {
    if (k.current) current = k.id;
  }
  ASSERT_GT(current, 0u);
  for (auto& r : fleet) {
    EXPECT_TRUE(Eventually([&] {
      for (const auto& k : r.tokens->secrets().master_keys()) {
        if (k.current) return k.id == current;
      }
      return false;
    }));
  }
  auto token = Fetch(fleet[1].endpoint, "alice", "");
  ASSERT_TRUE(token.ok()) << Describe(token);
  auto id = security::TokenIdentifier::decode(token->identifier);
  ASSERT_TRUE(id.ok());
  EXPECT_EQ(id->master_key_id, current);
  auto on_c = WithToken(fleet[2].endpoint, *token);
  EXPECT_TRUE(on_c.ok()) << Describe(on_c);
  for (auto& r : fleet) r.server->stop();
}

TEST_F(ZkTokenItest, ZooKeeperRestartedUnderTheFleet) {
  auto a = Start(), b = Start();
  ASSERT_TRUE(a.ok() && b.ok()) << Describe(a) << Describe(b);
  auto before = Fetch(a->endpoint, "alice", "");
  ASSERT_TRUE(before.ok()) << Describe(before);
  ASSERT_TRUE(Eventually([&] { return b->tokens->secrets().token_count() == 1; }));
  zk_->stop();
  // Cut off: issuing fails with a retriable error; the cached view still
  // verifies (the cut-off is shorter than the session timeout).
  auto during = Fetch(a->endpoint, "alice", "");
  EXPECT_EQ(during.code(), make_error_code(Errc::kUnavailable)) << Describe(during);
  EXPECT_TRUE(WithToken(b->endpoint, *before).ok());
  ASSERT_EQ(zk_->start(), "");
  Result<Token> after = Status(Errc::kInternal, "not tried");
  ASSERT_TRUE(Eventually([&] {
    after = Fetch(a->endpoint, "alice", "");
    return after.ok();
  })) << Describe(after);
  // B reconnects on its own schedule; until then a miss is UNAVAILABLE
  // (retriable), never a refusal.
  Result<std::unique_ptr<Client>> on_b = Status(Errc::kInternal, "not tried");
  EXPECT_TRUE(Eventually([&] {
    on_b = WithToken(b->endpoint, *after);
    EXPECT_TRUE(on_b.ok() || on_b.code() == make_error_code(Errc::kUnavailable)) << Describe(on_b);
    return on_b.ok();
  })) << Describe(on_b);
  EXPECT_TRUE(WithToken(b->endpoint, *before).ok());
  a->server->stop();
  b->server->stop();
}

// Starts authrpc-server with CONFIG and reads its endpoint from stdout.
Result<testing::ServerProcess> SpawnServer(const std::string& config) {
  return testing::SpawnServer(AUTHRPC_SERVER_BIN, config);
}

TEST_F(ZkTokenItest, ServerKilledDuringIssuanceLeavesNoHalfWrittenToken) {
  const std::string digest_file = dir_ + "/zk.digest";
  std::ofstream(digest_file) << kDigest << "\n";
  const nlohmann::json config = {
      {"listen", {"tcp://127.0.0.1:0"}},
      {"log_level", "error"},
      {"auth",
       {{"mechanisms", {"kerberos", "token"}},
        {"options", {{"kerberos", {{"principal", "rpc/localhost@" + kdc_->realm()}}}}}}},
      {"tokens",
       {{"store",
         {{"type", "zookeeper"},
          {"connect", zk_->connect_string()},
          {"root", root_},
          {"auth", {{"digest_file", digest_file}}},
          {"session_timeout_ms", 4000}}},
        {"allow_plaintext", true}}}};  // token.get over this tcp:// endpoint
  const std::string path = dir_ + "/server.json";
  std::ofstream(path) << config.dump(2);
  auto child = SpawnServer(path);
  ASSERT_TRUE(child.ok()) << Describe(child);
  auto b = Start();
  ASSERT_TRUE(b.ok()) << Describe(b);

  std::mutex mu;
  std::vector<Token> acknowledged;
  std::thread burst([&] {
    auto alice = Connect(child->endpoint, KerberosAs("alice"));
    if (!alice.ok()) return;
    for (int i = 0; i < 100000; ++i) {
      auto r = (*alice)->call_json("token", "get", {{"renewer", ""}});
      if (!r.ok()) break;
      std::lock_guard lock(mu);
      acknowledged.push_back(*Token::from_string((*r)["token"].get<std::string>()));
    }
  });
  // How long the burst runs before the crash is the load under test: the
  // kill must land in the middle of writes, at no chosen point.
  std::this_thread::sleep_for(1500ms);
  ASSERT_EQ(::kill(child->pid, SIGKILL), 0);
  ::waitpid(child->pid, nullptr, 0);
  burst.join();
  ASSERT_GT(acknowledged.size(), 3u) << "the burst made too little progress to test anything";

  for (const auto& t : acknowledged) {
    auto verified = b->tokens->secrets().verify(t);
    EXPECT_TRUE(verified.ok()) << verified.status().to_string();
  }
  // Every node in ZooKeeper decodes: a fresh store loads the whole state.
  security::ZkTokenStoreOptions o = ZkOptions();
  auto store = security::ZkTokenStore::open(o);
  ASSERT_TRUE(store.ok()) << store.status().to_string();
  auto state = (*store)->load();
  ASSERT_TRUE(state.ok()) << state.status().to_string();
  EXPECT_GE(state->tokens.size(), acknowledged.size());
  EXPECT_LE(state->tokens.size(), acknowledged.size() + 1);  // one whose reply the kill cut off
  std::printf("SIGKILL test: %zu tokens acknowledged, %zu stored\n", acknowledged.size(), state->tokens.size());
  b->server->stop();
}

}  // namespace
}  // namespace authrpc
