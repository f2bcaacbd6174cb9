#include "authrpc/components/admin/admin_request.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>

#include "authrpc/base/log.h"

namespace authrpc {
namespace {

constexpr std::size_t kMaxName = 253;

char ascii_lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

bool equal_ignoring_case(std::string_view a, std::string_view b) {
  return a.size() == b.size() &&
         std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) { return ascii_lower(x) == ascii_lower(y); });
}

// inet_pton reads a C string: an address with a NUL byte in it, or longer
// than any literal of its family, is not one.
bool ip_literal(int family, std::string_view text) {
  char buf[INET6_ADDRSTRLEN];
  if (text.empty() || text.size() >= sizeof buf || text.find('\0') != std::string_view::npos) return false;
  std::copy(text.begin(), text.end(), buf);
  buf[text.size()] = '\0';
  in6_addr out;
  return ::inet_pton(family, buf, &out) == 1;
}

bool digits(std::string_view text) {
  return std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// Labels of letters, digits and '-', joined by single dots.
bool dns_name(std::string_view name) {
  if (name.empty() || name.size() > kMaxName || name.front() == '.' || name.back() == '.') return false;
  char previous = '.';
  for (const char c : name) {
    const bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    if (!alnum && c != '-' && c != '.') return false;
    if (c == '.' && previous == '.') return false;
    previous = c;
  }
  return true;
}

// A field value without the optional whitespace around it (RFC 9110 §5.5),
// which libmicrohttpd leaves at its end.
std::string_view trim_ows(std::string_view value) {
  const auto first = value.find_first_not_of(" \t");
  if (first == std::string_view::npos) return {};
  return value.substr(first, value.find_last_not_of(" \t") - first + 1);
}

}  // namespace

bool admin_host_allowed(std::string_view host, std::span<const std::string> names) {
  const bool bracketed = !host.empty() && host.front() == '[';
  std::string_view name, port;
  if (bracketed) {
    const auto close = host.find(']');
    if (close == std::string_view::npos) return false;
    port = host.substr(close + 1);
    if (!port.empty() && port.front() != ':') return false;
    if (!ip_literal(AF_INET6, host.substr(1, close - 1))) return false;
  } else {
    const auto colon = host.find(':');
    name = host.substr(0, colon);
    if (colon != std::string_view::npos) port = host.substr(colon);
  }
  if (!port.empty() && (port.size() > 6 || !digits(port.substr(1)))) return false;
  if (bracketed) return true;
  if (ip_literal(AF_INET, name) || equal_ignoring_case(name, "localhost")) return true;
  return std::any_of(names.begin(), names.end(),
                     [name](const std::string& allowed) { return equal_ignoring_case(name, allowed); });
}

AdminAnswer decide_admin_request(const AdminRequest& request, std::span<const std::string> names) {
  if (request.host_fields.size() > 1) return AdminAnswer::kBadRequest;
  if (request.host_fields.size() == 1 && !admin_host_allowed(trim_ows(request.host_fields.front()), names)) {
    return AdminAnswer::kMisdirected;
  }
  if (request.method != "GET" && request.method != "HEAD") return AdminAnswer::kMethodNotAllowed;
  const std::string_view path = request.target.substr(0, request.target.find('?'));
  if (path == "/metrics") return AdminAnswer::kMetrics;
  if (path == "/healthz") return AdminAnswer::kHealthz;
  if (path == "/readyz") return AdminAnswer::kReadyz;
  return AdminAnswer::kNotFound;
}

Result<std::vector<std::string>> admin_host_names(std::span<const std::string> hosts) {
  std::vector<std::string> out;
  out.reserve(hosts.size());
  for (const std::string& host : hosts) {
    if (!dns_name(host)) {
      return Status(Errc::kConfigError, "admin hosts: '" + escape_for_log(host) +
                          "' is not a DNS name (letters, digits and '-' in labels joined by dots; no port, "
                          "wildcard or IP literal: IP literals are always accepted)");
    }
    std::string lower = host;
    std::transform(lower.begin(), lower.end(), lower.begin(), ascii_lower);
    out.push_back(std::move(lower));
  }
  return out;
}

}  // namespace authrpc
