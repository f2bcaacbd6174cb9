// https_request(): one blocking HTTP/1.1 request over TLS to a server on
// loopback, verified against a given CA file (library authrpc_test_support).
// Tests use it to talk to the identity provider they start (GlewlwydIdp) and
// to read what it serves (its JWKS, its discovery document) the way a
// resource server would: certificate chain and name checked, nothing trusted
// by default. One connection per request ("Connection: close"); the caller's
// thread blocks until the answer or the timeout. Not a general HTTP client:
// https:// URLs with a loopback host only, bodies up to 1 MiB, no chunked
// transfer encoding.
#pragma once

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "authrpc/security/base/result.h"

namespace authrpc::testing {

struct HttpsRequest {
  std::string method = "GET";
  // https://HOST:PORT/PATH with HOST 127.0.0.1 (any 127/8), localhost or [::1].
  std::string url;
  // PEM file of the CA the server's certificate must chain to; the
  // certificate must also name HOST.
  std::string ca_file;
  // Extra request headers (Host, Connection and Content-Length are added).
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  std::chrono::milliseconds timeout{5000};
};

struct HttpsResponse {
  int status = 0;
  std::string content_type;
  std::string body;
};

// The server's answer, whatever its status. Errors: kInvalidArgument (URL not
// https:// or not loopback), kUnavailable (connect refused, reset, timeout:
// worth retrying), kAuthenticationFailed (the certificate does not verify),
// kProtocolError (an answer that is not HTTP/1.x, or too large).
Result<HttpsResponse> https_request(const HttpsRequest& request);
// A GET of `url` with the default timeout.
Result<HttpsResponse> https_get(std::string url, std::string ca_file);

// application/x-www-form-urlencoded encoding of one name or value.
std::string form_urlencode(std::string_view text);

}  // namespace authrpc::testing
