#include "authrpc/security/hmac_sha256.h"

#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/params.h>

#include <memory>

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

}  // namespace

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
