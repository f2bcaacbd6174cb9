#include "authrpc/security/x509_identity.h"

#include <openssl/bio.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <memory>

#include "authrpc/base/enum_names.h"

namespace authrpc::security {
namespace {

std::string asn1_string(const ASN1_STRING* s) {
  unsigned char* utf8 = nullptr;
  const int len = ASN1_STRING_to_UTF8(&utf8, s);
  if (len < 0) return {};
  std::string out(reinterpret_cast<const char*>(utf8), static_cast<std::size_t>(len));
  OPENSSL_free(utf8);
  return out;
}

std::string common_name(X509* cert) {
  X509_NAME* name = X509_get_subject_name(cert);
  int index = -1, last = -1;
  while ((index = X509_NAME_get_index_by_NID(name, NID_commonName, index)) >= 0) last = index;
  if (last < 0) return {};
  return asn1_string(X509_NAME_ENTRY_get_data(X509_NAME_get_entry(name, last)));
}

std::string first_san(X509* cert, int type) {
  auto* names = static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(cert, NID_subject_alt_name, nullptr, nullptr));
  if (names == nullptr) return {};
  std::string out;
  for (int i = 0; i < sk_GENERAL_NAME_num(names) && out.empty(); ++i) {
    const GENERAL_NAME* n = sk_GENERAL_NAME_value(names, i);
    if (n->type == type) out = asn1_string(n->d.ia5);
  }
  GENERAL_NAMES_free(names);
  return out;
}

std::string subject_line(X509* cert) {
  BIO* bio = BIO_new(BIO_s_mem());
  X509_NAME_print_ex(bio, X509_get_subject_name(cert), 0, XN_FLAG_RFC2253);
  char* data = nullptr;
  const long len = BIO_get_mem_data(bio, &data);
  std::string out(data, static_cast<std::size_t>(len));
  BIO_free(bio);
  return out;
}

constexpr EnumName<X509UserFrom> kUserFromNames[] = {
    {X509UserFrom::kCommonName, "cn"},
    {X509UserFrom::kSanEmail, "san-email"},
    {X509UserFrom::kSanEmailLocal, "san-email-local"},
    {X509UserFrom::kSanDns, "san-dns"},
};

}  // namespace

bool parse_x509_user_from(std::string_view text, X509UserFrom* out) noexcept {
  return parse_enum_name<X509UserFrom>(kUserFromNames, text, out);
}

std::string_view to_string(X509UserFrom rule) noexcept {
  return enum_name<X509UserFrom>(kUserFromNames, rule);
}

Result<X509Identity> x509_identity(std::string_view der, X509UserFrom rule) {
  const auto* p = reinterpret_cast<const unsigned char*>(der.data());
  std::unique_ptr<X509, decltype(&X509_free)> cert(d2i_X509(nullptr, &p, static_cast<long>(der.size())),
                                                   &X509_free);
  if (!cert) return Status(Errc::kAuthenticationFailed, "client certificate does not parse");
  std::string user;
  switch (rule) {
    case X509UserFrom::kCommonName: user = common_name(cert.get()); break;
    case X509UserFrom::kSanEmail: user = first_san(cert.get(), GEN_EMAIL); break;
    case X509UserFrom::kSanEmailLocal:
      user = first_san(cert.get(), GEN_EMAIL);
      user = user.substr(0, user.find('@'));
      break;
    case X509UserFrom::kSanDns: user = first_san(cert.get(), GEN_DNS); break;
  }
  if (user.empty()) {
    return Status(Errc::kAuthenticationFailed,
                  "client certificate has no " + std::string(to_string(rule)) + " to take the user name from");
  }
  return X509Identity{std::move(user), subject_line(cert.get())};
}

}  // namespace authrpc::security
