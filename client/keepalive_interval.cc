#include "authrpc/client/keepalive_interval.h"

#include <cstdint>
#include <random>

namespace authrpc {
namespace {

// splitmix64: a jitter needs spread, not secrecy.
std::uint64_t next_random() {
  thread_local std::uint64_t state = (std::uint64_t{std::random_device{}()} << 32) ^
                                     std::random_device{}();
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

}  // namespace

std::chrono::steady_clock::duration keepalive_interval(std::chrono::milliseconds keepalive) {
  const auto full = std::chrono::duration_cast<std::chrono::steady_clock::duration>(keepalive);
  const auto spread = static_cast<std::uint64_t>(full.count() / 5);
  if (spread == 0) return full;
  return full - std::chrono::steady_clock::duration(
                    static_cast<std::chrono::steady_clock::rep>(next_random() % (spread + 1)));
}

}  // namespace authrpc
