// The tls:// listener (rpc/tls_listener.h): the TCP listener whose accepted
// streams are wrapped, and its first-byte check — TLS (0x16) becomes a TLS
// stream; anything else is served unchanged (encryption `optional`) or
// refused with the one fixed ERROR frame (`required`). Real sockets on
// loopback, real OpenSSL (tests/testing/test_tls.h), a raw blocking socket for the
// plaintext client (tests/testing/test_support.h).
#include <gtest/gtest.h>

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <asio/use_future.hpp>
#include <array>
#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <string>

#include "authrpc/rpc/messages.h"
#include "authrpc/rpc/tls_errors.h"
#include "authrpc/rpc/tls_listener.h"
#include "authrpc/rpc/tls_stream.h"
#include "authrpc/rpc/transport.h"
#include "tests/testing/test_support.h"
#include "tests/testing/test_tls.h"

namespace authrpc {

// For test names: beside the enum, where GoogleTest looks.
inline void PrintTo(PlaintextClients p, std::ostream* os) {
  *os << (p == PlaintextClients::kServe ? "serve plaintext" : "refuse plaintext");
}

namespace {

using namespace std::chrono_literals;
using testing::Describe;
using testing::RawConnection;
using testing::TestTls;

// Bytes a plaintext authrpc client starts with: the preamble and the start
// of a HELLO (anything but 0x16 first).
std::string PlaintextBytes() {
  const auto preamble = wire::make_preamble();
  return std::string(preamble.begin(), preamble.end()) + "and what follows it";
}

// What one accepted connection's open() made of it, read on the server.
struct Opened {
  std::error_code ec;  // open()'s
  bool replaced = false;  // open() returned a stream other than the accepted one
  std::optional<Endpoint::Scheme> scheme;
  bool tls = false;       // tls() once `received` was read
  std::string received;   // what the server read after open(), up to `expect` bytes
};

class TlsListenerTest : public ::testing::Test {
 protected:
  void Listen(PlaintextClients plaintext) {
    auto ep = Endpoint::parse("tls://127.0.0.1:0");
    ASSERT_TRUE(ep.ok());
    auto tcp = transport_for(ep->scheme).listen(io_, *ep, {});
    ASSERT_TRUE(tcp.ok()) << Describe(tcp);
    auto tls = wrap_tls_listener(std::move(*tcp), TestTls::shared().server(), plaintext);
    ASSERT_TRUE(tls.ok()) << Describe(tls);
    listener_ = std::move(*tls);
    EXPECT_EQ(listener_->local_endpoint().scheme, Endpoint::Scheme::kTls);
  }

  // Accepts one connection, runs `before_open` once open() is waiting (the
  // client's first byte, a close), opens it and reads `expect` bytes.
  asio::awaitable<Opened> AcceptAndOpen(std::function<void(ByteStream&)> before_open,
                                        std::size_t expect) {
    Opened out;
    auto accepted = co_await listener_->accept();
    if (!accepted.ok()) {
      out.ec = accepted.code();
      co_return out;
    }
    std::unique_ptr<ByteStream> stream = std::move(*accepted);
    EXPECT_TRUE(stream->needs_open());
    // Posted: it runs once open() below has found nothing and waits.
    if (before_open) asio::post(io_, [&stream, before_open] { before_open(*stream); });
    auto opened = co_await stream->open(out.ec);
    if (out.ec) co_return out;
    if (opened) {
      out.replaced = true;
      stream = std::move(opened);
    }
    out.scheme = stream->scheme();
    char buffer[256];
    while (out.received.size() < expect) {
      std::error_code ec;
      const std::size_t n = co_await stream->read_some(
          asio::buffer(buffer, std::min(sizeof buffer, expect - out.received.size())), ec);
      if (ec) {
        out.ec = ec;
        break;
      }
      out.received.append(buffer, n);
    }
    out.tls = stream->tls() != nullptr;
    co_return out;
  }

  Opened Run(asio::awaitable<Opened> server) {
    auto done = asio::co_spawn(io_, std::move(server), asio::use_future);
    io_.run_for(10s);
    if (done.wait_for(0s) != std::future_status::ready) {
      ADD_FAILURE() << "the server side did not finish";
      Opened failed;
      failed.ec = asio::error::timed_out;
      return failed;
    }
    return done.get();
  }

  asio::io_context io_;
  std::unique_ptr<Listener> listener_;
};

// A plaintext client on either kind of listener, sending its first bytes
// before accept() or only once open() waits for them.
struct PlaintextCase {
  const char* name;
  PlaintextClients listener;
  bool send_before_accept;
};

void PrintTo(const PlaintextCase& c, std::ostream* os) { *os << c.name; }

class TlsListenerPlaintextTest : public TlsListenerTest,
                                 public ::testing::WithParamInterface<PlaintextCase> {};

TEST_P(TlsListenerPlaintextTest, FirstByteDecides) {
  const PlaintextCase& c = GetParam();
  Listen(c.listener);
  RawConnection raw(listener_->local_endpoint().port);
  ASSERT_TRUE(raw.connected());
  const std::string bytes = PlaintextBytes();
  if (c.send_before_accept) {
    ASSERT_TRUE(raw.Send(bytes));
  }
  std::function<void(ByteStream&)> send;
  if (!c.send_before_accept) send = [&](ByteStream&) { EXPECT_TRUE(raw.Send(bytes)); };
  const Opened opened = Run(AcceptAndOpen(send, bytes.size()));
  if (c.listener == PlaintextClients::kServe) {
    // The accepted TCP stream, unchanged: every byte there, the first one too.
    ASSERT_FALSE(opened.ec) << opened.ec.message();
    EXPECT_TRUE(opened.replaced);
    EXPECT_EQ(opened.scheme, Endpoint::Scheme::kTcp);
    EXPECT_FALSE(opened.tls);
    EXPECT_EQ(opened.received, bytes);
    return;
  }
  // Refused: TlsErrc::kTlsRequired on the server; the client reads the one
  // fixed ERROR frame, then the end of the stream once the server closes.
  EXPECT_EQ(opened.ec, make_error_code(TlsErrc::kTlsRequired)) << opened.ec.message();
  const auto frame = raw.ReadFrame();
  ASSERT_TRUE(frame.has_value());
  EXPECT_EQ(frame->type, wire::FrameType::kError);
  const auto error = wire::parse_error(frame->body);
  ASSERT_TRUE(error.ok()) << Describe(error);
  EXPECT_EQ(error->code, static_cast<std::uint16_t>(Errc::kFailedPrecondition));
  EXPECT_EQ(error->message, "this endpoint requires TLS (connect with tls://)");
}

INSTANTIATE_TEST_SUITE_P(
    Table, TlsListenerPlaintextTest,
    ::testing::Values(PlaintextCase{"optional_early", PlaintextClients::kServe, true},
                      PlaintextCase{"optional_late", PlaintextClients::kServe, false},
                      PlaintextCase{"required_early", PlaintextClients::kRefuse, true},
                      PlaintextCase{"required_late", PlaintextClients::kRefuse, false}),
    [](const auto& param_info) { return std::string(param_info.param.name); });

// Writes `bytes` through a stream's write_all() and records the outcome.
class WriteOnce final : public WriteCompletion {
 public:
  void write_done(std::error_code ec) override {
    done = true;
    result = ec;
  }
  bool done = false;
  std::error_code result;
};

// A TLS client (connect, then wrap_tls_client) on either kind of listener:
// open() makes the stream TLS; its handshake runs inside the first reads.
class TlsListenerTlsClientTest : public TlsListenerTest,
                                 public ::testing::WithParamInterface<PlaintextClients> {};

TEST_P(TlsListenerTlsClientTest, HandshakeRecordMakesATlsStream) {
  Listen(GetParam());
  const std::string hello = "hello over TLS";
  const Endpoint server = listener_->local_endpoint();
  std::unique_ptr<ByteStream> client;
  WriteOnce written;
  std::array<asio::const_buffer, 1> buffers{asio::buffer(hello)};
  asio::co_spawn(
      io_,
      [&]() -> asio::awaitable<void> {
        const auto deadline = std::chrono::steady_clock::now() + 10s;
        auto tcp = co_await transport_for(Endpoint::Scheme::kTcp).connect(io_.get_executor(), server, deadline);
        EXPECT_TRUE(tcp.ok()) << Describe(tcp);
        if (!tcp.ok()) co_return;
        auto tls = co_await wrap_tls_client(std::move(*tcp), server, deadline, TestTls::shared().client());
        EXPECT_TRUE(tls.ok()) << Describe(tls);
        if (!tls.ok()) co_return;
        client = std::move(*tls);
        EXPECT_NE(client->tls(), nullptr);
        client->write_all(buffers, written);
      },
      asio::detached);
  const Opened opened = Run(AcceptAndOpen(nullptr, hello.size()));
  ASSERT_FALSE(opened.ec) << opened.ec.message();
  EXPECT_TRUE(opened.replaced);
  EXPECT_EQ(opened.scheme, Endpoint::Scheme::kTls);
  EXPECT_TRUE(opened.tls);
  EXPECT_EQ(opened.received, hello);
  EXPECT_TRUE(written.done);
  EXPECT_FALSE(written.result) << written.result.message();
}

INSTANTIATE_TEST_SUITE_P(Table, TlsListenerTlsClientTest,
                         ::testing::Values(PlaintextClients::kServe, PlaintextClients::kRefuse),
                         [](const auto& param_info) {
                           return std::string(param_info.param == PlaintextClients::kServe
                                                  ? "optional"
                                                  : "required");
                         });

// Whatever ends a connection before its first byte ends open() too: the
// client leaving, or the server closing the stream (what the negotiation
// timeout and the pre-authentication budget do). Nothing is written before
// open() has decided.
TEST_F(TlsListenerTest, ClientLeavingBeforeItsFirstByteEndsOpen) {
  Listen(PlaintextClients::kServe);
  RawConnection raw(listener_->local_endpoint().port);
  ASSERT_TRUE(raw.connected());
  const Opened opened = Run(AcceptAndOpen([&](ByteStream&) { raw.Close(); }, 1));
  EXPECT_EQ(opened.ec, asio::error::eof) << opened.ec.message();
}

TEST_F(TlsListenerTest, ClosingThePendingStreamEndsOpenAndSendsNothing) {
  Listen(PlaintextClients::kServe);
  RawConnection raw(listener_->local_endpoint().port);
  ASSERT_TRUE(raw.connected());
  WriteOnce written;
  const std::string frame = "an ERROR frame would go here";
  std::array<asio::const_buffer, 1> buffers{asio::buffer(frame)};
  const Opened opened = Run(AcceptAndOpen(
      [&](ByteStream& pending) {
        pending.write_all(buffers, written);  // refused: nothing leaves in plaintext
        pending.close();
      },
      1));
  EXPECT_TRUE(opened.ec) << "open() went on after close()";
  EXPECT_TRUE(written.done);
  EXPECT_EQ(written.result, make_error_code(TlsErrc::kTlsRequired));
  std::string got;
  EXPECT_FALSE(raw.ReadExact(got, 1, 2s));
  EXPECT_TRUE(got.empty()) << "sent in plaintext before the first byte: " << got;
}

}  // namespace
}  // namespace authrpc
