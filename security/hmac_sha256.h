// HMAC-SHA256 without OpenSSL 3's per-call algorithm fetch. The one-shot
// HMAC() fetches the HMAC and SHA-256 implementations from the provider on
// every call, which costs more than the hashing itself; this helper fetches
// them once per process and keeps one EVP_MAC_CTX per thread, re-keyed for
// each MAC (docs/TOKENS.md "Costs", docs/DESIGN.md "Measured costs behind
// the code"). Used by the token password derivation
// (security/token.h) and the `token` mechanism's proofs
// (auth/token_mechanism.h). Thread-safe.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string_view>

namespace authrpc::security {

inline constexpr std::size_t kHmacSha256Bytes = 32;

// HMAC-SHA256(key, parts[0] || parts[1] || ...) into *out. False if
// OpenSSL fails or the key is empty; *out is then unspecified.
bool hmac_sha256(std::span<const std::uint8_t> key, std::initializer_list<std::string_view> parts,
                 std::array<std::uint8_t, kHmacSha256Bytes>* out);

}  // namespace authrpc::security
