// What the streaming tests send and check (streaming_test,
// shm_stream_plane_test): a byte pattern either side regenerates from
// (seed, offset), a SHA-256 of what went by, a stream read to its end, and
// a coroutine's sleep.
#pragma once

#include <openssl/evp.h>

#include <asio/awaitable.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "authrpc/base/status.h"

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

// What a reader took in from a stream until its end: the messages, their
// bytes and SHA-256 (hex), and the status that ended it (ok: the writer
// finished; else the error read() returned).
struct StreamTotals {
  std::uint64_t messages = 0;
  std::uint64_t bytes = 0;
  std::string sha256;
  Status end;
};

// Reads `stream` (a ServerStream, or the stream a client opened) to its end.
template <typename Stream>
asio::awaitable<StreamTotals> ReadToEnd(Stream& stream) {
  StreamTotals out;
  Sha256 sha;
  for (;;) {
    auto m = co_await stream.read();
    if (!m.ok()) {
      out.end = m.status();
      break;
    }
    if (!*m) break;
    sha.Update((*m)->view());
    out.bytes += (*m)->size();
    ++out.messages;
  }
  out.sha256 = sha.Hex();
  co_return out;
}

// Waits `d` on the calling coroutine's executor.
asio::awaitable<void> Sleep(std::chrono::milliseconds d);

}  // namespace authrpc::testing
