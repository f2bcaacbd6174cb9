#include "minibench/realm.h"

#include <unistd.h>

#include <cstdlib>

#include "tests/testing/mini_kdc.h"

namespace minibench {
namespace {

using authrpc::Errc;
using authrpc::testing::MiniKdc;
using authrpc::Status;
using authrpc::security::KerberosCredentials;

constexpr const char* kClient = "alice";
constexpr const char* kService = "rpc/localhost";

std::string env_or_empty(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? value : "";
}

Status readable(const std::string& flag, const std::string& path) {
  if (::access(path.c_str(), R_OK) == 0) return {};
  return Status(Errc::kConfigError, flag + " " + path + ": not readable");
}

}  // namespace

KerberosCredentials::AcceptorOptions KerberosSetup::acceptor() const {
  KerberosCredentials::AcceptorOptions o;
  o.keytab = service_keytab;
  o.principal = service_principal;
  o.replay_cache = replay_cache;
  o.replay_cache_dir = replay_cache_dir;
  return o;
}

KerberosCredentials::InitiatorOptions KerberosSetup::initiator() const {
  KerberosCredentials::InitiatorOptions o;
  if (!client_keytab.empty()) {
    o.principal = client_principal;
    o.keytab = client_keytab;
  } else {
    o.ccache = ccache;
  }
  return o;
}

nlohmann::json KerberosSetup::server_options() const {
  nlohmann::json o = {{"principal", service_principal}, {"replay_cache", replay_cache}};
  if (!service_keytab.empty()) o["keytab"] = service_keytab;
  if (!replay_cache_dir.empty()) o["replay_cache_dir"] = replay_cache_dir;
  return o;
}

nlohmann::json KerberosSetup::client_options() const {
  nlohmann::json o = {{"service_principal", service_principal}};
  if (!client_keytab.empty()) {
    o["principal"] = client_principal;
    o["keytab"] = client_keytab;
  } else if (!ccache.empty()) {
    o["ccache"] = ccache;
  }
  return o;
}

std::string KerberosSetup::client_credentials() const {
  if (!client_keytab.empty()) return "keytab login as " + client_principal;
  return ccache.empty() ? std::string("the default ticket cache") : "ticket cache " + ccache;
}

BenchRealm::~BenchRealm() = default;

authrpc::Result<std::unique_ptr<BenchRealm>> BenchRealm::open(const RealmFlags& flags) {
  std::unique_ptr<BenchRealm> realm(new BenchRealm());
  Status s = flags.names_realm() ? use_named(*realm, flags) : start_throwaway(*realm, flags);
  if (!s.ok()) return s;
  return realm;
}

Status BenchRealm::start_throwaway(BenchRealm& realm, const RealmFlags& flags) {
  if (!flags.kdc_log.empty()) {
    return Status(Errc::kConfigError,
                  "--kdc-log goes with a realm named by --keytab/--service-principal (the "
                  "throwaway realm's log is read anyway)");
  }
  std::string missing;
  if (!MiniKdc::tools_installed(&missing)) {
    return Status(Errc::kNotFound,
                  missing + " not found: install krb5-kdc, krb5-admin-server and krb5-user "
                            "(scripts/setup.sh), or name a realm with --keytab, "
                            "--service-principal, ...");
  }
  realm.kdc_ = std::make_unique<MiniKdc>();
  MiniKdc& kdc = *realm.kdc_;
  if (Status s = kdc.start(); !s.ok()) return s;
  if (Status s = kdc.add_principal(kClient); !s.ok()) return s;
  if (Status s = kdc.create_keytab(kClient, kdc.client_keytab()); !s.ok()) return s;
  if (Status s = kdc.create_service_keytab(kService); !s.ok()) return s;
  if (Status s = kdc.kinit(kClient, kdc.client_keytab()); !s.ok()) return s;
  kdc.set_env_for_process();

  KerberosSetup& k = realm.setup_;
  k.description = "throwaway realm " + kdc.realm() + " (krb5kdc pid " + std::to_string(kdc.pid()) +
                  " on 127.0.0.1:" + std::to_string(kdc.port()) + ", " + kdc.dir() + ")";
  k.service_principal = std::string(kService) + "@" + kdc.realm();
  k.service_keytab = kdc.service_keytab();
  k.replay_cache = flags.replay_cache;
  k.replay_cache_dir = kdc.rcache_dir();
  // A keytab login, as a service calling a service would: the tickets live in
  // a private memory cache. (A FILE ticket cache is read and locked on every
  // session — 45–95 µs here — by the authrpc client and the floor alike.)
  k.client_principal = std::string(kClient) + "@" + kdc.realm();
  k.client_keytab = kdc.client_keytab();
  k.kdc_log = kdc.kdc_log();
  return {};
}

Status BenchRealm::use_named(BenchRealm& realm, const RealmFlags& flags) {
  if (flags.service_principal.empty()) {
    return Status(Errc::kConfigError, "a named realm needs --service-principal");
  }
  if (flags.principal.empty() != flags.client_keytab.empty()) {
    return Status(Errc::kConfigError, "--principal and --client-keytab go together");
  }
  for (const auto& [flag, path] : {std::pair{"--krb5-conf", flags.krb5_conf},
                                   std::pair{"--keytab", flags.keytab},
                                   std::pair{"--client-keytab", flags.client_keytab}}) {
    if (!path.empty()) {
      if (Status s = readable(flag, path); !s.ok()) return s;
    }
  }
  // Cyrus SASL's GSSAPI plugin (kerberos-sasl) reads only the environment.
  if (!flags.krb5_conf.empty()) ::setenv("KRB5_CONFIG", flags.krb5_conf.c_str(), 1);
  if (!flags.keytab.empty()) ::setenv("KRB5_KTNAME", ("FILE:" + flags.keytab).c_str(), 1);

  KerberosSetup& k = realm.setup_;
  const std::string conf = env_or_empty("KRB5_CONFIG");
  k.description = "realm of " + (conf.empty() ? std::string("the system krb5.conf") : conf);
  k.service_principal = flags.service_principal;
  k.service_keytab = flags.keytab;
  k.replay_cache = flags.replay_cache;
  k.client_principal = flags.principal;
  k.client_keytab = flags.client_keytab;
  if (k.client_keytab.empty()) k.ccache = env_or_empty("KRB5CCNAME");
  k.kdc_log = flags.kdc_log;
  return {};
}

}  // namespace minibench
