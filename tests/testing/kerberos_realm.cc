#include "tests/testing/kerberos_realm.h"

#include "authrpc/auth/mechanisms/simple/simple.h"
#include "tests/testing/test_support.h"

namespace authrpc::testing {

Status PopulateRealm(MiniKdc& kdc, const KerberosRealmOptions& options) {
  if (Status s = kdc.start(); !s.ok()) return s;
  for (const auto& client : options.clients) {
    if (Status s = kdc.add_principal(client); !s.ok()) return s;
    if (Status s = kdc.create_keytab(client, kdc.client_keytab()); !s.ok()) return s;
  }
  if (Status s = kdc.create_service_keytab(options.service); !s.ok()) return s;
  for (const auto& other : options.other_principals) {
    if (Status s = kdc.add_principal(other); !s.ok()) return s;
  }
  if (!options.kinit.empty()) return kdc.kinit(options.kinit, kdc.client_keytab());
  return {};
}

std::string ServicePrincipal(const MiniKdc& kdc, const std::string& host) {
  return "rpc/" + host + "@" + kdc.realm();
}

KerberosServerOptions KerberosServerOptionsFor(const MiniKdc& kdc) {
  KerberosServerOptions o;
  o.keytab = kdc.service_keytab();
  o.principal = ServicePrincipal(kdc);
  o.replay_cache = true;
  o.replay_cache_dir = kdc.rcache_dir();
  return o;
}

KerberosClientOptions CcacheClientOptions(const MiniKdc& kdc) {
  KerberosClientOptions o;
  o.ccache = kdc.ccache();
  o.service_principal = ServicePrincipal(kdc);
  return o;
}

KerberosClientOptions KeytabClientOptions(const MiniKdc& kdc, const std::string& user) {
  KerberosClientOptions o;
  o.principal = user;
  o.keytab = kdc.client_keytab();
  o.service_principal = ServicePrincipal(kdc);
  return o;
}

void KerberosSuite::StartRealm(KerberosRealmOptions options) {
  realm_ = std::make_unique<MiniKdc>(options.kdc);
  kdc_ = realm_.get();
  setup_ = PopulateRealm(*realm_, options);
  if (setup_.ok()) realm_->set_env_for_process();
}

void KerberosSuite::TearDownTestSuite() {
  kdc_ = nullptr;
  realm_.reset();
}

void KerberosSuite::SetUp() {
  ASSERT_OK(setup_);
  kdc_->set_env_for_process();
}

Result<RunningServer> StartServer(std::vector<std::shared_ptr<ServerMechanism>> mechanisms,
                                  const std::string& uri, LogSink log) {
  auto server = std::make_unique<TestServer>();
  server->endpoint(uri).mechanisms(std::move(mechanisms)).blocking_threads(1).log(std::move(log));
  if (Status s = server->start(); !s.ok()) return s;
  const Endpoint endpoint = server->endpoint();
  return RunningServer{std::move(server), endpoint};
}

Result<std::unique_ptr<Client>> Connect(const Endpoint& endpoint,
                                        std::vector<std::shared_ptr<ClientMechanism>> mechanisms,
                                        bool wait_for_authentication) {
  return TestClient(endpoint)
      .mechanisms(std::move(mechanisms))
      .wait_for_authentication(wait_for_authentication)
      .connect();
}

Result<std::unique_ptr<Client>> Connect(const Endpoint& endpoint,
                                        std::shared_ptr<ClientMechanism> mechanism,
                                        bool wait_for_authentication) {
  return Connect(endpoint, std::vector<std::shared_ptr<ClientMechanism>>{std::move(mechanism)},
                 wait_for_authentication);
}

Endpoint ViaLocalhost(Endpoint endpoint) {
  endpoint.host = "localhost";
  return endpoint;
}

Result<nlohmann::json> Whoami(Client& client) {
  return client.call_json("sys", "whoami", nlohmann::json::object());
}

void ExpectServesSimple(const Endpoint& endpoint) {
  SCOPED_TRACE("server still serves a simple client");
  auto client = Connect(endpoint, std::make_shared<SimpleClientMechanism>("bob"));
  ASSERT_TRUE(client.ok()) << Describe(client);
  auto who = Whoami(**client);
  ASSERT_TRUE(who.ok()) << Describe(who);
  EXPECT_EQ((*who)["mechanism"], "simple");
  EXPECT_EQ((*who)["user"], "bob");
}

}  // namespace authrpc::testing
