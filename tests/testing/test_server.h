// TestServer and TestClient: the one way tests stand up a real Server on
// loopback and connect real Clients to it (library authrpc_test_support).
// Every ServerOptions / ClientOptions a test needs is set here, so that an
// API change to either is fixed in test_server.cc, not in every test.
//
//   TestServer server;
//   server.tls().mechanism(kerberos).service(DataService());
//   ASSERT_OK(server.start());
//   auto client = server.client().mechanism(ticket_cache_client).connect();
//
// Defaults, for a loaded 2-core machine and quiet test output: one
// tcp://127.0.0.1:0 endpoint, `simple` when no mechanism is given, one IO
// thread, two blocking threads, 5 s negotiation timeout, 1 s stop grace, no
// log. Clients: 10 s connect and call timeouts.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "authrpc/auth/mechanism.h"
#include "authrpc/base/log.h"
#include "authrpc/base/result.h"
#include "authrpc/base/status.h"
#include "authrpc/client/client.h"
#include "authrpc/rpc/endpoint.h"
#include "authrpc/rpc/security_requirement.h"
#include "authrpc/server/server.h"
#include "authrpc/server/service.h"
#include "tests/testing/test_support.h"
#include "tests/testing/test_tls.h"

namespace authrpc::testing {

// The builder methods TestClient and TestServer share, on their `Options`
// (ClientOptions or ServerOptions); each returns the `Self` it builds.
template <class Self, class Options>
class OptionsBuilder {
 public:
  using Mechanism = typename decltype(Options::mechanisms)::value_type;

  // Mechanisms, most preferred first (appended): those a client allows, those
  // a server enables.
  Self& mechanism(Mechanism m) {
    options_.mechanisms.push_back(std::move(m));
    return self();
  }
  Self& mechanisms(std::vector<Mechanism> ms) {
    for (auto& m : ms) options_.mechanisms.push_back(std::move(m));
    return self();
  }
  Self& encryption(SecurityRequirement p) {
    options_.encryption = p;
    return self();
  }
  Self& authentication(SecurityRequirement p) {
    options_.authentication = p;
    return self();
  }
  // Anything else, applied last.
  Self& options(std::function<void(Options&)> tweak) {
    tweaks_.push_back(std::move(tweak));
    return self();
  }

 protected:
  // `o` with every options() tweak applied, in order.
  Options tweaked(Options o) const {
    for (const auto& tweak : tweaks_) tweak(o);
    return o;
  }

  Options options_;

 private:
  Self& self() { return static_cast<Self&>(*this); }

  std::vector<std::function<void(Options&)>> tweaks_;
};

// What a client of a TestServer is built from; TestServer::client() fills in
// the endpoint and the TLS context matching the server's.
class TestClient : public OptionsBuilder<TestClient, ClientOptions> {
 public:
  explicit TestClient(Endpoint endpoint);

  // Shorthand for mechanism(SimpleClientMechanism(user)).
  TestClient& simple(std::string user = "alice");
  // The TLS context (CA, optional client certificate); null: none.
  TestClient& tls(std::shared_ptr<security::TlsClientContext> context);
  TestClient& wait_for_authentication(bool wait);

  // The options as they would be used, for tests that call Client:: directly.
  ClientOptions build() const;
  // Blocking connect on a private runtime.
  Result<std::unique_ptr<Client>> connect() const;
};

// Owns a started Server and stops it (bounded, see StopAndDestroy) when
// destroyed or stop()ped. Set up with the builder methods, then start().
// Not thread-safe; the Server itself is.
class TestServer : public OptionsBuilder<TestServer, ServerOptions> {
 public:
  TestServer();
  ~TestServer();
  TestServer(const TestServer&) = delete;
  TestServer& operator=(const TestServer&) = delete;

  // --- before start() ---
  // An endpoint to listen on (appended; the first replaces the default).
  // "unix:" alone stands for a fresh abstract name, "tls:" for
  // tls://127.0.0.1:0, "tcp:" for tcp://127.0.0.1:0.
  TestServer& endpoint(const std::string& uri);
  TestServer& endpoint(Endpoint endpoint);
  // A tls://127.0.0.1:0 endpoint served with `context`, by default the
  // process-wide TestTls (client certificates not requested).
  TestServer& tls(std::shared_ptr<security::TlsServerContext> context = nullptr);
  // The TLS context of tls:// endpoints, without adding an endpoint.
  TestServer& tls_context(std::shared_ptr<security::TlsServerContext> context);
  // The TLS client context client() gives its clients (set by tls() with the
  // default context to TestTls's; null: none).
  TestServer& client_tls(std::shared_ptr<security::TlsClientContext> context);
  TestServer& service(Service s);
  TestServer& io_threads(std::size_t n);
  TestServer& blocking_threads(std::size_t n);
  TestServer& log(LogSink sink);
  // options(): timeouts, limits, authorizer, shm...

  // The options start() would use, for tests that check Server's own
  // validation of them.
  ServerOptions build() const;
  // Binds every endpoint and serves; fails as Server::start() does.
  Status start();

  // --- after start() ---
  Server& server() const { return *server_; }
  // The first endpoint as bound (port resolved), and all of them. After a
  // failed start(), endpoints() is what the server still had bound: a test
  // that checks Server's refusals expects it empty.
  const Endpoint& endpoint() const { return bound_.front(); }
  const std::vector<Endpoint>& endpoints() const { return bound_; }
  ServerStats stats() const { return server_->stats(); }
  // A client of endpoint() (or of `endpoint`), with the server's client TLS
  // context on a tls:// endpoint.
  TestClient client() const { return client(endpoint()); }
  TestClient client(const Endpoint& endpoint) const;
  // Stops and destroys the server (false and a test failure if stop()
  // hangs). Idempotent; the destructor calls it.
  bool stop();

 private:
  bool default_endpoint_ = true;
  std::vector<Service> services_;
  std::shared_ptr<security::TlsClientContext> client_tls_;
  std::unique_ptr<Server> server_;
  std::vector<Endpoint> bound_;
};

}  // namespace authrpc::testing
