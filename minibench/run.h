// measure(): the run stage of `minibench [sessions|calls]`. It measures a
// prepared run's rows — sessions, the jwt-verify rows, calls or calls under
// load — on a ClientRuntime, as an application's client runs, then reads
// what the server and the clients counted (--metrics) and runs --token-ops,
// and stops the server children. Called by main.cc, between prepare()
// (prepare.h) and report_run() (report.h).
#pragma once

#include <nlohmann/json.hpp>

#include "authrpc/base/status.h"
#include "minibench/args.h"
#include "minibench/prepare.h"
#include "minibench/report.h"

namespace minibench {

// Fills `report` with the rows and `counted` with each side's authrpc_*
// counter total (metrics_count.h).
authrpc::Status measure(const Args& args, PreparedRun& run, Report& report, nlohmann::ordered_json& counted);

}  // namespace minibench
