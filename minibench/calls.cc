#include "minibench/calls.h"

#include <asio/co_spawn.hpp>
#include <asio/executor_work_guard.hpp>
#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <asio/use_awaitable.hpp>
#include <cmath>
#include <exception>
#include <functional>
#include <latch>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>
#include <vector>

#include "authrpc/auth/mechanism_registry.h"
#include "authrpc/base/cycle_clock.h"
#include "authrpc/client/client.h"
#include "authrpc/security/tls_context.h"
#include "minibench/echo_floor.h"
#include "minibench/floor.h"
#include "minibench/rotation.h"
#include "minibench/schedule.h"
#include "minibench/sessions.h"
#include "minibench/typed_calls.h"

namespace minibench {
namespace {

using authrpc::Client;
using authrpc::CycleClock;
using authrpc::Errc;
using authrpc::Result;
using authrpc::Status;

// The client threads of one group of rows: K threads, each running an
// io_context of its own until the object is destroyed. Connection i of a row
// lives on thread i.
class ClientThreads {
 public:
  explicit ClientThreads(std::size_t count) {
    for (std::size_t i = 0; i < count; ++i) {
      auto& t = threads_.emplace_back(std::make_unique<Thread>());
      t->work.emplace(t->io.get_executor());
      t->thread = std::thread([io = &t->io] { io->run(); });
    }
  }
  ~ClientThreads() {
    for (auto& t : threads_) t->work.reset();
    for (auto& t : threads_) t->thread.join();
  }
  ClientThreads(const ClientThreads&) = delete;
  ClientThreads& operator=(const ClientThreads&) = delete;

  std::size_t size() const noexcept { return threads_.size(); }
  asio::any_io_executor executor(std::size_t i) { return threads_[i]->io.get_executor(); }

  // Starts `per_thread` coroutines made by make(thread, worker) on every
  // thread at once (each made on its own thread) and waits until all have
  // ended: the first failure, and the wall time from the start to the last
  // thread's end.
  using Make = std::function<asio::awaitable<Status>(std::size_t thread, std::size_t worker)>;
  Result<Clock::duration> run(std::size_t per_thread, const Make& make,
                              Clock::time_point start = Clock::now()) {
    const std::size_t n = threads_.size();
    std::latch done(static_cast<std::ptrdiff_t>(n));
    std::vector<Clock::time_point> ended(n, start);
    std::vector<std::size_t> left(n, per_thread);  // each touched by its thread only
    std::mutex mu;
    Status failure;
    for (std::size_t i = 0; i < n; ++i) {
      asio::post(threads_[i]->io, [&, i] {
        for (std::size_t w = 0; w < per_thread; ++w) {
          asio::co_spawn(threads_[i]->io, make(i, w),
                         [&, i](std::exception_ptr e, Status s) {
                           if (e) s = exception_status(e);
                           if (!s.ok()) {
                             std::lock_guard lock(mu);
                             if (failure.ok()) failure = std::move(s);
                           }
                           if (--left[i] == 0) {
                             ended[i] = Clock::now();
                             done.count_down();
                           }
                         });
        }
      });
    }
    done.wait();
    if (!failure.ok()) return failure;
    Clock::time_point last = start;
    for (const auto& t : ended) last = std::max(last, t);
    return last - start;
  }

 private:
  struct Thread {
    asio::io_context io{1};
    std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work;
    std::thread thread;
  };
  std::vector<std::unique_ptr<Thread>> threads_;
};

// One side of a group — the authrpc row or its floor — as the schedule runs
// it: its connections (opened once, kept for the row) and its blocks.
class LoadSide {
 public:
  virtual ~LoadSide() = default;
  virtual const std::string& name() const = 0;
  // Opens connection i on thread i, for every thread.
  virtual Status open(ClientThreads& threads) = 0;
  // One block: every connection keeps plan.depth calls in flight until
  // `until`; each call's round trip in µs into us[thread].
  virtual Result<Clock::duration> block(ClientThreads& threads, Clock::time_point start,
                                        Clock::time_point until,
                                        std::vector<std::vector<double>>& us) = 0;
  // Closes the connections on their threads.
  virtual void close(ClientThreads& threads) = 0;
};

// Runs `fn(i)` on thread i for every thread and waits.
void on_each_thread(ClientThreads& threads, const std::function<void(std::size_t)>& fn) {
  std::latch done(static_cast<std::ptrdiff_t>(threads.size()));
  for (std::size_t i = 0; i < threads.size(); ++i) {
    asio::post(threads.executor(i), [&, i] {
      fn(i);
      done.count_down();
    });
  }
  done.wait();
}

// Opens one connection per thread into `conns`: on thread i,
// co_await connect(executor i).
template <typename Conn, typename Connect>
Status open_each(ClientThreads& threads, std::vector<std::unique_ptr<Conn>>& conns, Connect connect) {
  conns.resize(threads.size());
  auto opened = threads.run(1, [&](std::size_t i, std::size_t) -> asio::awaitable<Status> {
    auto made = co_await connect(threads.executor(i));
    if (!made.ok()) co_return made.status();
    conns[i] = std::move(*made);
    co_return Status();
  });
  return opened.ok() ? Status() : opened.status();
}

// Closes the connections of open_each() on their threads.
template <typename Conn>
void close_each(ClientThreads& threads, std::vector<std::unique_ptr<Conn>>& conns) {
  if (conns.empty()) return;
  on_each_thread(threads, [&conns](std::size_t i) { conns[i].reset(); });
  // A turn more for the closes to finish on each thread.
  on_each_thread(threads, [](std::size_t) {});
  conns.clear();
}

// One of D coroutines on a connection: sys.echo calls back to back until
// `until`, each timed from before the call to its reply (the clock read
// that ends one call starts the next). On the CycleClock (one rdtsc where
// it is the TSC), as the floor's batches are (echo_floor.cc): a
// steady_clock read per call would be ~2 % of the row's CPU, which the
// floor, reading once per batch, does not pay.
asio::awaitable<Status> echo_calls(Client& client, Clock::time_point until,
                                   std::vector<double>& us) {
  const auto length = until - Clock::now();
  const CycleClock::Ticks begin = CycleClock::now();
  CycleClock::Ticks start = begin;
  while (CycleClock::elapsed(begin, start) < length) {
    auto reply = co_await client.async_call("sys", "echo", "x");
    const CycleClock::Ticks now = CycleClock::now();
    if (!reply.ok()) co_return reply.status();
    if (reply->size() != 1 || reply->front() != 'x') co_return Status(Errc::kDataLoss, "sys.echo: wrong reply");
    us.push_back(std::chrono::duration<double, std::micro>(CycleClock::elapsed(start, now)).count());
    start = now;
  }
  co_return Status();
}

class AuthrpcSide final : public LoadSide {
 public:
  AuthrpcSide(std::string name, authrpc::ClientOptions options, std::size_t depth)
      : name_(std::move(name)), options_(std::move(options)), depth_(depth) {}

  const std::string& name() const override { return name_; }

  Status open(ClientThreads& threads) override {
    return open_each(threads, clients_,
                     [this](asio::any_io_executor ex) { return Client::async_connect(ex, options_); });
  }

  Result<Clock::duration> block(ClientThreads& threads, Clock::time_point start,
                                Clock::time_point until,
                                std::vector<std::vector<double>>& us) override {
    return threads.run(
        depth_,
        [&](std::size_t i, std::size_t) { return echo_calls(*clients_[i], until, us[i]); }, start);
  }

  void close(ClientThreads& threads) override { close_each(threads, clients_); }

 private:
  std::string name_;
  authrpc::ClientOptions options_;
  std::size_t depth_;
  std::vector<std::unique_ptr<Client>> clients_;
};

class FloorSide final : public LoadSide {
 public:
  FloorSide(std::string name, authrpc::Endpoint endpoint,
            std::shared_ptr<authrpc::security::TlsClientContext> tls, std::size_t depth)
      : name_(std::move(name)), endpoint_(std::move(endpoint)), tls_(std::move(tls)),
        depth_(depth) {}

  const std::string& name() const override { return name_; }

  Status open(ClientThreads& threads) override {
    return open_each(threads, loads_, [this](asio::any_io_executor ex) {
      return EchoLoad::connect(ex, endpoint_, tls_);
    });
  }

  Result<Clock::duration> block(ClientThreads& threads, Clock::time_point start,
                                Clock::time_point until,
                                std::vector<std::vector<double>>& us) override {
    return threads.run(
        1, [&](std::size_t i, std::size_t) { return loads_[i]->run(depth_, until, us[i]); },
        start);
  }

  void close(ClientThreads& threads) override { close_each(threads, loads_); }

 private:
  std::string name_;
  authrpc::Endpoint endpoint_;
  std::shared_ptr<authrpc::security::TlsClientContext> tls_;
  std::size_t depth_;
  std::vector<std::unique_ptr<EchoLoad>> loads_;
};

// A side's measurements: per-call samples per block, and calls/s per block.
struct SideResult {
  Samples samples;
  std::vector<double> block_per_s;
};

// Runs one block of `side` for `length`; timed: into `result`.
Status run_block(ClientThreads& threads, LoadSide& side, Clock::duration length,
                 SideResult* result) {
  std::vector<std::vector<double>> us(threads.size());
  const auto start = Clock::now();
  auto wall = side.block(threads, start, start + length, us);
  if (!wall.ok()) return Status(wall.code(), side.name() + ": " + wall.status().message);
  if (result == nullptr) return Status();
  result->samples.begin_block();
  std::size_t calls = 0;
  for (const auto& v : us) {
    result->samples.add_all(v);
    calls += v.size();
  }
  result->samples.add_wall(*wall);
  const double seconds = std::chrono::duration<double>(*wall).count();
  result->block_per_s.push_back(seconds > 0 ? static_cast<double>(calls) / seconds : 0);
  return Status();
}

// The group: the floor (if any) and the row, alternating in rotating blocks
// after a warm-up block of each (the row's first, then the floor's, as
// schedule.h's groups).
Status run_sides(const BenchPlan& plan, const std::string& label,
                 std::vector<LoadSide*> sides, std::vector<SideResult>& results) {
  const std::size_t blocks = std::max<std::size_t>(1, plan.blocks);
  const auto length = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(plan.duration_s / static_cast<double>(blocks)));
  ClientThreads threads(plan.concurrency);
  std::string names;
  for (auto* side : sides) names += (names.empty() ? "" : ", ") + side->name();
  progress(plan, label + ": " + std::to_string(plan.concurrency) + " connections x " +
                     std::to_string(plan.depth) + " calls in flight, " +
                     std::to_string(blocks) + " blocks of " +
                     std::to_string(std::chrono::duration<double>(length).count()) +
                     " s each (after one of warm-up): " + names);
  Status s;
  for (std::size_t i = 0; s.ok() && i < sides.size(); ++i) {
    s = sides[i]->open(threads);
    if (!s.ok()) s.message = sides[i]->name() + ": " + s.message;
  }
  const std::size_t sizes[] = {sides.size()};
  const std::vector<Turn> turns = rotation(sizes, blocks, true);
  for (std::size_t i = 0; s.ok() && i < turns.size(); ++i) {
    const Turn& t = turns[i];
    s = run_block(threads, *sides[t.side], length, t.timed ? &results[t.side] : nullptr);
    if (s.ok() && t.timed && (i + 1 == turns.size() || turns[i + 1].block != t.block)) {
      progress(plan, label + ": block " + std::to_string(t.block + 1) + "/" + std::to_string(blocks));
    }
  }
  for (auto* side : sides) side->close(threads);
  if (!s.ok()) s.message = label + ": " + s.message;
  return s;
}

Row load_row(Row row, const BenchPlan& plan, const SideResult& result) {
  row.load = LoadShape{plan.concurrency, plan.depth, plan.duration_s};
  row.block_per_s = result.block_per_s;
  return row;
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
    if (!plan.client_metrics()) options.metrics = nullptr;
    auto client = co_await Client::async_connect(ex, std::move(options));
    if (!client.ok()) co_return client.status();
    // --api proto: the typed rows alone, without the 1-byte row or its twin.
    const bool bytes_rows = plan.calls_api != CallsApi::kProto;
    // --metrics compare: the same calls on a connection to the server that
    // counts nothing, by a client that counts nothing, in the same blocks.
    std::unique_ptr<Client> off_client;
    if (bytes_rows && plan.metrics == MetricsMode::kCompare && target.authrpc_nometrics) {
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
    if (bytes_rows) group.push_back({[&]() { return timed_echo(**client); }, &samples, {}, name});
    std::optional<TypedCalls> typed;
    if (plan.calls_api != CallsApi::kBytes) typed.emplace(**client, target.transport).add_to(group);
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
    if (bytes_rows) {
      Row row = compared_row(name, plan.calls_method, target.transport, samples,
                             floor_summary ? &*floor_summary : nullptr);
      row.metrics = plan.client_metrics();
      report.add(std::move(row));
      report.add_target(name, kCallTarget);
    }
    if (typed) {
      typed->report(report, plan.calls_method, floor_summary ? &*floor_summary : nullptr,
                    plan.client_metrics());
    }
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

std::string call_load_shape(const BenchPlan& plan) {
  return "c" + std::to_string(plan.concurrency) + "d" + std::to_string(plan.depth);
}

Status run_call_load(const BenchPlan& plan, Report& report) {
  const auto registry = authrpc::MechanismRegistry::with_builtins();
  const MethodPlan* method = plan.method(plan.calls_method);
  auto mechanism = registry.make_client(
      plan.calls_method, method != nullptr ? method->client_options : nlohmann::json::object());
  if (!mechanism.ok()) return mechanism.status();
  const std::string shape = call_load_shape(plan);

  // One group per transport: what it connects to and how it names its rows.
  struct Group {
    std::string transport;  // "tcp", "unix"; TLS runs on tcp
    bool tls;
    authrpc::Endpoint authrpc;
    std::optional<authrpc::Endpoint> floor;
  };
  std::vector<Group> groups;
  if (plan.plaintext) {
    for (const auto& t : plan.transports) groups.push_back({t.transport, false, t.authrpc, t.echo_floor});
  }
  std::shared_ptr<authrpc::security::TlsClientContext> tls_context;
  if (plan.tls) {
    auto made = tls_client_context(plan.tls->ca_file, false);  // connections are opened once per row
    if (!made.ok()) return made.status();
    tls_context = std::move(*made);
    groups.push_back({"tcp", true, plan.tls->authrpc, plan.tls->echo_floor});
  }

  for (const auto& g : groups) {
    const std::string name = (g.tls ? "calls+tls/" : "calls/") + g.transport + " " + shape;
    const std::string floor_name =
        "floor/" + std::string(g.tls ? "tls" : g.transport) + "-echo " + shape;
    authrpc::ClientOptions options;
    options.endpoint = g.authrpc;
    options.mechanisms = {*mechanism};
    if (g.tls) options.tls = tls_context;
    if (!plan.client_metrics()) options.metrics = nullptr;
    AuthrpcSide row(name, std::move(options), plan.depth);
    std::optional<FloorSide> floor;
    if (g.floor) floor.emplace(floor_name, *g.floor, g.tls ? tls_context : nullptr, plan.depth);
    std::vector<LoadSide*> sides;
    if (floor) sides.push_back(&*floor);
    sides.push_back(&row);
    std::vector<SideResult> results(sides.size());
    const std::string label =
        "calls " + std::string(g.tls ? "tls" : g.transport) + " " + shape;
    if (Status s = run_sides(plan, label, sides, results); !s.ok()) return s;

    std::optional<Row> floor_summary;
    if (floor) {
      floor_summary = load_row(floor_row(floor_name, g.transport, results[0].samples), plan,
                               results[0]);
      floor_summary->tls = g.tls;
      report.add(*floor_summary);
    }
    Row r = load_row(compared_row(name, plan.calls_method, g.transport, results.back().samples,
                                  floor_summary ? &*floor_summary : nullptr),
                     plan, results.back());
    r.tls = g.tls;
    r.metrics = plan.client_metrics();
    report.add(std::move(r));
    if (!g.tls) {
      report.add_rate_target(name, "calls c" + std::to_string(plan.concurrency) + " d" +
                                       std::to_string(plan.depth) + ": calls/s " + g.transport +
                                       "/floor",
                             kCallLoadTarget);
    }
  }
  return Status();
}

}  // namespace minibench
