#include "tests/testing/test_server.h"

#include <gtest/gtest.h>

#include <utility>

#include "authrpc/auth/mechanisms/simple/simple.h"

namespace authrpc::testing {

using namespace std::chrono_literals;

// --- TestClient ----------------------------------------------------------------

TestClient::TestClient(Endpoint endpoint) {
  options_.endpoint = std::move(endpoint);
  options_.connect_timeout = 10s;
  options_.default_call_timeout = 10s;
}

TestClient& TestClient::simple(std::string user) {
  return mechanism(std::make_shared<SimpleClientMechanism>(std::move(user)));
}

TestClient& TestClient::tls(std::shared_ptr<security::TlsClientContext> context) {
  options_.tls = std::move(context);
  return *this;
}

TestClient& TestClient::wait_for_authentication(bool wait) {
  options_.wait_for_authentication = wait;
  return *this;
}

ClientOptions TestClient::build() const { return tweaked(options_); }

Result<std::unique_ptr<Client>> TestClient::connect() const { return Client::connect(build()); }

// --- TestServer ----------------------------------------------------------------

TestServer::TestServer() {
  options_.endpoints = {*Endpoint::parse("tcp://127.0.0.1:0")};
  options_.io_threads = 1;
  options_.blocking_threads = 2;
  options_.negotiation_timeout = 5s;
  options_.stop_grace = 1s;
  options_.log = null_log_sink();
}

TestServer::~TestServer() { stop(); }

TestServer& TestServer::endpoint(Endpoint endpoint) {
  if (default_endpoint_) options_.endpoints.clear();
  default_endpoint_ = false;
  options_.endpoints.push_back(std::move(endpoint));
  return *this;
}

TestServer& TestServer::endpoint(const std::string& uri) {
  if (uri == "unix:") return endpoint(FreshEndpoint(SocketKind::kUnix, "authrpc-test-server"));
  const std::string full = uri == "tcp:" ? "tcp://127.0.0.1:0" : uri == "tls:" ? "tls://127.0.0.1:0" : uri;
  auto parsed = Endpoint::parse(full);
  EXPECT_TRUE(parsed.ok()) << full << ": " << Describe(parsed);
  return parsed.ok() ? endpoint(*parsed) : *this;
}

TestServer& TestServer::tls(std::shared_ptr<security::TlsServerContext> context) {
  if (!context) {
    context = TestTls::shared().server();
    if (!client_tls_) client_tls_ = TestTls::shared().client();
  }
  tls_context(std::move(context));
  return endpoint("tls://127.0.0.1:0");
}

TestServer& TestServer::tls_context(std::shared_ptr<security::TlsServerContext> context) {
  options_.tls = std::move(context);
  return *this;
}

TestServer& TestServer::client_tls(std::shared_ptr<security::TlsClientContext> context) {
  client_tls_ = std::move(context);
  return *this;
}

TestServer& TestServer::service(Service s) {
  services_.push_back(std::move(s));
  return *this;
}

TestServer& TestServer::io_threads(std::size_t n) {
  options_.io_threads = n;
  return *this;
}

TestServer& TestServer::blocking_threads(std::size_t n) {
  options_.blocking_threads = n;
  return *this;
}

TestServer& TestServer::log(LogSink sink) {
  options_.log = std::move(sink);
  return *this;
}

ServerOptions TestServer::build() const {
  ServerOptions o = options_;
  if (o.mechanisms.empty()) o.mechanisms.push_back(std::make_shared<SimpleServerMechanism>());
  return tweaked(std::move(o));
}

Status TestServer::start() {
  if (server_) return Status(Errc::kFailedPrecondition, "TestServer already started");
  auto server = std::make_unique<Server>(build());
  for (auto& s : services_) {
    if (Status st = server->add_service(std::move(s)); !st.ok()) return st;
  }
  services_.clear();
  const Status started = server->start();
  bound_ = server->bound_endpoints();  // after a failure: what it left bound (nothing, if it cleaned up)
  if (!started.ok()) return started;
  if (bound_.empty()) return Status(Errc::kInternal, "the server bound no endpoint");
  server_ = std::move(server);
  return {};
}

TestClient TestServer::client(const Endpoint& endpoint) const {
  TestClient c(endpoint);
  if (endpoint.scheme == Endpoint::Scheme::kTls) c.tls(client_tls_);
  return c;
}

bool TestServer::stop() { return StopAndDestroy(server_); }

}  // namespace authrpc::testing
