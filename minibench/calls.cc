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

asio::awaitable<Result<Clock::duration>> echo_call(Client& client) {
  const auto start = Clock::now();
  auto reply = co_await client.async_call("sys", "echo", "x");
  const auto elapsed = Clock::now() - start;
  if (!reply.ok()) co_return reply.status();
  if (*reply != "x") co_return Status(authrpc::Errc::kDataLoss, "sys.echo: wrong reply");
  co_return elapsed;
}

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
    auto client = co_await Client::async_connect(ex, std::move(options));
    if (!client.ok()) co_return client.status();

    Samples samples, floor_samples;
    Measured row{[&]() { return echo_call(**client); }, &samples};
    std::unique_ptr<FloorClient> floor_client;
    std::unique_ptr<PingPong> pingpong;
    std::optional<Measured> floor;
    if (target.floor) {
      auto made = FloorClient::make(*target.floor);
      if (!made.ok()) co_return made.status();
      floor_client = std::move(*made);
      auto connected = co_await floor_client->connect(ex);
      if (!connected.ok()) co_return connected.status();
      pingpong = std::move(*connected);
      floor = Measured{[&]() { return pingpong->round_trip(); }, &floor_samples};
    }
    if (Status s = co_await run_interleaved(plan, "calls " + target.transport, row, floor);
        !s.ok()) {
      co_return s;
    }

    const std::string name = "calls/" + target.transport;
    std::optional<Row> floor_summary;
    if (floor) {
      floor_summary = floor_row("floor/" + target.transport + "-pingpong", target.transport,
                                floor_samples);
      report.add(*floor_summary);
    }
    report.add(compared_row(name, plan.calls_method, target.transport, samples,
                            floor_summary ? &*floor_summary : nullptr));
    report.add_target(name, kCallTarget);
  }
  co_return Status();
}

}  // namespace minibench
