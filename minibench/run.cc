#include "minibench/run.h"

#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>

#include <algorithm>
#include <exception>
#include <future>
#include <string>
#include <utility>

#include "authrpc/base/metrics.h"
#include "authrpc/client/client_runtime.h"
#include "minibench/call_load.h"
#include "minibench/calls.h"
#include "minibench/jwt_bench.h"
#include "minibench/metrics_count.h"
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
        if (e) {
          try {
            std::rethrow_exception(e);
          } catch (const std::exception& ex) {
            status = Status(authrpc::Errc::kInternal, std::string("exception: ") + ex.what());
          }
        }
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

}  // namespace minibench
