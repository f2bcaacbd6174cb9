// Endpoint: where a server listens or a client connects, written as a URI:
//   tcp://127.0.0.1:7000   tcp://[::1]:7000   tcp://localhost:7000
//   tls://127.0.0.1:7443   (TCP carrying TLS from the first byte: docs/TLS.md)
//   unix:/run/app.sock     unix:///run/app.sock   unix:@abstract-name
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "authrpc/base/result.h"

namespace authrpc {

struct Endpoint {
  enum class Scheme { kTcp, kUnix, kTls };

  Scheme scheme = Scheme::kTcp;
  std::string host;  // tcp, tls: name or literal address (no brackets)
  std::uint16_t port = 0;
  std::string path;  // unix: filesystem path, or "@name" for the abstract namespace

  static Result<Endpoint> parse(std::string_view uri);
  std::string to_string() const;
  std::string_view scheme_name() const noexcept;
};

}  // namespace authrpc
