#include "tests/http_get.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <utility>

namespace authrpc::testing {
namespace {

using Clock = std::chrono::steady_clock;
constexpr std::size_t kMaxResponse = 16 << 20;

Status unavailable(const std::string& what) {
  return {Errc::kUnavailable, what + ": " + std::strerror(errno)};
}

int left_ms(Clock::time_point until) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now()).count();
  return static_cast<int>(std::clamp<long long>(left, 0, 1 << 30));
}

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

// "http://AUTHORITY/TARGET" → {authority, target ("/" when absent)}.
Result<std::pair<std::string, std::string>> split_url(const std::string& url) {
  constexpr std::string_view kScheme = "http://";
  std::string_view rest = url;
  if (rest.substr(0, kScheme.size()) != kScheme) return Status(Errc::kInvalidArgument, "not an http:// URL: " + url);
  rest.remove_prefix(kScheme.size());
  const std::size_t slash = rest.find('/');
  return std::pair{std::string(rest.substr(0, slash)),
                   slash == std::string_view::npos ? std::string("/") : std::string(rest.substr(slash))};
}

}  // namespace

Result<HttpResponse> http_request(const std::string& method, const std::string& url,
                                  std::chrono::milliseconds timeout) {
  auto parts = split_url(url);
  if (!parts.ok()) return parts.status();
  return http_exchange(url,
                       method + " " + parts->second + " HTTP/1.1\r\nHost: " + parts->first +
                           "\r\nUser-Agent: authrpc-tests\r\nConnection: close\r\n\r\n",
                       timeout);
}

Result<HttpResponse> http_exchange(const std::string& url, const std::string& request,
                                   std::chrono::milliseconds timeout) {
  auto parts = split_url(url);
  if (!parts.ok()) return parts.status();
  const std::string_view authority = parts->first;
  const std::size_t colon = authority.rfind(':');
  if (colon == std::string_view::npos) return Status(Errc::kInvalidArgument, "no port in " + url);
  std::string host(authority.substr(0, colon));
  const std::string_view port_text = authority.substr(colon + 1);
  unsigned port = 0;
  const auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (ec != std::errc() || end != port_text.data() + port_text.size() || port == 0 || port > 65535) {
    return Status(Errc::kInvalidArgument, "bad port in " + url);
  }

  sockaddr_storage addr{};
  socklen_t addr_len = 0;
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    auto* a6 = reinterpret_cast<sockaddr_in6*>(&addr);
    a6->sin6_family = AF_INET6;
    a6->sin6_port = htons(static_cast<std::uint16_t>(port));
    if (::inet_pton(AF_INET6, host.substr(1, host.size() - 2).c_str(), &a6->sin6_addr) != 1 ||
        !IN6_IS_ADDR_LOOPBACK(&a6->sin6_addr)) {
      return Status(Errc::kInvalidArgument, "not a loopback host: " + url);
    }
    addr_len = sizeof(sockaddr_in6);
  } else {
    if (host == "localhost") host = "127.0.0.1";
    auto* a4 = reinterpret_cast<sockaddr_in*>(&addr);
    a4->sin_family = AF_INET;
    a4->sin_port = htons(static_cast<std::uint16_t>(port));
    if (::inet_pton(AF_INET, host.c_str(), &a4->sin_addr) != 1 || (ntohl(a4->sin_addr.s_addr) >> 24) != 127) {
      return Status(Errc::kInvalidArgument, "not a loopback host: " + url);
    }
    addr_len = sizeof(sockaddr_in);
  }

  const auto until = Clock::now() + timeout;
  Fd sock{::socket(addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0)};
  if (sock.fd < 0) return unavailable("socket");
  if (::connect(sock.fd, reinterpret_cast<const sockaddr*>(&addr), addr_len) != 0) {
    if (errno != EINPROGRESS) return unavailable("connect to " + url);
    pollfd p{sock.fd, POLLOUT, 0};
    if (::poll(&p, 1, left_ms(until)) != 1) return Status(Errc::kUnavailable, "connect to " + url + ": timed out");
    int error = 0;
    socklen_t len = sizeof error;
    ::getsockopt(sock.fd, SOL_SOCKET, SO_ERROR, &error, &len);
    if (error != 0) {
      errno = error;
      return unavailable("connect to " + url);
    }
  }

  std::size_t sent = 0;
  while (sent < request.size()) {
    const ssize_t n = ::send(sock.fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n > 0) {
      sent += static_cast<std::size_t>(n);
      continue;
    }
    if (n < 0 && errno != EAGAIN && errno != EINTR) return unavailable("send to " + url);
    pollfd p{sock.fd, POLLOUT, 0};
    if (::poll(&p, 1, left_ms(until)) != 1) return Status(Errc::kUnavailable, "send to " + url + ": timed out");
  }

  std::string answer;
  char buf[16384];
  for (;;) {
    const ssize_t n = ::recv(sock.fd, buf, sizeof buf, 0);
    if (n > 0) {
      answer.append(buf, static_cast<std::size_t>(n));
      if (answer.size() > kMaxResponse) return Status(Errc::kProtocolError, "answer over 16 MiB from " + url);
      continue;
    }
    if (n == 0) break;
    if (errno == EINTR) continue;
    if (errno != EAGAIN) return unavailable("receive from " + url);
    pollfd p{sock.fd, POLLIN, 0};
    if (::poll(&p, 1, left_ms(until)) != 1) return Status(Errc::kUnavailable, "receive from " + url + ": timed out");
  }

  const std::size_t head_end = answer.find("\r\n\r\n");
  if (head_end == std::string::npos || answer.compare(0, 7, "HTTP/1.") != 0 || answer.size() < 12) {
    return Status(Errc::kProtocolError, "not an HTTP/1.x answer from " + url);
  }
  HttpResponse response;
  const auto [status_end, status_ec] = std::from_chars(answer.data() + 9, answer.data() + 12, response.status);
  if (status_ec != std::errc() || status_end != answer.data() + 12) {
    return Status(Errc::kProtocolError, "no status code from " + url);
  }
  std::size_t line = answer.find("\r\n") + 2;
  while (line < head_end) {
    const std::size_t eol = answer.find("\r\n", line);
    const std::string header = answer.substr(line, eol - line);
    line = eol + 2;
    const std::size_t sep = header.find(':');
    if (sep == std::string::npos) return Status(Errc::kProtocolError, "a bad header line from " + url);
    std::string name = header.substr(0, sep);
    std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
    std::string value = header.substr(sep + 1);
    value.erase(0, value.find_first_not_of(" \t"));
    value.erase(value.find_last_not_of(" \t") + 1);
    response.headers[name] = value;
  }
  if (response.header("transfer-encoding").find("chunked") != std::string::npos) {
    return Status(Errc::kProtocolError, "chunked answers are not supported (" + url + ")");
  }
  response.body = answer.substr(head_end + 4);
  return response;
}

}  // namespace authrpc::testing
