// http_request(): one blocking plain-HTTP/1.1 request to a server on
// loopback (library authrpc_test_support), for the admin listener's tests
// (/metrics, /healthz, /readyz) and anything else that scrapes it. One
// connection per request ("Connection: close"); http_exchange() sends a
// request written by hand, byte for byte. The caller's thread blocks
// until the server closes or the timeout passes. Not a general HTTP client:
// http:// URLs with a loopback IPv4 host (127/8, localhost) or [::1] only,
// answers up to 16 MiB, no chunked transfer encoding. tests/https_request.h
// is the TLS counterpart.
#pragma once

#include <chrono>
#include <map>
#include <string>

#include "authrpc/security/base/result.h"

namespace authrpc::testing {

struct HttpResponse {
  int status = 0;
  // Header names in lower case; a repeated header keeps its last value.
  std::map<std::string, std::string> headers;
  std::string body;

  std::string header(const std::string& lower_case_name) const {
    const auto it = headers.find(lower_case_name);
    return it == headers.end() ? std::string() : it->second;
  }
};

// The server's answer, whatever its status. Errors: kInvalidArgument (URL
// not http:// or not loopback), kUnavailable (connect refused, reset,
// timeout: worth retrying), kProtocolError (an answer that is not
// HTTP/1.x, too large, or chunked).
Result<HttpResponse> http_request(const std::string& method, const std::string& url,
                                  std::chrono::milliseconds timeout = std::chrono::seconds(5));
// Sends `request` exactly as given (request line, headers, any body) to the
// host and port of `url` (its path is not used) and reads the answer as
// http_request() does, until the server closes.
Result<HttpResponse> http_exchange(const std::string& url, const std::string& request,
                                   std::chrono::milliseconds timeout = std::chrono::seconds(5));
inline Result<HttpResponse> http_get(const std::string& url,
                                     std::chrono::milliseconds timeout = std::chrono::seconds(5)) {
  return http_request("GET", url, timeout);
}

}  // namespace authrpc::testing
