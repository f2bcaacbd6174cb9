// ClientRuntime: the IO threads client connections run on. One runtime can
// carry many Clients; a Client connected without one makes its own.
// Destroying the runtime stops its threads: destroy its Clients first.
#pragma once

#include <asio/any_io_executor.hpp>
#include <asio/io_context.hpp>
#include <atomic>
#include <cstddef>
#include <memory>
#include <thread>
#include <vector>

namespace authrpc {

class ClientRuntime {
 public:
  explicit ClientRuntime(std::size_t threads = 1);
  ~ClientRuntime();
  ClientRuntime(const ClientRuntime&) = delete;
  ClientRuntime& operator=(const ClientRuntime&) = delete;

  // The next IO thread's context, round robin.
  asio::io_context& next_context();

 private:
  struct Loop;
  std::vector<std::unique_ptr<Loop>> loops_;
  std::atomic<std::size_t> next_{0};
};

}  // namespace authrpc
