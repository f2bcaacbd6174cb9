// Authorization end to end with real Kerberos (docs/AUTHZ.md): two real MIT
// KDCs (tests/testing/mini_kdc.h) — AUTHRPC.TEST and PARTNER.TEST, whose clients
// reach the same server key name (rpc/localhost) in each realm — a real
// Server with the `kerberos` and `token` mechanisms, the token service, an
// ACL file and an audit log, and real Clients on loopback:
//  - principals with an instance (alice/admin), of another realm
//    (carol@PARTNER.TEST) and a service principal (oozie/localhost) mapped
//    through auth_to_local rules to short names; an unmapped one refused;
//  - service and method ACLs allowing and denying per short name and group;
//  - a proxy user (the service principal oozie/localhost acting via DO_AS)
//    allowed, and refused for a user it may not impersonate, from a host it
//    may not use, and over a token-authenticated connection;
//  - a delegation token fetched through a proxy connection records the real
//    user, `authrpc token print` shows it, and a session with that token
//    carries it;
//  - the audit log lines of all of the above, without a secret.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "authrpc/auth/authz/authorizer.h"
#include "authrpc/auth/mechanisms/token/token_mechanism.h"
#include "authrpc/client/client.h"
#include "authrpc/components/kerberos/kerberos.h"
#include "authrpc/security/credentials_file.h"
#include "authrpc/server/audit_log.h"
#include "authrpc/server/server.h"
#include "authrpc/server/token_service.h"
#include "tests/testing/mini_kdc.h"
#include "tests/testing/test_server.h"
#include "tests/testing/test_support.h"
#include "tests/testing/test_programs.h"

namespace authrpc {
namespace {

using namespace std::chrono_literals;
using authrpc::testing::MiniKdc;
using authrpc::testing::MiniKdcOptions;
using testing::Describe;
using testing::TempDir;
using testing::AdminService;
using testing::DataService;
namespace fs = std::filesystem;

constexpr const char* kRealm = "AUTHRPC.TEST";
constexpr const char* kPartner = "PARTNER.TEST";

// The ACL file. Short names: alice, bob, alice-admin (alice/admin), oozie
// (oozie/localhost), carol-partner (carol@PARTNER.TEST), yarn; no rule for
// dave@PARTNER.TEST.
const nlohmann::json kPolicy = R"({
  "auth_to_local": {
    "default_realm": "AUTHRPC.TEST",
    "rules": ["RULE:[2:$1-$2@$0](.*-admin@AUTHRPC\\.TEST)s/@.*//",
              "RULE:[2:$1@$0](oozie@AUTHRPC\\.TEST)s/@.*//",
              "RULE:[1:$1@$0](carol@PARTNER\\.TEST)s/@.*/-partner/",
              "DEFAULT"]
  },
  "groups": {"source": "static", "static": {
    "alice": ["staff"], "bob": ["staff", "interns"], "alice-admin": ["ops"],
    "oozie": ["services"], "carol-partner": ["partners"], "yarn": ["services"]}},
  "admins": {"users": ["alice-admin"]},
  "default": "deny",
  "services": {
    "sys": {"users": ["*"]},
    "token": {"users": ["*"]},
    "data": {"groups": ["staff", "partners"], "blocked_groups": ["interns"],
             "methods": {"write": {"users": ["alice"]}}},
    "admin": {"groups": ["ops"]}
  },
  "proxy_users": {
    "oozie": {"users": ["alice"], "groups": ["partners"], "hosts": ["127.0.0.1"]},
    "yarn": {"users": ["alice"], "hosts": ["10.0.0.0/8"]}
  }
})"_json;

class AuthzItest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    kdc_ = std::make_unique<MiniKdc>();
    MiniKdcOptions partner_options;
    partner_options.realm = kPartner;
    partner_ = std::make_unique<MiniKdc>(partner_options);
    setup_ = kdc_->start();
    if (setup_.ok()) setup_ = partner_->start();
    if (setup_.ok()) {
      setup_ = testing::AddClientsAndService(
          *kdc_, {"alice", "alice/admin", "bob", "yarn", "oozie/localhost"});
    }
    // The partner realm: carol, and its own key for rpc/localhost, added to
    // the server's keytab (the server accepts either realm's ticket).
    for (const char* p : {"carol", "dave"}) {
      if (setup_.ok()) setup_ = partner_->add_principal(p);
      if (setup_.ok()) setup_ = partner_->create_keytab(p, kdc_->client_keytab());
    }
    if (setup_.ok()) setup_ = partner_->add_principal("rpc/localhost");
    if (setup_.ok()) setup_ = partner_->create_keytab("rpc/localhost", kdc_->service_keytab());
    if (!setup_.ok()) return;
    // One krb5.conf naming both realms' KDCs, for this process.
    krb5_conf_ = kdc_->dir() + "/krb5-two-realms.conf";
    std::ifstream in(kdc_->krb5_conf());
    std::stringstream text;
    text << in.rdbuf();
    std::string conf = text.str();
    const std::string realms = "[realms]\n";
    const auto at = conf.find(realms);
    if (at == std::string::npos) {
      setup_ = Status(Errc::kInternal, "no [realms] in " + kdc_->krb5_conf());
      return;
    }
    conf.insert(at + realms.size(), std::string("  ") + kPartner + " = {\n    kdc = 127.0.0.1:" +
                                        std::to_string(partner_->port()) + "\n  }\n");
    std::ofstream(krb5_conf_) << conf;
  }
  static void TearDownTestSuite() {
    kdc_.reset();
    partner_.reset();
  }

  void SetUp() override {
    ASSERT_TRUE(setup_.ok()) << setup_.to_string();
    kdc_->set_env_for_process();
    ::setenv("KRB5_CONFIG", krb5_conf_.c_str(), 1);
    dir_ = TempDir("authz-itest");
    ASSERT_FALSE(dir_.empty());
    std::ofstream(dir_ / "acl.json") << kPolicy.dump(2);
    auto authorizer = Authorizer::from_file((dir_ / "acl.json").string());
    ASSERT_TRUE(authorizer.ok()) << Describe(authorizer);
    auto audit = AuditLog::open((dir_ / "audit.jsonl").string());
    ASSERT_TRUE(audit.ok()) << Describe(audit);
    audit_ = *audit;

    TokenServiceOptions t_options;
    t_options.store = TokenServiceOptions::Store::kMemory;
    t_options.log = null_log_sink();
    // The token sessions here run over plaintext tcp: the challenge exchange.
    t_options.mechanism.allow_plaintext = true;
    auto tokens = TokenService::open(std::move(t_options));
    ASSERT_TRUE(tokens.ok()) << Describe(tokens);
    tokens_ = std::move(*tokens);
    // Any principal in the keytab: rpc/localhost of either realm.
    KerberosServerOptions k;
    k.keytab = kdc_->service_keytab();
    k.principal = "*";
    auto kerberos = KerberosServerMechanism::create(k);
    ASSERT_TRUE(kerberos.ok()) << Describe(kerberos);
    server_ = std::make_unique<testing::TestServer>();
    server_->mechanisms({*kerberos, tokens_->mechanism()});
    server_->service(tokens_->service()).service(DataService()).service(AdminService());
    server_->options([authorizer = *authorizer, audit = audit_](ServerOptions& o) {
      o.authorizer = authorizer;
      o.audit_log = audit;
    });
    ASSERT_OK(server_->start());
    endpoint_ = server_->endpoint();
  }

  void TearDown() override {
    server_.reset();
    fs::remove_all(dir_);
  }

  // `principal` logs in from the client keytab (both realms' keys are there).
  Result<std::unique_ptr<Client>> ConnectAs(const std::string& principal, std::string do_as = {}) {
    KerberosClientOptions k;
    k.principal = principal;
    k.keytab = kdc_->client_keytab();
    const std::string realm = principal.substr(principal.find('@') + 1);
    k.service_principal = "rpc/localhost@" + realm;
    auto m = KerberosClientMechanism::create(k);
    if (!m.ok()) return m.status();
    return testing::TestClient(endpoint_)
        .mechanism(*m)
        .options([do_as](ClientOptions& o) { o.do_as = do_as; })
        .connect();
  }

  Result<std::unique_ptr<Client>> ConnectWithToken(const security::Token& token, std::string do_as = {}) {
    TokenClientOptions t;
    t.token = token;
    return testing::TestClient(endpoint_)
        .mechanism(std::make_shared<TokenClientMechanism>(t))
        .options([do_as](ClientOptions& o) { o.do_as = do_as; })
        .connect();
  }

  std::vector<nlohmann::json> AuditLines() {
    audit_->flush();
    std::vector<nlohmann::json> out;
    std::ifstream in(dir_ / "audit.jsonl");
    for (std::string line; std::getline(in, line);) {
      auto j = nlohmann::json::parse(line, nullptr, false);
      EXPECT_FALSE(j.is_discarded()) << "not JSON: " << line;
      out.push_back(j);
    }
    return out;
  }

  // The audit lines with these field values.
  std::vector<nlohmann::json> Audit(const nlohmann::json& match) {
    std::vector<nlohmann::json> out;
    for (const auto& line : AuditLines()) {
      bool all = true;
      for (const auto& [key, value] : match.items()) all = all && line.value(key, nlohmann::json()) == value;
      if (all) out.push_back(line);
    }
    return out;
  }

  static std::string P(const std::string& name) { return name + "@" + kRealm; }

  static inline std::unique_ptr<MiniKdc> kdc_;
  static inline std::unique_ptr<MiniKdc> partner_;
  static inline Status setup_;
  static inline std::string krb5_conf_;
  fs::path dir_;
  std::shared_ptr<AuditLog> audit_;
  std::unique_ptr<TokenService> tokens_;
  std::unique_ptr<testing::TestServer> server_;
  Endpoint endpoint_;
};

TEST_F(AuthzItest, KerberosPrincipalsMapToShortNamesAndAclsDecide) {
  enum class Want { kOk, kDenied };
  struct Case {
    std::string principal;
    std::string short_name;
    const char* service;
    const char* method;
    Want want;
  };
  const std::vector<Case> cases = {
      {P("alice"), "alice", "data", "read", Want::kOk},
      {P("alice"), "alice", "data", "write", Want::kOk},
      {P("alice"), "alice", "admin", "shutdown", Want::kDenied},
      {P("bob"), "bob", "data", "read", Want::kDenied},  // blocked group interns wins over staff
      {P("alice/admin"), "alice-admin", "admin", "shutdown", Want::kOk},
      {P("alice/admin"), "alice-admin", "data", "read", Want::kDenied},  // an instance is not alice
      {std::string("carol@") + kPartner, "carol-partner", "data", "read", Want::kOk},
      {std::string("carol@") + kPartner, "carol-partner", "data", "write", Want::kDenied},
      {P("oozie/localhost"), "oozie", "data", "read", Want::kDenied},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.principal + " " + c.service + "." + c.method);
    auto client = ConnectAs(c.principal);
    ASSERT_TRUE(client.ok()) << Describe(client);
    EXPECT_EQ((*client)->authenticated_user(), c.short_name);
    auto who = (*client)->call_json("sys", "whoami", nlohmann::json::object());
    ASSERT_TRUE(who.ok()) << Describe(who);
    EXPECT_EQ((*who)["user"], c.short_name);
    EXPECT_EQ((*who)["principal"], c.principal);
    auto r = (*client)->call(c.service, c.method, "");
    if (c.want == Want::kOk) {
      EXPECT_TRUE(r.ok()) << Describe(r);
    } else {
      EXPECT_EQ(r.code(), make_error_code(Errc::kPermissionDenied)) << Describe(r);
      // The refusal is for that call only.
      EXPECT_TRUE((*client)->call("sys", "echo", "x").ok());
    }
  }
  // No rule maps another principal of the partner realm (DEFAULT maps only
  // the default realm's).
  const std::string dave = std::string("dave@") + kPartner;
  auto unmapped = ConnectAs(dave);
  ASSERT_FALSE(unmapped.ok());
  EXPECT_EQ(unmapped.code(), make_error_code(Errc::kPermissionDenied)) << Describe(unmapped);

  // Audit: one success per mapped session with principal and short name, a
  // refusal per denied call, the unmapped principal's failure.
  auto ok = Audit({{"event", "authentication"}, {"outcome", "success"}, {"principal", P("alice/admin")}});
  ASSERT_FALSE(ok.empty());
  EXPECT_EQ(ok.front()["user"], "alice-admin");
  EXPECT_EQ(ok.front()["mechanism"], "kerberos");
  EXPECT_TRUE(ok.front()["peer"].get<std::string>().starts_with("127.0.0.1:"));
  auto denied = Audit({{"event", "authorization"}, {"outcome", "denied"}, {"user", "bob"}});
  ASSERT_EQ(denied.size(), 1u);
  EXPECT_EQ(denied.front()["service"], "data");
  EXPECT_EQ(denied.front()["method"], "read");
  EXPECT_EQ(denied.front()["principal"], P("bob"));
  EXPECT_NE(denied.front()["reason"].get<std::string>().find("interns"), std::string::npos)
      << denied.front().dump();
  auto partner = Audit({{"event", "authorization"}, {"user", "carol-partner"}, {"method", "write"}});
  EXPECT_EQ(partner.size(), 1u);
  auto refused = Audit({{"event", "authentication"}, {"outcome", "failure"}, {"principal", dave}});
  ASSERT_EQ(refused.size(), 1u);
  EXPECT_EQ(refused.front()["mechanism"], "kerberos");
}

TEST_F(AuthzItest, ProxyUserAllowedAndRefused) {
  // oozie/localhost acts as alice: allowed; calls run as alice.
  auto as_alice = ConnectAs(P("oozie/localhost"), "alice");
  ASSERT_TRUE(as_alice.ok()) << Describe(as_alice);
  EXPECT_EQ((*as_alice)->authenticated_user(), "alice");
  auto who = (*as_alice)->call_json("sys", "whoami", nlohmann::json::object());
  ASSERT_TRUE(who.ok()) << Describe(who);
  EXPECT_EQ((*who)["user"], "alice");
  EXPECT_EQ((*who)["real_user"], P("oozie/localhost"));
  EXPECT_TRUE((*as_alice)->call("data", "write", "").ok());  // alice's ACL, not oozie's
  // ... and a member of an allowed group.
  auto as_carol = ConnectAs(P("oozie/localhost"), "carol-partner");
  ASSERT_TRUE(as_carol.ok()) << Describe(as_carol);
  EXPECT_TRUE((*as_carol)->call("data", "read", "").ok());
  EXPECT_EQ((*as_carol)->call("data", "write", "").code(), make_error_code(Errc::kPermissionDenied));

  struct Refusal {
    const char* name;
    std::string principal;
    const char* do_as;
    const char* reason;
  };
  const std::vector<Refusal> refusals = {
      {"wrong group", P("oozie/localhost"), "bob", "not allowed to impersonate bob"},
      {"wrong host", P("yarn"), "alice", "may not impersonate from 127.0.0.1"},
      {"not a proxy", P("alice"), "bob", "not allowed to impersonate anyone"},
  };
  for (const auto& r : refusals) {
    SCOPED_TRACE(r.name);
    auto c = ConnectAs(r.principal, r.do_as);
    ASSERT_FALSE(c.ok());
    EXPECT_EQ(c.code(), make_error_code(Errc::kPermissionDenied)) << Describe(c);
    EXPECT_NE(c.status().message.find(r.reason), std::string::npos) << Describe(c);
    auto line = Audit({{"event", "proxy"}, {"outcome", "denied"}, {"user", r.do_as},
                       {"real_user", r.principal}});
    ASSERT_EQ(line.size(), 1u) << r.name;
    EXPECT_EQ(line.front()["mechanism"], "kerberos");
    EXPECT_NE(line.front()["reason"].get<std::string>().find(r.reason), std::string::npos);
  }

  // Over a token: alice's own token may not be used to act as anyone.
  auto fetch = ConnectAs(P("alice"));
  ASSERT_TRUE(fetch.ok()) << Describe(fetch);
  auto got = (*fetch)->call_json("token", "get", {{"renewer", P("yarn")}, {"service", endpoint_.to_string()}});
  ASSERT_TRUE(got.ok()) << Describe(got);
  const std::string token_text = (*got)["token"].get<std::string>();
  auto token = security::Token::from_string(token_text);
  ASSERT_TRUE(token.ok());
  auto over_token = ConnectWithToken(*token, "carol-partner");
  ASSERT_FALSE(over_token.ok());
  EXPECT_EQ(over_token.code(), make_error_code(Errc::kPermissionDenied)) << Describe(over_token);
  EXPECT_NE(over_token.status().message.find("token-authenticated"), std::string::npos);
  auto token_line = Audit({{"event", "proxy"}, {"outcome", "denied"}, {"mechanism", "token"}});
  ASSERT_EQ(token_line.size(), 1u);
  EXPECT_EQ(token_line.front()["user"], "carol-partner");
  // Never a secret in the audit log.
  std::ifstream in(dir_ / "audit.jsonl");
  std::stringstream all;
  all << in.rdbuf();
  EXPECT_EQ(all.str().find(token_text), std::string::npos);
  EXPECT_EQ(all.str().find(token_text.substr(token_text.size() - 24)), std::string::npos);
}

std::string RunCli(const std::string& args, int* status) {
  std::string out;
  FILE* p = ::popen((std::string(AUTHRPC_CLI_BIN) + " " + args + " 2>&1").c_str(), "r");
  if (p == nullptr) return out;
  char buf[4096];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  const int st = ::pclose(p);
  *status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return out;
}

TEST_F(AuthzItest, TokenFetchedThroughAProxyRecordsTheRealUser) {
  auto proxy = ConnectAs(P("oozie/localhost"), "alice");
  ASSERT_TRUE(proxy.ok()) << Describe(proxy);
  auto got = (*proxy)->call_json("token", "get", {{"renewer", P("yarn")}, {"service", endpoint_.to_string()}});
  ASSERT_TRUE(got.ok()) << Describe(got);
  EXPECT_EQ((*got)["owner"], "alice");
  EXPECT_EQ((*got)["real_user"], P("oozie/localhost"));
  auto token = security::Token::from_string((*got)["token"].get<std::string>());
  ASSERT_TRUE(token.ok());
  auto id = token->decode_identifier();
  ASSERT_TRUE(id.ok());
  EXPECT_EQ(id->owner, "alice");
  EXPECT_EQ(id->real_user, P("oozie/localhost"));

  // authrpc token print shows it.
  security::CredentialsFile file;
  file.add(*token);
  const std::string path = (dir_ / "proxy.tokens").string();
  ASSERT_TRUE(file.write(path).ok());
  int status = -1;
  const std::string printed = RunCli("token print --token-file " + path, &status);
  ASSERT_EQ(status, 0) << printed;
  EXPECT_NE(printed.find("real user:       " + P("oozie/localhost")), std::string::npos) << printed;
  EXPECT_NE(printed.find("owner:"), std::string::npos) << printed;

  // A session with the token is alice's, with oozie as the real user, and
  // alice's ACLs apply.
  auto with_token = ConnectWithToken(*token);
  ASSERT_TRUE(with_token.ok()) << Describe(with_token);
  auto who = (*with_token)->call_json("sys", "whoami", nlohmann::json::object());
  ASSERT_TRUE(who.ok()) << Describe(who);
  EXPECT_EQ((*who)["user"], "alice");
  EXPECT_EQ((*who)["mechanism"], "token");
  EXPECT_EQ((*who)["real_user"], P("oozie/localhost"));
  EXPECT_TRUE((*with_token)->call("data", "write", "").ok());
  auto line = Audit({{"event", "authentication"}, {"outcome", "success"}, {"mechanism", "token"}});
  ASSERT_EQ(line.size(), 1u);
  EXPECT_EQ(line.front()["user"], "alice");
  EXPECT_EQ(line.front()["real_user"], P("oozie/localhost"));
}

}  // namespace
}  // namespace authrpc
