// Maps a verified X.509 client certificate to a user name (docs/TLS.md,
// "Client certificates"). Pure parsing of DER with OpenSSL; the certificate
// must already have been verified by the TLS handshake — this code does not
// check signatures or validity. Used by the `x509` mechanism
// (auth/mechanisms/x509/x509.h).
#pragma once

#include <string>
#include <string_view>

#include "authrpc/base/result.h"

namespace authrpc::security {

// Where the user name comes from.
enum class X509UserFrom {
  kCommonName,      // "cn": the subject's (last) commonName
  kSanEmail,        // "san-email": the first rfc822Name SAN, whole
  kSanEmailLocal,   // "san-email-local": the part of it before '@'
  kSanDns,          // "san-dns": the first dNSName SAN
};

bool parse_x509_user_from(std::string_view text, X509UserFrom* out) noexcept;
std::string_view to_string(X509UserFrom rule) noexcept;

struct X509Identity {
  std::string user;     // per the rule
  std::string subject;  // RFC 2253 one-line subject, e.g. "CN=alice,O=Example"
};

// AUTHENTICATION_FAILED if the DER does not parse or the field the rule
// names is missing or empty.
Result<X509Identity> x509_identity(std::string_view der, X509UserFrom rule);

}  // namespace authrpc::security
