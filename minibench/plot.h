// `--plot FILE.svg`: a bar chart a person reads at a glance. One panel per
// kind of connection (sessions over tcp, unix, tcp + TLS; calls), each
// floor in grey followed by the rows held to it, one bar per row in its
// method's colour
// (the same colour for a method in every panel, never reused for another):
// the solid bar reaches the row's p50, a pale extension its p99. A value
// column gives p50, p99 and the ratio to the floor; a row that beats its
// floor (floor_check.h) is marked. One log time axis shared by all panels,
// ticks at 1-2-5 × each decade, a tick label drawn only where it has room.
// Hand-written SVG 1.1 (no dependency). Called by minibench/main.cc after
// the run.
#pragma once

#include <string>
#include <vector>

#include "minibench/report.h"
#include "authrpc/security/base/result.h"

namespace minibench {

// The SVG document for `rows` (rows without samples are left out).
std::string plot_svg(const std::vector<Row>& rows, const std::string& title);

authrpc::Status write_plot(const std::string& path, const std::vector<Row>& rows,
                           const std::string& title);

// The colour of a method's bars ("none": floors), "#rrggbb"; the known
// methods have fixed, distinct colours, others take the next unused one.
std::string method_colour(const std::string& method);

}  // namespace minibench
