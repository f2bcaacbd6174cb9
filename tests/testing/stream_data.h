// What the streaming tests send and check (streaming_test,
// shm_stream_plane_test): a byte pattern either side regenerates from
// (seed, offset), a SHA-256 of what went by, and a coroutine's sleep.
#pragma once

#include <openssl/evp.h>

#include <asio/awaitable.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace authrpc::testing {

// Byte `i` of the pattern `seed`.
char PatternByte(std::uint64_t seed, std::uint64_t i);
// Bytes [offset, offset + n) of the pattern `seed` into `out`.
void Pattern(std::uint64_t seed, std::uint64_t offset, char* out, std::size_t n);

// A running SHA-256; Hex() ends it.
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  void Update(std::string_view bytes);
  std::string Hex();

 private:
  EVP_MD_CTX* ctx_;
};

// Waits `d` on the calling coroutine's executor.
asio::awaitable<void> Sleep(std::chrono::milliseconds d);

}  // namespace authrpc::testing
