#include "tests/testing/test_tls.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "tests/testing/test_support.h"

namespace authrpc::testing {

const TestTls& TestTls::shared() {
  static const TestTls tls;
  return tls;
}

TestTls::TestTls() : dir_(TempDir("test-tls")) {
  ca_ = std::make_unique<TestCa>(dir_, "ca");
  ca_->issue({"server", "localhost", {"DNS:localhost", "IP:127.0.0.1", "IP:::1"}});
  TestCa::Leaf client{"client", kClientCommonName, {"email:alice@example.com"}};
  client.client = true;
  ca_->issue(client);
}

TestTls::~TestTls() {
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);
}

std::string TestTls::ca_file() const { return ca_->ca_file(); }
std::string TestTls::cert_file(const std::string& leaf) const { return ca_->cert_file(leaf); }
std::string TestTls::key_file(const std::string& leaf) const { return ca_->key_file(leaf); }

void TestTls::issue(const TestCa::Leaf& leaf) const { ca_->issue(leaf); }

std::shared_ptr<security::TlsServerContext> TestTls::server(
    security::ClientCertificates client_certificates, security::TlsVersion min_version,
    const std::string& leaf) const {
  security::TlsServerOptions o;
  o.certificate_file = ca_->cert_file(leaf);
  o.private_key_file = ca_->key_file(leaf);
  o.ca_file = ca_->ca_file();
  o.client_certificates = client_certificates;
  o.min_version = min_version;
  auto context = security::TlsServerContext::create(o);
  EXPECT_TRUE(context.ok()) << "TLS server context: " << context.status().to_string();
  if (!context.ok()) return nullptr;
  return std::move(*context);
}

std::shared_ptr<security::TlsClientContext> TestTls::client(bool with_certificate) const {
  security::TlsClientOptions o;
  o.ca_file = ca_->ca_file();
  if (with_certificate) {
    o.certificate_file = ca_->cert_file("client");
    o.private_key_file = ca_->key_file("client");
  }
  auto context = security::TlsClientContext::create(o);
  EXPECT_TRUE(context.ok()) << "TLS client context: " << context.status().to_string();
  if (!context.ok()) return nullptr;
  return std::move(*context);
}

}  // namespace authrpc::testing
