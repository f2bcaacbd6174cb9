#include "minibench/concurrency.h"

#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>
#include <exception>
#include <latch>
#include <mutex>
#include <thread>

namespace minibench {

ConcurrentBlock run_concurrently(const IterationOn& on, std::size_t count, std::size_t threads) {
  ConcurrentBlock block;
  if (count == 0) return block;
  threads = std::max<std::size_t>(1, std::min(threads, count));
  std::vector<std::vector<double>> per_thread(threads);
  std::mutex mu;  // guards block.status
  auto fail = [&](authrpc::Status s) {
    std::lock_guard lock(mu);
    if (block.status.ok()) block.status = std::move(s);
  };
  // Every thread is set up before the clock starts, and starts its sessions
  // when it does.
  std::latch ready(static_cast<std::ptrdiff_t>(threads));
  std::latch go(1);
  std::vector<std::thread> workers;
  workers.reserve(threads);
  for (std::size_t t = 0; t < threads; ++t) {
    const std::size_t share = count / threads + (t < count % threads ? 1 : 0);
    workers.emplace_back([&, t, share] {
      asio::io_context io{1};
      std::vector<double>& out = per_thread[t];
      out.reserve(share);
      asio::co_spawn(
          io,
          [&]() -> asio::awaitable<void> {
            for (std::size_t i = 0; i < share; ++i) {
              auto elapsed = co_await on(io.get_executor());
              if (!elapsed.ok()) {
                fail(elapsed.status());
                co_return;
              }
              out.push_back(std::chrono::duration<double, std::micro>(*elapsed).count());
            }
          },
          [&](std::exception_ptr e) {
            if (!e) return;
            try {
              std::rethrow_exception(e);
            } catch (const std::exception& ex) {
              fail(authrpc::Status(authrpc::Errc::kInternal, std::string("exception: ") + ex.what()));
            }
          });
      ready.count_down();
      go.wait();
      io.run();
    });
  }
  ready.wait();
  const auto start = Clock::now();
  go.count_down();
  for (auto& w : workers) w.join();
  block.wall = Clock::now() - start;
  for (auto& v : per_thread) block.us.insert(block.us.end(), v.begin(), v.end());
  return block;
}

}  // namespace minibench
