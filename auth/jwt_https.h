// https_get(): one blocking HTTPS GET with certificate and host-name
// verification, bounded in time and size. What the `jwt` mechanism fetches
// JWKS documents with (from its host's blocking executor, or once at
// start-up); not a general HTTP client: no redirects, no proxies, no cookies.
// Thread-safe (each call has its own socket and TLS context); blocks the
// calling thread for at most the timeout (a name lookup still running then
// is left to finish on a thread of its own).
#pragma once

#include <chrono>
#include <cstddef>
#include <string>
#include <string_view>

#include "authrpc/security/base/result.h"

namespace authrpc {

struct HttpsGetOptions {
  // PEM file of the CAs to trust; empty: OpenSSL's default verify paths
  // (the system's CAs).
  std::string ca_file;
  // For the whole request: resolve, connect, handshake, send, receive.
  std::chrono::milliseconds timeout{5000};
  // A longer body is refused (RESOURCE_EXHAUSTED).
  std::size_t max_bytes = 1 << 20;
};

// The body of a 200 response to GET `url` ("https://host[:port]/path",
// host a name, an IPv4 address or a bracketed IPv6 address). HTTP/1.1 with
// Connection: close; Content-Length, chunked or read-to-close bodies.
// Errors: INVALID_ARGUMENT for a URL that is not https:// or is malformed;
// UNAVAILABLE for resolve/connect/timeout failures, a TLS handshake or
// certificate verification failure (the message says which), or a status
// other than 200 (the message has the status line, escaped);
// RESOURCE_EXHAUSTED for a body over max_bytes; PROTOCOL_ERROR for a
// malformed response (or one cut short: a body shorter than its
// Content-Length, a read-to-close body without TLS close_notify);
// CONFIG_ERROR when ca_file cannot be loaded. Messages name the URL
// without its query (which may hold an API key) and never a URL with user
// information (refused).
Result<std::string> https_get(std::string_view url, const HttpsGetOptions& options);

}  // namespace authrpc
