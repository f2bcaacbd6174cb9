#include "minibench/calls.h"

#include <nlohmann/json.hpp>

#include "authrpc/auth/mechanism_registry.h"
#include "authrpc/client/client.h"
#include "minibench/floor.h"
#include "minibench/schedule.h"

namespace minibench {
namespace {

using authrpc::Client;
using authrpc::Result;
using authrpc::Status;

}  // namespace

asio::awaitable<Status> run_calls(asio::any_io_executor ex, const BenchPlan& plan,
                                  Report& report) {
  const auto registry = authrpc::MechanismRegistry::with_builtins();
  const MethodPlan* method = plan.method(plan.calls_method);
  auto mechanism = registry.make_client(
      plan.calls_method, method != nullptr ? method->client_options : nlohmann::json::object());
  if (!mechanism.ok()) co_return mechanism.status();

  for (const auto& target : plan.transports) {
    authrpc::ClientOptions options;
    options.endpoint = target.authrpc;
    options.mechanisms = {*mechanism};
    if (!plan.client_metrics()) options.metrics = nullptr;
    auto client = co_await Client::async_connect(ex, std::move(options));
    if (!client.ok()) co_return client.status();
    // --metrics compare: the same calls on a connection to the server that
    // counts nothing, by a client that counts nothing, in the same blocks.
    std::unique_ptr<Client> off_client;
    if (plan.metrics == MetricsMode::kCompare && target.authrpc_nometrics) {
      authrpc::ClientOptions off;
      off.endpoint = *target.authrpc_nometrics;
      off.mechanisms = {*mechanism};
      off.metrics = nullptr;
      auto connected = co_await Client::async_connect(ex, std::move(off));
      if (!connected.ok()) co_return connected.status();
      off_client = std::move(*connected);
    }

    const std::string name = "calls/" + target.transport;
    Samples samples, floor_samples, off_samples;
    std::vector<Measured> group;
    std::unique_ptr<FloorClient> floor_client;
    std::unique_ptr<PingPong> pingpong;
    if (target.floor) {
      auto made = FloorClient::make(*target.floor);
      if (!made.ok()) co_return made.status();
      floor_client = std::move(*made);
      auto connected = co_await floor_client->connect(ex);
      if (!connected.ok()) co_return connected.status();
      pingpong = std::move(*connected);
      group.push_back({[&]() { return pingpong->round_trip(); }, &floor_samples});
    }
    const bool has_floor = !group.empty();
    group.push_back({[&]() { return timed_echo(**client); }, &samples, {}, name});
    if (off_client) {
      group.push_back({[&]() { return timed_echo(*off_client); }, &off_samples, {},
                       metrics_off_row(name)});
    }
    if (Status s = co_await run_group(plan, "calls " + target.transport, std::move(group),
                                      has_floor);
        !s.ok()) {
      co_return s;
    }

    std::optional<Row> floor_summary;
    if (has_floor) {
      floor_summary = floor_row("floor/" + target.transport + "-pingpong", target.transport,
                                floor_samples);
      report.add(*floor_summary);
    }
    Row row = compared_row(name, plan.calls_method, target.transport, samples,
                           floor_summary ? &*floor_summary : nullptr);
    row.metrics = plan.client_metrics();
    report.add(std::move(row));
    report.add_target(name, kCallTarget);
    if (off_client) {
      Row off = compared_row(metrics_off_row(name), plan.calls_method, target.transport,
                             off_samples, floor_summary ? &*floor_summary : nullptr);
      off.metrics = false;
      report.add(std::move(off));
      report.add_metrics_cost(name, metrics_off_row(name),
                              target.transport == "tcp"
                                  ? std::optional<double>(kMetricsCostTarget)
                                  : std::nullopt);
    }
  }
  co_return Status();
}

}  // namespace minibench
