#include "tests/kerberos_realm.h"

#include "tests/test_support.h"

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

}  // namespace authrpc::testing
