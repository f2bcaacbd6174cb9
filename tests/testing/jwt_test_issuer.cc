#include "tests/testing/jwt_test_issuer.h"

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/executor_work_guard.hpp>
#include <asio/io_context.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/read_until.hpp>
#include <asio/redirect_error.hpp>
#include <asio/ssl.hpp>
#include <asio/streambuf.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/write.hpp>
#include <future>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "authrpc/security/base64url.h"
#include "tests/testing/test_tls.h"

namespace authrpc::testing {

// The server's state. The acceptor and connections live on the IO thread;
// the document, status and count are read there and set by the test.
struct JwksHttpsServer::Impl {
  using Tcp = asio::ip::tcp;

  // Declared before io: the connections io destroys with it use it.
  asio::ssl::context ssl{asio::ssl::context::tls_server};
  std::string path;
  unsigned short port = 0;

  std::mutex mu;
  std::string document;
  int status = 0;
  std::atomic<int> requests{0};

  asio::io_context io;
  asio::executor_work_guard<asio::io_context::executor_type> work{io.get_executor()};
  std::shared_ptr<Tcp::acceptor> acceptor;  // IO thread only
  std::thread thread;

  // Runs `f` on the IO thread and waits for it.
  template <typename F>
  void on_io(F f) {
    std::promise<void> done;
    asio::post(io, [&] {
      try {
        f();
        done.set_value();
      } catch (...) {
        done.set_exception(std::current_exception());
      }
    });
    done.get_future().get();
  }

  void listen() {
    auto a = std::make_shared<Tcp::acceptor>(io);
    const Tcp::endpoint endpoint(asio::ip::make_address("127.0.0.1"), port);
    a->open(endpoint.protocol());
    a->set_option(Tcp::acceptor::reuse_address(true));
    a->bind(endpoint);
    a->listen();
    port = a->local_endpoint().port();
    acceptor = a;
    asio::co_spawn(io, accept_loop(a), asio::detached);
  }

  asio::awaitable<void> accept_loop(std::shared_ptr<Tcp::acceptor> a) {
    for (;;) {
      std::error_code ec;
      Tcp::socket socket = co_await a->async_accept(asio::redirect_error(asio::use_awaitable, ec));
      if (ec) co_return;  // closed by stop()
      asio::co_spawn(io, serve(std::move(socket)), asio::detached);
    }
  }

  std::string response(std::string_view request_head) {
    // "GET /jwks HTTP/1.1"
    const std::string_view line = request_head.substr(0, request_head.find("\r\n"));
    const std::size_t space = line.find(' ');
    const std::string_view method = line.substr(0, space);
    const std::string_view rest = space == std::string_view::npos ? "" : line.substr(space + 1);
    const std::string_view target = rest.substr(0, rest.find(' '));
    int code = 404;
    std::string body = "not found\n";
    std::string type = "text/plain";
    if (method == "GET" && target == path) {
      std::lock_guard lock(mu);
      code = status == 0 ? 200 : status;
      body = code == 200 ? document : "status " + std::to_string(code) + "\n";
      type = code == 200 ? "application/json" : "text/plain";
      ++requests;
    }
    const char* reason = code == 200 ? "OK" : code == 404 ? "Not Found" : code == 500 ? "Internal Server Error"
                                            : code == 503 ? "Service Unavailable" : "Status";
    return "HTTP/1.1 " + std::to_string(code) + " " + reason + "\r\nContent-Type: " + type +
           "\r\nContent-Length: " + std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
  }

  asio::awaitable<void> serve(Tcp::socket socket) {
    asio::ssl::stream<Tcp::socket> stream(std::move(socket), ssl);
    std::error_code ec;
    co_await stream.async_handshake(asio::ssl::stream_base::server, asio::redirect_error(asio::use_awaitable, ec));
    if (ec) co_return;
    std::string request;
    co_await asio::async_read_until(stream, asio::dynamic_buffer(request, 16 * 1024), "\r\n\r\n",
                                    asio::redirect_error(asio::use_awaitable, ec));
    if (ec) co_return;
    const std::string reply = response(request);
    co_await asio::async_write(stream, asio::buffer(reply), asio::redirect_error(asio::use_awaitable, ec));
    if (ec) co_return;
    co_await stream.async_shutdown(asio::redirect_error(asio::use_awaitable, ec));
  }
};

JwksHttpsServer::JwksHttpsServer(const TestTls& tls, std::string document, std::string path)
    : impl_(std::make_unique<Impl>()) {
  impl_->ssl.set_options(asio::ssl::context::no_sslv2 | asio::ssl::context::no_sslv3 |
                         asio::ssl::context::no_tlsv1 | asio::ssl::context::no_tlsv1_1);
  impl_->ssl.use_certificate_chain_file(tls.cert_file("server"));
  impl_->ssl.use_private_key_file(tls.key_file("server"), asio::ssl::context::pem);
  impl_->document = std::move(document);
  impl_->path = std::move(path);
  impl_->thread = std::thread([impl = impl_.get()] { impl->io.run(); });
  try {
    impl_->on_io([impl = impl_.get()] { impl->listen(); });
  } catch (...) {
    impl_->io.stop();
    impl_->thread.join();
    throw;
  }
}

JwksHttpsServer::~JwksHttpsServer() {
  impl_->io.stop();
  impl_->thread.join();
}

std::string JwksHttpsServer::url() const {
  return "https://localhost:" + std::to_string(impl_->port) + impl_->path;
}

void JwksHttpsServer::set_document(std::string document) {
  std::lock_guard lock(impl_->mu);
  impl_->document = std::move(document);
}

void JwksHttpsServer::set_status(int status) {
  std::lock_guard lock(impl_->mu);
  impl_->status = status;
}

void JwksHttpsServer::stop() {
  impl_->on_io([impl = impl_.get()] {
    if (impl->acceptor) impl->acceptor->close();
    impl->acceptor.reset();
  });
}

void JwksHttpsServer::start() {
  impl_->on_io([impl = impl_.get()] {
    if (!impl->acceptor) impl->listen();
  });
}

int JwksHttpsServer::requests() const { return impl_->requests.load(); }

}  // namespace authrpc::testing
