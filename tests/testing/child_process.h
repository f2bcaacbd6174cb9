// Helpers for test fixtures that run a real program (Glewlwyd, Prometheus)
// beside the test: spawn it with its output in a log file, fork a child that
// tells the test where it serves, read and write small files, quote a log's
// tail in an error. Part of authrpc_test_support.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace authrpc::testing {

// Forks and execs `argv` (argv[0] a path) with stdin from `input` (/dev/null
// if empty) and stdout and stderr appended to `output`; the child dies with
// the test process (PR_SET_PDEATHSIG). -1 if fork failed.
pid_t SpawnLogged(const std::vector<std::string>& argv, const std::string& output,
                  const std::string& input = {});
// Waits up to `limit` for `pid` to exit; true if it did (and was reaped).
bool ReapedWithin(pid_t pid, std::chrono::steady_clock::duration limit);

// A forked child and the line it told its parent ("" if it ended or failed
// before it told; pid -1 if fork failed).
struct ToldChild {
  pid_t pid = -1;
  std::string told;
};
// Forks a child that runs `child(tell)` and _exits with its result; `tell`
// hands the parent a line (a server's endpoint), once, and the child goes on
// (serving until it is killed). Returns once the child told or ended.
ToldChild ForkTelling(const std::function<int(const std::function<void(const std::string&)>& tell)>& child);

std::string ReadFile(const std::string& path);
// false if the file could not be written.
bool WriteFile(const std::string& path, const std::string& text);
// The last `max` bytes of a file, escaped for a message (escape_for_log).
std::string FileTail(const std::string& path, std::size_t max = 800);

}  // namespace authrpc::testing
