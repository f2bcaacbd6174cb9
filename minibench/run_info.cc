#include "minibench/run_info.h"

#include <openssl/crypto.h>
#include <sasl/sasl.h>
#include <sched.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <string>

#include "minibench/build_info.h"  // generated: kCommit (minibench/build_info.cmake)

namespace minibench {
namespace {

using Json = nlohmann::ordered_json;

Json or_null(const std::string& s) { return s.empty() ? Json(nullptr) : Json(s); }

std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  char buf[32];
  if (gmtime_r(&now, &tm) == nullptr || std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0) {
    return {};
  }
  return buf;
}

// The first "model name" line of /proc/cpuinfo (x86; other architectures
// name the CPU differently and get null).
std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (!line.starts_with("model name")) continue;
    const auto colon = line.find(':');
    if (colon == std::string::npos) return {};
    const auto start = line.find_first_not_of(" \t", colon + 1);
    return start == std::string::npos ? std::string() : line.substr(start);
  }
  return {};
}

std::string sasl_version() {
  const char* implementation = nullptr;
  const char* version = nullptr;
  sasl_version_info(&implementation, &version, nullptr, nullptr, nullptr, nullptr);
  if (version == nullptr) return {};
  return (implementation != nullptr ? std::string(implementation) + " " : std::string()) + version;
}

}  // namespace

Json machine_info() {
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
  utsname u{};
  const bool have_uname = ::uname(&u) == 0;
  cpu_set_t usable;
  CPU_ZERO(&usable);
  const long cpus = ::sysconf(_SC_NPROCESSORS_ONLN);
  double load[1] = {};
  return {
      {"time_utc", or_null(utc_now())},
      {"host", or_null(host)},
      {"cpu_model", or_null(cpu_model())},
      {"cpus", cpus > 0 ? Json(cpus) : Json(nullptr)},
      {"cpus_usable",
       ::sched_getaffinity(0, sizeof usable, &usable) == 0 ? Json(CPU_COUNT(&usable)) : Json(nullptr)},
      {"kernel", have_uname ? Json(std::string(u.sysname) + " " + u.release + " " + u.version +
                                   " " + u.machine)
                            : Json(nullptr)},
      // Others' work on the machine moves every number: say how busy it was.
      {"load_average", ::getloadavg(load, 1) == 1 ? Json(std::round(load[0] * 100) / 100)
                                                  : Json(nullptr)},
      {"version", MINIBENCH_VERSION},
      {"commit", or_null(kCommit)},
      {"build_type", or_null(MINIBENCH_BUILD_TYPE)},
      {"openssl", OpenSSL_version(OPENSSL_VERSION)},
      // MIT krb5 has no run-time version call: the headers' release it was
      // built against (krb5-config --version at configure time).
      {"krb5", or_null(MINIBENCH_KRB5_VERSION)},
      {"sasl", or_null(sasl_version())},
  };
}

}  // namespace minibench
