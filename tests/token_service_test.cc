// The token service's request handling without a KDC (server/service.h,
// server/token_service.h): who may call a token.* method is decided before
// its body is parsed, and bodies are parsed within size and depth limits.
// A real Server on loopback with the memory store; `simple` connections are
// refused (the default issue_mechanisms) or, for the limit cases, allowed by
// naming "simple" in issue_mechanisms. The RSS case is the attacker's: 8 MiB
// of "[[[[" to token.cancel from a `simple` connection (~520 MB resident
// before).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <unistd.h>

#include "authrpc/auth/mechanisms/simple/simple.h"
#include "authrpc/client/client.h"
#include "authrpc/security/base64url.h"
#include "authrpc/security/clock.h"
#include "authrpc/server/audit_log.h"
#include "authrpc/server/server.h"
#include "authrpc/server/service.h"
#include "authrpc/server/token_service.h"
#include "tests/testing/test_server.h"
#include "tests/testing/test_support.h"

namespace authrpc {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;
using testing::Describe;

// Resident set size of this process (the server runs in it).
std::size_t ResidentBytes() {
  std::ifstream statm("/proc/self/statm");
  std::size_t pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
}

// AddressSanitizer's quarantine keeps freed blocks (the 8 MiB buffers)
// resident, and ThreadSanitizer's shadow grows with every byte touched
// (about 200 MiB for these bodies), so resident memory says nothing about
// parsing under either: build/ checks it. gcc says so with
// __SANITIZE_ADDRESS__ and __SANITIZE_THREAD__, clang 14 with __has_feature.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kResidentMemoryIsMeaningful = false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
constexpr bool kResidentMemoryIsMeaningful = false;
#else
constexpr bool kResidentMemoryIsMeaningful = true;
#endif
#else
constexpr bool kResidentMemoryIsMeaningful = true;
#endif

std::string Nested(std::size_t depth) { return std::string(depth, '[') + std::string(depth, ']'); }

struct Running {
  std::unique_ptr<TokenService> tokens;
  testing::TestServer server;  // stopped before the token service goes
  Endpoint endpoint;
};

std::unique_ptr<Running> Start(std::vector<std::string> issue_mechanisms,
                               const std::function<void(TokenServiceOptions&)>& tweak = {}) {
  auto r = std::make_unique<Running>();
  TokenServiceOptions t;
  t.store = TokenServiceOptions::Store::kMemory;
  t.issue_mechanisms = std::move(issue_mechanisms);
  t.mechanism.allow_plaintext = true;  // token callers over this tcp:// server (the challenge exchange)
  t.log = null_log_sink();
  if (tweak) tweak(t);
  auto tokens = TokenService::open(std::move(t));
  EXPECT_TRUE(tokens.ok()) << Describe(tokens);
  if (!tokens.ok()) return nullptr;
  r->tokens = std::move(*tokens);
  r->server.mechanisms({std::make_shared<SimpleServerMechanism>(), r->tokens->mechanism()})
      .service(r->tokens->service())
      .blocking_threads(1);
  const Status started = r->server.start();
  EXPECT_TRUE(started.ok()) << started.to_string();
  if (!started.ok()) return nullptr;
  r->endpoint = r->server.endpoint();
  return r;
}

TEST(ParseJsonRequest, Limits) {
  const JsonLimits limits{1000, 4};
  struct Case {
    std::string text;
    bool ok;
    const char* error;
  };
  const Case cases[] = {
      {R"({"token": "x"})", true, ""},
      {Nested(4), true, ""},
      {Nested(5), false, "nests deeper than this method's limit of 4"},
      {R"({"a": {"b": {"c": {"d": 1}}}})", true, ""},
      {R"({"a": {"b": {"c": {"d": [1]}}}})", false, "nests deeper"},
      {std::string(1001, ' '), false, "1001 bytes is over this method's limit of 1000"},
      {std::string(999, ' ') + "1", true, ""},
      {"{\"token\": ", false, "not valid JSON"},
      {"{} {}", false, "not valid JSON"},
      {"", false, "not valid JSON"},
      // Depth is checked before validity: an over-deep prefix is refused
      // without reading on.
      {Nested(5).substr(0, 5) + "garbage", false, "nests deeper"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.text.substr(0, 40));
    auto r = parse_json_request(c.text, limits);
    EXPECT_EQ(r.ok(), c.ok) << Describe(r);
    if (!c.ok) {
      EXPECT_EQ(r.code(), make_error_code(Errc::kInvalidArgument));
      EXPECT_THAT(r.status().message, HasSubstr(c.error));
    }
  }
}

// Refused before parsing, and memory does not grow.
TEST(TokenServiceRequests, SimpleCallersAreRefusedBeforeTheBodyIsParsed) {
  auto running = Start({"kerberos", "kerberos-sasl"});
  ASSERT_NE(running, nullptr);
  auto client = testing::ConnectWith(running->endpoint, std::make_shared<SimpleClientMechanism>("alice"),
                                     30s);
  ASSERT_TRUE(client.ok()) << Describe(client);
  const std::string hostile = Nested(4u << 20);  // 8 MiB
  // Each call moves 8 MiB through the client's and the server's frame
  // buffers and a copy for the blocking pool: tens of MiB that glibc may
  // keep. Parsing it was ~65 bytes per input byte (~520 MiB).
  const std::size_t before = ResidentBytes();
  for (const char* method : {"cancel", "get", "renew", "cancel", "cancel", "cancel"}) {
    SCOPED_TRACE(method);
    auto r = (*client)->call("token", method, hostile);
    EXPECT_EQ(r.code(), make_error_code(Errc::kPermissionDenied)) << Describe(r);
    EXPECT_THAT(r.status().message, HasSubstr("needs a connection authenticated by Kerberos"));
    EXPECT_THAT(r.status().message, HasSubstr("'simple'"));
  }
  const std::size_t after = ResidentBytes();
  RecordProperty("rss_before_kib", static_cast<int>(before >> 10));
  RecordProperty("rss_after_kib", static_cast<int>(after >> 10));
  std::printf("RSS around six 8 MiB nested bodies: %zu KiB before, %zu KiB after\n", before >> 10,
              after >> 10);
  if (kResidentMemoryIsMeaningful) {
    EXPECT_LT(after, before + (128u << 20)) << "resident memory grew by " << ((after - before) >> 20) << " MiB";
  }
  // The connection and the server are fine.
  auto who = (*client)->call_json("sys", "whoami", nlohmann::json::object());
  EXPECT_TRUE(who.ok()) << Describe(who);
}

// A caller who may use the methods still gets typed errors for bodies over
// the limits, and the server keeps serving.
TEST(TokenServiceRequests, BodiesOverTheLimitsAreInvalidArgument) {
  auto running = Start({"simple"});
  ASSERT_NE(running, nullptr);
  auto client = testing::ConnectWith(running->endpoint, std::make_shared<SimpleClientMechanism>("alice"),
                                     30s);
  ASSERT_TRUE(client.ok()) << Describe(client);
  struct Case {
    const char* method;
    std::string body;
    const char* error;
  };
  const Case cases[] = {
      {"cancel", Nested(4u << 20), "over this method's limit"},
      {"get", Nested(4u << 20), "over this method's limit"},
      {"renew", Nested(100), "nests deeper than this method's limit of 4"},
      {"get", R"({"renewer": [[[[["yarn"]]]]]})", "nests deeper"},
      {"cancel", "{\"token\": ", "not valid JSON"},
  };
  const std::size_t before = ResidentBytes();
  for (const auto& c : cases) {
    SCOPED_TRACE(std::string(c.method) + " " + c.body.substr(0, 30));
    auto r = (*client)->call("token", c.method, c.body);
    EXPECT_EQ(r.code(), make_error_code(Errc::kInvalidArgument)) << Describe(r);
    EXPECT_THAT(r.status().message, HasSubstr(c.error));
  }
  if (kResidentMemoryIsMeaningful) {
    EXPECT_LT(ResidentBytes(), before + (64u << 20));
  }
  auto got = (*client)->call_json("token", "get", {{"renewer", "yarn"}, {"service", "svc"}});
  ASSERT_TRUE(got.ok()) << Describe(got);
  EXPECT_EQ((*got)["owner"], "alice");
}

// token.cancel is open to token-authenticated callers too (an owner
// cancelling the token it holds), never to `simple` ones.
TEST(TokenServiceRequests, CancelNeedsKerberosOrATokenCaller) {
  auto running = Start({"simple"});
  ASSERT_NE(running, nullptr);
  std::string token_text;
  {
    auto alice = testing::ConnectWith(running->endpoint, std::make_shared<SimpleClientMechanism>("alice"));
    ASSERT_TRUE(alice.ok()) << Describe(alice);
    auto got = (*alice)->call_json("token", "get", {{"renewer", "yarn"}, {"service", "svc"}});
    ASSERT_TRUE(got.ok()) << Describe(got);
    token_text = (*got)["token"].get<std::string>();
  }
  auto token = security::Token::from_string(token_text);
  ASSERT_TRUE(token.ok());
  TokenClientOptions to;
  to.token = *token;
  to.service = "svc";
  auto by_token = testing::ConnectWith(running->endpoint, std::make_shared<TokenClientMechanism>(to));
  ASSERT_TRUE(by_token.ok()) << Describe(by_token);
  auto cancelled = (*by_token)->call_json("token", "cancel", {{"token", token_text}});
  EXPECT_TRUE(cancelled.ok()) << Describe(cancelled);
}

// A token's password is in token.get's answer: issued over tls:// and
// unix://, over plaintext tcp:// only where the server accepts tokens there
// too (tokens.allow_plaintext), else FAILED_PRECONDITION before the request
// is read. Transport × allow_plaintext → issued or not.
TEST(TokenServiceRequests, GetOverPlaintextTcpOnlyWhereTokensAreAcceptedThere) {
  for (const bool allow_plaintext : {false, true}) {
    TokenServiceOptions t;
    t.store = TokenServiceOptions::Store::kMemory;
    t.issue_mechanisms = std::vector<std::string>{"simple"};
    t.mechanism.allow_plaintext = allow_plaintext;
    t.log = null_log_sink();
    auto tokens = TokenService::open(std::move(t));
    ASSERT_TRUE(tokens.ok()) << Describe(tokens);
    testing::TestServer server;
    server.endpoint("tcp:").tls().endpoint("unix:").encryption(SecurityRequirement::kOptional)
        .mechanisms({std::make_shared<SimpleServerMechanism>()})
        .service((*tokens)->service())
        .blocking_threads(1);
    const Status started = server.start();
    ASSERT_TRUE(started.ok()) << started.to_string();
    for (const Endpoint& endpoint : server.endpoints()) {
      SCOPED_TRACE(endpoint.to_string() + (allow_plaintext ? " allow_plaintext" : ""));
      auto client = server.client(endpoint).simple("alice").connect();
      ASSERT_TRUE(client.ok()) << Describe(client);
      auto got = (*client)->call_json("token", "get", {{"renewer", "yarn"}});
      if (endpoint.scheme != Endpoint::Scheme::kTcp || allow_plaintext) {
        ASSERT_TRUE(got.ok()) << Describe(got);
        EXPECT_TRUE((*got)["token"].is_string());
      } else {
        EXPECT_EQ(got.code(), make_error_code(Errc::kFailedPrecondition)) << Describe(got);
        EXPECT_THAT(got.status().message, HasSubstr("PLAINTEXT"));
      }
    }
  }
}

// Every token.get/renew/cancel is audited (event "token", with the
// operation, the caller, the token's id and never the token) and counted by
// operation and outcome; the store's calls are timed.
TEST(TokenServiceAudit, OperationsAreAuditedAndCounted) {
  const std::string dir = testing::TempDir("token-audit");
  ASSERT_FALSE(dir.empty());
  const std::string path = dir + "/audit.jsonl";
  auto audit = AuditLog::open(path);
  ASSERT_TRUE(audit.ok()) << Describe(audit);
  auto metrics = std::make_shared<MetricsRegistry>();
  auto running = Start({"simple"}, [&](TokenServiceOptions& t) {
    t.audit_log = *audit;
    t.metrics = metrics;
  });
  ASSERT_NE(running, nullptr);
  auto as = [&](const std::string& user) {
    auto c = testing::ConnectWith(running->endpoint, std::make_shared<SimpleClientMechanism>(user));
    EXPECT_TRUE(c.ok()) << Describe(c);
    return std::move(*c);
  };
  auto alice = as("alice"), yarn = as("yarn"), bob = as("bob");

  auto got = alice->call_json("token", "get", {{"renewer", "yarn"}, {"service", "svc"}});
  ASSERT_TRUE(got.ok()) << Describe(got);
  const std::string token_text = (*got)["token"].get<std::string>();
  const std::string token_id = "sequence_number=" + std::to_string((*got)["sequence_number"].get<std::uint64_t>()) +
                               ",master_key_id=" + std::to_string((*got)["master_key_id"].get<std::uint32_t>());
  auto token = security::Token::from_string(token_text);
  ASSERT_TRUE(token.ok());
  const nlohmann::json by_token = {{"token", token_text}};

  EXPECT_TRUE(yarn->call_json("token", "renew", by_token).ok());
  EXPECT_EQ(bob->call_json("token", "renew", by_token).code(), make_error_code(Errc::kPermissionDenied));
  EXPECT_EQ(alice->call_json("token", "cancel", {{"token", "not a token"}}).code(),
            make_error_code(Errc::kInvalidArgument));
  {
    // A connection authenticated by the token may cancel but never get.
    TokenClientOptions to;
    to.token = *token;
    to.service = "svc";
    auto holder = testing::ConnectWith(running->endpoint, std::make_shared<TokenClientMechanism>(to));
    ASSERT_TRUE(holder.ok()) << Describe(holder);
    EXPECT_EQ((*holder)->call_json("token", "get", nlohmann::json::object()).code(),
              make_error_code(Errc::kPermissionDenied));
  }
  EXPECT_TRUE(alice->call_json("token", "cancel", by_token).ok());
  const auto late = yarn->call_json("token", "renew", by_token);
  ASSERT_FALSE(late.ok());
  const Errc late_code = to_wire_errc(late.code());

  (*audit)->flush();
  std::ifstream in(path);
  std::string raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<nlohmann::json> lines;
  std::istringstream split(raw);
  for (std::string l; std::getline(split, l);) lines.push_back(nlohmann::json::parse(l));

  struct Expected {
    const char* operation;
    const char* outcome;
    const char* user;
    const char* mechanism;
    bool has_token_id;
    const char* code;  // "" on success
  };
  const std::string late_name(errc_name(late_code));
  const Expected expected[] = {
      {"get", "success", "alice", "simple", true, ""},
      {"renew", "success", "yarn", "simple", true, ""},
      {"renew", "denied", "bob", "simple", true, "PERMISSION_DENIED"},
      {"cancel", "failure", "alice", "simple", false, "INVALID_ARGUMENT"},
      {"get", "denied", "alice", "token", false, "PERMISSION_DENIED"},
      {"cancel", "success", "alice", "simple", true, ""},
      {"renew", "failure", "yarn", "simple", true, late_name.c_str()},
  };
  ASSERT_EQ(lines.size(), std::size(expected)) << raw;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const auto& l = lines[i];
    const auto& e = expected[i];
    SCOPED_TRACE(l.dump());
    EXPECT_EQ(l["event"], "token");
    EXPECT_EQ(l["operation"], e.operation);
    EXPECT_EQ(l["method"], e.operation);
    EXPECT_EQ(l["service"], "token");
    EXPECT_EQ(l["outcome"], e.outcome);
    EXPECT_EQ(l["user"], e.user);
    EXPECT_EQ(l["mechanism"], e.mechanism);
    EXPECT_THAT(l["peer"].get<std::string>(), HasSubstr("127.0.0.1:"));
    if (e.has_token_id) {
      EXPECT_EQ(l.value("token_id", ""), token_id);
    } else {
      EXPECT_FALSE(l.contains("token_id"));
    }
    if (*e.code == 0) {
      EXPECT_FALSE(l.contains("code"));
      EXPECT_EQ(l["reason"], "");
    } else {
      EXPECT_EQ(l.value("code", ""), e.code);
      EXPECT_NE(l["reason"], "");
    }
  }
  // Never the token, nor its password in any encoding a log might use.
  EXPECT_EQ(raw.find(token_text), std::string::npos);
  EXPECT_EQ(raw.find(security::base64url_encode(token->password.view())), std::string::npos);
  EXPECT_EQ(raw.find(token_text.substr(token_text.size() / 2, 16)), std::string::npos);

  auto count = [&](const char* operation, const char* outcome) {
    return metrics->value(kTokenOperationsTotal, {{"operation", operation}, {"outcome", outcome}});
  };
  EXPECT_EQ(count("get", "ok"), 1);
  EXPECT_EQ(count("get", "permission_denied"), 1);
  EXPECT_EQ(count("renew", "ok"), 1);
  EXPECT_EQ(count("renew", "permission_denied"), 1);
  std::string late_label = late_name;
  for (char& c : late_label) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  EXPECT_EQ(count("renew", late_label.c_str()), 1);
  EXPECT_EQ(count("cancel", "invalid_argument"), 1);
  EXPECT_EQ(count("cancel", "ok"), 1);
  EXPECT_EQ(count("cancel", "unavailable"), 0);

  // Each family's children exist before they count (a rate is defined from
  // the first scrape), and the store's calls were timed.
  const auto snapshot = metrics->snapshot();
  std::map<std::string, std::uint64_t> store_calls;
  std::size_t operation_children = 0;
  for (const auto& family : snapshot) {
    if (family.name == kTokenOperationsTotal) operation_children = family.samples.size();
    if (family.name != "authrpc_token_store_operation_seconds") continue;
    EXPECT_EQ(family.type, MetricType::kHistogram);
    for (const auto& sample : family.samples) {
      ASSERT_EQ(sample.labels.size(), 2u);
      EXPECT_EQ(sample.labels[0], (std::pair<std::string, std::string>{"store", "memory"}));
      store_calls[sample.labels[1].second] = sample.histogram.count;
    }
  }
  EXPECT_EQ(operation_children, 3u * 8u);
  EXPECT_EQ(store_calls["add_token"], 1u);
  EXPECT_EQ(store_calls["update_token"], 1u);  // the renew that succeeded
  EXPECT_EQ(store_calls["remove_tokens"], 1u);
  EXPECT_EQ(store_calls["load"], 1u);
  EXPECT_GE(store_calls["allocate_sequence_number"], 1u);
  running->server.stop();
  std::filesystem::remove_all(dir);
}

// TokenService::ready(), what the admin listener's /readyz asks: ready with
// no key yet (the first token.get makes one) and with a fresh one; not ready
// once the key is overdue for its roll by more than two sweeps (a sweeper
// that keeps failing), ready again after a roll.
TEST(TokenServiceReady, AKeyOverdueForItsRollIsNotReady) {
  auto clock = std::make_shared<security::ManualClock>(security::TokenTime(std::chrono::hours(24 * 365 * 50)));
  TokenServiceOptions t;
  t.store = TokenServiceOptions::Store::kMemory;
  t.secrets.clock = clock;
  t.secrets.key_roll_interval = 1h;
  t.sweep_interval = 24h;  // the test sweeps by hand
  t.log = null_log_sink();
  auto tokens = TokenService::open(std::move(t));
  ASSERT_TRUE(tokens.ok()) << Describe(tokens);
  EXPECT_TRUE((*tokens)->ready().ok()) << (*tokens)->ready().to_string();
  ASSERT_TRUE((*tokens)->secrets().issue({"alice", "yarn", "", "svc"}).ok());
  EXPECT_TRUE((*tokens)->ready().ok());

  clock->advance(1h + 2 * 24h - 1ms);
  EXPECT_TRUE((*tokens)->ready().ok()) << "two sweeps late is still in time";
  clock->advance(1ms);
  const Status late = (*tokens)->ready();
  EXPECT_EQ(late.code, Errc::kUnavailable);
  EXPECT_THAT(late.message, HasSubstr("overdue for its roll"));

  ASSERT_TRUE((*tokens)->secrets().sweep().ok());
  EXPECT_TRUE((*tokens)->ready().ok()) << (*tokens)->ready().to_string();
}

}  // namespace
}  // namespace authrpc
