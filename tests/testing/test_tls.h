// TestTls: a throwaway CA and the TLS contexts tests use with it
// (library authrpc_test_support): a server certificate "server" for
// localhost, 127.0.0.1 and ::1, and a client certificate "client" for
// "alice" (CN alice, SAN email alice@example.com, for x509's mappings). A test
// that needs a certificate with odd names or dates from the same CA issues it
// (issue()) and serves it (server(..., leaf)). Files live in a temporary
// directory removed with the TestTls. Made with tests/testing/tls_test_certs.h.
#pragma once

#include <memory>
#include <string>

#include "authrpc/security/tls_context.h"
#include "tests/testing/tls_test_certs.h"

namespace authrpc::testing {


class TestTls {
 public:
  // The process-wide one, made on first use (ECDSA keys: a few ms).
  static const TestTls& shared();

  TestTls();
  ~TestTls();
  TestTls(const TestTls&) = delete;
  TestTls& operator=(const TestTls&) = delete;

  // A server context with this CA's leaf `leaf` (by default the localhost
  // certificate); client certificates `client_certificates` (checked against
  // this CA); TLS `min_version` and up.
  std::shared_ptr<security::TlsServerContext> server(
      security::ClientCertificates client_certificates = security::ClientCertificates::kNone,
      security::TlsVersion min_version = security::TlsVersion::kTls13,
      const std::string& leaf = "server") const;
  // A client context trusting this CA, presenting alice's certificate if
  // `with_certificate`.
  std::shared_ptr<security::TlsClientContext> client(bool with_certificate = false) const;

  // Signs another leaf with this CA (an expired certificate, one for
  // another name), written next to the others; serve it with server(..., leaf.name).
  void issue(const TestCa::Leaf& leaf) const;

  const std::string& dir() const { return dir_; }
  std::string ca_file() const;
  // The PEM files of a leaf ("server", "client" or one issue()d), for tests
  // that configure TLS from files (server configuration JSON).
  std::string cert_file(const std::string& leaf) const;
  std::string key_file(const std::string& leaf) const;
  // The certificate's common name (the user x509 maps it to).
  static constexpr const char* kClientCommonName = "alice";

 private:
  std::string dir_;
  std::unique_ptr<TestCa> ca_;
};

}  // namespace authrpc::testing
