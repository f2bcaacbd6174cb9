// The run and report stages of `minibench [sessions|calls]`, called by
// main.cc after prepare() (prepare.h). measure() measures a prepared run's
// rows — sessions, the jwt-verify rows, calls or calls under load — on a
// ClientRuntime, as an application's client runs, then reads what the
// server and the clients counted (--metrics) and runs --token-ops, and stops
// the server children. report_run() prints the measured rows, the summary
// table, the targets, what counting metrics cost and what --metrics counted,
// then writes --plot and --json (with the "run" object: settings, machine,
// metrics_counted).
#pragma once

#include <nlohmann/json.hpp>

#include "authrpc/base/status.h"
#include "minibench/args.h"
#include "minibench/prepare.h"
#include "minibench/report.h"

namespace minibench {

// Fills `report` with the rows and `counted` with each side's authrpc_*
// counter total (counted_total, server_child.h).
authrpc::Status measure(const Args& args, PreparedRun& run, Report& report, nlohmann::ordered_json& counted);

// `machine`: run_info.h's machine_info(), read when the run began. Returns
// the exit status: 0, or 1 if a file cannot be written.
int report_run(const Args& args, const PreparedRun& run, Report& report, const nlohmann::ordered_json& counted,
               const nlohmann::ordered_json& machine);

}  // namespace minibench
