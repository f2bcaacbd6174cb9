#include "authrpc/rpc/endpoint.h"

#include <charconv>
#include <sys/un.h>

namespace authrpc {
namespace {

Status bad(std::string_view uri, std::string_view why) {
  return {Errc::kInvalidArgument,
          "bad endpoint '" + std::string(uri) + "': " + std::string(why)};
}

}  // namespace

Result<Endpoint> Endpoint::parse(std::string_view uri) {
  Endpoint ep;
  if (uri.starts_with("unix:")) {
    ep.scheme = Scheme::kUnix;
    std::string_view path = uri.substr(5);
    if (path.starts_with("//")) path.remove_prefix(2);
    if (path.empty()) return bad(uri, "empty socket path");
    if (path.size() >= sizeof(sockaddr_un{}.sun_path)) return bad(uri, "socket path too long");
    ep.path = std::string(path);
    return ep;
  }
  if (uri.starts_with("tls://")) {
    ep.scheme = Scheme::kTls;
  } else if (!uri.starts_with("tcp://")) {
    return bad(uri, "scheme must be tcp://, tls:// or unix:");
  }
  std::string_view rest = uri.substr(6);
  if (!rest.empty() && rest.back() == '/') rest.remove_suffix(1);
  std::string_view host, port;
  if (rest.starts_with("[")) {
    const auto close = rest.find(']');
    if (close == std::string_view::npos) return bad(uri, "unterminated '['");
    host = rest.substr(1, close - 1);
    rest.remove_prefix(close + 1);
    if (!rest.starts_with(":")) return bad(uri, "missing port");
    port = rest.substr(1);
  } else {
    const auto colon = rest.rfind(':');
    if (colon == std::string_view::npos) return bad(uri, "missing port");
    host = rest.substr(0, colon);
    port = rest.substr(colon + 1);
    if (host.find(':') != std::string_view::npos) {
      return bad(uri, "an IPv6 address must be written in brackets: tcp://[::1]:PORT");
    }
  }
  if (host.empty()) return bad(uri, "missing host");
  unsigned value = 0;
  const auto [ptr, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
  if (ec != std::errc() || ptr != port.data() + port.size() || value > 65535) {
    return bad(uri, "port must be a number 0–65535");
  }
  ep.host = std::string(host);
  ep.port = static_cast<std::uint16_t>(value);
  return ep;
}

std::string Endpoint::to_string() const {
  if (scheme == Scheme::kUnix) return (path.starts_with("//") ? "unix://" : "unix:") + path;
  const std::string prefix = scheme == Scheme::kTls ? "tls://" : "tcp://";
  if (host.find(':') != std::string::npos) return prefix + "[" + host + "]:" + std::to_string(port);
  return prefix + host + ":" + std::to_string(port);
}

std::string_view Endpoint::scheme_name() const noexcept {
  switch (scheme) {
    case Scheme::kUnix: return "unix";
    case Scheme::kTls: return "tls";
    case Scheme::kTcp: break;
  }
  return "tcp";
}

}  // namespace authrpc
