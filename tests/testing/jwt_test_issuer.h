// What the JWT tests issue tokens with: the keys and signing of
// tests/testing/jwt_issuer.h, and a JWKS document served over HTTPS on
// loopback by a server the test can change, stop and start again (key
// rotation, an IdP that is down). Library authrpc_test_support.
#pragma once

#include <memory>
#include <string>

#include "tests/testing/jwt_issuer.h"

namespace authrpc::testing {

class TestTls;

// An HTTPS server on 127.0.0.1 (a free port, certificate "server" of `tls`,
// valid for localhost and 127.0.0.1) answering GET <path> with the current
// document (application/json), anything else with 404. Runs its own thread;
// stop() closes the listener (connections are refused, as from an IdP that
// is down) and start() listens again on the same port.
class JwksHttpsServer {
 public:
  explicit JwksHttpsServer(const TestTls& tls, std::string document, std::string path = "/jwks");
  ~JwksHttpsServer();
  std::string url() const;  // "https://localhost:<port>/jwks"
  void set_document(std::string document);
  // Answer with this HTTP status instead of 200 (0: back to 200).
  void set_status(int status);
  void stop();
  void start();
  int requests() const;  // GETs of <path> answered so far (whatever the status)

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace authrpc::testing
