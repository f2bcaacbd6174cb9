#include "minibench/floor_check.h"

#include <algorithm>

#include "minibench/stats.h"

namespace minibench {

bool beats_floor(double advantage, const std::vector<double>& per_block) {
  if (!(advantage > 1.0 + kFloorNoise)) return false;  // also false for NaN
  return std::all_of(per_block.begin(), per_block.end(), [](double a) { return a > 1.0; });
}

std::string beats_floor_warning(const std::string& row, const std::string& floor,
                                double advantage, const std::string& unit) {
  return "WARNING: " + row + " beats its floor " + floor + " (" + fmt("%.2f", advantage) +
         " x, in every " + unit + "): the floor is not the leanest bare way to do this work, so the "
         "ratio and any target held to it say nothing (docs/PERFORMANCE.md, \"What each floor does\")";
}

}  // namespace minibench
