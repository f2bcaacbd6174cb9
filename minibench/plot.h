// `--plot FILE.svg`: a chart a person reads at a glance. One panel per kind
// of connection (sessions over tcp, unix, tcp + TLS; calls), each floor in
// grey followed by the rows held to it, each row in its method's colour
// (the same colour for a method in every panel, never reused for another)
// and drawn twice: on a log time axis (solid to p50, pale to p99), and on a
// linear axis as its p50 over its floor's p50, with a black tick where each
// of its targets lies on that axis. Beside it: the ratio, each target with
// met / NOT met, and a mark on a row that beats its floor (floor_check.h).
// A footer says when, where and with what the run measured (run_info.h).
// Hand-written SVG 1.1 (no dependency). Called by minibench/main.cc after
// the run.
#pragma once

#include <string>

#include "minibench/report.h"
#include "authrpc/base/result.h"

namespace minibench {

// The SVG document for the report's rows (rows without samples are left
// out), its targets and its run information.
std::string plot_svg(const Report& report, const std::string& title);

authrpc::Status write_plot(const std::string& path, const Report& report, const std::string& title);

// The colour of a method's bars ("none": floors), "#rrggbb"; the known
// methods have fixed, distinct colours, others take the next unused one.
std::string method_colour(const std::string& method);

}  // namespace minibench
