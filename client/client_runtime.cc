#include "client/client_runtime.h"

#include <asio/executor_work_guard.hpp>

namespace authrpc {

struct ClientRuntime::Loop {
  asio::io_context io{1};
  asio::executor_work_guard<asio::io_context::executor_type> work{io.get_executor()};
  std::thread thread{[this] { io.run(); }};
};

ClientRuntime::ClientRuntime(std::size_t threads) {
  if (threads == 0) threads = 1;
  for (std::size_t i = 0; i < threads; ++i) loops_.push_back(std::make_unique<Loop>());
}

ClientRuntime::~ClientRuntime() {
  for (auto& loop : loops_) {
    loop->work.reset();
    loop->io.stop();
  }
  for (auto& loop : loops_) loop->thread.join();
}

asio::io_context& ClientRuntime::next_context() {
  return loops_[next_++ % loops_.size()]->io;
}

}  // namespace authrpc
