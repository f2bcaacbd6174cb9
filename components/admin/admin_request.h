// What the admin listener (components/admin/admin_server.h) answers to one
// request, decided from its method, its request target as sent and its Host
// header fields alone: a pure function, so that every refusal is tested without
// sockets (tests/admin_request_test.cc) and fuzzed
// (tests/fuzz/admin_request_fuzz.cc). AdminServer turns the decision into a
// response. Internal to the admin component: not installed.
//
// The rules, in the order they apply:
//  1. Host. More than one Host field is 400 (RFC 9112 §3.2). One is
//     accepted when its value, without spaces or tabs around it, has a host
//     part (the port is ignored) that is an IPv4 literal,
//     an [IPv6] literal, "localhost", or one of the configured names
//     (AdminOptions::hosts), compared without regard to case; any other is
//     421 Misdirected Request. A web page whose DNS name the attacker points
//     at the admin address (DNS rebinding) sends that name in Host, so it
//     is refused; an IP literal cannot be rebound. No Host (HTTP/1.0) is
//     accepted: HTTP/1.1 without one never reaches here (libmicrohttpd
//     answers 400), and a browser always sends one.
//  2. Method: GET or HEAD, exactly (methods are case-sensitive); any other
//     is 405 with "Allow: GET, HEAD".
//  3. Path: the target up to its first '?', compared byte for byte with
//     /metrics, /healthz and /readyz: never percent-decoded or normalized,
//     so /metrics%00, /metrics%2F, //metrics and /metrics/../metrics are
//     404. The query is ignored (no page takes parameters).
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "authrpc/base/result.h"

namespace authrpc {

enum class AdminAnswer {
  kMetrics,           // 200, the Prometheus exposition
  kHealthz,           // 200 "ok"
  kReadyz,            // 200 or 503, after the readiness checks
  kNotFound,          // 404
  kMethodNotAllowed,  // 405, Allow: GET, HEAD
  kMisdirected,       // 421: Host names another host
  kBadRequest,        // 400: more than one Host
};

struct AdminRequest {
  std::string_view method;
  std::string_view target;  // as sent: path and query, not decoded
  std::span<const std::string_view> host_fields;  // the Host fields' values, in order
};

// `names`: the configured host names, lower case (admin_host_names()).
AdminAnswer decide_admin_request(const AdminRequest& request, std::span<const std::string> names);

// True if the Host value `host` ("HOST" or "HOST:PORT") names this listener
// by rule 1 above.
bool admin_host_allowed(std::string_view host, std::span<const std::string> names);

// AdminOptions::hosts checked and lower-cased: each a DNS name (labels of
// letters, digits and '-' joined by single dots, at most 253 bytes); no
// port, wildcard or IP literal (IP literals are always accepted).
// CONFIG_ERROR naming the first bad one.
Result<std::vector<std::string>> admin_host_names(std::span<const std::string> hosts);

}  // namespace authrpc
