// The timed iterations (schedule.h): one session, one echo call, and a
// group of session rows. A file of their own, apart from run_block: GCC 12
// compiles their coroutines' turns leaner here, and the client's
// instructions per session (scripts/session_cost.sh) include the
// benchmark's own work.
#include <asio/post.hpp>
#include <asio/use_awaitable.hpp>

#include "minibench/schedule.h"

namespace minibench {

asio::awaitable<authrpc::Result<Clock::duration>> timed_session(asio::any_io_executor ex,
                                                                const authrpc::ClientOptions& base) {
  authrpc::ClientOptions options = base;  // copied before the clock starts
  const auto start = Clock::now();
  auto client = co_await authrpc::Client::async_connect(ex, std::move(options));
  if (!client.ok()) co_return client.status();
  auto reply = co_await (*client)->async_call("sys", "whoami", "");
  const auto elapsed = Clock::now() - start;
  if (!reply.ok()) co_return reply.status();
  if (reply->empty()) co_return authrpc::Status(authrpc::Errc::kDataLoss, "sys.whoami: empty reply");
  client->reset();
  // Closing completes asynchronously (the reader coroutine sees the close on
  // the next turn of the loop): two turns, untimed.
  co_await asio::post(ex, asio::use_awaitable);
  co_await asio::post(ex, asio::use_awaitable);
  co_return elapsed;
}

asio::awaitable<authrpc::Result<std::vector<Row>>> run_session_group(
    asio::any_io_executor ex, const BenchPlan& plan, const std::string& label,
    const std::string& transport, std::optional<Measured> floor, const std::vector<SessionRow>& rows) {
  std::vector<Samples> samples(rows.size() + 1);  // [0]: the floor's; never reallocated
  std::vector<Measured> group;
  const bool has_floor = floor.has_value();
  const std::string floor_name = floor ? floor->name : std::string();
  if (floor) {
    floor->samples = &samples[0];
    group.push_back(std::move(*floor));
  }
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const authrpc::ClientOptions& o = rows[i].options;
    group.push_back({[&ex, &o]() { return timed_session(ex, o); }, &samples[i + 1], rows[i].events,
                     rows[i].name, [&o](asio::any_io_executor e) { return timed_session(e, o); },
                     rows[i].connections});
  }
  if (authrpc::Status s = co_await run_group(plan, label, std::move(group), has_floor); !s.ok()) {
    co_return s;
  }
  std::vector<Row> out;
  out.reserve(rows.size() + 1);  // `floor` below stays valid
  if (has_floor) out.push_back(floor_row(floor_name, transport, samples[0]));
  const Row* floor_of_rows = has_floor ? &out.front() : nullptr;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    out.push_back(compared_row(rows[i].name, rows[i].method, transport, samples[i + 1], floor_of_rows));
  }
  co_return out;
}

asio::awaitable<authrpc::Result<Clock::duration>> timed_echo(authrpc::Client& client, std::string_view payload) {
  const auto start = Clock::now();
  auto reply = co_await client.async_call("sys", "echo", payload);
  const auto elapsed = Clock::now() - start;
  if (!reply.ok()) co_return reply.status();
  if (*reply != payload) co_return authrpc::Status(authrpc::Errc::kDataLoss, "sys.echo: wrong reply");
  co_return elapsed;
}

}  // namespace minibench
