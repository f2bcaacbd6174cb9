// Where and with what a run measured — the part of the --json files' "run"
// object that lets two runs be compared later: when (UTC), the host, its
// CPU model and count (and how many this process may use), the kernel, the
// load average when the run began, authrpc's version and source commit,
// the build type, and the OpenSSL, MIT krb5 and Cyrus SASL versions; and
// the one way every subcommand writes its --json and --plot files.
// Called by the subcommands' report stages (run.cc, throughput.cc,
// idle.cc) and plot.cc.
#pragma once

#include <cerrno>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <system_error>

#include "authrpc/base/status.h"

namespace minibench {

// Keys: time_utc, host, cpu_model, cpus, cpus_usable, kernel, load_average,
// version, commit, build_type, openssl, krb5, sasl. A value that cannot be
// read is null.
nlohmann::ordered_json machine_info();

// Writes `text` to `path`, replacing it; the error names the path. Inline:
// plot.cc and report.cc are also built into minibench_tests alone.
inline authrpc::Status write_file(const std::string& path, const std::string& text) {
  std::ofstream file(path, std::ios::trunc);
  file << text;
  file.close();
  if (!file) return authrpc::Status(std::error_code(errno, std::generic_category()), "write " + path);
  return {};
}

}  // namespace minibench
