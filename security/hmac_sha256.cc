#include "authrpc/security/hmac_sha256.h"

#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/params.h>

#include <memory>
#include <utility>

#include "authrpc/security/secret_bytes.h"

namespace authrpc::security {
namespace {

struct MacCtxFree {
  void operator()(EVP_MAC_CTX* c) const noexcept { EVP_MAC_CTX_free(c); }
};
using MacCtx = std::unique_ptr<EVP_MAC_CTX, MacCtxFree>;

// An HMAC-SHA256 context with both algorithms fetched, keyed with a dummy
// key: OpenSSL 3.0 cannot duplicate an HMAC context that was never keyed,
// and re-keying a duplicate reuses the fetched digest instead of fetching
// it again. Never used for a MAC itself.
MacCtx make_template() {
  EVP_MAC* mac = EVP_MAC_fetch(nullptr, "HMAC", nullptr);
  if (mac == nullptr) return nullptr;
  MacCtx ctx(EVP_MAC_CTX_new(mac));
  EVP_MAC_free(mac);  // the context keeps its own reference
  if (!ctx) return nullptr;
  char digest[] = "SHA256";
  const OSSL_PARAM params[] = {
      OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0), OSSL_PARAM_END};
  const unsigned char dummy_key[kHmacSha256Bytes] = {};
  if (EVP_MAC_init(ctx.get(), dummy_key, sizeof dummy_key, params) != 1) return nullptr;
  return ctx;
}

const EVP_MAC_CTX* template_ctx() {
  static const MacCtx ctx = make_template();
  return ctx.get();
}

// One context per thread, re-keyed for each MAC: no allocation and no fetch
// per call. It holds the last key's HMAC state until the next call or the
// thread's exit (EVP_MAC_CTX_free wipes it), like the password it was
// computed from, which its caller holds anyway.
EVP_MAC_CTX* thread_ctx() {
  thread_local const MacCtx ctx = [] {
    const EVP_MAC_CTX* tmpl = template_ctx();
    return tmpl != nullptr ? MacCtx(EVP_MAC_CTX_dup(tmpl)) : MacCtx();
  }();
  return ctx.get();
}

struct MdCtxFree {
  void operator()(EVP_MD_CTX* c) const noexcept { EVP_MD_CTX_free(c); }
};
using MdCtx = std::unique_ptr<EVP_MD_CTX, MdCtxFree>;

constexpr std::size_t kBlockBytes = 64;  // SHA-256's block

const EVP_MD* sha256() {
  static EVP_MD* const md = EVP_MD_fetch(nullptr, "SHA256", nullptr);
  return md;
}

// A HmacSha256Key's MACs run in this thread's context: the prepared states
// are copied into it, never changed, so one key serves every thread.
EVP_MD_CTX* thread_md_ctx() {
  thread_local const MdCtx ctx(EVP_MD_CTX_new());
  return ctx.get();
}

// SHA-256 after one block of key ^ pad.
MdCtx padded_key_state(std::span<const std::uint8_t> key, std::uint8_t pad) {
  std::uint8_t block[kBlockBytes];
  for (std::size_t i = 0; i < kBlockBytes; ++i) {
    block[i] = static_cast<std::uint8_t>((i < key.size() ? key[i] : 0) ^ pad);
  }
  MdCtx ctx(EVP_MD_CTX_new());
  const bool ok = ctx && sha256() != nullptr && EVP_DigestInit_ex(ctx.get(), sha256(), nullptr) == 1 &&
                  EVP_DigestUpdate(ctx.get(), block, sizeof block) == 1;
  cleanse(block, sizeof block);
  return ok ? std::move(ctx) : MdCtx();
}

}  // namespace

HmacSha256Key::HmacSha256Key(std::span<const std::uint8_t> key) {
  if (key.empty()) return;
  std::array<std::uint8_t, kHmacSha256Bytes> hashed{};
  if (key.size() > kBlockBytes) {
    unsigned int len = 0;
    if (sha256() == nullptr ||
        EVP_Digest(key.data(), key.size(), hashed.data(), &len, sha256(), nullptr) != 1) {
      return;
    }
    key = hashed;
  }
  MdCtx inner = padded_key_state(key, 0x36);
  MdCtx outer = padded_key_state(key, 0x5c);
  cleanse(hashed.data(), hashed.size());
  if (!inner || !outer) return;
  inner_ = inner.release();
  outer_ = outer.release();
}

HmacSha256Key::~HmacSha256Key() { reset(); }

HmacSha256Key::HmacSha256Key(HmacSha256Key&& other) noexcept
    : inner_(std::exchange(other.inner_, nullptr)), outer_(std::exchange(other.outer_, nullptr)) {}

HmacSha256Key& HmacSha256Key::operator=(HmacSha256Key&& other) noexcept {
  if (this != &other) {
    reset();
    inner_ = std::exchange(other.inner_, nullptr);
    outer_ = std::exchange(other.outer_, nullptr);
  }
  return *this;
}

void HmacSha256Key::reset() noexcept {
  // EVP_MD_CTX_free clears the SHA-256 state (the provider's freectx is
  // OPENSSL_clear_free).
  EVP_MD_CTX_free(inner_);
  EVP_MD_CTX_free(outer_);
  inner_ = outer_ = nullptr;
}

bool HmacSha256Key::mac(std::initializer_list<std::string_view> parts,
                        std::array<std::uint8_t, kHmacSha256Bytes>* out) const {
  EVP_MD_CTX* ctx = thread_md_ctx();
  if (empty() || ctx == nullptr || EVP_MD_CTX_copy_ex(ctx, inner_) != 1) return false;
  for (std::string_view part : parts) {
    if (!part.empty() && EVP_DigestUpdate(ctx, part.data(), part.size()) != 1) return false;
  }
  std::array<std::uint8_t, kHmacSha256Bytes> inner_hash{};
  unsigned int len = 0;
  const bool ok = EVP_DigestFinal_ex(ctx, inner_hash.data(), &len) == 1 && len == inner_hash.size() &&
                  EVP_MD_CTX_copy_ex(ctx, outer_) == 1 &&
                  EVP_DigestUpdate(ctx, inner_hash.data(), inner_hash.size()) == 1 &&
                  EVP_DigestFinal_ex(ctx, out->data(), &len) == 1 && len == out->size();
  cleanse(inner_hash.data(), inner_hash.size());
  return ok;
}

bool hmac_sha256(std::span<const std::uint8_t> key, std::initializer_list<std::string_view> parts,
                 std::array<std::uint8_t, kHmacSha256Bytes>* out) {
  EVP_MAC_CTX* ctx = thread_ctx();
  if (ctx == nullptr || key.empty() || EVP_MAC_init(ctx, key.data(), key.size(), nullptr) != 1) {
    return false;
  }
  for (std::string_view part : parts) {
    if (!part.empty() &&
        EVP_MAC_update(ctx, reinterpret_cast<const unsigned char*>(part.data()), part.size()) !=
            1) {
      return false;
    }
  }
  std::size_t len = 0;
  return EVP_MAC_final(ctx, out->data(), &len, out->size()) == 1 && len == out->size();
}

}  // namespace authrpc::security
