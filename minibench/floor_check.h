// Whether a row beat its floor by more than noise. A floor is meant to be the
// leanest bare way to do a row's work, measured the same way as the row; a
// row that is faster than its floor in every paired block (or run) and by
// more than kFloorNoise overall shows a floor that is not one — the framework
// does something the bare code does not (socket buffer or write sizes, fewer
// syscalls, a thread layout) — and its ratio, and any target held to it,
// mean nothing until the floor is fixed. Called by report.cc (sessions,
// calls), throughput.cc and plot.cc, which print or draw a warning.
#pragma once

#include <string>
#include <vector>

namespace minibench {

// Block-to-block noise of a p50 (or MB/s) ratio on a quiet machine: a row
// must beat its floor by more than this to be flagged.
inline constexpr double kFloorNoise = 0.05;

// `advantage`: the floor's cost over the row's (floor p50 / row p50, or row
// MB/s / floor MB/s) for the whole row; > 1 means the row was faster.
// `per_block`: the same for each paired block or run (may be empty).
// True if advantage > 1 + kFloorNoise and the row was faster in every block.
bool beats_floor(double advantage, const std::vector<double>& per_block);

// The warning line: "WARNING: <row> beats its floor <floor> (<advantage> x,
// in every <unit>) ...", `unit` being "block" (sessions, calls) or "run"
// (throughput).
std::string beats_floor_warning(const std::string& row, const std::string& floor,
                                double advantage, const std::string& unit = "block");

}  // namespace minibench
