// The negotiation table: client mechanisms × server mechanisms × channel →
// the outcome the client sees, as one list of rows of one type
// (tests/testing/negotiation_table.cc), run by one parameterised test,
// NegotiationTable.Negotiate, in two instantiations:
//   negotiation_test   (WithoutKdc/...) the rows that need no KDC: `simple`, `jwt`,
//                      `x509` and the test mechanisms below; one ctest entry
//                      per row, seconds in all;
//   negotiation_itest  (WithKdc/...) the rows with a mechanism of the kerberos
//                      family or a delegation token; one ctest entry
//                      (negotiation_table), so that its rows share one KDC.
// A row's instantiation follows from the mechanisms it names (NeedsKdc).
//
// A mechanism spec is a mechanism name or "name:variant" (credentials wrong
// on purpose); ServerMechanismFor / ClientMechanismFor are the one place that
// turns specs into mechanisms. Besides every built-in mechanism, two test-only
// mechanisms exist:
//   plain-test   the client sends the user in HELLO, the server answers with
//                an AUTH_CHALLENGE, the client sends the password in
//                AUTH_RESPONSE; the server's final message proves it knew the
//                user (mutual step). Exercises multi-round negotiation.
//                Variant "optimistic": the client sends the password in
//                HELLO too, as its last message; the server challenges it
//                all the same (pipelined calls are dropped and sent again).
//   reject-test  the server always refuses with AUTHENTICATION_FAILED.
// Users: simple → bob, plain-test → carol, x509 → alice (the certificate's
// CN), jwt → alice (the token's sub), kerberos and delegation tokens →
// alice@REALM.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <ostream>
#include <string>
#include <vector>

#include "authrpc/auth/mechanism.h"
#include "authrpc/base/status.h"
#include "tests/testing/kerberos_realm.h"

namespace authrpc::testing {

// How the client reaches the server.
enum class Channel {
  kTcp,              // tcp://, encryption disabled on both sides
  kUnix,             // an abstract unix:// name
  kTls,              // tls://, encryption required, no client certificate
  kMutualTls,        // tls://, client certificate required and presented
  kTlsNoClientCert,  // tls://, client certificate optional and not presented
  kPlainToOptional,  // tls:// with encryption optional; the client speaks plaintext
};
const char* ChannelName(Channel c);

// Which mechanisms each side started a session of, in order; checked only
// for rows that say (Started(...)).
struct SessionsStarted {
  bool checked = false;
  std::vector<std::string> client;
  std::vector<std::string> server;
};
SessionsStarted Started(std::vector<std::string> client, std::vector<std::string> server);

struct NegotiationCase {
  const char* name;
  std::vector<std::string> client;  // specs, in the client's order of preference
  std::vector<std::string> server;  // specs, most preferred first
  Channel channel = Channel::kTcp;
  Errc expected = Errc::kOk;  // kOk, or the code of the client's error
  std::string mechanism;      // on success: negotiated (and seen by the server)
  std::string user;           // on success: authenticated, "@" stands for "@<realm>"
  std::string message;        // on failure: a fragment of the client's error
  SessionsStarted sessions;
};
void PrintTo(const NegotiationCase& c, std::ostream* os);

// Whether a row names a mechanism that needs the suite's KDC (kerberos,
// kerberos-sasl) or its delegation tokens (token, token-digest, token-scram).
bool NeedsKdc(const NegotiationCase& c);
// The rows for one instantiation: those that need a KDC, or those that do not.
std::vector<NegotiationCase> NegotiationRows(bool with_kdc);
// Every row, for checks on the table itself.
const std::vector<NegotiationCase>& AllNegotiationRows();

// Records, per side, the mechanisms whose sessions were started, in order.
class SessionLog {
 public:
  void add(std::string name);
  std::vector<std::string> names() const;

 private:
  mutable std::mutex mu_;
  std::vector<std::string> names_;
};

// A mechanism for `spec`, recording its sessions in `log`. A mechanism of
// the kerberos family or a token mechanism needs NegotiationTable's realm
// (a row that needs a KDC); otherwise the test fails.
std::shared_ptr<ServerMechanism> ServerMechanismFor(const std::string& spec, SessionLog* log);
std::shared_ptr<ClientMechanism> ClientMechanismFor(const std::string& spec, SessionLog* log);

// One row: a TestServer with the row's server mechanisms on its channel and a
// `test.count` method, a TestClient with its client mechanisms. The KDC and
// the delegation tokens are made by the first row that needs them and shared
// by the rest of the suite.
class NegotiationTable : public KerberosSuite, public ::testing::WithParamInterface<NegotiationCase> {
 protected:
  static void SetUpTestSuite() {}  // no KDC unless a row needs one
  static void TearDownTestSuite();
  void SetUp() override;
};

}  // namespace authrpc::testing
