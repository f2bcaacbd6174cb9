// floor/gss: the bare floor of a Kerberos session — what one GSSAPI token
// each way costs with no framework: connect, the client's
// gss_init_sec_context (its AP-REQ) over the socket, the server's
// gss_accept_sec_context and its AP-REP back, the client completing its
// context (mutual authentication), close. The `kerberos` rows are held to it.
//
// Wire: each token as a 4-byte big-endian length and the token, one write
// per side. The server takes the client's name out of the accepted context
// (an authentication that does not say who is on the other end is no floor
// for one) and checks the mutual flag, as the `kerberos` mechanism does; it
// does not format the name or build an identity — that is authrpc's work.
// Both sides use the credentials they are given (the same as the kerberos
// rows: minibench/realm.h), the same GSSAPI flags as
// components/kerberos/kerberos.cc (mutual + integrity), and run on Asio
// coroutines on one thread, like the bare floors (floor.h). The server side
// runs in minibench's server child.
//
// Threading: a server and its connections live on the executor given to
// start(); client sessions run on the executor they are given.
#pragma once

#include <asio/any_io_executor.hpp>
#include <asio/awaitable.hpp>
#include <memory>
#include <string>

#include "minibench/floor.h"
#include "minibench/stats.h"
#include "authrpc/base/result.h"
#include "authrpc/components/kerberos/kerberos_credentials.h"
#include "authrpc/rpc/endpoint.h"

namespace minibench {

// Starts a floor/gss listener on `endpoint` (tcp port 0: any free port;
// unix:@name: abstract) that accepts with `acceptor`.
authrpc::Result<std::unique_ptr<FloorServer>> start_gss_floor_server(
    const asio::any_io_executor& ex, const authrpc::Endpoint& endpoint,
    std::shared_ptr<const authrpc::security::KerberosCredentials> acceptor);

// The client half of floor/gss, for one server endpoint.
class GssFloorClient {
 public:
  // `initiator` null: the default ticket cache, resolved by GSSAPI on every
  // session (as the `kerberos` mechanism does without a ccache option).
  // `service_principal` is imported and canonicalized for the krb5 mechanism
  // once, here.
  static authrpc::Result<std::unique_ptr<GssFloorClient>> make(
      const authrpc::Endpoint& endpoint,
      std::shared_ptr<const authrpc::security::KerberosCredentials> initiator,
      const std::string& service_principal);
  virtual ~GssFloorClient() = default;
  // One floor session, timed from before connect until the client has
  // verified the AP-REP (the close is not timed).
  virtual asio::awaitable<authrpc::Result<Clock::duration>> session(asio::any_io_executor ex) = 0;
};

}  // namespace minibench
