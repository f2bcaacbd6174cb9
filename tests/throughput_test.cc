// `minibench throughput` end to end with small sizes: it spawns its server
// child, measures get and put over tcp, unix and TLS next to the floors, and
// writes JSON rows in the shape minibench/README.md documents.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>

#include "minibench/stats.h"
#include "tests/testing/scoped_temp_dir.h"

namespace {

struct Ran {
  int status = -1;
  std::string output;
};

Ran RunMinibench(const std::string& args) {
  Ran r;
  const std::string command = std::string(MINIBENCH_BIN) + " throughput " + args + " 2>&1";
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return r;
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0) r.output.append(buf, n);
  const int status = ::pclose(pipe);
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}


class ThroughputTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ThroughputTest, SmallRunPrintsRowsAndValidJson) {
  const std::string mode = GetParam();
  const authrpc::testing::ScopedTempDir dir("throughput-test");
  ASSERT_TRUE(dir.ok());
  const std::string json_path = dir.file(mode + ".json");
  const Ran ran = RunMinibench("--" + mode +
                               " --streams 2 --batch 65536 --bytes 4M --runs 2 --transport all "
                               "--quiet --json " + json_path);
  ASSERT_EQ(ran.status, 0) << ran.output;
  for (const std::string& line :
       {"Testing method: " + std::string(mode == "get" ? "DoGet" : "DoPut") + " (" + mode + "/tcp)",
        std::string("Number of concurrent ") + mode + "s: 2", std::string("Batch size: 65536"),
        std::string("Batches ") + (mode == "get" ? "read" : "written") + ": 64",
        std::string("Bytes ") + (mode == "get" ? "read" : "written") + ": 4194304",
        std::string("Speed: "), std::string("Throughput: "), std::string("Latency mean: "),
        std::string("Latency quantile=0.5: "), std::string("Latency quantile=0.95: "),
        std::string("Latency quantile=0.99: "), std::string("Latency max: "),
        std::string("(floor-stream/unix), bare socket stream"),
        std::string("TLS_AES_128_GCM_SHA256"),
        mode + "/tcp    MB/s >= 0.90 x floor-stream/tcp MB/s: ratio ",
        "Testing method: " + std::string(mode == "get" ? "DoGet" : "DoPut") + " (" + mode + "/shm)",
        mode + "/shm    MB/s >= 2.00 x " + mode + "/unix MB/s: ratio "}) {
    EXPECT_NE(ran.output.find(line), std::string::npos) << "missing: " << line << "\n" << ran.output;
  }
  // The latency target is stated for get: a put's latency is the time
  // write() takes to accept a batch, which queueing makes near zero.
  const std::string latency_target = mode + "/shm    p50 latency <= 0.50 x " + mode + "/unix";
  EXPECT_EQ(ran.output.find(latency_target) != std::string::npos, mode == "get") << ran.output;

  std::ifstream file(json_path);
  ASSERT_TRUE(file.good());
  const nlohmann::json doc = nlohmann::json::parse(file, nullptr, false);
  ASSERT_FALSE(doc.is_discarded());
  std::set<std::string> names;
  for (const auto& row : doc.at("rows")) {
    names.insert(row.at("name").get<std::string>());
    for (const char* key : {"method", "transport", "tls", "n", "mean_us", "p50_us", "p95_us",
                            "p99_us", "max_us", "per_s", "floor", "ratio", "mb_per_s",
                            "batches_per_s", "cpu_ns_per_byte", "beats_floor"}) {
      EXPECT_TRUE(row.contains(key)) << key << " in " << row.dump();
    }
    EXPECT_EQ(row.at("n").get<int>(), 64) << row.dump();
    EXPECT_GT(row.at("mb_per_s").get<double>(), 0.0) << row.dump();
    EXPECT_GT(row.at("batches_per_s").get<double>(), 0.0) << row.dump();
    // 4 MiB move in a few ms: a clock-tick CPU reading was 0 for most rows.
    EXPECT_GT(row.at("cpu_ns_per_byte").get<double>(), 0.0) << row.dump();
    const std::string transport = row.at("transport").get<std::string>();
    EXPECT_EQ(row.at("floor").get<std::string>(),
              "floor-stream/" + (transport == "shm" ? std::string("unix") : transport));
  }
  EXPECT_EQ(names, (std::set<std::string>{mode + "/tcp", mode + "/unix", mode + "/tls",
                                           mode + "/shm", "floor-stream/tcp", "floor-stream/unix",
                                           "floor-stream/tls"}));
  // When, where and what was measured.
  const nlohmann::json& run = doc.at("run");
  for (const char* key : {"mode", "streams", "batch", "bytes", "runs", "time_utc", "host", "cpus",
                          "kernel", "load_average", "version", "commit", "build_type", "openssl",
                          "krb5"}) {
    EXPECT_TRUE(run.contains(key)) << key << " in " << run.dump();
  }
  EXPECT_EQ(run.at("mode"), mode);
  EXPECT_EQ(run.at("batch"), 65536);
  // tcp, unix, tls, shm's MB/s against unix, and for get shm's p50 latency.
  ASSERT_EQ(doc.at("targets").size(), mode == "get" ? 5u : 4u);
  for (const auto& t : doc.at("targets")) {
    EXPECT_TRUE(t.at("ratio").is_number()) << t.dump();
    EXPECT_TRUE(t.at("met").is_boolean()) << t.dump();
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, ThroughputTest, ::testing::Values("get", "put"),
                         [](const auto& param_info) { return param_info.param; });

TEST(ThroughputUsageTest, BadOptionsAreUsageErrors) {
  for (const char* args : {"--get --put", "--streams 0", "--batch 16M", "--transport ipc",
                                 "--bogus"}) {
    const Ran ran = RunMinibench(args);
    EXPECT_EQ(ran.status, 2) << args << "\n" << ran.output;
  }
}


// Spins until this thread has used `ns` of CPU.
void burn_cpu(std::int64_t ns) {
  auto now = [] {
    timespec ts{};
    ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
  };
  const std::int64_t start = now();
  volatile std::uint64_t sink = 0;
  while (now() - start < ns) sink = sink + 1;
}

// The CPU column's clock (process_cpu_ns, minibench/stats.h) resolves far
// below a clock tick, for this process and for a child (the server): 4 ms of
// work reads as ~4 ms, where /proc/<pid>/stat's ticks read 0 or 10 ms.
TEST(CpuClockTest, ResolvesMillisecondsInThisProcessAndAChild) {
  constexpr std::int64_t kWork = 4'000'000;  // ns
  const auto before = minibench::process_cpu_ns(::getpid());
  burn_cpu(kWork);
  const auto after = minibench::process_cpu_ns(::getpid());
  ASSERT_TRUE(before && after);
  EXPECT_GE(*after - *before, kWork);
  EXPECT_LT(*after - *before, kWork + 3'000'000);

  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    burn_cpu(kWork);
    (void)::write(ready[1], "x", 1);
    ::pause();  // until killed
    ::_exit(0);
  }
  char byte;
  ASSERT_EQ(::read(ready[0], &byte, 1), 1);
  const auto child_ns = minibench::process_cpu_ns(child);
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  ::close(ready[0]);
  ::close(ready[1]);
  ASSERT_TRUE(child_ns.has_value());
  EXPECT_GE(*child_ns, kWork);
  EXPECT_LT(*child_ns, kWork + 3'000'000);  // the fork's own work is far below a millisecond
}
}  // namespace
