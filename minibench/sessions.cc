#include "minibench/sessions.h"

#include <asio/post.hpp>
#include <asio/use_awaitable.hpp>
#include <nlohmann/json.hpp>

#include "auth/mechanism_registry.h"
#include "client/client.h"
#include "minibench/floor.h"
#include "minibench/schedule.h"

namespace minibench {
namespace {

using authrpc::Client;
using authrpc::ClientOptions;
using authrpc::Result;
using authrpc::Status;

asio::awaitable<Result<Clock::duration>> authrpc_session(asio::any_io_executor ex,
                                                         const ClientOptions& base) {
  ClientOptions options = base;  // copied before the clock starts
  const auto start = Clock::now();
  auto client = co_await Client::async_connect(ex, std::move(options));
  if (!client.ok()) co_return client.status();
  auto reply = co_await (*client)->async_call("sys", "whoami", "");
  const auto elapsed = Clock::now() - start;
  if (!reply.ok()) co_return reply.status();
  if (reply->empty()) co_return Status(authrpc::Errc::kDataLoss, "sys.whoami: empty reply");
  client->reset();
  // Closing completes asynchronously (the reader coroutine sees the close on
  // the next turn of the loop). Let it finish here, untimed, so that this
  // session's teardown does not run inside the next session's timing — the
  // bare floor client closes synchronously.
  co_await asio::post(ex, asio::use_awaitable);
  co_await asio::post(ex, asio::use_awaitable);
  co_return elapsed;
}

}  // namespace

asio::awaitable<Status> run_sessions(asio::any_io_executor ex, const BenchPlan& plan,
                                     Report& report) {
  const auto registry = authrpc::MechanismRegistry::with_builtins();
  auto mechanism = registry.make_client(plan.method, nlohmann::json::object());
  if (!mechanism.ok()) co_return mechanism.status();

  for (const auto& target : plan.transports) {
    ClientOptions options;
    options.endpoint = target.authrpc;
    options.mechanisms = {*mechanism};
    options.wait_for_authentication = false;

    Samples samples, floor_samples;
    Measured row{[&]() { return authrpc_session(ex, options); }, &samples};
    std::unique_ptr<FloorClient> floor_client;
    std::optional<Measured> floor;
    if (target.floor) {
      auto made = FloorClient::make(*target.floor);
      if (!made.ok()) co_return made.status();
      floor_client = std::move(*made);
      floor = Measured{[&]() { return floor_client->session(ex); }, &floor_samples};
    }
    if (Status s = co_await run_interleaved(plan, "sessions " + target.transport, row, floor);
        !s.ok()) {
      co_return s;
    }

    const std::string name = plan.method + "/" + target.transport;
    std::optional<Row> floor_summary;
    if (floor) {
      floor_summary = floor_row("floor/" + target.transport, target.transport, floor_samples);
      report.add(*floor_summary);
    }
    report.add(compared_row(name, plan.method, target.transport, samples,
                            floor_summary ? &*floor_summary : nullptr));
    report.add_target(name, kSessionTarget);
  }
  co_return Status();
}

}  // namespace minibench
