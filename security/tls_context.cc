#include "authrpc/security/tls_context.h"

#include <fcntl.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "authrpc/base/enum_names.h"

namespace authrpc::security {
namespace {

// TLS 1.2 suites when 1.2 is allowed: forward-secret AEAD only.
constexpr const char* kTls12Ciphers =
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"
    "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"
    "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305";
constexpr const char* kTls13Suites =
    "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256";
constexpr unsigned char kSessionIdContext[] = "authrpc";

// Index of the per-SSL cache key (a heap std::string owned by the SSL).
int cache_key_index() {
  static const int index = SSL_get_ex_new_index(
      0, nullptr, nullptr, nullptr,
      [](void*, void* ptr, CRYPTO_EX_DATA*, int, long, void*) { delete static_cast<std::string*>(ptr); });
  return index;
}

// A configuration OpenSSL refused, with its reason.
Status fail(std::string what, Errc code = Errc::kConfigError) {
  const std::string reason = drain_openssl_errors();
  return {code, reason.empty() ? what : what + ": " + reason};
}

// Settings common to both sides.
Status configure_common(SSL_CTX* ctx, TlsVersion min_version) {
  SSL_CTX_set_min_proto_version(ctx, min_version == TlsVersion::kTls13 ? TLS1_3_VERSION
                                                                        : TLS1_2_VERSION);
  SSL_CTX_set_max_proto_version(ctx, TLS1_3_VERSION);
  // Renegotiation and compression stay off; an EOF without close_notify is
  // an ordinary end of stream (authrpc frames carry their own lengths, so a
  // truncation is detected one layer up).
  SSL_CTX_set_options(ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION |
                               SSL_OP_IGNORE_UNEXPECTED_EOF | SSL_OP_CIPHER_SERVER_PREFERENCE);
  SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  // Bulk streams: read several records per recv() instead of two recv()s
  // (header, body) per 16 KiB record.
  SSL_CTX_set_read_ahead(ctx, 1);
  SSL_CTX_set_default_read_buffer_len(ctx, 64 * 1024);
  if (SSL_CTX_set_cipher_list(ctx, kTls12Ciphers) != 1 ||
      SSL_CTX_set_ciphersuites(ctx, kTls13Suites) != 1 ||
      SSL_CTX_set1_groups_list(ctx, "X25519:P-256:P-384") != 1) {
    return fail("TLS cipher configuration");
  }
  return {};
}

// CONFIG_ERROR "cannot read WHAT PATH: <errno text>" unless the file can be
// opened for reading: said before OpenSSL tries, whose own report of a
// missing file is a system-library error code.
Status check_readable(std::string_view what, const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return {Errc::kConfigError,
            "cannot read " + std::string(what) + " " + path + ": " + std::strerror(errno)};
  }
  ::close(fd);
  return {};
}

Status load_chain_and_key(SSL_CTX* ctx, const std::string& chain, const std::string& key) {
  if (Status s = check_readable("certificate file", chain); !s.ok()) return s;
  if (SSL_CTX_use_certificate_chain_file(ctx, chain.c_str()) != 1) {
    return fail("certificate file " + chain + " holds no usable PEM certificate");
  }
  if (Status s = check_readable("private key file", key); !s.ok()) return s;
  if (SSL_CTX_use_PrivateKey_file(ctx, key.c_str(), SSL_FILETYPE_PEM) != 1) {
    // OpenSSL checks the key against the certificate as it loads it.
    const unsigned long e = ERR_peek_last_error();
    const bool mismatch = ERR_GET_LIB(e) == ERR_LIB_X509 && ERR_GET_REASON(e) == X509_R_KEY_VALUES_MISMATCH;
    return fail(mismatch ? "private key " + key + " does not match certificate " + chain
                         : "private key file " + key + " holds no usable PEM key");
  }
  if (SSL_CTX_check_private_key(ctx) != 1) {
    return fail("private key " + key + " does not match certificate " + chain);
  }
  return {};
}

Status load_ca(SSL_CTX* ctx, const std::string& ca_file) {
  if (Status s = check_readable("CA file", ca_file); !s.ok()) return s;
  if (SSL_CTX_load_verify_locations(ctx, ca_file.c_str(), nullptr) != 1) {
    return fail("CA file " + ca_file + " holds no usable PEM certificate");
  }
  return {};
}

constexpr EnumName<ClientCertificates> kClientCertificateNames[] = {
    {ClientCertificates::kNone, "none"},
    {ClientCertificates::kOptional, "optional"},
    {ClientCertificates::kRequired, "required"},
};

}  // namespace

std::string_view to_string(TlsVersion v) noexcept { return v == TlsVersion::kTls12 ? "1.2" : "1.3"; }

bool parse_tls_version(std::string_view text, TlsVersion* out) noexcept {
  if (text == "1.2") *out = TlsVersion::kTls12;
  else if (text == "1.3") *out = TlsVersion::kTls13;
  else return false;
  return true;
}

std::string_view to_string(ClientCertificates c) noexcept {
  return enum_name<ClientCertificates>(kClientCertificateNames, c);
}

bool parse_client_certificates(std::string_view text, ClientCertificates* out) noexcept {
  return parse_enum_name<ClientCertificates>(kClientCertificateNames, text, out);
}

std::string drain_openssl_errors() {
  std::string out;
  while (const unsigned long e = ERR_get_error()) {
    // Words only: a system library error is its errno's text, and an
    // error without a reason string adds nothing a reader can use (its
    // packed code, "error:80000002:...", least of all).
    std::string reason;
    if (ERR_SYSTEM_ERROR(e)) {
      reason = std::strerror(static_cast<int>(ERR_GET_REASON(e)));
    } else if (const char* text = ERR_reason_error_string(e)) {
      reason = text;
    }
    if (reason.empty() || out == reason || out.ends_with("; " + reason)) continue;
    if (!out.empty()) out += "; ";
    out += reason;
  }
  return out;
}

Result<std::shared_ptr<TlsServerContext>> TlsServerContext::create(const TlsServerOptions& options) {
  ERR_clear_error();
  SSL_CTX* ctx = SSL_CTX_new(TLS_server_method());
  if (ctx == nullptr) return fail("SSL_CTX_new", Errc::kInternal);
  std::shared_ptr<TlsServerContext> self(new TlsServerContext(ctx, options));
  if (options.certificate_file.empty() || options.private_key_file.empty()) {
    return Status(Errc::kConfigError, "a TLS server needs a certificate file and a private key file");
  }
  if (auto s = configure_common(ctx, options.min_version); !s.ok()) return s;
  if (auto s = load_chain_and_key(ctx, options.certificate_file, options.private_key_file); !s.ok()) {
    return s;
  }
  SSL_CTX_set_session_id_context(ctx, kSessionIdContext, sizeof kSessionIdContext - 1);
  if (options.session_tickets) {
    // One ticket per full handshake is enough for a client that reconnects.
    SSL_CTX_set_num_tickets(ctx, 1);
  } else {
    SSL_CTX_set_num_tickets(ctx, 0);
    SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET);
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
  }
  if (options.client_certificates != ClientCertificates::kNone) {
    if (options.ca_file.empty()) {
      return Status(Errc::kConfigError, "client certificates need a CA bundle (ca_file)");
    }
    if (auto s = load_ca(ctx, options.ca_file); !s.ok()) return s;
    STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(options.ca_file.c_str());
    if (names != nullptr) SSL_CTX_set_client_CA_list(ctx, names);
    int mode = SSL_VERIFY_PEER;
    if (options.client_certificates == ClientCertificates::kRequired) {
      mode |= SSL_VERIFY_FAIL_IF_NO_PEER_CERT;
    }
    SSL_CTX_set_verify(ctx, mode, nullptr);
  } else {
    SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, nullptr);
  }
  return self;
}

TlsServerContext::~TlsServerContext() { SSL_CTX_free(ctx_); }

Result<std::shared_ptr<TlsClientContext>> TlsClientContext::create(const TlsClientOptions& options) {
  ERR_clear_error();
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  if (ctx == nullptr) return fail("SSL_CTX_new", Errc::kInternal);
  std::shared_ptr<TlsClientContext> self(new TlsClientContext(ctx, options));
  if (auto s = configure_common(ctx, options.min_version); !s.ok()) return s;
  if (options.ca_file.empty()) {
    return Status(Errc::kConfigError,
                  "a TLS client needs a CA bundle (ca_file) to verify the server");
  }
  if (auto s = load_ca(ctx, options.ca_file); !s.ok()) return s;
  if (options.certificate_file.empty() != options.private_key_file.empty()) {
    return Status(Errc::kConfigError,
                  "a client certificate needs both certificate_file and private_key_file");
  }
  if (!options.certificate_file.empty()) {
    if (auto s = load_chain_and_key(ctx, options.certificate_file, options.private_key_file); !s.ok()) {
      return s;
    }
  }
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
  if (options.session_resumption) {
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
    SSL_CTX_set_app_data(ctx, self.get());
    SSL_CTX_sess_set_new_cb(ctx, &TlsClientContext::on_new_session);
  } else {
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
  }
  return self;
}

TlsClientContext::~TlsClientContext() {
  clear_sessions();
  SSL_CTX_free(ctx_);
}

Result<UniqueSsl> TlsClientContext::new_ssl(const std::string& server_name,
                                            const std::string& cache_key) {
  ERR_clear_error();
  UniqueSsl owned(SSL_new(ctx_));
  SSL* ssl = owned.get();
  if (ssl == nullptr) return fail("SSL_new", Errc::kInternal);
  X509_VERIFY_PARAM* param = SSL_get0_param(ssl);
  const bool is_ip = X509_VERIFY_PARAM_set1_ip_asc(param, server_name.c_str()) == 1;
  if (!is_ip) {
    // A DNS name: checked against the SAN (no CN fallback, no partial wildcards).
    SSL_set_hostflags(ssl, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS | X509_CHECK_FLAG_NEVER_CHECK_SUBJECT);
    if (SSL_set1_host(ssl, server_name.c_str()) != 1 ||
        SSL_set_tlsext_host_name(ssl, server_name.c_str()) != 1) {
      return fail("bad server name '" + server_name + "'");
    }
  }
  if (options_.session_resumption) {
    SSL_set_ex_data(ssl, cache_key_index(), new std::string(cache_key));
    std::lock_guard lock(mu_);
    auto it = sessions_.find(cache_key);
    if (it != sessions_.end()) {
      if (SSL_SESSION_is_resumable(it->second) == 1) {
        SSL_set_session(ssl, it->second);
      } else {
        SSL_SESSION_free(it->second);
        sessions_.erase(it);
      }
    }
  }
  return Result<UniqueSsl>(std::move(owned));
}

int TlsClientContext::on_new_session(SSL* ssl, SSL_SESSION* session) {
  auto* self = static_cast<TlsClientContext*>(SSL_CTX_get_app_data(SSL_get_SSL_CTX(ssl)));
  auto* key = static_cast<std::string*>(SSL_get_ex_data(ssl, cache_key_index()));
  if (self == nullptr || key == nullptr) return 0;
  std::lock_guard lock(self->mu_);
  auto [it, inserted] = self->sessions_.try_emplace(*key, session);
  if (!inserted) {
    SSL_SESSION_free(it->second);
    it->second = session;
  }
  return 1;  // we keep the reference
}

std::size_t TlsClientContext::cached_sessions() const {
  std::lock_guard lock(mu_);
  return sessions_.size();
}

void TlsClientContext::clear_sessions() {
  std::lock_guard lock(mu_);
  for (auto& [key, session] : sessions_) SSL_SESSION_free(session);
  sessions_.clear();
}

}  // namespace authrpc::security
