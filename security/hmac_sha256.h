// HMAC-SHA256 without OpenSSL 3's per-call algorithm fetch, in two forms
// (docs/TOKENS.md "Cost", docs/PERFORMANCE.md "Measured costs behind the code"):
//  - hmac_sha256(): any key, once. Fetches HMAC and SHA-256 once per process
//    and keeps one EVP_MAC_CTX per thread, re-keyed for each MAC. Used where
//    a key is used once (a token's password from its master key,
//    security/token.h).
//  - HmacSha256Key: one key, many MACs. Keyed once (the SHA-256 states after
//    the inner and outer padded key block), so a MAC costs its message's
//    blocks and one more, with no re-keying: about a third of hmac_sha256()'s
//    time for a short message. Used for a token's password by the `token`
//    mechanism's proofs (auth/mechanisms/token/token_mechanism.h), on both sides.
// Thread-safe: hmac_sha256() from any thread; a HmacSha256Key's mac() from
// many threads at once (each copies the prepared states into its own
// context).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string_view>

// OpenSSL's EVP_MD_CTX, declared here so that this header needs no OpenSSL
// headers (it is installed: security/secret_manager.h includes it).
struct evp_md_ctx_st;

namespace authrpc::security {

inline constexpr std::size_t kHmacSha256Bytes = 32;

// HMAC-SHA256(key, parts[0] || parts[1] || ...) into *out. False if
// OpenSSL fails or the key is empty; *out is then unspecified.
bool hmac_sha256(std::span<const std::uint8_t> key, std::initializer_list<std::string_view> parts,
                 std::array<std::uint8_t, kHmacSha256Bytes>* out);

// A secret key prepared for HMAC-SHA256. Owns two SHA-256 contexts that
// hold key-equivalent state (whoever has them can make MACs): freed with
// OPENSSL_clear_free by OpenSSL's SHA-256 provider, never printed.
// Move-only; immutable once made.
class HmacSha256Key {
 public:
  HmacSha256Key() noexcept = default;
  // empty() if the key is empty or OpenSSL fails. Keys longer than a
  // SHA-256 block are hashed first, as HMAC says.
  explicit HmacSha256Key(std::span<const std::uint8_t> key);
  ~HmacSha256Key();
  HmacSha256Key(HmacSha256Key&& other) noexcept;
  HmacSha256Key& operator=(HmacSha256Key&& other) noexcept;
  HmacSha256Key(const HmacSha256Key&) = delete;
  HmacSha256Key& operator=(const HmacSha256Key&) = delete;

  bool empty() const noexcept { return inner_ == nullptr; }
  // HMAC-SHA256(key, parts[0] || parts[1] || ...) into *out; false if
  // empty() or OpenSSL fails (*out is then unspecified).
  bool mac(std::initializer_list<std::string_view> parts,
           std::array<std::uint8_t, kHmacSha256Bytes>* out) const;

 private:
  void reset() noexcept;
  evp_md_ctx_st* inner_ = nullptr;  // SHA-256 after key ^ ipad
  evp_md_ctx_st* outer_ = nullptr;  // SHA-256 after key ^ opad
};

}  // namespace authrpc::security
