// http_request(): one blocking HTTP/1.1 request from a test, on libcurl's
// easy interface (library authrpc_test_support): plain http:// to the admin
// listener and Prometheus, https:// to the identity provider the tests start
// (GlewlwydIdp), verified as a resource server would: the certificate must
// chain to the given CA file (nothing else is trusted) and name the URL's
// host. Requests with an unusual method, request-target, HTTP version or Host
// header are built field by field, for the tests of a server's request
// parsing. No proxy, no redirects followed; answers up to 16 MiB.
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "authrpc/base/result.h"

namespace authrpc::testing {

struct HttpRequest {
  // Sent as given: "GET", "POST", "get", "BREW"... "HEAD" reads no body.
  std::string method = "GET";
  // http://HOST:PORT/PATH or https://HOST:PORT/PATH; the path is sent as
  // written (no dot segments removed, nothing decoded).
  std::string url;
  // https: PEM file of the CA the server's certificate must chain to.
  std::string ca_file;
  // Extra headers, in order, each sent even when repeated or empty; a
  // "Host" here replaces the one made from the URL.
  std::vector<std::pair<std::string, std::string>> headers;
  // Header lines sent as written, after the others: for what no client
  // sends, such as a second Host (libcurl sends one at most).
  std::vector<std::string> raw_header_lines;
  bool send_host = true;  // false: no Host header at all
  std::string body;       // sent with a Content-Length when not empty
  // The request-target instead of the URL's path ("host:port" for CONNECT).
  std::string target;
  bool http10 = false;  // "HTTP/1.0" in the request line
  std::chrono::milliseconds timeout{5000};
};

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

// The server's answer, whatever its status. Errors: kInvalidArgument (a URL
// libcurl refuses), kUnavailable (connect refused, reset, timeout: worth
// retrying), kAuthenticationFailed (the server's certificate does not
// verify), kProtocolError (an answer that is not HTTP/1.x, or too large).
Result<HttpResponse> http_request(const HttpRequest& request);
// GET `url` (http://).
Result<HttpResponse> http_get(const std::string& url, std::chrono::milliseconds timeout = std::chrono::seconds(5));
// GET `url` (https://), the certificate verified against `ca_file`.
Result<HttpResponse> http_get(const std::string& url, const std::string& ca_file);

// application/x-www-form-urlencoded encoding of one name or value.
std::string form_urlencode(std::string_view text);

}  // namespace authrpc::testing
