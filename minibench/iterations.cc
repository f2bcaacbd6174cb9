#include "minibench/iterations.h"

#include <asio/post.hpp>
#include <asio/use_awaitable.hpp>

// GCC 12 misreads Asio's coroutine frame allocator as a mismatched new/delete
// pair (GCC bug 109224), as in sessions.cc.
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ == 12
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif

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

asio::awaitable<authrpc::Result<Clock::duration>> timed_echo(authrpc::Client& client) {
  const auto start = Clock::now();
  auto reply = co_await client.async_call("sys", "echo", "x");
  const auto elapsed = Clock::now() - start;
  if (!reply.ok()) co_return reply.status();
  if (*reply != "x") co_return authrpc::Status(authrpc::Errc::kDataLoss, "sys.echo: wrong reply");
  co_return elapsed;
}

}  // namespace minibench
