#include "authrpc/security/base64url.h"

#include <openssl/evp.h>

#include "authrpc/security/secret_bytes.h"

namespace authrpc::security {
namespace {

bool url_char(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_';
}

// The 6-bit value of a URL-safe base64 character (checked by url_char).
int sextet(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  return c == '-' ? 62 : 63;
}

}  // namespace

std::string base64url_encode(std::string_view bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3) + 1, '\0');
  int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(bytes.data()),
                          static_cast<int>(bytes.size()));
  out.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
  while (!out.empty() && out.back() == '=') out.pop_back();
  for (char& c : out) {
    if (c == '+') c = '-';
    if (c == '/') c = '_';
  }
  return out;
}

std::optional<std::string> base64url_decode(std::string_view text) {
  if (text.size() % 4 == 1) return std::nullopt;
  for (char c : text) {
    if (!url_char(c)) return std::nullopt;
  }
  std::size_t pad = (4 - text.size() % 4) % 4;
  // Unused low bits of the last character must be zero, so that each byte
  // string has exactly one text form.
  if (pad == 1 && (sextet(text.back()) & 0x03) != 0) return std::nullopt;
  if (pad == 2 && (sextet(text.back()) & 0x0f) != 0) return std::nullopt;

  std::string standard(text);
  standard.append(pad, '=');
  for (char& c : standard) {
    if (c == '-') c = '+';
    if (c == '_') c = '/';
  }
  std::string out(3 * (standard.size() / 4), '\0');
  int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(standard.data()),
                          static_cast<int>(standard.size()));
  // The translated copy held the secret's text form too.
  cleanse(standard.data(), standard.size());
  if (n < 0 || static_cast<std::size_t>(n) < pad) {
    cleanse(out.data(), out.size());
    return std::nullopt;
  }
  // EVP_DecodeBlock counts the zero bytes that padding stands for.
  out.resize(static_cast<std::size_t>(n) - pad);
  return out;
}

}  // namespace authrpc::security
