// token_store_bench: how fast a SecretManager issues, renews and cancels
// tokens through a FileTokenStore on this machine (each operation is an
// fdatasync'd journal append), and how fast verify() is (in memory). Built
// with the tests, not registered in ctest: a measurement, not a test.
//
//   token_store_bench [--dir DIR] [-n OPS] [--runs R]
//
// DIR is where the stores go (default: a new directory under $TMPDIR or
// /tmp, removed afterwards; it must be on the disk to be measured: tmpfs
// makes fsync free). Prints, per run and as the median over runs, ops/s and
// p50/p99 latency for each operation.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "authrpc/security/file_token_store.h"
#include "authrpc/security/secret_manager.h"

namespace {

using authrpc::security::FileTokenStore;
using authrpc::security::SecretManager;
using authrpc::security::Token;
using authrpc::security::TokenStore;
using Clock = std::chrono::steady_clock;

struct Row {
  double ops_per_s = 0;
  double p50_us = 0;
  double p99_us = 0;
};

Row measure(int n, const std::function<bool(int)>& op) {
  std::vector<double> us;
  us.reserve(n);
  auto begin = Clock::now();
  for (int i = 0; i < n; ++i) {
    auto t0 = Clock::now();
    if (!op(i)) {
      std::fprintf(stderr, "operation %d failed\n", i);
      std::exit(1);
    }
    us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  double total = std::chrono::duration<double>(Clock::now() - begin).count();
  std::sort(us.begin(), us.end());
  return {n / total, us[us.size() / 2], us[std::min(us.size() - 1, us.size() * 99 / 100)]};
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir;
  int n = 2000;
  int runs = 5;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--dir" && i + 1 < argc) {
      dir = argv[++i];
    } else if (a == "-n" && i + 1 < argc) {
      n = std::atoi(argv[++i]);
    } else if (a == "--runs" && i + 1 < argc) {
      runs = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: %s [--dir DIR] [-n OPS] [--runs R]\n", argv[0]);
      return 2;
    }
  }
  if (n < 1 || runs < 1) return 2;
  bool own_dir = dir.empty();
  if (own_dir) {
    const char* tmp = std::getenv("TMPDIR");
    std::string templ = std::string(tmp ? tmp : "/tmp") + "/token-store-bench-XXXXXX";
    if (::mkdtemp(templ.data()) == nullptr) {
      std::perror("mkdtemp");
      return 1;
    }
    dir = templ;
  }

  const char* names[] = {"issue", "renew", "cancel", "verify"};
  std::map<std::string, std::vector<Row>> rows;
  std::printf("%-7s %4s %7s %12s %10s %10s\n", "op", "run", "n", "ops/s", "p50_us", "p99_us");
  for (int run = 0; run < runs; ++run) {
    const std::string store_dir = dir + "/run" + std::to_string(run);
    auto store = FileTokenStore::open(store_dir);
    if (!store.ok()) {
      std::fprintf(stderr, "%s\n", store.status().to_string().c_str());
      return 1;
    }
    auto manager = SecretManager::open(std::shared_ptr<TokenStore>(std::move(*store)));
    if (!manager.ok()) {
      std::fprintf(stderr, "%s\n", manager.status().to_string().c_str());
      return 1;
    }
    SecretManager& m = **manager;
    std::vector<Token> tokens(n);
    rows["issue"].push_back(measure(n, [&](int i) {
      auto t = m.issue({"user" + std::to_string(i) + "@EXAMPLE.COM", "yarn", "", "tcp://db1:7000"});
      if (!t.ok()) return false;
      tokens[i] = std::move(*t);
      return true;
    }));
    rows["verify"].push_back(measure(n, [&](int i) { return m.verify(tokens[i]).ok(); }));
    rows["renew"].push_back(measure(n, [&](int i) { return m.renew(tokens[i], "yarn").ok(); }));
    rows["cancel"].push_back(measure(n, [&](int i) { return m.cancel(tokens[i], "yarn").ok(); }));
    for (const char* name : names) {
      const Row& r = rows[name].back();
      std::printf("%-7s %4d %7d %12.0f %10.1f %10.1f\n", name, run, n, r.ops_per_s, r.p50_us, r.p99_us);
    }
    manager->reset();
    std::filesystem::remove_all(store_dir);
  }
  std::printf("median of %d runs:\n", runs);
  for (const char* name : names) {
    std::vector<double> rate, p50, p99;
    for (const auto& r : rows[name]) {
      rate.push_back(r.ops_per_s);
      p50.push_back(r.p50_us);
      p99.push_back(r.p99_us);
    }
    std::printf("%-7s %4s %7d %12.0f %10.1f %10.1f\n", name, "med", n, median(rate), median(p50), median(p99));
  }
  if (own_dir) std::filesystem::remove_all(dir);
  return 0;
}
