// Issue throughput of SecretManagers sharing one ZooKeeper token store, each
// with its own session, as N servers of a fleet would be (built, not run by
// ctest):
//   zk_token_store_bench HOST:PORT [servers=1] [seconds=3] [batch=100]
// Prints ops/s per server and in total, and the round trips to the sequence
// counter. Start a ZooKeeper first (tests/testing/mini_zk.h describes how).
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "authrpc/components/zookeeper/zk_token_store.h"
#include "authrpc/security/secret_manager.h"

using namespace authrpc::security;

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s HOST:PORT [servers] [seconds] [batch]\n", argv[0]);
    return 2;
  }
  const int servers = argc > 2 ? std::atoi(argv[2]) : 1;
  const int seconds = argc > 3 ? std::atoi(argv[3]) : 3;
  const std::uint32_t batch = argc > 4 ? static_cast<std::uint32_t>(std::atoi(argv[4])) : 100;
  const std::string root = "/bench/" + std::to_string(std::chrono::steady_clock::now().time_since_epoch().count());
  std::vector<std::shared_ptr<ZkTokenStore>> stores;
  std::vector<std::unique_ptr<SecretManager>> managers;
  for (int i = 0; i < servers; ++i) {
    ZkTokenStoreOptions o;
    o.connect = argv[1];
    o.root = root;
    o.sequence_batch = batch;
    auto store = ZkTokenStore::open(o);
    if (!store.ok()) {
      std::fprintf(stderr, "%s\n", store.status().to_string().c_str());
      return 1;
    }
    stores.emplace_back(std::move(*store));
    auto m = SecretManager::open(stores.back());
    if (!m.ok()) {
      std::fprintf(stderr, "%s\n", m.status().to_string().c_str());
      return 1;
    }
    managers.push_back(std::move(*m));
  }
  std::atomic<bool> stop{false};
  std::vector<std::uint64_t> counts(static_cast<std::size_t>(servers));
  std::vector<std::thread> threads;
  for (int i = 0; i < servers; ++i) {
    threads.emplace_back([&, i] {
      while (!stop) {
        if (managers[i]->issue({"alice", "yarn", "", "svc"}).ok()) ++counts[i];
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::seconds(seconds));
  stop = true;
  for (auto& t : threads) t.join();
  std::uint64_t total = 0;
  for (int i = 0; i < servers; ++i) {
    const double rate = static_cast<double>(counts[i]) / seconds;
    std::printf("server %d: %.0f issues/s, %llu sequence reservations, %llu watch events\n", i, rate,
                static_cast<unsigned long long>(stores[i]->stats().sequence_reservations),
                static_cast<unsigned long long>(stores[i]->stats().events));
    total += counts[i];
  }
  std::printf("%d server(s): %.0f issues/s in total\n", servers, static_cast<double>(total) / seconds);
  return 0;
}
