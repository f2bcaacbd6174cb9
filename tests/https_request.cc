#include "tests/https_request.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cctype>
#include <charconv>
#include <cstring>
#include <memory>
#include <optional>

#include "authrpc/security/base/log.h"

namespace authrpc::testing {
namespace {

constexpr std::size_t kMaxResponse = 1 << 20;

struct Url {
  std::string host;  // as in the URL, without brackets
  bool ipv6 = false;
  std::uint16_t port = 443;
  std::string target;  // path and query, "/" at least
};

std::optional<Url> parse_url(std::string_view url) {
  constexpr std::string_view kScheme = "https://";
  if (url.substr(0, kScheme.size()) != kScheme) return std::nullopt;
  url.remove_prefix(kScheme.size());
  const std::size_t slash = url.find('/');
  std::string_view authority = url.substr(0, slash);
  Url out;
  out.target = slash == std::string_view::npos ? "/" : std::string(url.substr(slash));
  std::string_view port;
  if (!authority.empty() && authority.front() == '[') {
    const std::size_t close = authority.find(']');
    if (close == std::string_view::npos) return std::nullopt;
    out.host = std::string(authority.substr(1, close - 1));
    out.ipv6 = true;
    authority.remove_prefix(close + 1);
    if (!authority.empty()) {
      if (authority.front() != ':') return std::nullopt;
      port = authority.substr(1);
    }
  } else {
    const std::size_t colon = authority.find(':');
    out.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) port = authority.substr(colon + 1);
  }
  if (!port.empty()) {
    unsigned value = 0;
    auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
    if (ec != std::errc() || end != port.data() + port.size() || value == 0 || value > 65535) return std::nullopt;
    out.port = static_cast<std::uint16_t>(value);
  }
  return out;
}

struct FdCloser {
  int fd;
  ~FdCloser() {
    if (fd >= 0) ::close(fd);
  }
};

// A connected socket to the URL's loopback host, or why not.
Result<int> connect_loopback(const Url& url, std::chrono::milliseconds timeout) {
  sockaddr_storage addr{};
  socklen_t len = 0;
  if (url.ipv6) {
    auto* a6 = reinterpret_cast<sockaddr_in6*>(&addr);
    a6->sin6_family = AF_INET6;
    a6->sin6_port = htons(url.port);
    if (::inet_pton(AF_INET6, url.host.c_str(), &a6->sin6_addr) != 1 || !IN6_IS_ADDR_LOOPBACK(&a6->sin6_addr)) {
      return Result<int>(Errc::kInvalidArgument, "not a loopback address: [" + escape_for_log(url.host) + "]");
    }
    len = sizeof *a6;
  } else {
    auto* a4 = reinterpret_cast<sockaddr_in*>(&addr);
    a4->sin_family = AF_INET;
    a4->sin_port = htons(url.port);
    const std::string host = url.host == "localhost" ? "127.0.0.1" : url.host;
    if (::inet_pton(AF_INET, host.c_str(), &a4->sin_addr) != 1 || (ntohl(a4->sin_addr.s_addr) >> 24) != 127) {
      return Result<int>(Errc::kInvalidArgument, "not a loopback address: " + escape_for_log(url.host));
    }
    len = sizeof *a4;
  }
  const int fd = ::socket(addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Result<int>(Errc::kUnavailable, std::string("socket: ") + std::strerror(errno));
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(timeout.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((timeout.count() % 1000) * 1000);
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), len) != 0) {
    const int err = errno;
    ::close(fd);
    return Result<int>(Errc::kUnavailable, "connect to port " + std::to_string(url.port) + ": " + std::strerror(err));
  }
  return fd;
}

std::string openssl_errors() {
  std::string out;
  for (unsigned long e; (e = ERR_get_error()) != 0;) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    if (!out.empty()) out += "; ";
    out += buf;
  }
  return out;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Parses a complete response read up to the peer's close.
Result<HttpsResponse> parse_response(std::string_view raw) {
  const std::size_t head_end = raw.find("\r\n\r\n");
  if (head_end == std::string_view::npos || raw.substr(0, 7) != "HTTP/1.") {
    return Result<HttpsResponse>(Errc::kProtocolError,
                                 "not an HTTP/1.x response: " + escape_for_log(raw.substr(0, 64)));
  }
  std::string_view head = raw.substr(0, head_end);
  std::string_view body = raw.substr(head_end + 4);
  HttpsResponse out;
  const std::size_t sp = head.find(' ');
  if (sp == std::string_view::npos || head.size() < sp + 4 ||
      std::from_chars(head.data() + sp + 1, head.data() + sp + 4, out.status).ec != std::errc()) {
    return Result<HttpsResponse>(Errc::kProtocolError, "bad status line: " + escape_for_log(head.substr(0, 64)));
  }
  bool chunked = false;
  std::optional<std::size_t> content_length;
  std::size_t pos = head.find("\r\n");
  while (pos != std::string_view::npos) {
    head.remove_prefix(pos + 2);
    pos = head.find("\r\n");
    const std::string_view line = head.substr(0, pos);
    const std::size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    const std::string name = lower(line.substr(0, colon));
    std::string_view value = line.substr(colon + 1);
    while (!value.empty() && value.front() == ' ') value.remove_prefix(1);
    if (name == "content-type") out.content_type = std::string(value);
    if (name == "transfer-encoding" && lower(value).find("chunked") != std::string::npos) chunked = true;
    if (name == "content-length") {
      std::size_t n = 0;
      if (std::from_chars(value.data(), value.data() + value.size(), n).ec == std::errc()) content_length = n;
    }
  }
  if (chunked) {
    // The servers tests talk to (glewlwyd's libmicrohttpd) send a length.
    return Result<HttpsResponse>(Errc::kProtocolError, "chunked responses are not supported");
  }
  if (content_length) {
    if (body.size() < *content_length) {
      return Result<HttpsResponse>(Errc::kUnavailable, "body shorter than its Content-Length (connection cut)");
    }
    out.body = std::string(body.substr(0, *content_length));
  } else {
    out.body = std::string(body);
  }
  return out;
}

}  // namespace

std::string form_urlencode(std::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~') {
      out += static_cast<char>(c);
    } else if (c == ' ') {
      out += '+';
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

Result<HttpsResponse> https_request(const HttpsRequest& request) {
  const auto url = parse_url(request.url);
  if (!url) return Result<HttpsResponse>(Errc::kInvalidArgument, "not an https:// URL: " + escape_for_log(request.url));
  auto fd = connect_loopback(*url, request.timeout);
  if (!fd.ok()) return fd.status();
  FdCloser closer{*fd};

  ERR_clear_error();
  std::unique_ptr<SSL_CTX, decltype(&SSL_CTX_free)> ctx(SSL_CTX_new(TLS_client_method()), SSL_CTX_free);
  if (!ctx || SSL_CTX_load_verify_locations(ctx.get(), request.ca_file.c_str(), nullptr) != 1) {
    return Result<HttpsResponse>(Errc::kInvalidArgument,
                                 "cannot load CA file " + request.ca_file + ": " + openssl_errors());
  }
  SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_PEER, nullptr);
  SSL_CTX_set_min_proto_version(ctx.get(), TLS1_2_VERSION);
  std::unique_ptr<SSL, decltype(&SSL_free)> ssl(SSL_new(ctx.get()), SSL_free);
  X509_VERIFY_PARAM* param = SSL_get0_param(ssl.get());
  const bool ip_literal = url->ipv6 || std::isdigit(static_cast<unsigned char>(url->host.front()));
  if (ip_literal ? X509_VERIFY_PARAM_set1_ip_asc(param, url->host.c_str()) != 1
                 : (X509_VERIFY_PARAM_set1_host(param, url->host.c_str(), 0) != 1 ||
                    SSL_set_tlsext_host_name(ssl.get(), url->host.c_str()) != 1)) {
    return Result<HttpsResponse>(Errc::kInvalidArgument, "bad host " + escape_for_log(url->host));
  }
  SSL_set_fd(ssl.get(), *fd);
  if (SSL_connect(ssl.get()) != 1) {
    const long verify = SSL_get_verify_result(ssl.get());
    if (verify != X509_V_OK) {
      return Result<HttpsResponse>(Errc::kAuthenticationFailed, std::string("server certificate refused: ") +
                                                                    X509_verify_cert_error_string(verify));
    }
    return Result<HttpsResponse>(Errc::kUnavailable, "TLS handshake with port " + std::to_string(url->port) +
                                                         " failed: " + openssl_errors());
  }

  const std::string host_header = url->ipv6 ? "[" + url->host + "]" : url->host;
  std::string out = request.method + " " + url->target + " HTTP/1.1\r\nHost: " + host_header + ":" +
                    std::to_string(url->port) + "\r\nConnection: close\r\n";
  for (const auto& [name, value] : request.headers) out += name + ": " + value + "\r\n";
  if (!request.body.empty() || request.method == "POST") {
    out += "Content-Length: " + std::to_string(request.body.size()) + "\r\n";
  }
  out += "\r\n" + request.body;
  std::size_t written = 0;
  while (written < out.size()) {
    std::size_t n = 0;
    if (SSL_write_ex(ssl.get(), out.data() + written, out.size() - written, &n) != 1) {
      return Result<HttpsResponse>(Errc::kUnavailable, "write failed: " + openssl_errors());
    }
    written += n;
  }

  std::string raw;
  char buf[16384];
  while (true) {
    std::size_t n = 0;
    if (SSL_read_ex(ssl.get(), buf, sizeof buf, &n) == 1) {
      raw.append(buf, n);
      if (raw.size() > kMaxResponse) return Result<HttpsResponse>(Errc::kProtocolError, "response above 1 MiB");
      continue;
    }
    const int err = SSL_get_error(ssl.get(), 0);
    // A server that closes without close_notify (libmicrohttpd does) ends
    // the response as well; parse_response() catches a cut body by its length.
    if (err == SSL_ERROR_ZERO_RETURN || err == SSL_ERROR_SYSCALL || err == SSL_ERROR_SSL) {
      if (!raw.empty()) break;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        return Result<HttpsResponse>(Errc::kUnavailable, "no answer within " +
                                                             std::to_string(request.timeout.count()) + " ms");
      }
      return Result<HttpsResponse>(Errc::kUnavailable, "connection closed before any answer");
    }
    return Result<HttpsResponse>(Errc::kUnavailable, "read failed: " + openssl_errors());
  }
  ERR_clear_error();
  return parse_response(raw);
}

Result<HttpsResponse> https_get(std::string url, std::string ca_file) {
  HttpsRequest request;
  request.url = std::move(url);
  request.ca_file = std::move(ca_file);
  return https_request(request);
}

}  // namespace authrpc::testing
