// TLS contexts: one OpenSSL SSL_CTX per process side, built once from PEM
// files and shared by every connection of that side (building a context per
// connection is what makes gRPC's and libpq's TLS sessions cost milliseconds).
// TlsServerContext holds the server's chain and key and, for mutual TLS, the
// CA bundle client certificates must chain to. TlsClientContext holds the CA
// bundle, an optional client certificate, and a cache of TLS 1.3 session
// tickets so that a client reconnecting to the same server resumes instead of
// doing a full handshake.
//
// Created by the application (or server/client configuration) and passed to
// the TLS stream wrappers (rpc/tls_stream.h, rpc/tls_listener.h).
// Thread-safe after create(): the SSL_CTX is only read, the session cache has
// its own mutex.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <openssl/ssl.h>
#include <string>
#include <string_view>

#include "authrpc/base/result.h"

namespace authrpc::security {

// The oldest protocol version accepted. Nothing below TLS 1.2 exists here.
enum class TlsVersion { kTls12, kTls13 };

// Whether a server asks for client certificates (mutual TLS).
enum class ClientCertificates { kNone, kOptional, kRequired };

std::string_view to_string(TlsVersion v) noexcept;
bool parse_tls_version(std::string_view text, TlsVersion* out) noexcept;  // "1.2", "1.3"
std::string_view to_string(ClientCertificates c) noexcept;
bool parse_client_certificates(std::string_view text, ClientCertificates* out) noexcept;

struct TlsServerOptions {
  std::string certificate_file;  // PEM: leaf first, then intermediates
  std::string private_key_file;  // PEM (unencrypted)
  std::string ca_file;           // PEM bundle for client certificates; needed unless kNone
  TlsVersion min_version = TlsVersion::kTls13;
  ClientCertificates client_certificates = ClientCertificates::kNone;
  // TLS 1.3 resumption by session ticket (stateless on the server).
  bool session_tickets = true;
};

struct TlsClientOptions {
  std::string ca_file;           // PEM bundle the server's chain must lead to
  std::string certificate_file;  // optional client certificate (mutual TLS)
  std::string private_key_file;
  TlsVersion min_version = TlsVersion::kTls13;
  bool session_resumption = true;  // keep tickets and offer them on reconnect
};

// An SSL the holder owns.
struct SslFree {
  void operator()(SSL* ssl) const noexcept { SSL_free(ssl); }
};
using UniqueSsl = std::unique_ptr<SSL, SslFree>;

class TlsServerContext {
 public:
  // Loads and checks the files (key matches the certificate). A failure is
  // CONFIG_ERROR (INTERNAL if OpenSSL cannot make a context at all); its text
  // holds file names and OpenSSL's reason only.
  static Result<std::shared_ptr<TlsServerContext>> create(const TlsServerOptions& options);
  ~TlsServerContext();
  TlsServerContext(const TlsServerContext&) = delete;
  TlsServerContext& operator=(const TlsServerContext&) = delete;

  SSL_CTX* native() const noexcept { return ctx_; }
  const TlsServerOptions& options() const noexcept { return options_; }

 private:
  TlsServerContext(SSL_CTX* ctx, TlsServerOptions options) : ctx_(ctx), options_(std::move(options)) {}
  SSL_CTX* ctx_;
  TlsServerOptions options_;
};

class TlsClientContext {
 public:
  // As TlsServerContext::create().
  static Result<std::shared_ptr<TlsClientContext>> create(const TlsClientOptions& options);
  ~TlsClientContext();
  TlsClientContext(const TlsClientContext&) = delete;
  TlsClientContext& operator=(const TlsClientContext&) = delete;

  SSL_CTX* native() const noexcept { return ctx_; }
  const TlsClientOptions& options() const noexcept { return options_; }
  bool has_certificate() const noexcept { return !options_.certificate_file.empty(); }

  // Prepares a new client SSL for `server_name` (a DNS name or an IP
  // literal): SNI, name verification against the certificate's SAN, and a
  // cached session for `cache_key` (e.g. "host:port") if there is one; new
  // tickets the server sends are stored under that key. A name OpenSSL
  // refuses is CONFIG_ERROR.
  Result<UniqueSsl> new_ssl(const std::string& server_name, const std::string& cache_key);

  // Sessions held in the cache (for tests and benchmarks).
  std::size_t cached_sessions() const;
  void clear_sessions();

 private:
  TlsClientContext(SSL_CTX* ctx, TlsClientOptions options) : ctx_(ctx), options_(std::move(options)) {}
  static int on_new_session(SSL* ssl, SSL_SESSION* session);

  SSL_CTX* ctx_;
  TlsClientOptions options_;
  mutable std::mutex mu_;
  std::map<std::string, SSL_SESSION*> sessions_;  // owned references
};

// Drains OpenSSL's error queue into one line ("" if empty).
std::string drain_openssl_errors();

}  // namespace authrpc::security
