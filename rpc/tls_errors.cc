#include "authrpc/rpc/tls_errors.h"

#include <openssl/err.h>
#include <openssl/x509_vfy.h>

#include "authrpc/base/error_table.h"
#include "authrpc/security/tls_context.h"

namespace authrpc {
namespace {

// The names are also the `reason` label of the TLS handshake metrics: a
// fixed set.
constexpr ErrorRow<TlsErrc> kTlsErrors[] = {
    {TlsErrc::kHandshakeFailed, "HANDSHAKE_FAILED", "TLS handshake failed",
     Errc::kAuthenticationFailed},
    {TlsErrc::kCertificateExpired, "CERTIFICATE_EXPIRED", "certificate expired or not yet valid",
     Errc::kAuthenticationFailed},
    {TlsErrc::kUnknownCa, "UNKNOWN_CA", "certificate not issued by a trusted CA",
     Errc::kAuthenticationFailed},
    {TlsErrc::kNameMismatch, "NAME_MISMATCH", "certificate does not match the server name",
     Errc::kAuthenticationFailed},
    {TlsErrc::kCertificateRequired, "CERTIFICATE_REQUIRED", "client certificate required",
     Errc::kAuthenticationFailed},
    {TlsErrc::kCertificateRejected, "CERTIFICATE_REJECTED", "peer rejected our certificate",
     Errc::kAuthenticationFailed},
    {TlsErrc::kNotTls, "NOT_TLS", "peer does not speak TLS", Errc::kProtocolError},
    {TlsErrc::kTlsRequired, "TLS_REQUIRED", "TLS required", Errc::kFailedPrecondition},
    {TlsErrc::kProtocolVersion, "PROTOCOL_VERSION", "no common TLS version or cipher suite",
     Errc::kProtocolError},
    {TlsErrc::kTlsDisabled, "TLS_DISABLED", "TLS disabled by policy", Errc::kFailedPrecondition},
};
constexpr ErrorTable<TlsErrc> kTlsTable{
    kTlsErrors, {TlsErrc{}, "TLS_ERROR", "TLS error", Errc::kAuthenticationFailed}};
constinit const TableErrorCategory<TlsErrc> kTlsCategory("authrpc.tls", kTlsTable);

TlsErrc from_verify_result(long result) {
  switch (result) {
    case X509_V_ERR_CERT_HAS_EXPIRED:
    case X509_V_ERR_CERT_NOT_YET_VALID:
      return TlsErrc::kCertificateExpired;
    case X509_V_ERR_HOSTNAME_MISMATCH:
    case X509_V_ERR_IP_ADDRESS_MISMATCH:
    case X509_V_ERR_EMAIL_MISMATCH:
      return TlsErrc::kNameMismatch;
    case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY:
    case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT:
    case X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN:
    case X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT:
    case X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE:
    case X509_V_ERR_CERT_SIGNATURE_FAILURE:
      return TlsErrc::kUnknownCa;
    default:
      return TlsErrc::kHandshakeFailed;
  }
}

TlsErrc from_reason(int reason) {
  switch (reason) {
    case SSL_R_WRONG_VERSION_NUMBER:
    case SSL_R_PACKET_LENGTH_TOO_LONG:
    case SSL_R_RECORD_LENGTH_MISMATCH:
    case SSL_R_HTTP_REQUEST:
    case SSL_R_HTTPS_PROXY_REQUEST:
    case SSL_R_UNEXPECTED_RECORD:
    case SSL_R_UNEXPECTED_MESSAGE:
    case SSL_R_LENGTH_MISMATCH:
    case SSL_R_BAD_PACKET_LENGTH:
    case SSL_R_RECORD_TOO_SMALL:
    case SSL_R_UNKNOWN_PROTOCOL:
      return TlsErrc::kNotTls;
    case SSL_R_PEER_DID_NOT_RETURN_A_CERTIFICATE:
    case SSL_R_TLSV13_ALERT_CERTIFICATE_REQUIRED:
      return TlsErrc::kCertificateRequired;
    case SSL_R_SSLV3_ALERT_BAD_CERTIFICATE:
    case SSL_R_TLSV1_ALERT_UNKNOWN_CA:
    case SSL_R_SSLV3_ALERT_CERTIFICATE_EXPIRED:
    case SSL_R_SSLV3_ALERT_CERTIFICATE_UNKNOWN:
    case SSL_R_SSLV3_ALERT_UNSUPPORTED_CERTIFICATE:
    case SSL_R_SSLV3_ALERT_CERTIFICATE_REVOKED:
      return TlsErrc::kCertificateRejected;
    case SSL_R_UNSUPPORTED_PROTOCOL:
    case SSL_R_TLSV1_ALERT_PROTOCOL_VERSION:
    case SSL_R_NO_SHARED_CIPHER:
    case SSL_R_NO_PROTOCOLS_AVAILABLE:
    case SSL_R_SSLV3_ALERT_HANDSHAKE_FAILURE:
    case SSL_R_NO_SUITABLE_SIGNATURE_ALGORITHM:
    case SSL_R_VERSION_TOO_LOW:
      return TlsErrc::kProtocolVersion;
    default:
      return TlsErrc::kHandshakeFailed;
  }
}

// The name a client's certificate check looked for: the host name, or
// the IP address, it dialled ("" on a server).
std::string dialled_name(SSL* ssl) {
  X509_VERIFY_PARAM* param = SSL_get0_param(ssl);
  if (const char* host = X509_VERIFY_PARAM_get0_host(param, 0)) return host;
  char* ip = X509_VERIFY_PARAM_get1_ip_asc(param);
  if (ip == nullptr) return "the host dialled";
  std::string out = ip;
  OPENSSL_free(ip);
  return out;
}

}  // namespace

const std::error_category& tls_category() noexcept { return kTlsCategory; }

std::error_code make_error_code(TlsErrc e) noexcept {
  return {static_cast<int>(e), kTlsCategory};
}

Status tls_handshake_status(SSL* ssl, std::string_view context) {
  const long verify = SSL_get_verify_result(ssl);
  const unsigned long first = ERR_peek_error();
  const bool server = SSL_is_server(ssl) == 1;
  const std::string peer = server ? "the client" : "the server";
  TlsErrc kind = TlsErrc::kHandshakeFailed;
  const bool verify_failed =
      verify != X509_V_OK && ERR_GET_REASON(first) == SSL_R_CERTIFICATE_VERIFY_FAILED;
  if (verify_failed) {
    kind = from_verify_result(verify);
  } else if (first != 0) {
    kind = from_reason(ERR_GET_REASON(first));
  }
  // OpenSSL's words for what failed ("sslv3 alert bad certificate"), kept
  // where the kind alone does not say it all.
  const std::string reasons = security::drain_openssl_errors();
  auto with_reasons = [&reasons](std::string text) {
    return reasons.empty() ? text : text + " (" + reasons + ")";
  };
  std::string detail;
  if (verify_failed) {
    detail = "certificate verify failed: " + std::string(X509_verify_cert_error_string(verify));
    if (kind == TlsErrc::kNameMismatch) {
      detail += " (" + peer + "'s certificate does not name " + dialled_name(ssl) + ")";
    } else if (kind == TlsErrc::kUnknownCa) {
      detail += " (" + peer + "'s certificate does not chain to a CA in the CA file)";
    }
  } else {
    switch (kind) {
      case TlsErrc::kNotTls:
        detail = peer + " does not speak TLS" +
                 (server ? std::string() : " (is it a plaintext endpoint? then use tcp://)");
        break;
      case TlsErrc::kCertificateRequired:
        detail = server ? "the client presented no certificate"
                        : "the server requires a client certificate (a certificate and key)";
        break;
      case TlsErrc::kCertificateRejected:
        detail = with_reasons(peer + " refused our certificate");
        break;
      case TlsErrc::kProtocolVersion:
        detail = with_reasons("no TLS version or cipher suite in common with " + peer);
        break;
      default:
        detail = with_reasons("TLS handshake failed");
        break;
    }
  }
  std::string message(context);
  message += ": " + detail;
  return Status(make_error_code(kind), std::move(message));
}

}  // namespace authrpc
