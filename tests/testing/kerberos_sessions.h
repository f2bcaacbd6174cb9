// What the integration tests of the two Kerberos mechanisms (kerberos_itest
// for `kerberos`, kerberos_sasl_itest for `kerberos-sasl`) share to run and
// check sessions against the realm of tests/testing/kerberos_realm.h (library
// authrpc_test_kerberos): a server with the mechanism and `simple`, client
// mechanisms that fail the test when they cannot be made, a whole session
// checked through sys.whoami, and a client's first token run by hand for the
// tests that send raw frames. Test code: failures fail the current test.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "authrpc/auth/mechanism.h"
#include "authrpc/auth/mechanisms/simple/simple.h"
#include "authrpc/base/log.h"
#include "authrpc/base/result.h"
#include "authrpc/client/client.h"
#include "authrpc/components/kerberos/kerberos.h"
#include "authrpc/rpc/endpoint.h"
#include "tests/testing/kerberos_realm.h"
#include "tests/testing/test_support.h"
#include "tests/testing/mini_kdc.h"

namespace authrpc::testing {

// A server on `uri` enabling `Mechanism` (KerberosServerMechanism or
// KerberosSaslServerMechanism) made from `options`, and `simple`.
template <typename Mechanism>
Result<RunningServer> StartKerberosServer(const KerberosServerOptions& options,
                                          const std::string& uri = "tcp://127.0.0.1:0",
                                          LogSink log = null_log_sink()) {
  auto mechanism = Mechanism::create(options);
  if (!mechanism.ok()) return mechanism.status();
  return StartServer({*mechanism, std::make_shared<SimpleServerMechanism>()}, uri,
                     std::move(log));
}

// A client `Mechanism` made from `options`; null, and a test failure, if
// create() refuses them.
template <typename Mechanism>
std::shared_ptr<Mechanism> MakeKerberosClient(const KerberosClientOptions& options) {
  auto mechanism = Mechanism::create(options);
  EXPECT_TRUE(mechanism.ok()) << Describe(mechanism);
  return mechanism.ok() ? *mechanism : nullptr;
}

// sys.whoami on `client` shows `principal`@REALM (as principal and as user)
// of the realm, authenticated by `mechanism`.
void ExpectKerberosIdentity(Client& client, const MiniKdc& kdc, std::string_view mechanism,
                            const std::string& principal = "alice");

// One whole session: connects to `endpoint` with `mechanism`, checks that it
// is alice's (ExpectKerberosIdentity), closes.
void ExpectKerberosSession(const Endpoint& endpoint, std::shared_ptr<ClientMechanism> mechanism,
                           const MiniKdc& kdc, bool wait_for_authentication = true);

// Connecting to `endpoint` with `mechanism` fails with `errc`, whose retry
// advice is `advice`. The failure's message becomes the test property
// `property` (the XML report), unless that is empty.
void ExpectConnectFails(const Endpoint& endpoint, std::shared_ptr<ClientMechanism> mechanism,
                        Errc errc, RetryAdvice advice, const std::string& property = {});

// What a client mechanism sees of a plaintext TCP connection to
// 127.0.0.1:`port`.
ChannelInfo TcpChannel(std::uint16_t port);

// The first message a client session of `mechanism` sends on `channel` (the
// token a real client puts in HELLO), or the session's error.
Result<std::string> FirstToken(ClientMechanism& mechanism, const ChannelInfo& channel);

}  // namespace authrpc::testing
