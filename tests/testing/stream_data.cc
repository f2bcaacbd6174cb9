#include "tests/testing/stream_data.h"

#include <asio/redirect_error.hpp>
#include <asio/steady_timer.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>
#include <cstdio>
#include <system_error>

namespace authrpc::testing {

char PatternByte(std::uint64_t seed, std::uint64_t i) {
  std::uint64_t x = i * 0x9E3779B97F4A7C15ull + seed;
  x ^= x >> 29;
  return static_cast<char>(x * 0xBF58476D1CE4E5B9ull >> 56);
}

void Pattern(std::uint64_t seed, std::uint64_t offset, char* out, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) out[i] = PatternByte(seed, offset + i);
}

Sha256::Sha256() : ctx_(EVP_MD_CTX_new()) { EVP_DigestInit_ex(ctx_, EVP_sha256(), nullptr); }

Sha256::~Sha256() { EVP_MD_CTX_free(ctx_); }

void Sha256::Update(std::string_view bytes) { EVP_DigestUpdate(ctx_, bytes.data(), bytes.size()); }

std::string Sha256::Hex() {
  unsigned char digest[32];
  unsigned int len = 0;
  EVP_DigestFinal_ex(ctx_, digest, &len);
  std::string out;
  char buf[3];
  for (unsigned i = 0; i < len; ++i) {
    std::snprintf(buf, sizeof buf, "%02x", digest[i]);
    out += buf;
  }
  return out;
}

asio::awaitable<void> Sleep(std::chrono::milliseconds d) {
  asio::steady_timer timer(co_await asio::this_coro::executor, d);
  std::error_code ec;
  co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
}

}  // namespace authrpc::testing
