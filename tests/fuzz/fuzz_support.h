// What the libFuzzer targets in tests/fuzz share (docs/FUZZING.md): a ByteStream
// that plays the fuzzer's bytes as a peer's side of a connection, a private
// temporary directory, running a coroutine to completion, and the entry
// point of the targets whose first input byte picks a mode (fuzz_input).
//
// Fuzz code only. Every target must be deterministic, must not leak between
// iterations (LeakSanitizer runs at exit) and must not write outside the
// directory a ScratchDir owns.
#pragma once

#include <asio/awaitable.hpp>
#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "authrpc/rpc/transport.h"
#include "authrpc/security/clock.h"
#include "authrpc/security/secret_manager.h"
#include "authrpc/security/token.h"

namespace authrpc::fuzz {

// The fuzzer's bytes as the input of a connection. Reads hand out the bytes
// in the chunk sizes given (cycled), so that a frame split anywhere is tried;
// then end of stream. Writes succeed and are counted, not kept: what the code
// under test answers is not the subject. Unlike a socket, this delivers the
// same chunks on every run (a socketpair merges writes as the kernel likes),
// which is what makes a crash reproducible.
class InputStream final : public ByteStream {
 public:
  InputStream(const asio::any_io_executor& executor, std::string_view input,
              std::vector<std::size_t> chunks, Endpoint::Scheme scheme = Endpoint::Scheme::kTcp);

  asio::awaitable<std::size_t> read_some(asio::mutable_buffer buffer, std::error_code& ec) override;
  std::size_t try_read_some(asio::mutable_buffer buffer, std::error_code& ec) override;
  void write_all(std::span<const asio::const_buffer> buffers, WriteCompletion& done) override;
  std::size_t try_write(asio::const_buffer buffer, std::error_code& ec) override;
  void shutdown_send() noexcept override {}
  void close() noexcept override { closed_ = true; }
  const std::string& peer_address() const override { return peer_; }
  Endpoint::Scheme scheme() const noexcept override { return scheme_; }
  const asio::any_io_executor& executor() const noexcept override { return executor_; }

  std::size_t bytes_written() const noexcept { return written_; }

 private:
  std::size_t take(asio::mutable_buffer buffer, std::error_code& ec);

  asio::any_io_executor executor_;
  std::string_view input_;
  std::size_t pos_ = 0;
  std::vector<std::size_t> chunks_;
  std::size_t next_chunk_ = 0;
  Endpoint::Scheme scheme_;
  std::string peer_ = "127.0.0.1:40000";
  bool closed_ = false;
  std::size_t written_ = 0;
};

// Splits `data` into (chunk sizes, rest): the first byte says how many chunk
// sizes follow (0–3), each one byte (0 means 1). Without sizes the whole
// input arrives in one read.
std::vector<std::size_t> take_chunks(std::string_view& data);

// A fresh directory under $TMPDIR (else /tmp), removed with its contents.
// Targets keep one for the process (a static, removed at exit); a crash
// leaves it behind, so scripts/fuzz.sh points TMPDIR at a directory of its
// own (on /dev/shm: the token store and the credentials file fsync).
class ScratchDir {
 public:
  explicit ScratchDir(const char* tag);
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  const std::string& path() const noexcept { return path_; }
  // Removes everything inside, keeping the directory.
  void clear() const;
  // Writes `bytes` to path()/name; aborts on failure, which is
  // the harness's fault, not the input's.
  std::string write(const std::string& name, std::string_view bytes) const;

 private:
  std::string path_;
};

// A token realm that is the same in every process: a memory store holding
// one master key with a fixed secret, a clock that stands still, and one token
// issued to alice@EXAMPLE.COM for kService. Identifier and password are
// therefore the same bytes in the seed generator and in every fuzzer run, so
// seeds carrying valid proofs stay valid.
struct TokenRealm {
  static constexpr std::string_view kService = "tcp://127.0.0.1:7000";
  static constexpr std::string_view kChannelBinding = "fuzz-channel-binding-32-bytes!!!";

  TokenRealm();
  std::shared_ptr<security::ManualClock> clock;
  std::shared_ptr<security::SecretManager> secrets;
  security::Token token;
};
// The realm of this process (made on first use).
const TokenRealm& token_realm();

// Runs `a` to completion on `io` and returns its result; aborts if it does
// not finish (a coroutine that waits forever on finite input is a defect).
template <typename T>
T run(asio::io_context& io, asio::awaitable<T> a);

void fail(const char* what);  // prints and aborts: a harness error

// What a target whose input starts with a mode or flags byte does with one
// input: `first` is that byte, `rest` what follows. Its return value is
// libFuzzer's (-1: do not keep the input). The entry point that calls it is
// fuzz_input_main.cc's; each such target defines this.
int fuzz_input(std::uint8_t first, std::string_view rest);

// jwt_fuzz's shared HS256 key, with which make_seeds signs its valid tokens.
inline constexpr std::string_view kJwtHmacKey = "jwt_fuzz: a shared HS256 key of 32+ bytes";

template <typename T>
T run(asio::io_context& io, asio::awaitable<T> a) {
  std::optional<T> out;
  asio::co_spawn(
      io, [&]() -> asio::awaitable<void> { out.emplace(co_await std::move(a)); },
      [](std::exception_ptr e) {
        if (e) std::rethrow_exception(e);
      });
  io.restart();
  io.run();
  if (!out) fail("coroutine did not finish on finite input");
  return std::move(*out);
}

}  // namespace authrpc::fuzz
