#include "authrpc/security/secret_bytes.h"

#include <openssl/crypto.h>
#include <openssl/rand.h>

#include <algorithm>
#include <limits>

namespace authrpc::security {

SecretBytes::SecretBytes(std::span<const std::uint8_t> bytes) : bytes_(bytes.begin(), bytes.end()) {}

SecretBytes::SecretBytes(std::string_view bytes)
    : bytes_(reinterpret_cast<const std::uint8_t*>(bytes.data()),
             reinterpret_cast<const std::uint8_t*>(bytes.data()) + bytes.size()) {}

SecretBytes::~SecretBytes() { wipe(); }

SecretBytes::SecretBytes(const SecretBytes& other) : bytes_(other.bytes_) {}

SecretBytes& SecretBytes::operator=(const SecretBytes& other) {
  if (this != &other) {
    // Assign into a wiped buffer of the right size: no reallocation leaves a
    // copy of the old secret behind.
    reset(other.size());
    std::copy(other.bytes_.begin(), other.bytes_.end(), bytes_.begin());
  }
  return *this;
}

SecretBytes::SecretBytes(SecretBytes&& other) noexcept : bytes_(std::move(other.bytes_)) {
  other.bytes_.clear();
}

SecretBytes& SecretBytes::operator=(SecretBytes&& other) noexcept {
  if (this != &other) {
    wipe();
    bytes_ = std::move(other.bytes_);
    other.bytes_.clear();
  }
  return *this;
}

SecretBytes SecretBytes::random(std::size_t n) {
  SecretBytes out;
  out.reset(n);
  if (n > static_cast<std::size_t>(std::numeric_limits<int>::max()) ||
      RAND_priv_bytes(out.bytes_.data(), static_cast<int>(n)) != 1) {
    out.reset(0);
  }
  return out;
}

void SecretBytes::reset(std::size_t n) {
  wipe();
  std::vector<std::uint8_t>().swap(bytes_);
  bytes_.resize(n);
}

bool SecretBytes::equals(std::span<const std::uint8_t> other) const noexcept {
  if (other.size() != bytes_.size()) return false;
  if (bytes_.empty()) return true;
  return CRYPTO_memcmp(bytes_.data(), other.data(), bytes_.size()) == 0;
}

void SecretBytes::wipe() noexcept {
  if (!bytes_.empty()) OPENSSL_cleanse(bytes_.data(), bytes_.size());
}

void cleanse(void* data, std::size_t n) noexcept {
  if (n != 0) OPENSSL_cleanse(data, n);
}

}  // namespace authrpc::security
