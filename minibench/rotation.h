// The one order of turns every timed loop of minibench follows: the
// sessions and calls schedule (schedule.cc), calls under load
// (calls.cc), throughput's runs and idle's phases. Sides are measured
// in groups (a floor and the rows held to it); blocks rotate which side of
// a group goes first, so that drift and bursts of noise hit every side
// alike and each block yields a paired ratio. Kept apart from the loops
// (no asio) so that minibench_tests can check it alone.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

namespace minibench {

struct Turn {
  std::size_t side;   // index into the caller's sides: its groups laid end to end
  std::size_t block;  // 0-based; kWarmup for a warm-up turn
  bool timed;
};
inline constexpr std::size_t kWarmup = static_cast<std::size_t>(-1);

// With `warmup`, first one untimed turn per side: in each group, sides 1..n-1
// then 0 (the group's first side ends the warm-up next to block 0's start).
// Then `blocks` blocks; in block b each group in order runs its n sides
// starting at b % n and going round.
std::vector<Turn> rotation(std::span<const std::size_t> group_sizes, std::size_t blocks, bool warmup);

// How many of n iterations block b of `blocks` gets: n / blocks, plus 1 for
// each of the first n % blocks blocks.
std::size_t block_share(std::size_t n, std::size_t blocks, std::size_t b);

}  // namespace minibench
