// BenchRealm: the Kerberos realm minibench's Kerberos rows (kerberos,
// kerberos-sasl, floor/gss) run against, and KerberosSetup, what each side
// needs to use it.
//
// Without realm flags, BenchRealm starts a throwaway one (tests/testing/mini_kdc.h):
// krb5kdc on a free 127.0.0.1 port in a temporary directory, principals
// alice and rpc/localhost with keytabs, and KRB5_CONFIG, KRB5CCNAME (alice's
// TGT, for tools), KRB5_KTNAME, KRB5RCACHEDIR set for this process (MIT
// Kerberos reads them; the forked server child inherits them). Clients log
// in as alice from her keytab, as one service calling another would. The KDC
// is stopped and the directory removed when the BenchRealm is destroyed.
// With --krb5-conf / --keytab / --service-principal / --principal +
// --client-keytab it uses the realm they name instead (KDC requests are then
// counted only with --kdc-log).
//
// open() calls setenv(): call it before the process starts any thread (and
// before ServerChild::spawn, so that the child inherits the environment).
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "authrpc/base/result.h"
#include "authrpc/components/kerberos/kerberos_credentials.h"

namespace authrpc::testing {
class MiniKdc;
}

namespace minibench {

// The realm-related command-line flags.
struct RealmFlags {
  std::string krb5_conf;          // --krb5-conf: KRB5_CONFIG for this run
  std::string keytab;             // --keytab: the service's keytab
  std::string service_principal;  // --service-principal: "rpc/host@REALM"
  std::string principal;          // --principal (with --client-keytab): keytab login
  std::string client_keytab;      // --client-keytab
  std::string kdc_log;            // --kdc-log: the realm's KDC log, to count requests
  bool replay_cache = true;       // --replay-cache on|off (server and floor/gss alike)

  // True if a flag names an existing realm (no throwaway realm then).
  bool names_realm() const {
    return !krb5_conf.empty() || !keytab.empty() || !service_principal.empty() ||
           !principal.empty() || !client_keytab.empty();
  }
};

// What the Kerberos rows and floor/gss use — the same credentials and replay
// cache settings for the authrpc mechanisms and for the bare GSSAPI floor.
struct KerberosSetup {
  std::string description;        // one line for the run's header
  std::string service_principal;  // the server accepts for it; clients expect it
  std::string service_keytab;     // empty: KRB5_KTNAME, else the default keytab
  bool replay_cache = true;
  std::string replay_cache_dir;   // empty: KRB5RCACHEDIR, else the system default
  std::string client_principal;   // with client_keytab: keytab login (memory cache)
  std::string client_keytab;
  std::string ccache;             // otherwise this ticket cache; empty: the default one
  std::string kdc_log;            // empty: KDC requests are not counted

  authrpc::security::KerberosCredentials::AcceptorOptions acceptor() const;
  authrpc::security::KerberosCredentials::InitiatorOptions initiator() const;
  // True if a client keeps one credential handle (keytab or named cache);
  // false: it resolves the default cache on every session, as the
  // `kerberos` mechanism does without a ccache option.
  bool client_keeps_handle() const { return !client_keytab.empty() || !ccache.empty(); }
  // MechanismRegistry options for `kerberos` and `kerberos-sasl` (they take
  // the same).
  nlohmann::json server_options() const;
  nlohmann::json client_options() const;
  // "ticket cache FILE:/tmp/...", "keytab login as alice@R".
  std::string client_credentials() const;
};

class BenchRealm {
 public:
  // The realm `flags` name, or (none named) a throwaway one. kConfigError
  // for inconsistent flags; kNotFound when a throwaway realm is needed and
  // krb5kdc is not installed (the caller may skip the Kerberos rows then).
  static authrpc::Result<std::unique_ptr<BenchRealm>> open(const RealmFlags& flags);
  ~BenchRealm();
  BenchRealm(const BenchRealm&) = delete;
  BenchRealm& operator=(const BenchRealm&) = delete;

  const KerberosSetup& setup() const noexcept { return setup_; }

 private:
  BenchRealm() = default;
  static authrpc::Status start_throwaway(BenchRealm& realm, const RealmFlags& flags);
  static authrpc::Status use_named(BenchRealm& realm, const RealmFlags& flags);

  std::unique_ptr<authrpc::testing::MiniKdc> kdc_;  // null for a named realm
  KerberosSetup setup_;
};

}  // namespace minibench
