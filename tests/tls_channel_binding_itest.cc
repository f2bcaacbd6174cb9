// Channel binding: `kerberos` over TLS binds its AP-REQ to the TLS channel
// (RFC 9266 tls-exporter as GSS channel bindings), so that authentication
// relayed through a different TLS connection fails. A real MIT KDC
// (tests/testing/mini_kdc.h) and a test-only relaying proxy: a man in the middle that
// terminates the client's TLS with its own certificate — one the client
// trusts, the worst case — and re-originates TLS to the real server.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/io_context.hpp>
#include <asio/redirect_error.hpp>
#include <asio/steady_timer.hpp>
#include <asio/use_awaitable.hpp>
#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <thread>

#include "authrpc/auth/mechanisms/simple/simple.h"
#include "authrpc/client/client.h"
#include "authrpc/components/kerberos/kerberos.h"
#include "authrpc/rpc/tls_stream.h"
#include "authrpc/rpc/transport.h"
#include "authrpc/security/tls_context.h"
#include "authrpc/server/server.h"
#include "tests/testing/kerberos_realm.h"
#include "tests/testing/test_server.h"
#include "tests/testing/mini_kdc.h"
#include "tests/testing/test_support.h"
#include "tests/testing/tls_test_certs.h"
#include "tests/testing/scoped_temp_dir.h"

namespace authrpc {
namespace {

using namespace std::chrono_literals;
using authrpc::testing::MiniKdc;
using authrpc::testing::TestCa;
using testing::Describe;

// Waits for one ByteStream::write_all() inside a coroutine.
class AwaitWrite final : public WriteCompletion {
 public:
  explicit AwaitWrite(const asio::any_io_executor& ex) : timer_(ex) {}
  asio::awaitable<std::error_code> write(ByteStream& stream, const char* data, std::size_t size) {
    const asio::const_buffer buffer(data, size);
    done_ = false;
    stream.write_all(std::span<const asio::const_buffer>(&buffer, 1), *this);
    while (!done_) {
      timer_.expires_at(std::chrono::steady_clock::time_point::max());
      std::error_code ignored;
      co_await timer_.async_wait(asio::redirect_error(asio::use_awaitable, ignored));
    }
    co_return ec_;
  }
  void write_done(std::error_code ec) override {
    ec_ = ec;
    done_ = true;
    timer_.cancel();
  }

 private:
  asio::steady_timer timer_;
  bool done_ = false;
  std::error_code ec_;
};

// The relaying proxy: TLS in (its own certificate), TLS out (to `target`),
// bytes copied both ways unchanged.
class RelayingProxy {
 public:
  RelayingProxy(std::shared_ptr<security::TlsServerContext> own,
                std::shared_ptr<security::TlsClientContext> upstream, Endpoint target)
      : upstream_(std::move(upstream)), target_(std::move(target)) {
    auto ep = Endpoint::parse("tls://127.0.0.1:0");
    own_ = std::move(own);
    auto listener = transport_for(Endpoint::Scheme::kTls).listen(io_, *ep, {});
    EXPECT_TRUE(listener.ok()) << Describe(listener);
    listener_ = std::move(*listener);
    endpoint_ = listener_->local_endpoint();
    asio::co_spawn(io_, accept_loop(), asio::detached);
    thread_ = std::thread([this] { io_.run(); });
  }
  ~RelayingProxy() {
    io_.stop();
    thread_.join();
  }
  const Endpoint& endpoint() const { return endpoint_; }

 private:
  asio::awaitable<void> accept_loop() {
    for (;;) {
      auto tcp = co_await listener_->accept();
      if (!tcp.ok()) co_return;
      // TLS-only: the wrapper over the accepted TCP stream, no first-byte check.
      auto in = wrap_tls_server(std::move(*tcp), own_);
      if (!in.ok()) continue;
      asio::co_spawn(io_, relay(std::shared_ptr<ByteStream>(std::move(*in))), asio::detached);
    }
  }

  asio::awaitable<void> relay(std::shared_ptr<ByteStream> in) {
    const auto deadline = std::chrono::steady_clock::now() + 5s;
    auto tcp = co_await transport_for(Endpoint::Scheme::kTcp).connect(io_.get_executor(), target_,
                                                                     deadline);
    if (!tcp.ok()) {
      in->close();
      co_return;
    }
    auto out = co_await wrap_tls_client(std::move(*tcp), target_, deadline, upstream_);
    if (!out.ok()) {
      in->close();
      co_return;
    }
    std::shared_ptr<ByteStream> upstream(std::move(*out));
    asio::co_spawn(io_, copy(in, upstream), asio::detached);
    co_await copy(upstream, in);
  }

  asio::awaitable<void> copy(std::shared_ptr<ByteStream> from, std::shared_ptr<ByteStream> to) {
    AwaitWrite writer(io_.get_executor());
    char buffer[16384];
    for (;;) {
      std::error_code ec;
      const std::size_t n = co_await from->read_some(asio::buffer(buffer), ec);
      if (ec || n == 0) break;
      if (co_await writer.write(*to, buffer, n)) break;
    }
    from->close();
    to->close();
  }

  asio::io_context io_;
  std::unique_ptr<Listener> listener_;
  std::shared_ptr<security::TlsServerContext> own_;
  std::shared_ptr<security::TlsClientContext> upstream_;
  Endpoint target_;
  Endpoint endpoint_;
  std::thread thread_;
};

class KerberosTlsTest : public testing::KerberosSuite {
 protected:
  static void SetUpTestSuite() {
    StartRealm();
    dir_ = std::make_unique<testing::ScopedTempDir>("tls-cb");
    ca_ = std::make_unique<TestCa>(dir_->path(), "ca");
    ca_->issue({"server", "localhost", {"DNS:localhost", "IP:127.0.0.1"}});
    ca_->issue({"mitm", "mitm", {"IP:127.0.0.1"}});
  }
  static void TearDownTestSuite() {
    ca_.reset();
    dir_.reset();
    KerberosSuite::TearDownTestSuite();
  }

  static std::shared_ptr<security::TlsServerContext> ServerContext(const std::string& leaf) {
    security::TlsServerOptions o;
    o.certificate_file = ca_->cert_file(leaf);
    o.private_key_file = ca_->key_file(leaf);
    auto ctx = security::TlsServerContext::create(o);
    EXPECT_TRUE(ctx.ok()) << ctx.status().to_string();
    return ctx.ok() ? std::move(*ctx) : nullptr;
  }
  static std::shared_ptr<security::TlsClientContext> ClientContext() {
    security::TlsClientOptions o;
    o.ca_file = ca_->ca_file();
    auto ctx = security::TlsClientContext::create(o);
    EXPECT_TRUE(ctx.ok()) << ctx.status().to_string();
    return ctx.ok() ? std::move(*ctx) : nullptr;
  }

  // A TLS-only server enabling kerberos and simple.
  std::unique_ptr<testing::TestServer> StartServer() {
    auto kerberos = KerberosServerMechanism::create(testing::KerberosServerOptionsFor(*kdc_));
    EXPECT_TRUE(kerberos.ok()) << Describe(kerberos);
    if (!kerberos.ok()) return nullptr;
    auto server = std::make_unique<testing::TestServer>();
    server->tls(ServerContext("server")).client_tls(ClientContext());
    server->mechanisms({*kerberos, std::make_shared<SimpleServerMechanism>()}).blocking_threads(1);
    const Status s = server->start();
    EXPECT_TRUE(s.ok()) << s.to_string();
    return s.ok() ? std::move(server) : nullptr;
  }

  Result<std::unique_ptr<Client>> Connect(const Endpoint& endpoint, bool kerberos) {
    testing::TestClient client(endpoint);
    client.tls(ClientContext());
    if (kerberos) {
      auto m = KerberosClientMechanism::create(testing::CcacheClientOptions(*kdc_));
      if (!m.ok()) return m.status();
      client.mechanism(*m);
    } else {
      client.simple("bob");
    }
    return client.connect();
  }

  static inline std::unique_ptr<testing::ScopedTempDir> dir_;
  static inline std::unique_ptr<TestCa> ca_;
};

TEST_F(KerberosTlsTest, KerberosOverTlsIsBoundToTheChannelAndSucceedsDirectly) {
  auto server = StartServer();
  ASSERT_TRUE(server);
  auto client = Connect(server->endpoint(), true);
  ASSERT_TRUE(client.ok()) << Describe(client);
  auto who = (*client)->call_json("sys", "whoami", nlohmann::json::object());
  ASSERT_TRUE(who.ok()) << Describe(who);
  EXPECT_EQ((*who)["principal"], "alice@" + kdc_->realm());
  ASSERT_TRUE((*client)->tls_info().has_value());
}

TEST_F(KerberosTlsTest, AuthenticationRelayedThroughAnotherTlsConnectionFails) {
  auto server = StartServer();
  ASSERT_TRUE(server);
  RelayingProxy proxy(ServerContext("mitm"), ClientContext(), server->endpoint());

  // The relay itself works: an unauthenticated (`simple`) session passes.
  auto plain = Connect(proxy.endpoint(), false);
  ASSERT_TRUE(plain.ok()) << "relay broken: " << Describe(plain);
  auto who = (*plain)->call_json("sys", "whoami", nlohmann::json::object());
  ASSERT_TRUE(who.ok()) << Describe(who);
  EXPECT_EQ((*who)["user"], "bob");

  // Kerberos through it does not: the AP-REQ is bound to the client↔proxy
  // channel, the server checks it against the proxy↔server channel.
  auto relayed = Connect(proxy.endpoint(), true);
  ASSERT_FALSE(relayed.ok());
  EXPECT_EQ(relayed.status().code, Errc::kAuthenticationFailed) << Describe(relayed);
  EXPECT_GE(server->stats().negotiation_failures, 1u);

  // The server goes on serving kerberos to a client that reaches it directly.
  auto direct = Connect(server->endpoint(), true);
  ASSERT_TRUE(direct.ok()) << Describe(direct);
}

}  // namespace
}  // namespace authrpc
