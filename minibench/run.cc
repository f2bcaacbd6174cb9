#include "minibench/run.h"

#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <future>
#include <string>
#include <utility>

#include "authrpc/base/metrics.h"
#include "authrpc/client/client_runtime.h"
#include "minibench/calls.h"
#include "minibench/jwt_bench.h"
#include "minibench/plot.h"
#include "minibench/schedule.h"
#include "minibench/server_child.h"
#include "minibench/sessions.h"
#include "minibench/tokens.h"

namespace minibench {

using authrpc::Status;

Status measure(const Args& args, PreparedRun& run, Report& report, nlohmann::ordered_json& counted) {
  const BenchPlan& plan = run.plan;
  ServerChild* child = run.child.get();
  const KerberosSetup* kerberos = run.kerberos();
  Status status;
  // The cold check of an issued JWT, beside its warm session row.
  const bool jwt_verify_rows =
      args.sessions && std::any_of(plan.methods.begin(), plan.methods.end(),
                                   [](const MethodPlan& m) { return m.issued_jwt; });
  // What the rows' clients count (the token fetch before them may count too).
  const double client_counted_before = counted_total(*authrpc::default_metrics_registry());
  // The client side runs on a ClientRuntime, as an application's would.
  authrpc::ClientRuntime runtime(1);
  asio::io_context& io = runtime.next_context();
  std::promise<void> done;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        if (args.sessions) status = co_await run_sessions(io.get_executor(), plan, report);
        if (status.ok() && jwt_verify_rows) {
          status = co_await run_jwt_verify(io.get_executor(), plan, report);
        }
        if (status.ok() && args.calls) {
          if (call_load(args)) {
            status = run_call_load(plan, report);
          } else {
            status = co_await run_calls(io.get_executor(), plan, report);
          }
        }
      },
      [&](std::exception_ptr e) {
        if (e) status = exception_status(e);
        done.set_value();
      });
  done.get_future().wait();
  // --metrics reached the server and the clients: what each counted.
  counted = {{"clients", counted_total(*authrpc::default_metrics_registry()) - client_counted_before}};
  if (status.ok() && child) {
    for (const auto& [key, endpoint] : {std::pair{"server", "authrpc/unix"},
                                        std::pair{"nometrics_server", "authrpc-nometrics/unix"}}) {
      if (!child->endpoints().contains(endpoint)) continue;
      auto read = child->counted(endpoint);
      if (!read.ok()) {
        status = read.status();
        break;
      }
      counted[key] = *read ? nlohmann::ordered_json(**read) : nlohmann::ordered_json(nullptr);
    }
  }
  if (status.ok() && args.token_ops > 0 && child && kerberos != nullptr) {
    status = run_token_ops(run.token_server->endpoint, kerberos->client_options(), args.token_ops,
                           stdout);
  }
  if (run.cold_child) run.cold_child->stop();
  if (child) child->stop();
  return status;
}

namespace {

// The --json file's "run" object: what was measured, how, and where and when
// (`machine`: run_info.h, read when the run began).
nlohmann::ordered_json run_info(const Args& args, const BenchPlan& plan, const ServerChild* child,
                                const nlohmann::ordered_json& machine) {
  nlohmann::ordered_json methods = nlohmann::ordered_json::array();
  for (const auto& m : plan.methods) methods.push_back(m.name);
  nlohmann::ordered_json info = {
          {"mode", args.sessions && args.calls ? "all" : args.sessions ? "sessions" : "calls"},
          {"n", plan.n},
          {"warmup", plan.warmup},
          {"blocks", plan.blocks},
          {"concurrency", plan.concurrency},
          {"depth", plan.depth},
          {"duration_s", plan.duration_s},
          {"tls", args.tls},
          {"methods", methods},
          {"server", !child                ? args.server
                     : child->in_process() ? std::string("in process")
                                           : std::string("child process")},
          {"server_threads", child ? nlohmann::ordered_json(args.server_threads) : nullptr},
          {"metrics", args.metrics},
          {"api", args.api}};
  info.update(machine);
  return info;
}

// Whether --metrics took effect, in words: "--metrics on: the server
// counted, the rows' clients counted (...)". Each side's authrpc_* counter
// total (counted_total, server_child.h) is > 0 if it counted, 0 if it counted nothing,
// null if it had no registry; the totals themselves go to the JSON only
// (they add bytes to events: a sign of life, not a figure). In process the
// server counts into the clients' registry (the process's).
void print_counted(std::FILE* out, const std::string& setting,
                   const nlohmann::ordered_json& counted, bool in_process) {
  auto did = [&](const char* key) {
    const auto& v = counted.at(key);
    return v.is_null() ? std::string("had no metrics registry")
           : v.get<double>() > 0 ? std::string("counted")
                                 : std::string("counted nothing");
  };
  std::string line = "--metrics " + setting + ": ";
  if (counted.contains("server")) line += "the server " + did("server") + ", ";
  if (counted.contains("nometrics_server")) {
    line += "the metrics-off server " + did("nometrics_server") + ", ";
  }
  line += std::string("the rows' clients") +
          (in_process ? ", whose registry the in-process server shares, " : " ") + did("clients");
  line += " (their authrpc_* counters; totals: --json run.metrics_counted)";
  std::fprintf(out, "%s\n", line.c_str());
}

}  // namespace

int report_run(const Args& args, const PreparedRun& run, Report& report, const nlohmann::ordered_json& counted,
               const nlohmann::ordered_json& machine) {
  const BenchPlan& plan = run.plan;
  const ServerChild* child = run.child.get();
  report.print_rows(stdout);
  if (args.sessions) print_summary(stdout, report.rows(), plan.warmup);
  report.print_targets(stdout);
  report.print_metrics_cost(stdout);
  print_counted(stdout, args.metrics, counted, child && child->in_process());
  auto info = run_info(args, plan, child, machine);
  info["metrics_counted"] = counted;
  report.set_run_info(std::move(info));
  if (!args.plot.empty()) {
    const std::string title = std::string("minibench ") +
                              (args.sessions && args.calls ? "sessions and calls"
                               : args.sessions           ? "sessions"
                                                         : "calls") +
                              ": each row beside its floor (n " +
                              std::to_string(plan.n) + " per row" +
                              (plan.concurrency > 1
                                   ? ", " + std::to_string(plan.concurrency) + " client threads"
                                   : std::string()) +
                              ")";
    if (Status s = write_plot(args.plot, report, title); !s.ok()) {
      std::fprintf(stderr, "minibench: %s\n", s.to_string().c_str());
      return 1;
    }
  }
  if (!args.json.empty()) {
    if (Status s = report.write_json(args.json); !s.ok()) {
      std::fprintf(stderr, "minibench: %s\n", s.to_string().c_str());
      return 1;
    }
  }
  return 0;
}

}  // namespace minibench
