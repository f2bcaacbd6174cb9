// The Kerberos fixture of the test suite (library authrpc_test_kerberos): a
// real MIT KDC (tests/testing/mini_kdc.h) with the principals, keytabs and
// ticket cache Kerberos tests use, the mechanism options that point at them,
// KerberosSuite, a GoogleTest base class with one realm per suite, and the
// servers and clients its integration tests start.
//
// The usual realm: client alice (key in kdc.client_keytab(), a TGT in
// kdc.ccache()), service rpc/localhost (key in kdc.service_keytab(), the
// keytab KRB5_KTNAME names). MIT GSSAPI and Cyrus read krb5.conf, the default
// ccache, keytab and rcache directory from the environment, so the suite
// setenv()s the realm's environment before each test; the options below still
// name the keytab, ccache and replay cache explicitly wherever the mechanisms
// take them.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "authrpc/auth/mechanism.h"
#include "authrpc/base/log.h"
#include "authrpc/base/result.h"
#include "authrpc/base/status.h"
#include "authrpc/client/client.h"
#include "authrpc/components/kerberos/kerberos.h"
#include "authrpc/rpc/endpoint.h"
#include "tests/testing/test_server.h"
#include "tests/testing/mini_kdc.h"

namespace authrpc::testing {

struct KerberosRealmOptions {
  // Each with its key in client_keytab().
  std::vector<std::string> clients = {"alice"};
  // With its key in service_keytab().
  std::string service = "rpc/localhost";
  // In the KDC's database but in no keytab (e.g. rpc/otherhost).
  std::vector<std::string> other_principals;
  // Gets a TGT into ccache() from client_keytab(); empty: no kinit.
  std::string kinit = "alice";
  MiniKdcOptions kdc;
};

// Starts `kdc` and adds what `options` lists; stops at the first failure.
Status PopulateRealm(MiniKdc& kdc, const KerberosRealmOptions& options);

// "rpc/<host>@REALM", the service principal of the usual realm.
std::string ServicePrincipal(const MiniKdc& kdc, const std::string& host = "localhost");
// A kerberos / kerberos-sasl server: the service keytab, rpc/localhost, the
// replay cache in the realm's rcache directory.
KerberosServerOptions KerberosServerOptionsFor(const MiniKdc& kdc);
// A ticket-cache client (kinit first) expecting rpc/localhost.
KerberosClientOptions CcacheClientOptions(const MiniKdc& kdc);
// A keytab-login client (no kinit, no ticket cache) as `user`, expecting
// rpc/localhost.
KerberosClientOptions KeytabClientOptions(const MiniKdc& kdc, const std::string& user = "alice");

// --- servers and clients of the Kerberos integration tests ---

// A started server (tests/testing/test_server.h) and its bound endpoint.
struct RunningServer {
  std::unique_ptr<TestServer> server;
  Endpoint endpoint;
};

// A server on `uri` with `mechanisms` and one blocking thread.
Result<RunningServer> StartServer(std::vector<std::shared_ptr<ServerMechanism>> mechanisms,
                                  const std::string& uri = "tcp://127.0.0.1:0",
                                  LogSink log = null_log_sink());

// A client of `endpoint` with `mechanism(s)`; with wait_for_authentication
// false, connect() returns before the server's verdict.
Result<std::unique_ptr<Client>> Connect(const Endpoint& endpoint,
                                        std::vector<std::shared_ptr<ClientMechanism>> mechanisms,
                                        bool wait_for_authentication = true);
Result<std::unique_ptr<Client>> Connect(const Endpoint& endpoint,
                                        std::shared_ptr<ClientMechanism> mechanism,
                                        bool wait_for_authentication = true);

// The same endpoint reached through the host name "localhost" (so that a
// client without service_principal expects rpc@localhost, i.e.
// rpc/localhost@REALM).
Endpoint ViaLocalhost(Endpoint endpoint);

// sys.whoami's answer.
Result<nlohmann::json> Whoami(Client& client);

// After a failure: the server still authenticates a `simple` client as bob.
void ExpectServesSimple(const Endpoint& endpoint);

// One realm for the suite. A suite with other principals defines its own
// static SetUpTestSuite() calling StartRealm(options). Tests read the KDC
// through kdc_; SetUp() fails the test if the realm did not start, and points
// this process's Kerberos environment at it (another suite's realm may have
// done so in between).
class KerberosSuite : public ::testing::Test {
 protected:
  static void StartRealm(KerberosRealmOptions options = {});
  static void SetUpTestSuite() { StartRealm(); }
  static void TearDownTestSuite();
  void SetUp() override;

  static inline std::unique_ptr<MiniKdc> realm_;
  static inline MiniKdc* kdc_ = nullptr;  // realm_.get()
  static inline Status setup_;
};

}  // namespace authrpc::testing
