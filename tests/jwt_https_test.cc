// https_get (components/jwt/jwt_https.h) against real TLS servers on loopback:
// the JWKS test server, and small raw servers that answer with exactly the
// bytes a case needs (chunked, oversized, truncated, malformed, silent), or
// present a certificate for another name or from another CA.
#include "authrpc/components/jwt/jwt_https.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <openssl/ssl.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <thread>

#include "tests/testing/jwt_test_issuer.h"
#include "tests/testing/test_support.h"
#include "tests/testing/test_tls.h"

namespace authrpc {
namespace {

using namespace std::chrono_literals;
using testing::TestTls;

// A listening socket on a loopback address and a free port; -1 if the
// address cannot be bound (no IPv6).
int listen_on(const char* address, int* port) {
  sockaddr_storage storage{};
  socklen_t size;
  const bool v6 = std::string_view(address).find(':') != std::string_view::npos;
  if (v6) {
    auto* a = reinterpret_cast<sockaddr_in6*>(&storage);
    a->sin6_family = AF_INET6;
    inet_pton(AF_INET6, address, &a->sin6_addr);
    size = sizeof *a;
  } else {
    auto* a = reinterpret_cast<sockaddr_in*>(&storage);
    a->sin_family = AF_INET;
    inet_pton(AF_INET, address, &a->sin_addr);
    size = sizeof *a;
  }
  const int fd = ::socket(storage.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&storage), size) != 0 || ::listen(fd, 8) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&storage), &size) != 0) {
    ::close(fd);
    return -1;
  }
  *port = ntohs(v6 ? reinterpret_cast<sockaddr_in6*>(&storage)->sin6_port
                   : reinterpret_cast<sockaddr_in*>(&storage)->sin_port);
  return fd;
}

// One TLS connection served with blocking OpenSSL on a thread: the
// handshake, the request read up to its empty line, then `response` (or
// nothing, waiting for the client to go, when `silent`), then close_notify
// if `close_notify`, then close.
class RawTlsServer {
 public:
  struct Behaviour {
    std::string response;
    bool close_notify = true;
    bool silent = false;
    int max_version = 0;  // e.g. TLS1_1_VERSION: an old server
    bool close_after_handshake = false;  // read nothing, answer nothing
  };

  explicit RawTlsServer(Behaviour behaviour, const std::string& leaf = "server", const char* address = "127.0.0.1")
      : behaviour_(std::move(behaviour)),
        context_(TestTls::shared().server(security::ClientCertificates::kNone, security::TlsVersion::kTls12, leaf)) {
    if (behaviour_.max_version != 0) {
      SSL_CTX_set_security_level(context_->native(), 0);  // TLS 1.1 needs SHA-1
      SSL_CTX_set_min_proto_version(context_->native(), TLS1_VERSION);
      SSL_CTX_set_max_proto_version(context_->native(), behaviour_.max_version);
    }
    fd_ = listen_on(address, &port_);
    if (fd_ >= 0) thread_ = std::thread([this] { serve(); });
  }
  ~RawTlsServer() {
    ::shutdown(fd_, SHUT_RDWR);  // wakes accept() if no client came
    if (thread_.joinable()) thread_.join();
    if (fd_ >= 0) ::close(fd_);
  }
  bool listening() const { return fd_ >= 0; }
  std::string url(const std::string& host = "localhost") const {
    return "https://" + host + ":" + std::to_string(port_) + "/jwks";
  }
  // The request the client sent (after the connection is done).
  std::string request() {
    if (thread_.joinable()) thread_.join();
    return request_;
  }

 private:
  void serve() {
    // The client may go while we write (an oversized body): EPIPE, not a
    // SIGPIPE that kills the test.
    sigset_t pipe;
    sigemptyset(&pipe);
    sigaddset(&pipe, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe, nullptr);
    const int client = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (client < 0) return;
    SSL* ssl = SSL_new(context_->native());
    SSL_set_fd(ssl, client);
    if (SSL_accept(ssl) == 1 && !behaviour_.close_after_handshake) {
      char buf[4096];
      while (request_.find("\r\n\r\n") == std::string::npos) {
        const int n = SSL_read(ssl, buf, sizeof buf);
        if (n <= 0) break;
        request_.append(buf, static_cast<std::size_t>(n));
      }
      if (behaviour_.silent) {
        while (SSL_read(ssl, buf, sizeof buf) > 0) {
        }
      } else {
        std::size_t sent = 0;
        while (sent < behaviour_.response.size()) {
          const int n = SSL_write(ssl, behaviour_.response.data() + sent,
                                  static_cast<int>(std::min<std::size_t>(behaviour_.response.size() - sent, 4096)));
          if (n <= 0) break;
          sent += static_cast<std::size_t>(n);
        }
        if (behaviour_.close_notify) SSL_shutdown(ssl);
      }
    }
    SSL_free(ssl);
    ::close(client);
  }

  Behaviour behaviour_;
  std::shared_ptr<security::TlsServerContext> context_;
  int fd_ = -1;
  int port_ = 0;
  std::thread thread_;
  std::string request_;
};

HttpsGetOptions Options(std::size_t max_bytes = 1 << 20, std::chrono::milliseconds timeout = 5s) {
  HttpsGetOptions o;
  o.ca_file = TestTls::shared().ca_file();
  o.max_bytes = max_bytes;
  o.timeout = timeout;
  return o;
}

void ExpectError(const Result<std::string>& r, Errc code, std::string_view text) {
  ASSERT_FALSE(r.ok()) << "body: " << (r.ok() ? *r : "");
  EXPECT_EQ(r.code(), code) << r.status().to_string();
  EXPECT_NE(r.status().message.find(text), std::string::npos) << r.status().to_string();
}

TEST(HttpsGet, ReadsTheBodyOfEachFramingAndRefusesBadResponses) {
  const std::string ok = "HTTP/1.1 200 OK\r\n";
  struct Case {
    const char* name;
    std::string response;
    bool close_notify;
    std::size_t max_bytes;
    Errc code;        // kOk: the body must be `text`
    std::string text;
  };
  const Case cases[] = {
      {"Content-Length", ok + "Content-Length: 5\r\n\r\nhello", true, 100, Errc::kOk, "hello"},
      {"Content-Length, bytes after the body", ok + "content-length: 2\r\n\r\nhello", false, 100, Errc::kOk, "he"},
      {"Content-Length exactly max_bytes", ok + "Content-Length: 5\r\n\r\nhello", true, 5, Errc::kOk, "hello"},
      {"empty body", ok + "Content-Length: 0\r\n\r\n", false, 100, Errc::kOk, ""},
      {"chunked", ok + "Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n", true, 100,
       Errc::kOk, "hello world"},
      {"chunked, extension, upper-case hex, trailer",
       ok + "Transfer-Encoding: Chunked\r\n\r\nA;name=value\r\n0123456789\r\n0\r\nX-Trailer: 1\r\n\r\n", true, 100,
       Errc::kOk, "0123456789"},
      {"chunked overrides Content-Length",
       ok + "Content-Length: 100\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\n\r\n", true, 100, Errc::kOk,
       "hi"},
      {"read to close", ok + "Content-Type: application/json\r\n\r\n{\"keys\":[]}", true, 100, Errc::kOk,
       "{\"keys\":[]}"},
      // libcurl takes a TCP close without TLS close_notify as the end; a JWKS
      // document cut short by an attacker on the path would not parse.
      {"read to close, no close_notify", ok + "\r\n{\"keys\":[]}", false, 100, Errc::kOk, "{\"keys\":[]}"},
      {"interim 100 Continue first", "HTTP/1.1 100 Continue\r\n\r\n" + ok + "Content-Length: 2\r\n\r\nok", true, 100,
       Errc::kOk, "ok"},
      {"HTTP/1.0", "HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok", true, 100, Errc::kOk, "ok"},

      {"Content-Length over max_bytes", ok + "Content-Length: 101\r\n\r\n" + std::string(101, 'x'), true, 100,
       Errc::kResourceExhausted, "is over the limit of 100 bytes"},
      {"chunked over max_bytes", ok + "Transfer-Encoding: chunked\r\n\r\n40\r\n" + std::string(64, 'x') +
       "\r\n40\r\n" + std::string(64, 'x') + "\r\n0\r\n\r\n", true, 100, Errc::kResourceExhausted,
       "is over the limit of 100 bytes"},
      {"one chunk over max_bytes", ok + "Transfer-Encoding: chunked\r\n\r\n65\r\n" + std::string(101, 'x') +
       "\r\n0\r\n\r\n", true, 100, Errc::kResourceExhausted, "is over the limit of 100 bytes"},
      {"read to close over max_bytes", ok + "\r\n" + std::string(200000, 'x'), true, 1000, Errc::kResourceExhausted,
       "is over the limit of 1000 bytes"},

      {"404", "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n", true, 100, Errc::kUnavailable,
       "/jwks answered \"HTTP/1.1 404 Not Found\""},
      {"500", "HTTP/1.1 500 Internal Server Error\r\n\r\n", true, 100, Errc::kUnavailable,
       "answered \"HTTP/1.1 500 Internal Server Error\""},
      {"redirect not followed", "HTTP/1.1 302 Found\r\nLocation: https://elsewhere/\r\n\r\n", true, 100,
       Errc::kUnavailable, "answered \"HTTP/1.1 302 Found\""},
      {"redirect to http:// not followed",
       "HTTP/1.1 301 Moved Permanently\r\nLocation: http://localhost/jwks\r\nContent-Length: 0\r\n\r\n", true, 100,
       Errc::kUnavailable, "/jwks answered \"HTTP/1.1 301 Moved Permanently\""},
      {"status line escaped", "HTTP/1.1 500 \x1b[2J\r\n\r\n", true, 100, Errc::kUnavailable,
       "answered \"HTTP/1.1 500 \\x1b[2J\""},
      {"closed before a response", "", true, 100, Errc::kUnavailable, "before a response"},

      // What libcurl refuses, its reason after the URL's origin.
      {"no status code", "HTTP/1.1 OK\r\n\r\n", true, 100, Errc::kProtocolError,
       "malformed HTTP response from https://localhost:"},
      {"truncated Content-Length body", ok + "Content-Length: 10\r\n\r\nhello", true, 100, Errc::kProtocolError,
       "malformed HTTP response from https://localhost:"},
      {"negative Content-Length", ok + "Content-Length: -1\r\n\r\n", true, 100, Errc::kProtocolError,
       "malformed HTTP response from https://localhost:"},
      {"gzip", ok + "Transfer-Encoding: gzip, chunked\r\n\r\n", true, 100, Errc::kProtocolError,
       "malformed HTTP response from https://localhost:"},
      {"chunked, closed mid-chunk", ok + "Transfer-Encoding: chunked\r\n\r\n9\r\nhi", true, 100,
       Errc::kProtocolError, "malformed HTTP response from https://localhost:"},
      {"closed in the headers", ok + "Content-Len", true, 100, Errc::kProtocolError,
       "connection closed in the middle of the headers"},
      {"headers too long", ok + "X-Big: " + std::string(70000, 'x') + "\r\n\r\n", true, 100, Errc::kProtocolError,
       "status line and headers over 65536 bytes"},
      // libcurl reports a bad chunk as a failed read.
      {"bad chunk size", ok + "Transfer-Encoding: chunked\r\n\r\nzz\r\n", true, 100, Errc::kUnavailable,
       "connection to https://localhost:"},
      {"huge chunk size", ok + "Transfer-Encoding: chunked\r\n\r\nffffffffffffffff\r\n", true, 100,
       Errc::kUnavailable, "connection to https://localhost:"},
      {"no CRLF after a chunk", ok + "Transfer-Encoding: chunked\r\n\r\n2\r\nhiXX0\r\n\r\n", true, 100,
       Errc::kUnavailable, "connection to https://localhost:"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    RawTlsServer server({c.response, c.close_notify});
    auto body = https_get(server.url(), Options(c.max_bytes));
    if (c.code == Errc::kOk) {
      ASSERT_TRUE(body.ok()) << testing::Describe(body);
      EXPECT_EQ(*body, c.text);
    } else {
      ExpectError(body, c.code, c.text);
    }
  }
}

TEST(HttpsGet, SendsOneGetWithHostAndConnectionClose) {
  RawTlsServer server({"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"});
  ASSERT_TRUE(https_get(server.url() + "?a=b#frag", Options()).ok());
  const std::string request = server.request();
  EXPECT_EQ(request.rfind("GET /jwks?a=b HTTP/1.1\r\n", 0), 0u) << request;
  EXPECT_NE(request.find("\r\nHost: localhost:"), std::string::npos) << request;
  EXPECT_NE(request.find("\r\nConnection: close\r\n"), std::string::npos) << request;
}

// A query may carry an API key: messages name the URL without it.
TEST(HttpsGet, MessagesLeaveOutTheQuery) {
  RawTlsServer server({"HTTP/1.1 401 Unauthorized\r\n\r\n"});
  auto r = https_get(server.url() + "?api_key=s3cret", Options());
  ExpectError(r, Errc::kUnavailable, "/jwks answered \"HTTP/1.1 401 Unauthorized\"");
  EXPECT_EQ(r.status().message.find("s3cret"), std::string::npos) << r.status().message;
  r = https_get("https://[::1/?api_key=s3cret", Options());
  ExpectError(r, Errc::kInvalidArgument, "malformed https URL \"https://[::1/\"");
  EXPECT_EQ(r.status().message.find("s3cret"), std::string::npos) << r.status().message;
}

TEST(HttpsGet, ServesFromTheJwksServerByNameAndByAddress) {
  testing::JwtTestKey key = testing::JwtTestKey::ec_p256("k");
  testing::JwksHttpsServer server(TestTls::shared(), testing::jwks_document({&key}));
  auto body = https_get(server.url(), Options());
  ASSERT_TRUE(body.ok()) << testing::Describe(body);
  EXPECT_EQ(*body, testing::jwks_document({&key}));

  RawTlsServer by_ip({"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nv4"});
  body = https_get(by_ip.url("127.0.0.1"), Options());
  ASSERT_TRUE(body.ok()) << testing::Describe(body);
  EXPECT_EQ(*body, "v4");

  RawTlsServer v6({"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nv6"}, "server", "::1");
  if (!v6.listening()) GTEST_SKIP() << "no IPv6 loopback here";
  body = https_get(v6.url("[::1]"), Options());
  ASSERT_TRUE(body.ok()) << testing::Describe(body);
  EXPECT_EQ(*body, "v6");
}

// The IdP is reached as the URL names it: a proxy the environment names
// (here one where nothing listens) is not used.
TEST(HttpsGet, IgnoresProxiesNamedByTheEnvironment) {
  int port = 0;
  const int fd = listen_on("127.0.0.1", &port);
  ASSERT_GE(fd, 0);
  ::close(fd);
  const std::string proxy = "http://127.0.0.1:" + std::to_string(port);
  testing::ScopedEnv https_proxy("https_proxy", proxy), upper("HTTPS_PROXY", proxy), all("ALL_PROXY", proxy),
      no_proxy("NO_PROXY", ""), lower_no_proxy("no_proxy", "");
  RawTlsServer server({"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"});
  auto body = https_get(server.url(), Options());
  ASSERT_TRUE(body.ok()) << testing::Describe(body);
  EXPECT_EQ(*body, "ok");
}

TEST(HttpsGet, TimesOutAtTheDeadline) {
  // A server that completes the handshake and never answers.
  RawTlsServer silent({.response = "", .silent = true});
  auto start = std::chrono::steady_clock::now();
  ExpectError(https_get(silent.url(), Options(1 << 20, 300ms)), Errc::kUnavailable,
              "timed out after 300 ms reading the response from https://localhost:");
  EXPECT_LT(std::chrono::steady_clock::now() - start, 3s);

  // A listener that never accepts: TCP connects (the backlog), TLS never starts.
  int port = 0;
  const int fd = listen_on("127.0.0.1", &port);
  ASSERT_GE(fd, 0);
  start = std::chrono::steady_clock::now();
  ExpectError(https_get("https://127.0.0.1:" + std::to_string(port) + "/", Options(1 << 20, 300ms)),
              Errc::kUnavailable, "timed out after 300 ms connecting to https://127.0.0.1:");
  EXPECT_LT(std::chrono::steady_clock::now() - start, 3s);
  ::close(fd);
}

TEST(HttpsGet, RefusesCertificatesThatDoNotVerify) {
  TestTls::shared().issue({"jwt-other-name", "other.example", {"DNS:other.example"}});
  struct Case {
    const char* name;
    std::string leaf;
    std::string host;
    std::string ca_file;
    std::string text;
  };
  const std::string other_ca_dir = testing::TempDir("jwt-https-ca");
  testing::TestCa other_ca(other_ca_dir, "other-ca");
  // The name of the CA that issued the server's certificate, another key.
  testing::TestCa same_name_ca(other_ca_dir + "/same-name", "ca");
  const Case cases[] = {
      {"CA nobody trusts", "server", "localhost", other_ca.ca_file(),
       "certificate verification failed for https://localhost:"},
      {"CA of the same name, another key", "server", "localhost", same_name_ca.ca_file(),
       "certificate verification failed for https://localhost:"},
      {"another DNS name", "jwt-other-name", "localhost", TestTls::shared().ca_file(),
       "certificate verification failed for https://localhost:"},
      {"another IP address", "jwt-other-name", "127.0.0.1", TestTls::shared().ca_file(),
       "certificate verification failed for https://127.0.0.1:"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    RawTlsServer server({"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nno"}, c.leaf);
    HttpsGetOptions options = Options();
    options.ca_file = c.ca_file;
    ExpectError(https_get(server.url(c.host), options), Errc::kUnavailable, c.text);
  }
  std::filesystem::remove_all(other_ca_dir);
}

// The server goes as the request arrives: whatever the client writes next
// (the request, a close_notify) meets a reset socket, and must be an error,
// not a SIGPIPE that ends the process.
TEST(HttpsGet, APeerThatGoesIsAnErrorNotASignal) {
  for (int i = 0; i < 20; ++i) {
    RawTlsServer gone({.response = "", .close_after_handshake = true});
    auto r = https_get(gone.url(), Options());
    EXPECT_EQ(r.code(), Errc::kUnavailable) << r.status().to_string();
  }
}

TEST(HttpsGet, RefusesTlsBelow12) {
  RawTlsServer old({.response = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", .max_version = TLS1_1_VERSION});
  ExpectError(https_get(old.url(), Options()), Errc::kUnavailable, "TLS handshake with https://localhost:");
}

TEST(HttpsGet, RefusesUrlsItDoesNotFetch) {
  struct Case {
    const char* url;
    const char* text;
  };
  const Case cases[] = {
      {"http://localhost/jwks", "not an https:// URL: \"http://localhost/jwks\""},
      {"localhost/jwks", "not an https:// URL"},
      {"", "not an https:// URL"},
      {"https://", "malformed https URL \"https://\": "},
      {"https://:443/", "malformed https URL"},
      {"https://localhost:0/", "port 0"},
      {"https://localhost:65536/", "malformed https URL"},
      {"https://localhost:+1/", "malformed https URL"},
      {"https://localhost:44x/", "malformed https URL"},
      {"https://user:hunter2@localhost/", "user information is not supported"},
      {"https://:hunter2@localhost/", "user information is not supported"},
      {"https://[::1/", "malformed https URL"},
      {"https://[localhost]/", "malformed https URL"},
      {"https://[::1]x/", "malformed https URL"},
      {"https://local host/", "a space or control character"},
      {"https://localhost/\r\nX-Injected: 1", "a space or control character"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.url);
    auto r = https_get(c.url, Options());
    ExpectError(r, Errc::kInvalidArgument, c.text);
  }
  // The password is not echoed.
  auto r = https_get("https://user:hunter2@localhost/", Options());
  EXPECT_EQ(r.status().message.find("hunter2"), std::string::npos);
}

TEST(HttpsGet, ConnectionRefusedAndOtherLocalFailures) {
  int port = 0;
  const int fd = listen_on("127.0.0.1", &port);
  ASSERT_GE(fd, 0);
  ::close(fd);  // nothing listens there now
  ExpectError(https_get("https://127.0.0.1:" + std::to_string(port) + "/jwks", Options()), Errc::kUnavailable,
              "cannot connect to https://127.0.0.1:" + std::to_string(port) + ": Connection refused");

  // ".invalid" never resolves (RFC 6761); without DNS here the lookup may
  // fail at once or hang until the deadline: UNAVAILABLE either way.
  auto unresolved = https_get("https://name.invalid/jwks", Options(1 << 20, 1s));
  EXPECT_EQ(unresolved.code(), Errc::kUnavailable) << unresolved.status().to_string();
  EXPECT_TRUE(unresolved.status().message.find("cannot resolve \"name.invalid\": ") == 0 ||
              unresolved.status().message == "timed out after 1000 ms resolving \"name.invalid\"")
      << unresolved.status().message;

  HttpsGetOptions missing_ca = Options();
  missing_ca.ca_file = "/nonexistent/ca.pem";
  RawTlsServer server({"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"});
  ExpectError(https_get(server.url(), missing_ca), Errc::kConfigError,
              "cannot load CA file \"/nonexistent/ca.pem\"");
}

}  // namespace
}  // namespace authrpc
