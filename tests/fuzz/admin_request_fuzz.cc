// Fuzz target: what the admin listener answers to a request
// (components/admin/admin_request.h: decide_admin_request, admin_host_allowed)
// and the check of its configured host names (admin_host_names). The request
// comes from anyone who reaches the admin port, or from a web page through DNS
// rebinding; only the three exact paths, by GET or HEAD, with an allowed Host,
// may be served.
//
// Input: lines split at '\n': the method, the request target, then up to
// four Host field values. The same lines after the first are also tried as
// configured host names; what admin_host_names accepts then decides the
// request again as the configured names.
#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "authrpc/components/admin/admin_request.h"
#include "tests/fuzz/fuzz_support.h"

namespace authrpc::fuzz {
namespace {

constexpr std::size_t kMaxHostFields = 4;

// The Host value as the decision reads it: without spaces and tabs around.
std::string_view trimmed(std::string_view value) {
  const auto first = value.find_first_not_of(" \t");
  if (first == std::string_view::npos) return {};
  return value.substr(first, value.find_last_not_of(" \t") - first + 1);
}

bool served(AdminAnswer answer) {
  return answer == AdminAnswer::kMetrics || answer == AdminAnswer::kHealthz || answer == AdminAnswer::kReadyz;
}

// What any served answer must satisfy, whatever the names.
void check(const AdminRequest& request, AdminAnswer answer, const std::vector<std::string>& names) {
  if (!served(answer)) return;
  if (request.method != "GET" && request.method != "HEAD") fail("served a method other than GET or HEAD");
  const std::string_view path = request.target.substr(0, request.target.find('?'));
  const std::string_view expected = answer == AdminAnswer::kMetrics   ? "/metrics"
                                    : answer == AdminAnswer::kHealthz ? "/healthz"
                                                                      : "/readyz";
  if (path != expected) fail("served a page for another path");
  if (request.host_fields.size() > 1) fail("served a request with more than one Host");
  if (request.host_fields.size() == 1 && !admin_host_allowed(trimmed(request.host_fields.front()), names)) {
    fail("served a request whose Host is not allowed");
  }
}

std::vector<std::string_view> lines(std::string_view data) {
  std::vector<std::string_view> out;
  for (;;) {
    const auto end = data.find('\n');
    out.push_back(data.substr(0, end));
    if (end == std::string_view::npos) return out;
    data.remove_prefix(end + 1);
  }
}

}  // namespace
}  // namespace authrpc::fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* bytes, std::size_t size) {
  using namespace authrpc;
  using namespace authrpc::fuzz;
  const auto parts = lines(std::string_view(reinterpret_cast<const char*>(bytes), size));
  if (parts.size() < 2 || parts.size() > 2 + kMaxHostFields) return -1;
  const std::vector<std::string_view> host_fields(parts.begin() + 2, parts.end());
  const AdminRequest request{parts[0], parts[1], host_fields};

  static const std::vector<std::string> fixed = {"metrics.example", "node-1.cluster.local"};
  const AdminAnswer answer = decide_admin_request(request, fixed);
  check(request, answer, fixed);
  if (decide_admin_request(request, fixed) != answer) fail("the same request decided twice differently");

  const std::vector<std::string> candidates(parts.begin() + 1, parts.end());
  auto names = admin_host_names(candidates);
  if (names.ok()) {
    for (const std::string& name : *names) {
      if (std::any_of(name.begin(), name.end(), [](char c) { return c >= 'A' && c <= 'Z'; })) {
        fail("a configured name kept upper case");
      }
      if (!admin_host_allowed(name, *names) || !admin_host_allowed(name + ":9464", *names)) {
        fail("a configured name is not allowed as a Host");
      }
    }
    check(request, decide_admin_request(request, *names), *names);
  }
  return 0;
}
