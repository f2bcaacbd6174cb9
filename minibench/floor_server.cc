#include "minibench/floor_server.h"

#include <asio/executor_work_guard.hpp>
#include <asio/io_context.hpp>
#include <pthread.h>

#include <csignal>
#include <cstdio>
#include <memory>
#include <thread>
#include <vector>

#include "minibench/floor.h"

namespace minibench {

using authrpc::Endpoint;

int run_floor_server(const Args& args) {
  std::vector<Endpoint> endpoints;
  for (const auto& uri : args.floor_listen) {
    auto ep = Endpoint::parse(uri);
    if (!ep.ok()) return usage_error(ep.status().to_string());
    endpoints.push_back(*ep);
  }
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  asio::io_context io{1};
  std::vector<std::unique_ptr<FloorServer>> servers;
  for (const auto& ep : endpoints) {
    auto server = FloorServer::start(io.get_executor(), ep);
    if (!server.ok()) {
      std::fprintf(stderr, "minibench: %s\n", server.status().to_string().c_str());
      return 1;
    }
    std::printf("%s\n", (*server)->endpoint().to_string().c_str());
    servers.push_back(std::move(*server));
  }
  std::fflush(stdout);
  auto work = asio::make_work_guard(io);
  std::thread thread([&io] { io.run(); });
  int received = 0;
  sigwait(&signals, &received);
  io.stop();
  thread.join();
  return 0;
}

}  // namespace minibench
