// Test certificates made with the OpenSSL API (ECDSA P-256), written as PEM
// files into a temporary directory: a CA, and leaves signed by it with the
// names and validity a test asks for (expired, wrong name, other CA). The
// same shapes as scripts/certs.sh, which users run; the tests need
// variations that the script does not offer (a certificate that expired).
#pragma once

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace authrpc::testing {

class TestCa {
 public:
  struct Leaf {
    std::string name;                 // files <dir>/<name>.pem and .key
    std::string common_name;
    std::vector<std::string> san;     // "DNS:localhost", "IP:127.0.0.1", "email:a@b"
    long not_before_seconds = -3600;  // relative to now
    long not_after_seconds = 86400;
    bool client = false;              // extendedKeyUsage clientAuth (else serverAuth)
  };

  // A CA called `name` with files <dir>/<name>.pem (and .key).
  TestCa(std::filesystem::path dir, std::string name) : dir_(std::move(dir)), name_(std::move(name)) {
    std::filesystem::create_directories(dir_);
    key_ = new_key();
    cert_ = X509_new();
    X509_set_version(cert_, 2);
    set_serial(cert_);
    X509_gmtime_adj(X509_getm_notBefore(cert_), -3600);
    X509_gmtime_adj(X509_getm_notAfter(cert_), 86400 * 30);
    X509_NAME* subject = X509_get_subject_name(cert_);
    add_cn(subject, "authrpc " + name_);
    X509_set_issuer_name(cert_, subject);
    X509_set_pubkey(cert_, key_);
    add_ext(cert_, cert_, NID_basic_constraints, "critical,CA:TRUE");
    add_ext(cert_, cert_, NID_key_usage, "critical,keyCertSign,cRLSign");
    add_ext(cert_, cert_, NID_subject_key_identifier, "hash");
    X509_sign(cert_, key_, EVP_sha256());
    write_cert(cert_, ca_file());
    write_key(key_, path(name_ + ".key"));
  }
  ~TestCa() {
    X509_free(cert_);
    EVP_PKEY_free(key_);
  }
  TestCa(const TestCa&) = delete;
  TestCa& operator=(const TestCa&) = delete;

  std::string ca_file() const { return path(name_ + ".pem"); }
  std::string cert_file(const std::string& leaf) const { return path(leaf + ".pem"); }
  std::string key_file(const std::string& leaf) const { return path(leaf + ".key"); }

  void issue(const Leaf& leaf) const {
    EVP_PKEY* key = new_key();
    X509* cert = X509_new();
    X509_set_version(cert, 2);
    set_serial(cert);
    X509_gmtime_adj(X509_getm_notBefore(cert), leaf.not_before_seconds);
    X509_gmtime_adj(X509_getm_notAfter(cert), leaf.not_after_seconds);
    add_cn(X509_get_subject_name(cert), leaf.common_name);
    X509_set_issuer_name(cert, X509_get_subject_name(cert_));
    X509_set_pubkey(cert, key);
    add_ext(cert, cert, NID_basic_constraints, "critical,CA:FALSE");
    add_ext(cert, cert, NID_key_usage, "critical,digitalSignature");
    add_ext(cert, cert, NID_ext_key_usage, leaf.client ? "clientAuth" : "serverAuth");
    if (!leaf.san.empty()) {
      std::string san;
      for (const auto& s : leaf.san) san += (san.empty() ? "" : ",") + s;
      add_ext(cert_, cert, NID_subject_alt_name, san);
    }
    X509_sign(cert, key_, EVP_sha256());
    write_cert(cert, cert_file(leaf.name));
    write_key(key, key_file(leaf.name));
    X509_free(cert);
    EVP_PKEY_free(key);
  }

 private:
  std::string path(const std::string& file) const { return (dir_ / file).string(); }

  static EVP_PKEY* new_key() {
    EVP_PKEY* key = EVP_EC_gen("P-256");
    if (key == nullptr) throw std::runtime_error("EVP_EC_gen");
    return key;
  }
  static void set_serial(X509* cert) {
    static long serial = 1;
    ASN1_INTEGER_set(X509_get_serialNumber(cert), serial++);
  }
  static void add_cn(X509_NAME* name, const std::string& cn) {
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8,
                               reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1, 0);
  }
  static void add_ext(X509* issuer, X509* cert, int nid, const std::string& value) {
    X509V3_CTX ctx;
    X509V3_set_ctx_nodb(&ctx);
    X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
    X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str());
    if (ext == nullptr) throw std::runtime_error("bad extension " + value);
    X509_add_ext(cert, ext, -1);
    X509_EXTENSION_free(ext);
  }
  static void write_cert(X509* cert, const std::string& file) {
    FILE* f = std::fopen(file.c_str(), "w");
    if (f == nullptr) throw std::runtime_error("cannot write " + file);
    PEM_write_X509(f, cert);
    std::fclose(f);
  }
  static void write_key(EVP_PKEY* key, const std::string& file) {
    FILE* f = std::fopen(file.c_str(), "w");
    if (f == nullptr) throw std::runtime_error("cannot write " + file);
    PEM_write_PrivateKey(f, key, nullptr, nullptr, 0, nullptr, nullptr);
    std::fclose(f);
  }

  std::filesystem::path dir_;
  std::string name_;
  EVP_PKEY* key_ = nullptr;
  X509* cert_ = nullptr;
};

}  // namespace authrpc::testing
