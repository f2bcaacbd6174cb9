// Helpers shared by the shared-memory ring tests and benchmark: deterministic
// message contents, a SHA-256 digest of a message sequence, writer and reader
// coroutines that move a sequence through a ring, and fork() plumbing.
#pragma once

#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>
#include <asio/steady_timer.hpp>
#include <asio/use_awaitable.hpp>
#include <openssl/evp.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <span>

#include "authrpc/rpc/shm_ring.h"

namespace authrpc::shm_test {

inline std::uint64_t splitmix64(std::uint64_t& x) {
  std::uint64_t z = (x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Fills `out` with bytes determined by `seq` (different for every message).
inline void fill_message(std::span<std::byte> out, std::uint64_t seq) {
  std::uint64_t state = seq * 0x2545f4914f6cdd1dull + 1;
  std::size_t i = 0;
  for (; i + 8 <= out.size(); i += 8) {
    const std::uint64_t v = splitmix64(state);
    std::memcpy(out.data() + i, &v, 8);
  }
  if (i < out.size()) {
    const std::uint64_t v = splitmix64(state);
    std::memcpy(out.data() + i, &v, out.size() - i);
  }
}

// SHA-256 over a sequence of (length, bytes) messages, plus counts.
class SequenceDigest {
 public:
  SequenceDigest() : ctx_(EVP_MD_CTX_new(), EVP_MD_CTX_free) {
    EVP_DigestInit_ex(ctx_.get(), EVP_sha256(), nullptr);
  }
  void add(std::span<const std::byte> message) {
    const std::uint64_t len = message.size();
    EVP_DigestUpdate(ctx_.get(), &len, sizeof len);
    EVP_DigestUpdate(ctx_.get(), message.data(), message.size());
    bytes_ += len;
    ++messages_;
  }
  struct Value {
    std::array<unsigned char, 32> sha{};
    std::uint64_t bytes = 0;
    std::uint64_t messages = 0;
    bool operator==(const Value&) const = default;
  };
  Value finish() {
    Value v;
    unsigned int n = 0;
    EVP_DigestFinal_ex(ctx_.get(), v.sha.data(), &n);
    v.bytes = bytes_;
    v.messages = messages_;
    return v;
  }

 private:
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx_;
  std::uint64_t bytes_ = 0;
  std::uint64_t messages_ = 0;
};

// Message sizes of a test sequence: the edges of a slot, then pseudo-random
// partial slots.
inline std::size_t message_size(std::uint64_t seq, std::size_t slot_size) {
  const std::size_t edges[] = {0, 1, 7, 4095, 4096, slot_size - 1, slot_size, slot_size / 2};
  if (seq < std::size(edges)) return edges[seq];
  std::uint64_t s = seq;
  return splitmix64(s) % (slot_size + 1);
}

using SizeFn = std::function<std::size_t(std::uint64_t seq)>;

// Writes `count` messages (tag = sequence number), then close()s the ring if
// `close` is set. Returns the first failure.
inline asio::awaitable<Status> write_sequence(ShmWriter& writer, std::uint64_t count, SizeFn size,
                                              SequenceDigest& digest, bool close = true) {
  for (std::uint64_t seq = 0; seq < count; ++seq) {
    auto slot = co_await writer.acquire();
    if (!slot.ok()) co_return slot.status();
    const std::size_t len = size(seq);
    fill_message(slot->first(len), seq);
    digest.add(slot->first(len));
    if (Status s = writer.commit(len, static_cast<std::uint32_t>(seq)); !s.ok()) co_return s;
  }
  if (close) writer.close();
  co_return Status();
}

// Reads until the ring fails (kEndOfRing after an orderly close) and returns
// that failure; checks that tags count up from 0. `each` runs per message.
inline asio::awaitable<Status> read_sequence(ShmReader& reader, SequenceDigest& digest,
                                             std::function<void()> each = {}) {
  for (std::uint64_t seq = 0;; ++seq) {
    auto slot = co_await reader.next();
    if (!slot.ok()) co_return slot.status();
    if (slot->tag != static_cast<std::uint32_t>(seq)) {
      co_return Status(Errc::kDataLoss, "tag " + std::to_string(slot->tag) + " where " +
                                            std::to_string(seq) + " was expected");
    }
    digest.add(slot->data);
    if (Status s = reader.release(); !s.ok()) co_return s;
    if (each) each();
  }
}

// Runs `io` until `coro` has finished (other work may remain) and returns
// its Status.
inline Status run_to_end(asio::io_context& io, asio::awaitable<Status> coro) {
  Status result(Errc::kUnknown, "coroutine did not finish");
  asio::co_spawn(io, std::move(coro), [&](std::exception_ptr e, Status s) {
    result = e ? Status(Errc::kInternal, "exception") : std::move(s);
    io.stop();
  });
  io.run();
  io.restart();
  return result;
}

// Forks; the child runs `child` and _exits with its return value. Returns the
// child's pid.
inline pid_t fork_child(const std::function<int()>& child) {
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(child());
  return pid;
}

// The child's exit code, or 128 + signal.
inline int wait_child(pid_t pid) {
  int status = 0;
  if (::waitpid(pid, &status, 0) != pid) return -1;
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

}  // namespace authrpc::shm_test
