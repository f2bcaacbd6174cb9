// TestTls: a throwaway CA and the TLS contexts tests use with it
// (library authrpc_test_support): a server certificate for localhost and
// 127.0.0.1, and a client certificate for "alice" (for x509). Files live in a
// temporary directory removed with the TestTls. Made with tests/tls_test_certs.h.
#pragma once

#include <memory>
#include <string>

#include "authrpc/security/tls_context.h"

namespace authrpc::testing {

class TestCa;

class TestTls {
 public:
  // The process-wide one, made on first use (ECDSA keys: a few ms).
  static const TestTls& shared();

  TestTls();
  ~TestTls();
  TestTls(const TestTls&) = delete;
  TestTls& operator=(const TestTls&) = delete;

  // A server context with this CA's localhost certificate; client
  // certificates `client_certificates` (checked against this CA).
  std::shared_ptr<security::TlsServerContext> server(
      security::ClientCertificates client_certificates = security::ClientCertificates::kNone) const;
  // A client context trusting this CA, presenting alice's certificate if
  // `with_certificate`.
  std::shared_ptr<security::TlsClientContext> client(bool with_certificate = false) const;

  const std::string& dir() const { return dir_; }
  std::string ca_file() const;
  // The certificate's common name (the user x509 maps it to).
  static constexpr const char* kClientCommonName = "alice";

 private:
  std::string dir_;
  std::unique_ptr<TestCa> ca_;
};

}  // namespace authrpc::testing
