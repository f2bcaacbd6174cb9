// Where and with what a run measured — the part of the --json files' "run"
// object that lets two runs be compared later: when (UTC), the host, its
// CPU model and count (and how many this process may use), the kernel, the
// load average when the run began, authrpc's version and source commit,
// the build type, and the OpenSSL, MIT krb5 and Cyrus SASL versions.
// Called by minibench/main.cc (sessions, calls) and throughput.cc.
#pragma once

#include <nlohmann/json.hpp>

namespace minibench {

// Keys: time_utc, host, cpu_model, cpus, cpus_usable, kernel, load_average,
// version, commit, build_type, openssl, krb5, sasl. A value that cannot be
// read is null.
nlohmann::ordered_json machine_info();

}  // namespace minibench
