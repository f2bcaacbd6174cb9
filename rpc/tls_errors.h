// Typed TLS failures. Each TlsErrc maps (default_error_condition) onto the
// authrpc Errc that says what a caller should do, so retry_advice() and the
// wire status work on them unchanged; the exact kind stays comparable
// (status.code == TlsErrc::kCertificateExpired).
#pragma once

#include <openssl/ssl.h>
#include <string>
#include <system_error>

#include "authrpc/base/status.h"

namespace authrpc {

enum class TlsErrc {
  kHandshakeFailed = 1,        // any other handshake failure
  kCertificateExpired,         // the peer's certificate (or chain) is expired or not yet valid
  kUnknownCa,                  // the peer's chain does not lead to a trusted CA
  kNameMismatch,               // the server's certificate does not name the host we dialled
  kCertificateRequired,        // mutual TLS: the client presented no certificate
  kCertificateRejected,        // the peer refused our certificate (alert from the other side)
  kNotTls,                     // the peer does not speak TLS (plaintext or garbage)
  kTlsRequired,                // plaintext on an endpoint that requires TLS
  kProtocolVersion,            // no common protocol version or cipher suite
  kTlsDisabled,                // TLS offered to a side whose policy disables it
};

const std::error_category& tls_category() noexcept;
std::error_code make_error_code(TlsErrc e) noexcept;

// Classifies a failed handshake on `ssl` (verify result, then the first
// OpenSSL reason), drains the error queue, and says what failed in words
// after `context`: "certificate verify failed: self-signed certificate
// (...)", "the server does not speak TLS (...)". OpenSSL's reason strings
// appear only where the kind alone does not say it all; its packed error
// codes never do.
Status tls_handshake_status(SSL* ssl, std::string_view context);

}  // namespace authrpc

template <>
struct std::is_error_code_enum<authrpc::TlsErrc> : std::true_type {};
