#include "authrpc/auth/jwt_https.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "authrpc/security/base/log.h"
#include "authrpc/security/tls_context.h"

namespace authrpc {
namespace {

using Clock = std::chrono::steady_clock;

// The status line and headers of a response may take this much; a JWKS
// endpoint sends a few hundred bytes of them.
constexpr std::size_t kMaxHeaderBytes = 64 * 1024;
// A chunk-size line ("1a2b;ext\r\n").
constexpr std::size_t kMaxChunkLine = 1024;
constexpr std::size_t kReadSize = 16 * 1024;

// A peer's or a configuration's text for a message: escaped and cut short.
std::string escaped(std::string_view text, std::size_t max = 200) {
  return escape_for_log(text.substr(0, max)) + (text.size() > max ? "..." : "");
}
std::string for_message(std::string_view text, std::size_t max = 200) {
  return "\"" + escaped(text, max) + "\"";
}

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

struct Url {
  std::string host;  // without brackets
  bool is_ip = false;
  std::string port = "443";
  std::string path;  // with the query, never empty
  std::string where;  // "https://host:port" for messages
  std::string where_path;  // where and the path without the query, for messages
};

// The URL for a message: without its query and fragment (which may carry
// an API key), and not at all when it has user information (a password).
std::string url_for_message(std::string_view url) {
  url = url.substr(0, url.find_first_of("?#"));
  if (url.find('@') != std::string_view::npos) return "(not shown: it has user information)";
  return for_message(url);
}

Result<Url> parse_url(std::string_view url) {
  auto bad = [&](std::string_view what) {
    return Result<Url>(Errc::kInvalidArgument,
                       "malformed https URL " + url_for_message(url) + ": " + std::string(what));
  };
  constexpr std::string_view kScheme = "https://";
  if (url.size() < kScheme.size() || !iequals(url.substr(0, kScheme.size()), kScheme)) {
    return Result<Url>(Errc::kInvalidArgument, "not an https:// URL: " + url_for_message(url));
  }
  for (char c : url) {
    if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f) return bad("a space or control character");
  }
  std::string_view rest = url.substr(kScheme.size());
  rest = rest.substr(0, rest.find('#'));
  const std::size_t authority_end = std::min(rest.find('/'), rest.find('?'));
  std::string_view authority = rest.substr(0, authority_end);
  Url out;
  out.path = authority_end == std::string_view::npos ? "/" : std::string(rest.substr(authority_end));
  if (out.path.front() == '?') out.path.insert(0, "/");
  // Credentials in a URL would end up in messages and logs.
  if (authority.find('@') != std::string_view::npos) return bad("user information is not supported");
  std::string_view port;
  if (!authority.empty() && authority.front() == '[') {
    const std::size_t close = authority.find(']');
    if (close == std::string_view::npos) return bad("no ']' after an IPv6 address");
    out.host = std::string(authority.substr(1, close - 1));
    in6_addr ignored;
    if (inet_pton(AF_INET6, out.host.c_str(), &ignored) != 1) return bad("not an IPv6 address in brackets");
    out.is_ip = true;
    std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') return bad("text after the IPv6 address");
      port = after.substr(1);
      if (port.empty()) return bad("empty port");
    }
  } else {
    const std::size_t colon = authority.find(':');
    out.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) {
      port = authority.substr(colon + 1);
      if (port.empty()) return bad("empty port");
    }
    if (out.host.empty()) return bad("no host");
    in_addr ignored;
    out.is_ip = inet_pton(AF_INET, out.host.c_str(), &ignored) == 1;
  }
  if (!port.empty()) {
    unsigned value = 0;
    auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
    if (ec != std::errc() || end != port.data() + port.size() || value == 0 || value > 65535 ||
        port.front() == '+') {
      return bad("not a port number");
    }
    out.port = std::to_string(value);
  }
  const std::string host_text = out.host.find(':') != std::string::npos ? "[" + out.host + "]" : out.host;
  out.where = "https://" + host_text + ":" + out.port;
  out.where_path = out.where + escaped(out.path.substr(0, out.path.find('?')));
  return out;
}

// Blocks SIGPIPE on this thread for the request and takes any SIGPIPE it
// raised: OpenSSL's socket BIO writes with write(), which raises SIGPIPE when
// the peer has gone, and a library must not change the process's signal
// handling (as rpc/socket_transport.cc's sendfile).
class SigpipeBlock {
 public:
  SigpipeBlock() {
    sigemptyset(&pipe_set_);
    sigaddset(&pipe_set_, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_set_, &old_set_);
    sigset_t pending;
    sigpending(&pending);
    was_pending_ = sigismember(&pending, SIGPIPE) == 1;
  }
  ~SigpipeBlock() {
    sigset_t pending;
    sigpending(&pending);
    if (!was_pending_ && sigismember(&pending, SIGPIPE) == 1) {
      const timespec zero{};
      sigtimedwait(&pipe_set_, nullptr, &zero);
    }
    pthread_sigmask(SIG_SETMASK, &old_set_, nullptr);
  }
  SigpipeBlock(const SigpipeBlock&) = delete;
  SigpipeBlock& operator=(const SigpipeBlock&) = delete;

 private:
  sigset_t pipe_set_, old_set_;
  bool was_pending_ = false;
};

// getaddrinfo() has no timeout; it runs on a thread of its own that the
// caller stops waiting for at the deadline (the thread then finishes alone,
// holding the shared state).
struct Resolution {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  int rc = 0;
  std::vector<sockaddr_storage> addresses;
  std::vector<socklen_t> lengths;
};

Status resolve(const Url& url, Clock::time_point deadline, std::chrono::milliseconds timeout,
               std::shared_ptr<Resolution>* out) {
  auto state = std::make_shared<Resolution>();
  *out = state;
  auto run = [state, host = url.host, port = url.port] {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    addrinfo* list = nullptr;
    const int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &list);
    std::lock_guard lock(state->mu);
    state->rc = rc;
    for (addrinfo* a = rc == 0 ? list : nullptr; a != nullptr; a = a->ai_next) {
      if (a->ai_addrlen > sizeof(sockaddr_storage)) continue;
      sockaddr_storage storage{};
      std::memcpy(&storage, a->ai_addr, a->ai_addrlen);
      state->addresses.push_back(storage);
      state->lengths.push_back(a->ai_addrlen);
    }
    if (list != nullptr) freeaddrinfo(list);
    state->done = true;
    state->cv.notify_all();
  };
  if (url.is_ip) {
    run();  // numeric: no lookup, no wait
  } else {
    try {
      std::thread(run).detach();
    } catch (const std::system_error& e) {
      return Status(Errc::kUnavailable, "cannot resolve " + for_message(url.host) + ": no thread: " + e.what());
    }
  }
  std::unique_lock lock(state->mu);
  if (!state->cv.wait_until(lock, deadline, [&] { return state->done; })) {
    return Status(Errc::kUnavailable, "timed out after " + std::to_string(timeout.count()) + " ms resolving " +
                                          for_message(url.host));
  }
  if (state->rc != 0) {
    return Status(Errc::kUnavailable, "cannot resolve " + for_message(url.host) + ": " + gai_strerror(state->rc));
  }
  if (state->addresses.empty()) return Status(Errc::kUnavailable, "cannot resolve " + for_message(url.host) + ": no address");
  return Status();
}

class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  void reset(int fd) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

struct SslCtxFree {
  void operator()(SSL_CTX* c) const noexcept { SSL_CTX_free(c); }
};

// One request: its socket, TLS state, deadline, and what it is doing (for
// the timeout's message).
class Request {
 public:
  Request(const Url& url, const HttpsGetOptions& options)
      : url_(url), options_(options), deadline_(Clock::now() + options.timeout) {}

  Result<std::string> run();

 private:
  Status connect();
  Status handshake();
  Status send_request();
  Result<std::string> read_response();
  Result<std::string> read_body(std::size_t header_end, const std::optional<std::uint64_t>& length,
                                bool chunked);

  // Waits until the socket is ready for `events`; UNAVAILABLE at the deadline.
  Status wait(short events);
  // Reads more bytes into buf_ (at most `max`). Sets eof_ (and clean_eof_
  // for a TLS close_notify) at the end of the stream.
  Status fill(std::size_t max = kReadSize);
  // The line starting at `*pos` (CRLF-terminated, at most `max` bytes),
  // without its CRLF; moves `*pos` past it.
  Result<std::string> line(std::size_t* pos, std::size_t max, std::string_view what);

  Status unavailable(const std::string& what) const { return Status(Errc::kUnavailable, what); }
  Status malformed(const std::string& what) const {
    return Status(Errc::kProtocolError, "malformed HTTP response from " + url_.where + ": " + what);
  }
  Status too_large() const {
    return Status(Errc::kResourceExhausted, "response body from " + url_.where_path +
                                                " is over the limit of " +
                                                std::to_string(options_.max_bytes) + " bytes");
  }
  Status io_error(const char* op) {
    const int error = errno;
    const std::string detail = security::drain_openssl_errors();
    return unavailable(std::string(op) + " " + url_.where + " failed: " +
                       (detail.empty() ? std::string(error != 0 ? std::strerror(error) : "connection reset")
                                       : detail));
  }

  const Url& url_;
  const HttpsGetOptions& options_;
  const Clock::time_point deadline_;
  const char* phase_ = "connecting to";
  Fd fd_;
  std::unique_ptr<SSL_CTX, SslCtxFree> ctx_;
  security::UniqueSsl ssl_;
  std::string buf_;
  bool eof_ = false;
  bool clean_eof_ = false;
  // OpenSSL reported SSL_ERROR_SYSCALL or SSL_ERROR_SSL: no close_notify may
  // be sent then (SSL_shutdown(3)).
  bool fatal_ = false;
};

Status Request::wait(short events) {
  for (;;) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline_ - Clock::now());
    if (left.count() <= 0) {
      return unavailable("timed out after " + std::to_string(options_.timeout.count()) + " ms " + phase_ +
                         " " + url_.where);
    }
    pollfd p{fd_.get(), events, 0};
    const int n = ::poll(&p, 1, static_cast<int>(std::min<std::int64_t>(left.count(), 1 << 30)));
    if (n > 0) return Status();
    if (n < 0 && errno != EINTR) return unavailable(std::string("poll: ") + std::strerror(errno));
  }
}

Status Request::connect() {
  std::shared_ptr<Resolution> resolution;
  phase_ = "resolving";
  if (Status s = resolve(url_, deadline_, options_.timeout, &resolution); !s.ok()) return s;
  phase_ = "connecting to";
  std::string last_error = "no address";
  for (std::size_t i = 0; i < resolution->addresses.size(); ++i) {
    const auto* address = reinterpret_cast<const sockaddr*>(&resolution->addresses[i]);
    fd_.reset(::socket(address->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (fd_.get() < 0) {
      last_error = std::strerror(errno);
      continue;
    }
    if (::connect(fd_.get(), address, resolution->lengths[i]) == 0) return Status();
    if (errno != EINPROGRESS && errno != EINTR) {
      last_error = std::strerror(errno);
      continue;
    }
    if (Status s = wait(POLLOUT); !s.ok()) return s;
    int error = 0;
    socklen_t size = sizeof error;
    if (::getsockopt(fd_.get(), SOL_SOCKET, SO_ERROR, &error, &size) != 0) error = errno;
    if (error == 0) return Status();
    last_error = std::strerror(error);
  }
  fd_.reset(-1);
  return unavailable("cannot connect to " + url_.where + ": " + last_error);
}

Status Request::handshake() {
  phase_ = "in the TLS handshake with";
  ctx_.reset(SSL_CTX_new(TLS_client_method()));
  if (!ctx_) return Status(Errc::kInternal, "cannot make a TLS context: " + security::drain_openssl_errors());
  SSL_CTX_set_min_proto_version(ctx_.get(), TLS1_2_VERSION);
  SSL_CTX_set_options(ctx_.get(), SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION);
  SSL_CTX_set_verify(ctx_.get(), SSL_VERIFY_PEER, nullptr);
  const int loaded = options_.ca_file.empty()
                         ? SSL_CTX_set_default_verify_paths(ctx_.get())
                         : SSL_CTX_load_verify_locations(ctx_.get(), options_.ca_file.c_str(), nullptr);
  if (loaded != 1) {
    return Status(Errc::kConfigError,
                  (options_.ca_file.empty() ? std::string("cannot load the default CA paths")
                                            : "cannot load CA file " + for_message(options_.ca_file)) +
                      ": " + security::drain_openssl_errors());
  }
  ssl_.reset(SSL_new(ctx_.get()));
  if (!ssl_ || SSL_set_fd(ssl_.get(), fd_.get()) != 1) {
    return Status(Errc::kInternal, "cannot make a TLS connection: " + security::drain_openssl_errors());
  }
  // The certificate must name what the URL names: a DNS name (also sent as
  // SNI) or an IP address (RFC 6066 forbids IP literals in SNI).
  X509_VERIFY_PARAM* param = SSL_get0_param(ssl_.get());
  X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
  const int named = url_.is_ip ? X509_VERIFY_PARAM_set1_ip_asc(param, url_.host.c_str())
                               : (SSL_set_tlsext_host_name(ssl_.get(), url_.host.c_str()) == 1 &&
                                  SSL_set1_host(ssl_.get(), url_.host.c_str()) == 1);
  if (named != 1) {
    return Status(Errc::kInvalidArgument, "malformed https URL: host " + for_message(url_.host) +
                                              " refused by OpenSSL: " + security::drain_openssl_errors());
  }
  for (;;) {
    ERR_clear_error();
    const int rc = SSL_connect(ssl_.get());
    if (rc == 1) return Status();
    const int error = SSL_get_error(ssl_.get(), rc);
    if (error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE) {
      if (Status s = wait(error == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT); !s.ok()) return s;
      continue;
    }
    const long verify = SSL_get_verify_result(ssl_.get());
    if (verify != X509_V_OK) {
      ERR_clear_error();
      return unavailable("certificate verification failed for " + url_.where + ": " +
                         X509_verify_cert_error_string(verify));
    }
    const std::string detail = security::drain_openssl_errors();
    return unavailable("TLS handshake with " + url_.where + " failed: " +
                       (detail.empty() ? "connection closed" : detail));
  }
}

Status Request::send_request() {
  phase_ = "sending the request to";
  const std::string host = url_.host.find(':') != std::string::npos ? "[" + url_.host + "]" : url_.host;
  const std::string request = "GET " + url_.path + " HTTP/1.1\r\nHost: " + host +
                              (url_.port == "443" ? "" : ":" + url_.port) +
                              "\r\nUser-Agent: authrpc\r\nAccept: application/json, application/jwk-set+json"
                              "\r\nConnection: close\r\n\r\n";
  std::size_t sent = 0;
  while (sent < request.size()) {
    ERR_clear_error();
    errno = 0;
    const int rc = SSL_write(ssl_.get(), request.data() + sent, static_cast<int>(request.size() - sent));
    if (rc > 0) {
      sent += static_cast<std::size_t>(rc);
      continue;
    }
    const int error = SSL_get_error(ssl_.get(), rc);
    if (error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE) {
      if (Status s = wait(error == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT); !s.ok()) return s;
      continue;
    }
    fatal_ = true;
    return io_error("sending to");
  }
  return Status();
}

Status Request::fill(std::size_t max) {
  if (eof_) return Status();
  char chunk[kReadSize];
  max = std::min(max, sizeof chunk);
  for (;;) {
    ERR_clear_error();
    errno = 0;
    const int rc = SSL_read(ssl_.get(), chunk, static_cast<int>(max));
    if (rc > 0) {
      buf_.append(chunk, static_cast<std::size_t>(rc));
      return Status();
    }
    const int error = SSL_get_error(ssl_.get(), rc);
    if (error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE) {
      if (Status s = wait(error == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT); !s.ok()) return s;
      continue;
    }
    if (error == SSL_ERROR_ZERO_RETURN) {
      eof_ = clean_eof_ = true;
      return Status();
    }
    // OpenSSL 3 reports a TCP close without close_notify as an SSL error
    // ("unexpected eof while reading"); OpenSSL 1.1 as SYSCALL with errno 0.
    if ((error == SSL_ERROR_SSL &&
         ERR_GET_REASON(ERR_peek_error()) == SSL_R_UNEXPECTED_EOF_WHILE_READING) ||
        (error == SSL_ERROR_SYSCALL && errno == 0)) {
      ERR_clear_error();
      eof_ = fatal_ = true;
      return Status();
    }
    fatal_ = true;
    return io_error("reading from");
  }
}

Result<std::string> Request::line(std::size_t* pos, std::size_t max, std::string_view what) {
  for (;;) {
    const std::size_t end = buf_.find("\r\n", *pos);
    if (end != std::string::npos && end - *pos <= max) {
      std::string out = buf_.substr(*pos, end - *pos);
      *pos = end + 2;
      return out;
    }
    if (buf_.size() - *pos > max + 1) return malformed(std::string(what) + " over " + std::to_string(max) + " bytes");
    if (eof_) return malformed("connection closed in the middle of " + std::string(what));
    if (Status s = fill(); !s.ok()) return s;
  }
}

Result<std::string> Request::read_response() {
  phase_ = "reading the response from";
  for (;;) {
    // The status line and headers, up to the empty line.
    std::size_t header_end;
    while ((header_end = buf_.find("\r\n\r\n")) == std::string::npos) {
      if (buf_.size() > kMaxHeaderBytes) {
        return malformed("status line and headers over " + std::to_string(kMaxHeaderBytes) + " bytes");
      }
      if (eof_) {
        if (buf_.empty()) return unavailable("connection closed by " + url_.where + " before a response");
        return malformed("connection closed in the middle of the headers");
      }
      if (Status s = fill(); !s.ok()) return s;
    }
    if (header_end > kMaxHeaderBytes) {
      return malformed("status line and headers over " + std::to_string(kMaxHeaderBytes) + " bytes");
    }
    std::string_view head(buf_.data(), header_end);
    const std::size_t status_end = head.find("\r\n");
    const std::string_view status_line = head.substr(0, status_end);
    // "HTTP/1.x NNN reason"
    if (status_line.size() < 12 || status_line.substr(0, 7) != "HTTP/1." || status_line[8] != ' ' ||
        !std::isdigit(static_cast<unsigned char>(status_line[7])) ||
        !std::all_of(status_line.begin() + 9, status_line.begin() + 12,
                     [](char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; }) ||
        (status_line.size() > 12 && status_line[12] != ' ')) {
      return malformed("status line " + for_message(status_line));
    }
    const int status = (status_line[9] - '0') * 100 + (status_line[10] - '0') * 10 + (status_line[11] - '0');
    if (status >= 100 && status < 200 && status != 101) {
      buf_.erase(0, header_end + 4);  // an interim response; the real one follows
      continue;
    }
    if (status != 200) {
      return unavailable(url_.where_path + " answered " + for_message(status_line));
    }
    std::optional<std::uint64_t> length;
    bool chunked = false;
    std::size_t pos = status_end == std::string_view::npos ? head.size() : status_end + 2;
    while (pos < head.size()) {
      std::size_t end = head.find("\r\n", pos);
      if (end == std::string_view::npos) end = head.size();
      const std::string_view field = head.substr(pos, end - pos);
      pos = end + 2;
      const std::size_t colon = field.find(':');
      if (field.empty() || field.front() == ' ' || field.front() == '\t' || colon == std::string_view::npos ||
          colon == 0 || field[colon - 1] == ' ' || field[colon - 1] == '\t') {
        return malformed("header line " + for_message(field, 100));
      }
      const std::string_view name = field.substr(0, colon);
      const std::string_view value = trim(field.substr(colon + 1));
      if (iequals(name, "Content-Length")) {
        std::uint64_t n = 0;
        auto [p, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
        if (value.empty() || ec != std::errc() || p != value.data() + value.size() || value.front() == '+' ||
            value.front() == '-' || (length && *length != n)) {
          return malformed("Content-Length " + for_message(value, 40));
        }
        length = n;
      } else if (iequals(name, "Transfer-Encoding")) {
        if (!iequals(value, "chunked") || chunked) return malformed("Transfer-Encoding " + for_message(value, 40));
        chunked = true;
      }
    }
    return read_body(header_end + 4, length, chunked);
  }
}

Result<std::string> Request::read_body(std::size_t start, const std::optional<std::uint64_t>& length,
                                       bool chunked) {
  const std::size_t max = options_.max_bytes;
  std::string body;
  if (chunked) {  // Transfer-Encoding overrides Content-Length (RFC 9112 §6.3)
    std::size_t pos = start;
    for (;;) {
      auto size_line = line(&pos, kMaxChunkLine, "a chunk-size line");
      if (!size_line.ok()) return size_line.status();
      const std::string_view hex = trim(std::string_view(*size_line).substr(0, size_line->find(';')));
      std::uint64_t size = 0;
      auto [p, ec] = std::from_chars(hex.data(), hex.data() + hex.size(), size, 16);
      if (hex.empty() || ec != std::errc() || p != hex.data() + hex.size()) {
        return malformed("chunk size " + for_message(*size_line, 40));
      }
      // The last chunk; trailers, if any, are not needed (Connection: close).
      if (size == 0) return body;
      if (size > max - body.size()) return too_large();
      // The chunk and its CRLF, read no further than that.
      while (buf_.size() - pos < size + 2) {
        if (eof_) return malformed("connection closed in the middle of a chunk");
        if (Status s = fill(static_cast<std::size_t>(size + 2 - (buf_.size() - pos))); !s.ok()) return s;
      }
      if (buf_.compare(pos + size, 2, "\r\n") != 0) return malformed("no CRLF after a chunk");
      body.append(buf_, pos, size);
      pos += size + 2;
      buf_.erase(0, pos);  // keep only what is not read yet
      pos = 0;
    }
  }
  buf_.erase(0, start);
  if (length) {
    if (*length > max) return too_large();
    while (buf_.size() < *length) {
      if (eof_) {
        return malformed("connection closed after " + std::to_string(buf_.size()) + " of " +
                         std::to_string(*length) + " body bytes");
      }
      if (Status s = fill(static_cast<std::size_t>(*length - buf_.size())); !s.ok()) return s;
    }
    buf_.resize(*length);  // anything after the body is not ours to read
    return std::move(buf_);
  }
  // Read to the end of the stream; at most one byte over the limit is read.
  while (!eof_) {
    if (buf_.size() > max) return too_large();
    if (Status s = fill(std::min(max - buf_.size(), kReadSize - 1) + 1); !s.ok()) return s;
  }
  if (buf_.size() > max) return too_large();
  // Without close_notify, an attacker on the path could have cut the body.
  if (!clean_eof_) return malformed("connection closed without TLS close_notify: the body may be truncated");
  return std::move(buf_);
}

Result<std::string> Request::run() {
  if (Status s = connect(); !s.ok()) return s;
  if (Status s = handshake(); !s.ok()) return s;
  if (Status s = send_request(); !s.ok()) return s;
  auto body = read_response();
  if (ssl_ && SSL_is_init_finished(ssl_.get()) && !fatal_) {
    ERR_clear_error();
    SSL_shutdown(ssl_.get());  // best effort: the socket is non-blocking
  }
  ERR_clear_error();
  return body;
}

}  // namespace

Result<std::string> https_get(std::string_view url, const HttpsGetOptions& options) {
  auto parsed = parse_url(url);
  if (!parsed.ok()) return parsed.status();
  SigpipeBlock sigpipe;
  Request request(*parsed, options);
  return request.run();
}

}  // namespace authrpc
