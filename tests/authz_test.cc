// Authorization end to end (docs/AUTHZ.md): a real Server and real Clients
// over loopback. A table-driven matrix (principal × rules × ACL × call →
// outcome), proxy users, ACL reload (admin RPC, and SIGHUP to a real
// authrpc-server child), and the audit log's content. Principals are asserted
// with the `simple` mechanism (which accepts "nn/host@REALM" as a name); a
// test mechanism named "token" stands for token-authenticated connections.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "authrpc/auth/authz/acl.h"
#include "authrpc/auth/authz/authorizer.h"
#include "authrpc/auth/mechanisms/simple/simple.h"
#include "authrpc/client/client.h"
#include "authrpc/server/audit_log.h"
#include "authrpc/server/server.h"
#include "tests/testing/one_message_mechanism.h"
#include "tests/testing/test_server.h"
#include "tests/testing/test_support.h"

extern char** environ;

namespace authrpc {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;
using ::testing::Not;
namespace fs = std::filesystem;
using testing::AdminService;
using testing::DataService;

constexpr const char* kSecret = "s3cret-Proof-42";

// "token" for tests: the client sends "user:proof"; the server accepts the
// proof kSecret. Its only purpose is a delegation-token mechanism (by its
// traits, not its name) carrying a secret, so that proxy-user refusal over
// tokens and secret-free audit lines can be tested without the real token
// mechanism. The server's verdict:
ServerStep CheckTokenProof(std::string_view t) {
  const auto colon = t.find(':');
  if (colon == std::string_view::npos || t.substr(colon + 1) != kSecret) {
    return ServerStep::failure({Errc::kAuthenticationFailed, "token: bad proof"});
  }
  return testing::BelieveTheName(t.substr(0, colon));
}
constexpr MechanismTraits kTestTokenTraits{.delegation_token = true};

std::string ReadFile(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void WriteFile(const fs::path& p, const std::string& text) {
  const fs::path tmp = p.string() + ".tmp";
  std::ofstream(tmp) << text;
  fs::rename(tmp, p);  // readers see the old or the new file, never half of one
}

Service MiscService() {
  Service misc("misc");
  misc.add_blocking("ping", [](CallContext&, std::string_view) -> Result<std::string> { return std::string("pong"); });
  return misc;
}

// A server with the ACL file in a temp dir, an audit log, and the
// simple + token mechanisms.
class AuthzServer {
 public:
  explicit AuthzServer(const nlohmann::json& acl, bool with_authorizer = true,
                       std::string endpoint = "tcp://127.0.0.1:0")
      : dir_(testing::TempDir("authz-test")) {
    WriteAcl(acl);
    server_.endpoint(endpoint == "unix" ? "unix:" + (dir_ / "s.sock").string() : endpoint);
    server_.mechanisms({std::make_shared<SimpleServerMechanism>(),
                        std::make_shared<testing::OneMessageServer>("token", kTestTokenTraits, CheckTokenProof)});
    server_.log([this](LogLevel, std::string_view line) {
      std::lock_guard lock(log_mu_);
      log_.append(line).append("\n");
    });
    std::shared_ptr<Authorizer> authorizer;
    if (with_authorizer) {
      auto a = Authorizer::from_file(acl_path().string());
      EXPECT_TRUE(a.ok()) << a.status().to_string();
      if (a.ok()) authorizer = *a;
    }
    audit_ = *AuditLog::open(audit_path().string());
    server_.options([authorizer, audit = audit_](ServerOptions& o) {
      o.authorizer = authorizer;
      o.audit_log = audit;
    });
    server_.service(DataService()).service(AdminService()).service(MiscService());
    const Status s = server_.start();
    EXPECT_TRUE(s.ok()) << s.to_string();
  }
  ~AuthzServer() {
    server_.stop();
    fs::remove_all(dir_);
  }

  fs::path acl_path() const { return dir_ / "acl.json"; }
  fs::path audit_path() const { return dir_ / "audit.jsonl"; }
  void WriteAcl(const nlohmann::json& acl) { WriteFile(acl_path(), acl.dump(2)); }
  void WriteAclText(const std::string& text) { WriteFile(acl_path(), text); }

  Result<std::unique_ptr<Client>> Connect(const std::string& user, std::string do_as = {},
                                          bool token = false,
                                          const std::string& proof = kSecret) {
    auto client = server_.client();
    if (token) {
      client.mechanism(std::make_shared<testing::OneMessageClient>("token", user + ":" + proof));
    } else {
      client.simple(user);
    }
    return client.options([do_as](ClientOptions& o) { o.do_as = do_as; }).connect();
  }

  std::vector<nlohmann::json> AuditLines() {
    audit_->flush();
    std::vector<nlohmann::json> out;
    std::istringstream in(ReadFile(audit_path()));
    for (std::string line; std::getline(in, line);) {
      auto j = nlohmann::json::parse(line, nullptr, false);
      EXPECT_FALSE(j.is_discarded()) << "not JSON: " << line;
      out.push_back(j);
    }
    return out;
  }
  std::string Log() {
    std::lock_guard lock(log_mu_);
    return log_;
  }

 private:
  fs::path dir_;
  std::shared_ptr<AuditLog> audit_;
  testing::TestServer server_;
  std::mutex log_mu_;
  std::string log_;
};

TEST(AuthzPolicyTest, ExampleAclFileLoads) {
  auto policy = AuthzPolicy::load(std::string(AUTHRPC_SOURCE_DIR) + "/examples/acl.json");
  ASSERT_TRUE(policy.ok()) << policy.status().to_string();
  Identity id;
  id.user = id.principal = "nn/nn1.example.com@EXAMPLE.COM";
  id.peer_address = "127.0.0.1:4000";
  std::vector<std::string> groups;
  ASSERT_TRUE((*policy)->establish(id, {}, groups).ok());
  EXPECT_EQ(id.user, "hdfs");
  EXPECT_TRUE((*policy)->check_call({id.user, &groups, id.peer_address}, "data", "write").ok());
  const Status bob = (*policy)->check_call({"bob", nullptr, id.peer_address}, "data", "write");
  EXPECT_EQ(bob.code, Errc::kPermissionDenied);
  EXPECT_FALSE(bob.message.empty());
}

TEST(AuthzPolicyTest, AclFileSyntaxErrorsNameLineAndColumn) {
  const fs::path dir = testing::TempDir("authz-test");
  const fs::path acl = dir / "acl.json";
  WriteFile(acl, "{\n  // comments are fine\n  \"default\": \"deny\"\n  \"admins\": {}\n}\n");
  auto policy = AuthzPolicy::load(acl.string());
  ASSERT_FALSE(policy.ok());
  EXPECT_EQ(policy.code(), Errc::kConfigError);
  EXPECT_NE(policy.status().message.find(acl.string() + ": syntax error at line 4, column 10"),
            std::string::npos)
      << policy.status().message;
  fs::remove_all(dir);
}

// A number too large for a double is an error nlohmann reports apart from
// syntax errors (out_of_range, not parse_error); it escaped the loader and
// ended the process (found by config_fuzz). It is a CONFIG_ERROR that says
// where, without quoting the digits.
TEST(AuthzPolicyTest, AclFileNumberTooLargeIsAConfigErrorNamingLineAndColumn) {
  const fs::path dir = testing::TempDir("authz-test");
  const fs::path acl = dir / "acl.json";
  const std::string digits = "2222322222222222222222222222e222222222";
  for (const std::string& text : {digits + std::string("\001\000\000", 3),
                                  "{\n  \"default\": \"deny\",\n  \"x\": [1, " + digits + "]\n}\n"}) {
    WriteFile(acl, text);
    auto policy = AuthzPolicy::load(acl.string());
    ASSERT_FALSE(policy.ok());
    EXPECT_EQ(policy.code(), Errc::kConfigError);
    const std::string where = text.starts_with(digits) ? "line 1, column 1" : "line 3, column 12";
    EXPECT_NE(policy.status().message.find(acl.string() + ": number out of range at " + where),
              std::string::npos)
        << policy.status().message;
    EXPECT_EQ(policy.status().message.find(digits), std::string::npos) << policy.status().message;
  }
  fs::remove_all(dir);
}

// Values of a type the reader did not expect are CONFIG_ERRORs naming the
// key, never an escaped nlohmann::json::type_error (config_fuzz found
// "groups.source" as an object ending the process).
TEST(AuthzPolicyTest, ValuesOfTheWrongTypeAreConfigErrorsNamingTheKey) {
  struct Case {
    const char* json;
    const char* message;
  };
  const Case cases[] = {
      {R"({"default": "allow", "groups": {"source": {"users": ["ali"]}}})", "'groups.source' must be"},
      {R"({"groups": {"source": 7}})", "'groups.source' must be"},
      {R"({"groups": {"source": "static"}, "default": 1})", "'default' must be"},
      {R"({"auth_to_local": {"rules": [], "mechanism": []}})", "'auth_to_local.mechanism' must be"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.json);
    auto policy = AuthzPolicy::from_json(nlohmann::json::parse(c.json));
    ASSERT_FALSE(policy.ok());
    EXPECT_EQ(policy.code(), Errc::kConfigError);
    EXPECT_NE(policy.status().message.find(c.message), std::string::npos) << policy.status().message;
  }
  auto fine = AuthzPolicy::from_json(nlohmann::json::parse(R"({"groups": {"source": "static"}})"));
  EXPECT_TRUE(fine.ok()) << fine.status().to_string();
}

// ---------------------------------------------------------------- matrix

const nlohmann::json kRealmPolicy = R"({
  "auth_to_local": {
    "default_realm": "EXAMPLE.COM",
    "rules": ["RULE:[2:$1@$0](nn@EXAMPLE\\.COM)s/.*/hdfs/",
              "RULE:[1:$1@$0](.*@PARTNER\\.ORG)s/@.*//L",
              "DEFAULT"]
  },
  "groups": {"source": "static", "static": {
    "alice": ["staff"], "bob": ["staff", "interns"], "hdfs": ["supergroup", "staff"],
    "carol": ["ops"]}},
  "default": "deny",
  "admins": {"users": ["carol"]},
  "services": {
    "sys": {"users": ["*"]},
    "data": {"users": ["dave"], "groups": ["staff"], "blocked_groups": ["interns"],
             "methods": {"write": {"users": ["alice"], "groups": ["supergroup"]}}},
    "admin": {"groups": ["ops"], "networks": ["10.0.0.0/8"]}
  }
})"_json;

const nlohmann::json kNetworkPolicy = R"({
  "default": "allow",
  "services": {
    "data": {"users": ["*"], "networks": ["127.0.0.0/8", "::1"], "blocked_users": ["mallory"]},
    "admin": {"users": ["*"], "networks": ["unix"]},
    "misc": {"users": ["*"], "blocked_networks": ["127.0.0.1/32"]}
  }
})"_json;

enum class Outcome { kOk, kDenied, kRefused, kNotFound };

struct AuthzCase {
  const char* name;
  const nlohmann::json* policy;
  const char* principal;
  const char* service;
  const char* method;
  Outcome expected;
};

class AuthzMatrixTest : public ::testing::TestWithParam<AuthzCase> {};

TEST_P(AuthzMatrixTest, Call) {
  const auto& c = GetParam();
  AuthzServer server(*c.policy);
  auto client = server.Connect(c.principal);
  if (c.expected == Outcome::kRefused) {
    ASSERT_FALSE(client.ok());
    EXPECT_EQ(client.code(), Errc::kPermissionDenied) << client.status().to_string();
    return;
  }
  ASSERT_TRUE(client.ok()) << client.status().to_string();
  auto r = (*client)->call(c.service, c.method, "");
  switch (c.expected) {
    case Outcome::kOk:
      EXPECT_TRUE(r.ok()) << r.status().to_string();
      break;
    case Outcome::kDenied:
      ASSERT_FALSE(r.ok());
      EXPECT_EQ(r.code(), Errc::kPermissionDenied) << r.status().to_string();
      break;
    case Outcome::kNotFound:
      EXPECT_EQ(r.code(), Errc::kNotFound) << r.status().to_string();
      break;
    case Outcome::kRefused:
      break;
  }
  // A refusal is for that call only: the connection stays usable.
  auto echo = (*client)->call("sys", "echo", "still here");
  ASSERT_TRUE(echo.ok()) << echo.status().to_string();
  EXPECT_EQ(*echo, "still here");
}

INSTANTIATE_TEST_SUITE_P(
    Matrix, AuthzMatrixTest,
    ::testing::Values(
        AuthzCase{"staff_reads", &kRealmPolicy, "alice@EXAMPLE.COM", "data", "read", Outcome::kOk},
        AuthzCase{"listed_user_writes", &kRealmPolicy, "alice@EXAMPLE.COM", "data", "write", Outcome::kOk},
        AuthzCase{"blocked_group_wins", &kRealmPolicy, "bob@EXAMPLE.COM", "data", "read", Outcome::kDenied},
        AuthzCase{"service_mapped_to_hdfs_writes", &kRealmPolicy, "nn/nn1.example.com@EXAMPLE.COM", "data", "write", Outcome::kOk},
        AuthzCase{"other_instance_by_default", &kRealmPolicy, "dn/dn1.example.com@EXAMPLE.COM", "data", "read", Outcome::kDenied},
        AuthzCase{"partner_realm_lowercased", &kRealmPolicy, "Dave@PARTNER.ORG", "data", "read", Outcome::kOk},
        AuthzCase{"method_acl_also_applies", &kRealmPolicy, "Dave@PARTNER.ORG", "data", "write", Outcome::kDenied},
        AuthzCase{"unmapped_realm_refused", &kRealmPolicy, "eve@OTHER.ORG", "sys", "echo", Outcome::kRefused},
        AuthzCase{"instance_in_other_realm_refused", &kRealmPolicy, "nn/x@OTHER.ORG", "sys", "echo", Outcome::kRefused},
        AuthzCase{"no_realm_name_unchanged", &kRealmPolicy, "alice", "data", "read", Outcome::kOk},
        AuthzCase{"network_restricted_service", &kRealmPolicy, "carol@EXAMPLE.COM", "admin", "shutdown", Outcome::kDenied},
        AuthzCase{"unlisted_service_default_deny", &kRealmPolicy, "alice@EXAMPLE.COM", "misc", "ping", Outcome::kDenied},
        AuthzCase{"unknown_method_not_found", &kRealmPolicy, "alice@EXAMPLE.COM", "data", "nope", Outcome::kNotFound},
        AuthzCase{"loopback_network_allowed", &kNetworkPolicy, "anyone", "data", "read", Outcome::kOk},
        AuthzCase{"blocked_user_in_allowed_network", &kNetworkPolicy, "mallory", "data", "read", Outcome::kDenied},
        AuthzCase{"unix_only_service_over_tcp", &kNetworkPolicy, "anyone", "admin", "shutdown", Outcome::kDenied},
        AuthzCase{"blocked_network", &kNetworkPolicy, "anyone", "misc", "ping", Outcome::kDenied},
        AuthzCase{"unlisted_service_default_allow", &kNetworkPolicy, "anyone", "sys", "whoami", Outcome::kOk}),
    [](const auto& param_info) { return std::string(param_info.param.name); });

// A `default: deny` policy that leaves a service out (or lists nobody for
// it) refuses every call to it: the server says so at start, naming the
// service and its methods, and says nothing of the services someone may call.
TEST(AuthzTest, ServicesNoCallerMayUseAreNamedInAWarningAtStart) {
  const nlohmann::json policy = {{"default", "deny"},
                                 {"services",
                                  {{"data", {{"users", {"alice"}}}},
                                   {"admin", {{"users", nlohmann::json::array()}}},
                                   {"misc", {{"methods", {{"ping", {{"users", {"*"}}}}}}}}}}};
  AuthzServer server(policy);
  const std::string log = server.Log();
  EXPECT_THAT(log, HasSubstr("no caller may use service 'sys' (sys.describe, sys.echo, sys.reload_authz, sys.stats, sys.whoami)"));
  EXPECT_THAT(log, HasSubstr("no caller may use service 'admin' (admin.shutdown)"));
  EXPECT_THAT(log, Not(HasSubstr("service 'data'")));
  EXPECT_THAT(log, Not(HasSubstr("service 'misc'")));

  AuthzServer open(nlohmann::json{{"services", {{"data", {{"users", {"alice"}}}}}}});
  EXPECT_THAT(open.Log(), Not(HasSubstr("no caller may use")));
}

TEST(AuthzTest, WhoamiShowsShortNameAndPrincipal) {
  AuthzServer server(kRealmPolicy);
  auto client = server.Connect("nn/nn1.example.com@EXAMPLE.COM");
  ASSERT_TRUE(client.ok()) << client.status().to_string();
  EXPECT_EQ((*client)->authenticated_user(), "hdfs");
  auto who = (*client)->call_json("sys", "whoami", nullptr);
  ASSERT_TRUE(who.ok()) << who.status().to_string();
  EXPECT_EQ((*who)["user"], "hdfs");
  EXPECT_EQ((*who)["principal"], "nn/nn1.example.com@EXAMPLE.COM");
  EXPECT_TRUE((*who)["real_user"].is_null());
}

TEST(AuthzTest, UnixSocketPeersMatchOnlyUnix) {
  AuthzServer server(kNetworkPolicy, true, "unix");
  auto client = server.Connect("anyone");
  ASSERT_TRUE(client.ok()) << client.status().to_string();
  EXPECT_TRUE((*client)->call("admin", "shutdown", "").ok());
  EXPECT_EQ((*client)->call("data", "read", "").code(), Errc::kPermissionDenied);
}

// ---------------------------------------------------------------- proxy users

const nlohmann::json kProxyPolicy = R"({
  "groups": {"source": "static", "static": {"alice": ["staff"], "root": ["wheel"]}},
  "proxy_users": {
    "svc": {"users": ["bob"], "groups": ["staff"], "hosts": ["127.0.0.1"]},
    "remote": {"users": ["*"], "hosts": ["10.0.0.0/8"]}
  },
  "default": "allow",
  "services": {"data": {"users": ["alice", "bob"]}}
})"_json;

struct ProxyCase {
  const char* name;
  const char* user;
  const char* do_as;
  bool token;
  bool allowed;
  const char* reason;  // substring of the refusal
};

class ProxyUserTest : public ::testing::TestWithParam<ProxyCase> {};

TEST_P(ProxyUserTest, DoAs) {
  const auto& c = GetParam();
  AuthzServer server(kProxyPolicy);
  auto client = server.Connect(c.user, c.do_as, c.token);
  if (!c.allowed) {
    ASSERT_FALSE(client.ok());
    EXPECT_EQ(client.code(), Errc::kPermissionDenied);
    EXPECT_THAT(client.status().message, HasSubstr(c.reason));
    bool audited = false;
    for (const auto& line : server.AuditLines()) {
      if (line["event"] == "proxy" && line["outcome"] == "denied" && line["user"] == c.do_as &&
          line["real_user"] == c.user) {
        audited = true;
      }
    }
    EXPECT_TRUE(audited) << ReadFile(server.audit_path());
    return;
  }
  ASSERT_TRUE(client.ok()) << client.status().to_string();
  auto who = (*client)->call_json("sys", "whoami", nullptr);
  ASSERT_TRUE(who.ok());
  EXPECT_EQ((*who)["user"], c.do_as);
  EXPECT_EQ((*who)["real_user"], c.user);
  // ACLs apply to the effective user.
  EXPECT_TRUE((*client)->call("data", "read", "").ok());
}

INSTANTIATE_TEST_SUITE_P(
    Proxy, ProxyUserTest,
    ::testing::Values(
        ProxyCase{"listed_user", "svc", "bob", false, true, ""},
        ProxyCase{"member_of_listed_group", "svc", "alice", false, true, ""},
        ProxyCase{"wrong_group", "svc", "root", false, false, "not allowed to impersonate root"},
        ProxyCase{"wrong_host", "remote", "alice", false, false, "may not impersonate from"},
        ProxyCase{"not_a_proxy", "alice", "bob", false, false, "not allowed to impersonate anyone"},
        ProxyCase{"over_token", "svc", "alice", true, false, "token-authenticated"}),
    [](const auto& param_info) { return std::string(param_info.param.name); });

TEST(ProxyUserTest, SelfIsNotImpersonation) {
  AuthzServer server(kProxyPolicy);
  auto client = server.Connect("alice", "alice");
  ASSERT_TRUE(client.ok()) << client.status().to_string();
  auto who = (*client)->call_json("sys", "whoami", nullptr);
  ASSERT_TRUE(who.ok());
  EXPECT_TRUE((*who)["real_user"].is_null());
}

TEST(ProxyUserTest, RefusedWithoutAuthorization) {
  AuthzServer server(kProxyPolicy, /*with_authorizer=*/false);
  auto client = server.Connect("svc", "bob");
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.code(), Errc::kPermissionDenied);
}

// ---------------------------------------------------------------- reload

TEST(AuthzReloadTest, AdminRpcGoodAndBrokenFile) {
  nlohmann::json policy = R"({"admins": {"users": ["carol"]},
    "services": {"data": {"users": ["alice"]}}})"_json;
  AuthzServer server(policy);
  auto alice = server.Connect("alice");
  auto carol = server.Connect("carol");
  ASSERT_TRUE(alice.ok() && carol.ok());
  EXPECT_TRUE((*alice)->call("data", "read", "").ok());

  policy["services"]["data"]["users"] = {"bob"};
  server.WriteAcl(policy);
  // Only admins may reload; until then the old policy is in force.
  auto denied = (*alice)->call("sys", "reload_authz", "");
  EXPECT_EQ(denied.code(), Errc::kPermissionDenied);
  EXPECT_TRUE((*alice)->call("data", "read", "").ok());
  auto reloaded = (*carol)->call("sys", "reload_authz", "");
  ASSERT_TRUE(reloaded.ok()) << reloaded.status().to_string();
  EXPECT_EQ(*reloaded, R"({"generation":2})");
  // Existing connections see the new policy on their next call.
  EXPECT_EQ((*alice)->call("data", "read", "").code(), Errc::kPermissionDenied);

  for (const std::string& broken : {std::string("{\"services\": "), std::string(R"({"servces": {}})"),
                                   std::string(R"({"services": {"data": {"networks": ["10.0.0.0/33"]}}})"),
                                   std::string(R"({"auth_to_local": {"rules": ["RULE:[1:$1]("]}})")}) {
    server.WriteAclText(broken);
    auto refused = (*carol)->call("sys", "reload_authz", "");
    EXPECT_EQ(refused.code(), Errc::kFailedPrecondition) << broken;
    EXPECT_THAT(refused.status().message, HasSubstr("old policy stays")) << broken;
    // The old (second) policy is still in force.
    EXPECT_EQ((*alice)->call("data", "read", "").code(), Errc::kPermissionDenied);
  }
  auto bob = server.Connect("bob");
  ASSERT_TRUE(bob.ok());
  EXPECT_TRUE((*bob)->call("data", "read", "").ok());
}

// Calls racing a stream of reloads always see one whole policy: every call
// is answered either OK (policy A) or PERMISSION_DENIED (policy B).
TEST(AuthzReloadTest, ConcurrentReloadsAreAtomic) {
  const auto a = R"({"admins": {"users": ["carol"]}, "services": {"data": {"users": ["alice"]}}})"_json;
  const auto b = R"({"admins": {"users": ["carol"]}, "services": {"data": {"users": ["bob"]}}})"_json;
  AuthzServer server(a);
  auto alice = server.Connect("alice");
  auto carol = server.Connect("carol");
  ASSERT_TRUE(alice.ok() && carol.ok());
  std::atomic<bool> done{false};
  std::thread reloader([&] {
    for (int i = 0; i < 50; ++i) {
      server.WriteAcl(i % 2 ? a : b);
      EXPECT_TRUE((*carol)->call("sys", "reload_authz", "").ok());
    }
    done = true;
  });
  int ok = 0, denied = 0;
  while (!done) {
    auto r = (*alice)->call("data", "read", "");
    if (r.ok()) ++ok;
    else if (r.code() == Errc::kPermissionDenied) ++denied;
    else ADD_FAILURE() << r.status().to_string();
  }
  reloader.join();
  EXPECT_GT(ok + denied, 0);
}

// SIGHUP to a real authrpc-server child: a good file is taken, a broken one
// refused while the old policy stays in force.
TEST(AuthzReloadTest, SighupToServerProcess) {
  const fs::path dir = testing::TempDir("authz-test");
  const fs::path acl = dir / "acl.json", out = dir / "out.txt", err = dir / "err.txt";
  WriteFile(acl, R"({"services": {"sys": {"users": ["alice"]}}})");
  WriteFile(dir / "server.json",
            nlohmann::json{{"listen", {"tcp://127.0.0.1:0"}},
                           {"authorization", {{"acl_file", acl.string()}}},
                           {"audit_log", {{"path", (dir / "audit.jsonl").string()}}}}
                .dump());
  const std::string config = (dir / "server.json").string();
  std::vector<std::string> args = {AUTHRPC_SERVER_BIN, "--config", config, "--print-endpoints"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  pid_t pid = -1;
  ASSERT_EQ(::posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ), 0);
  posix_spawn_file_actions_destroy(&actions);
  struct Reaper {
    pid_t pid;
    ~Reaper() {
      if (pid <= 0) return;
      ::kill(pid, SIGKILL);
      int status;
      ::waitpid(pid, &status, 0);
    }
  } reaper{pid};

  std::string endpoint;
  for (int i = 0; i < 500 && endpoint.empty(); ++i) {
    const std::string text = ReadFile(out);
    if (text.find('\n') != std::string::npos) endpoint = text.substr(0, text.find('\n'));
    else std::this_thread::sleep_for(10ms);
  }
  ASSERT_FALSE(endpoint.empty()) << ReadFile(err);
  auto call_as = [&](const std::string& user) {
    ClientOptions o;
    o.endpoint = *Endpoint::parse(endpoint);
    o.mechanisms.push_back(std::make_shared<SimpleClientMechanism>(user));
    auto c = Client::connect(std::move(o));
    if (!c.ok()) return c.status();
    return (*c)->call("sys", "echo", "x").status();
  };
  auto wait_for = [&](const std::string& user, Errc expected) {
    for (int i = 0; i < 300; ++i) {
      const Status s = call_as(user);
      if (expected == Errc::kOk ? s.ok() : s.code == make_error_code(expected)) return true;
      std::this_thread::sleep_for(10ms);
    }
    return false;
  };
  EXPECT_TRUE(call_as("alice").ok());
  EXPECT_EQ(call_as("bob").code, make_error_code(Errc::kPermissionDenied));

  WriteFile(acl, R"({"services": {"sys": {"users": ["bob"]}}})");
  ASSERT_EQ(::kill(pid, SIGHUP), 0);
  EXPECT_TRUE(wait_for("bob", Errc::kOk)) << ReadFile(err);
  EXPECT_EQ(call_as("alice").code, make_error_code(Errc::kPermissionDenied));

  WriteFile(acl, R"({"services": {"sys": {"users": ["alice"]}}, "typo": 1})");
  ASSERT_EQ(::kill(pid, SIGHUP), 0);
  for (int i = 0; i < 300 && ReadFile(err).find("reload refused") == std::string::npos; ++i) {
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_THAT(ReadFile(err), HasSubstr("reload refused, old policy stays"));
  EXPECT_THAT(ReadFile(err), HasSubstr("typo"));
  EXPECT_TRUE(call_as("bob").ok());
  EXPECT_EQ(call_as("alice").code, make_error_code(Errc::kPermissionDenied));
  // The server is still serving and stops cleanly.
  ASSERT_EQ(::kill(pid, SIGTERM), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  reaper.pid = -1;
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << ReadFile(err);
  fs::remove_all(dir);
}

// ---------------------------------------------------------------- audit log

TEST(AuditLogTest, LinesHaveContentAndNoSecrets) {
  AuthzServer server(kRealmPolicy);
  ASSERT_TRUE(server.Connect("alice@EXAMPLE.COM", {}, /*token=*/true).ok());
  {
    auto alice = server.Connect("alice@EXAMPLE.COM");
    ASSERT_TRUE(alice.ok());
    EXPECT_EQ((*alice)->call("misc", "ping", "").code(), Errc::kPermissionDenied);
  }
  EXPECT_FALSE(server.Connect("eve@OTHER.ORG").ok());
  const std::string wrong_proof = std::string(kSecret) + "-but-wrong";
  auto bad = server.Connect("alice", {}, /*token=*/true, wrong_proof);
  EXPECT_EQ(bad.code(), Errc::kAuthenticationFailed);
  const auto lines = server.AuditLines();
  ASSERT_GE(lines.size(), 4u) << ReadFile(server.audit_path());
  bool token_success = false, denied = false, unmapped = false;
  for (const auto& l : lines) {
    for (const char* key : {"time", "event", "outcome", "peer", "mechanism", "principal", "user",
                            "real_user", "service", "method", "reason"}) {
      EXPECT_TRUE(l.contains(key)) << key << " missing in " << l.dump();
    }
    EXPECT_THAT(l["peer"].get<std::string>(), HasSubstr("127.0.0.1:"));
    if (l["event"] == "authentication" && l["outcome"] == "success" && l["mechanism"] == "token") {
      token_success |= l["principal"] == "alice@EXAMPLE.COM" && l["user"] == "alice";
    }
    if (l["event"] == "authorization" && l["outcome"] == "denied") {
      denied |= l["service"] == "misc" && l["method"] == "ping" && l["user"] == "alice" &&
               l["mechanism"] == "simple" &&
               l["reason"].get<std::string>().find("default is deny") != std::string::npos;
    }
    if (l["event"] == "authentication" && l["outcome"] == "failure") {
      unmapped |= l["principal"] == "eve@OTHER.ORG" &&
                 l["reason"].get<std::string>().find("no auth_to_local rule") != std::string::npos;
    }
  }
  bool bad_proof = false;
  for (const auto& l : lines) {
    if (l["event"] == "authentication" && l["outcome"] == "failure" && l["mechanism"] == "token") {
      bad_proof |= l["reason"].get<std::string>().find("bad proof") != std::string::npos;
    }
  }
  EXPECT_TRUE(bad_proof) << ReadFile(server.audit_path());
  EXPECT_TRUE(token_success);
  EXPECT_TRUE(denied);
  EXPECT_TRUE(unmapped);
  EXPECT_THAT(ReadFile(server.audit_path()), Not(HasSubstr(kSecret)));
  EXPECT_THAT(server.Log(), Not(HasSubstr(kSecret)));
}

// Peers choose mechanism names, user names and reasons' contents: the line
// is printable ASCII only (so one line, and nothing a terminal acts on),
// and a JSON reader gets each string back as sent.
TEST(AuditLogTest, PeerStringsAreEscapedInTheLine) {
  const std::string hostile = "m\n[INFO] forged\x1b[2J\x7f \xc2\x9b \xe2\x80\xa8 \xe2\x80\xae m\xc3\xbcller";
  AuditEvent e;
  e.event = "authentication";
  e.outcome = "failure";
  e.peer = "127.0.0.1:1";
  e.mechanism = hostile;
  e.principal = hostile;
  const std::string reason = "mechanism '" + hostile + "' not enabled";
  e.reason = reason;
  const std::string line = AuditLog::format(e);
  for (char c : line) {
    const auto u = static_cast<unsigned char>(c);
    ASSERT_TRUE(u >= 0x20 && u < 0x7f) << "byte 0x" << std::hex << int(u) << " in " << line;
  }
  const auto j = nlohmann::json::parse(line);
  EXPECT_EQ(j["mechanism"], hostile);
  EXPECT_EQ(j["principal"], hostile);
  // Invalid UTF-8 is replaced, still on one printable line.
  e.mechanism = "bad \xff\xfe";
  const std::string replaced = AuditLog::format(e);
  EXPECT_EQ(replaced.find_first_of("\n\xff"), std::string::npos) << replaced;
}

// An existing audit log open to others is made 0600 (with a
// warning) at open and at reopen; someone else's is refused.
TEST(AuditLogTest, ExistingLooseFileIsTightenedOrRefused) {
  const std::string dir = testing::TempDir("audit-mode");
  ASSERT_FALSE(dir.empty());
  const std::string path = dir + "/audit.jsonl";
  std::vector<std::string> warnings;
  LogSink sink = [&](LogLevel level, std::string_view m) {
    if (level == LogLevel::kWarning) warnings.emplace_back(m);
  };
  auto mode_of = [&] {
    struct stat st {};
    EXPECT_EQ(::stat(path.c_str(), &st), 0);
    return st.st_mode & 0777;
  };
  { std::ofstream(path) << "{}\n"; }
  ASSERT_EQ(::chmod(path.c_str(), 0644), 0);
  auto log = AuditLog::open(path, 16, sink);
  ASSERT_TRUE(log.ok()) << testing::Describe(log);
  EXPECT_EQ(mode_of(), 0600u);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_THAT(warnings[0], HasSubstr("had mode 0644; made it 0600"));
  // Rotation left a loose file behind: reopen() tightens it too.
  fs::remove(path);
  { std::ofstream(path) << ""; }
  ASSERT_EQ(::chmod(path.c_str(), 0666), 0);
  ASSERT_TRUE((*log)->reopen().ok());
  EXPECT_EQ(mode_of(), 0600u);
  EXPECT_EQ(warnings.size(), 2u);
  log->reset();
  if (::geteuid() == 0) {
    ASSERT_EQ(::chmod(path.c_str(), 0644), 0);
    ASSERT_EQ(::chown(path.c_str(), 65534, 65534), 0);
    auto refused = AuditLog::open(path, 16, sink);
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(refused.code(), make_error_code(Errc::kConfigError));
    EXPECT_THAT(refused.status().message, HasSubstr("has mode 0644 and cannot be made 0600"));
    EXPECT_THAT(refused.status().message, HasSubstr("belongs to uid 65534"));
    EXPECT_EQ(mode_of(), 0644u) << "left as found";
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace authrpc
