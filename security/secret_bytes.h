// SecretBytes: key material or a password held in memory. Owns its buffer,
// wipes it (OPENSSL_cleanse) when freed or overwritten, compares in constant
// time, and has no operator<< so that it cannot end up in a log line by
// accident. Copies are explicit in the sense that each copy is wiped too.
// Not synchronised: share it read-only or copy it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace authrpc::security {

class SecretBytes {
 public:
  SecretBytes() = default;
  explicit SecretBytes(std::span<const std::uint8_t> bytes);
  explicit SecretBytes(std::string_view bytes);
  ~SecretBytes();
  SecretBytes(const SecretBytes& other);
  SecretBytes& operator=(const SecretBytes& other);
  SecretBytes(SecretBytes&& other) noexcept;
  SecretBytes& operator=(SecretBytes&& other) noexcept;

  // n bytes from the CSPRNG's private stream (RAND_priv_bytes). Returns an
  // empty object if the CSPRNG fails (never silently weak bytes).
  static SecretBytes random(std::size_t n);

  const std::uint8_t* data() const noexcept { return bytes_.data(); }
  std::uint8_t* data() noexcept { return bytes_.data(); }
  std::size_t size() const noexcept { return bytes_.size(); }
  bool empty() const noexcept { return bytes_.empty(); }
  std::span<const std::uint8_t> span() const noexcept { return bytes_; }
  std::string_view view() const noexcept {
    return {reinterpret_cast<const char*>(bytes_.data()), bytes_.size()};
  }

  // Wipes and resizes to n zero bytes.
  void reset(std::size_t n = 0);

  // Constant-time for equal sizes (CRYPTO_memcmp); sizes are not secret.
  bool equals(std::span<const std::uint8_t> other) const noexcept;
  bool equals(const SecretBytes& other) const noexcept { return equals(other.span()); }

 private:
  void wipe() noexcept;
  std::vector<std::uint8_t> bytes_;
};

// Wipes a buffer that held a secret (for std::string and friends).
void cleanse(void* data, std::size_t n) noexcept;

}  // namespace authrpc::security
