// https_get(): one blocking HTTPS GET on libcurl's easy interface, with
// certificate and host-name verification, bounded in time and size. What the
// `jwt` mechanism fetches JWKS documents with (from its host's blocking
// executor, or once at start-up); not a general HTTP client: https only, no
// redirects followed, no proxy (not even one named by the environment), no
// cookies, no compression. Thread-safe: each call has its own easy handle
// (libcurl's global initialisation runs once, at the first call); blocks the
// calling thread for at most the timeout.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>
#include <string_view>

#include "authrpc/base/result.h"

namespace authrpc {

struct HttpsGetOptions {
  // PEM file of the CAs to trust, and only those; empty: the system's CAs.
  std::string ca_file;
  // For the whole request: resolve, connect, handshake, send, receive.
  std::chrono::milliseconds timeout{5000};
  // A longer body is refused (RESOURCE_EXHAUSTED).
  std::size_t max_bytes = 1 << 20;
};

// The body of a 200 response to GET `url` ("https://host[:port]/path",
// host a name, an IPv4 address or a bracketed IPv6 address), over TLS 1.2
// or later and HTTP/1.1. Errors: INVALID_ARGUMENT for a URL that is not
// https:// or is malformed; UNAVAILABLE for resolve/connect/timeout
// failures, a TLS handshake or certificate verification failure (the
// message says which), a connection that fails before the body's end, or a
// status other than 200, a redirect included (the message has the status
// line, escaped); RESOURCE_EXHAUSTED for a body over max_bytes;
// PROTOCOL_ERROR for a malformed response (or a body shorter than its
// Content-Length); CONFIG_ERROR when ca_file cannot be loaded. Messages name
// the URL without its query (which may hold an API key) and never a URL
// with user information (refused).
Result<std::string> https_get(std::string_view url, const HttpsGetOptions& options);

}  // namespace authrpc
