// report_run(): the report stage of `minibench [sessions|calls]`. It prints
// a measured run's rows, its summary table, the targets, what counting
// metrics cost and what --metrics counted, then writes --plot and --json
// (with the "run" object: settings, machine, metrics_counted). Called by
// main.cc after measure() (run.h).
#pragma once

#include <nlohmann/json.hpp>

#include "minibench/args.h"
#include "minibench/prepare.h"
#include "minibench/report.h"

namespace minibench {

// `machine`: run_info.h's machine_info(), read when the run began. Returns
// the exit status: 0, or 1 if a file cannot be written.
int report_run(const Args& args, const PreparedRun& run, Report& report, const nlohmann::ordered_json& counted,
               const nlohmann::ordered_json& machine);

}  // namespace minibench
