#include "minibench/rotation.h"

namespace minibench {

std::vector<Turn> rotation(std::span<const std::size_t> group_sizes, std::size_t blocks, bool warmup) {
  std::vector<Turn> turns;
  std::size_t first = 0;
  if (warmup) {
    for (const std::size_t n : group_sizes) {
      for (std::size_t i = 1; i <= n; ++i) turns.push_back({first + i % n, kWarmup, false});
      first += n;
    }
  }
  for (std::size_t b = 0; b < blocks; ++b) {
    first = 0;
    for (const std::size_t n : group_sizes) {
      for (std::size_t i = 0; i < n; ++i) turns.push_back({first + (b + i) % n, b, true});
      first += n;
    }
  }
  return turns;
}

std::size_t block_share(std::size_t n, std::size_t blocks, std::size_t b) {
  return n / blocks + (b < n % blocks ? 1 : 0);
}

}  // namespace minibench
