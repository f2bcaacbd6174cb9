// Streaming calls end to end (docs/DATAPLANE.md): a real Server and Client
// over loopback TCP, an abstract Unix socket and TLS. Every test runs once
// per transport: byte-exact integrity both ways (each byte compared, plus a
// SHA-256 both ends compute), flow control with a slow consumer on either
// side, errors, cancellation and deadlines mid-stream, a client vanishing
// mid-stream, and file regions (sendfile on plaintext sockets).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <unistd.h>

#include <asio/co_spawn.hpp>
#include <asio/redirect_error.hpp>
#include <asio/steady_timer.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/use_future.hpp>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "authrpc/auth/mechanisms/simple/simple.h"
#include "authrpc/base/log.h"
#include "authrpc/client/client.h"
#include "authrpc/client/client_runtime.h"
#include "authrpc/rpc/call_stream.h"  // kDefaultStreamWindow, kFileChunk
#include "authrpc/security/tls_context.h"
#include "authrpc/server/server.h"
#include "authrpc/server/service.h"
#include "tests/testing/stream_data.h"
#include "tests/testing/test_server.h"
#include "tests/testing/scoped_temp_dir.h"
#include "tests/testing/tls_test_certs.h"

namespace authrpc {
namespace {

using namespace std::chrono_literals;
using security::TlsClientContext;
using security::TlsClientOptions;
using security::TlsServerContext;
using security::TlsServerOptions;
// The deterministic bytes of stream `seed` at `offset` (so both ends can
// produce and check them without sharing a buffer), their digest, a sleep.
using testing::Pattern;
using testing::ReadToEnd;
using testing::Sha256;
using testing::Sleep;
using testing::StreamTotals;

// "<total> <batch> <seed> [<delay ms>]"
struct GetRequest {
  std::uint64_t total = 0;
  std::size_t batch = 0;
  std::uint64_t seed = 0;
  long delay_ms = 0;
};
GetRequest ParseGet(std::string_view request) {
  GetRequest g;
  std::sscanf(std::string(request).c_str(), "%lu %zu %lu %ld", &g.total, &g.batch, &g.seed,
              &g.delay_ms);
  return g;
}

// What the handlers report to the tests.
struct Observed {
  std::mutex mu;
  std::size_t max_server_buffered = 0;  // slow_put: most bytes the server buffered
  std::uint32_t server_window = 0;
  Status vanished_write;                // get: the write that failed when the client went away
  bool vanished_cancelled_flag = false;
  std::promise<void> vanished;
  bool vanished_set = false;
};

Service BulkService(std::shared_ptr<Observed> seen) {
  Service bulk("bulk");
  // Sends `total` pattern bytes in `batch`-byte messages; the final payload
  // is the SHA-256 of everything sent. Messages alternate between a view
  // (zero-copy write) and a buffer filled in place.
  bulk.add_stream("get", [seen](CallContext& ctx,
                                ServerStream& stream) -> asio::awaitable<Result<std::string>> {
    const GetRequest g = ParseGet(stream.request());
    Sha256 sha;
    std::string view_buffer(g.batch, '\0');
    std::uint64_t sent = 0;
    bool flip = false;
    while (sent < g.total) {
      const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(g.batch, g.total - sent));
      Status s;
      if (flip) {
        Payload p = stream.allocate(n);
        Pattern(g.seed, sent, p.mutable_data(), n);
        sha.Update(p.view());
        s = co_await stream.write(std::move(p));
      } else {
        Pattern(g.seed, sent, view_buffer.data(), n);
        sha.Update(std::string_view(view_buffer.data(), n));
        s = co_await stream.write(std::string_view(view_buffer.data(), n));
      }
      flip = !flip;
      if (!s.ok()) {
        std::lock_guard lock(seen->mu);
        seen->vanished_write = s;
        seen->vanished_cancelled_flag = ctx.cancelled();
        if (!seen->vanished_set) {
          seen->vanished_set = true;
          seen->vanished.set_value();
        }
        co_return s;
      }
      sent += n;
      if (g.delay_ms > 0) co_await Sleep(std::chrono::milliseconds(g.delay_ms));
    }
    co_return sha.Hex();
  });
  // Reads every message; returns "<bytes> <sha256>".
  bulk.add_stream("put", [](CallContext&, ServerStream& stream) -> asio::awaitable<Result<std::string>> {
    const StreamTotals in = co_await ReadToEnd(stream);
    if (!in.end.ok()) co_return in.end;
    co_return std::to_string(in.bytes) + " " + in.sha256;
  });
  // As put, but reads one message every 10 ms and records how much the
  // server had buffered.
  bulk.add_stream("slow_put", [seen](CallContext&, ServerStream& stream) -> asio::awaitable<Result<std::string>> {
    std::uint64_t bytes = 0;
    for (;;) {
      co_await Sleep(10ms);
      {
        std::lock_guard lock(seen->mu);
        seen->max_server_buffered = std::max(seen->max_server_buffered, stream.buffered_bytes());
        seen->server_window = stream.receive_window();
      }
      auto m = co_await stream.read();
      if (!m.ok()) co_return m.status();
      if (!*m) break;
      bytes += (*m)->size();
    }
    co_return std::to_string(bytes);
  });
  // Sends `total` bytes, then fails with DATA_LOSS.
  bulk.add_stream("fail_midway", [](CallContext&, ServerStream& stream) -> asio::awaitable<Result<std::string>> {
    const GetRequest g = ParseGet(stream.request());
    std::string batch(g.batch, 'x');
    for (std::uint64_t sent = 0; sent < g.total; sent += g.batch) {
      if (Status s = co_await stream.write(batch); !s.ok()) co_return s;
    }
    co_return Status(Errc::kDataLoss, "disk on fire");
  });
  // Never sends: for deadlines.
  bulk.add_stream("silent", [](CallContext&, ServerStream& stream) -> asio::awaitable<Result<std::string>> {
    auto m = co_await stream.read();  // until the client ends, cancels or times out
    co_return m.ok() ? Result<std::string>(std::string("ended")) : Result<std::string>(m.status());
  });
  // "<path> <offset> <length>": sends that file region; returns whether it
  // was zero-copy.
  bulk.add_stream("file", [](CallContext&, ServerStream& stream) -> asio::awaitable<Result<std::string>> {
    char path[4096];
    unsigned long offset = 0, length = 0;
    if (std::sscanf(std::string(stream.request()).c_str(), "%4095s %lu %lu", path, &offset, &length) != 3) {
      co_return Status(Errc::kInvalidArgument, "bad request");
    }
    const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) co_return Status(Errc::kNotFound, "cannot open");
    const Status s = co_await stream.send_file(fd, offset, length);
    ::close(fd);
    if (!s.ok()) co_return s;
    co_return std::string(stream.zero_copy_files() ? "zero-copy" : "copied");
  });
  bulk.add("unary", [](CallContext&, std::string_view request) -> Result<std::string> {
    return std::string(request);
  });
  return bulk;
}

struct Certs {
  testing::ScopedTempDir dir{"streaming"};
  std::unique_ptr<testing::TestCa> ca;
  Certs() {
    ca = std::make_unique<testing::TestCa>(dir.path(), "ca");
    ca->issue({"server", "localhost", {"DNS:localhost", "IP:127.0.0.1"}});
  }
};

Certs& certs() {
  static Certs c;
  return c;
}

class StreamingTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { StartServer(); }
  void TearDown() override {
    client_.reset();
    server_.reset();
  }

  void StartServer(std::uint32_t stream_window = kDefaultStreamWindow) {
    const std::string transport = GetParam();
    std::string uri = transport == "tcp"    ? "tcp://127.0.0.1:0"
                      : transport == "unix" ? "unix:@authrpc-streaming-" + std::to_string(::getpid())
                      : transport == "shm"  ? "unix:@authrpc-streaming-shm-" + std::to_string(::getpid())
                                            : "tls://127.0.0.1:0";
    if (server_) server_->stop();
    server_ = std::make_unique<testing::TestServer>();
    server_->endpoint(uri).blocking_threads(8).service(BulkService(seen_));
    server_->options([transport, stream_window](ServerOptions& o) {
      o.shm.enabled = transport == "shm";  // unix:// with the shared-memory data plane
      o.stream_window = stream_window;
    });
    if (transport == "tls") {
      TlsServerOptions t;
      t.certificate_file = certs().ca->cert_file("server");
      t.private_key_file = certs().ca->key_file("server");
      auto tls = TlsServerContext::create(t);
      ASSERT_TRUE(tls.ok()) << tls.status().to_string();
      server_->tls_context(std::move(*tls));
    }
    const Status s = server_->start();
    ASSERT_TRUE(s.ok()) << s.to_string();
    endpoint_ = server_->endpoint();
  }

  std::unique_ptr<Client> Connect() {
    ClientOptions o;
    o.endpoint = endpoint_;
    o.mechanisms = {std::make_shared<SimpleClientMechanism>("alice")};
    o.connect_timeout = 5s;
    o.shm.enabled = GetParam() == "shm";
    if (GetParam() == "tls") {
      TlsClientOptions t;
      t.ca_file = certs().ca->ca_file();
      auto tls = TlsClientContext::create(t);
      EXPECT_TRUE(tls.ok()) << tls.status().to_string();
      if (tls.ok()) o.tls = std::move(*tls);
    }
    auto c = Client::connect(runtime_, std::move(o));
    EXPECT_TRUE(c.ok()) << c.status().to_string();
    return c.ok() ? std::move(*c) : nullptr;
  }

  // Runs `body` as a coroutine on the client's executor and waits for it.
  void Run(Client& client, std::function<asio::awaitable<void>()> body) {
    auto done = asio::co_spawn(client.executor(), std::move(body), asio::use_future);
    ASSERT_EQ(done.wait_for(60s), std::future_status::ready);
    done.get();
  }

  ClientRuntime runtime_{1};
  std::shared_ptr<Observed> seen_ = std::make_shared<Observed>();
  std::unique_ptr<testing::TestServer> server_;
  Endpoint endpoint_;
  std::unique_ptr<Client> client_;
};

TEST_P(StreamingTest, GetIsByteExact) {
  client_ = Connect();
  ASSERT_TRUE(client_);
  struct Case {
    std::uint64_t total;
    std::size_t batch;
  };
  // Small messages (read through the channel's buffer), large ones (read
  // straight into their own buffers), one message above the window's half,
  // and a total that is not a multiple of the batch.
  const std::vector<Case> cases = {{100'000, 1000}, {4 << 20, 128 << 10}, {6 << 20, 5 << 20},
                                   {1'000'003, 65'536}, {0, 1024}};
  for (const auto& c : cases) {
    SCOPED_TRACE(std::to_string(c.total) + " bytes in " + std::to_string(c.batch));
    Run(*client_, [&]() -> asio::awaitable<void> {
      const std::uint64_t seed = c.total ^ c.batch;
      const std::string request =
          std::to_string(c.total) + " " + std::to_string(c.batch) + " " + std::to_string(seed);
      auto stream = co_await client_->async_open_stream("bulk", "get", request);
      EXPECT_TRUE(stream.ok()) << stream.status().to_string();
      if (!stream.ok()) co_return;
      Sha256 sha;
      std::uint64_t got = 0;
      std::string expected;
      bool exact = true;
      for (;;) {
        auto m = co_await (*stream)->read();
        EXPECT_TRUE(m.ok()) << m.status().to_string();
        if (!m.ok() || !*m) break;
        const Payload& p = **m;
        expected.resize(p.size());
        Pattern(seed, got, expected.data(), p.size());
        exact = exact && std::memcmp(expected.data(), p.data(), p.size()) == 0;
        EXPECT_EQ(p.size(), std::min<std::uint64_t>(c.batch, c.total - got));
        sha.Update(p.view());
        got += p.size();
      }
      EXPECT_TRUE(exact);
      EXPECT_EQ(got, c.total);
      auto final = co_await (*stream)->finish();
      EXPECT_TRUE(final.ok()) << final.status().to_string();
      if (final.ok()) {
        EXPECT_EQ(*final, sha.Hex());
      }
    });
  }
}

TEST_P(StreamingTest, PutIsByteExact) {
  client_ = Connect();
  ASSERT_TRUE(client_);
  Run(*client_, [&]() -> asio::awaitable<void> {
    for (const std::size_t batch : {std::size_t{1}, std::size_t{3000}, std::size_t{128 << 10},
                                    std::size_t{3 << 20}}) {
      auto stream = co_await client_->async_open_stream("bulk", "put", "");
      EXPECT_TRUE(stream.ok()) << stream.status().to_string();
      if (!stream.ok()) co_return;
      Sha256 sha;
      const std::uint64_t total = batch * 20 + 7;
      std::string view(batch, '\0');
      bool flip = false;
      for (std::uint64_t sent = 0; sent < total;) {
        const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(batch, total - sent));
        Status s;
        if (flip) {
          Payload p = (*stream)->allocate(n);
          Pattern(batch, sent, p.mutable_data(), n);
          sha.Update(p.view());
          s = co_await (*stream)->write(std::move(p));
        } else {
          Pattern(batch, sent, view.data(), n);
          sha.Update(std::string_view(view.data(), n));
          s = co_await (*stream)->write(std::string_view(view.data(), n));
        }
        flip = !flip;
        EXPECT_TRUE(s.ok()) << s.to_string();
        sent += n;
      }
      auto final = co_await (*stream)->finish();
      EXPECT_TRUE(final.ok()) << final.status().to_string();
      if (final.ok()) {
        EXPECT_EQ(*final, std::to_string(total) + " " + sha.Hex());
      }
    }
  });
}

TEST_P(StreamingTest, SlowClientBuffersAtMostItsWindow) {
  client_ = Connect();
  ASSERT_TRUE(client_);
  Run(*client_, [&]() -> asio::awaitable<void> {
    StreamOptions options;
    options.window = 256 << 10;
    auto stream = co_await client_->async_open_stream("bulk", "get", "8388608 65536 1", options);
    EXPECT_TRUE(stream.ok()) << stream.status().to_string();
    if (!stream.ok()) co_return;
    std::size_t max_buffered = 0;
    std::uint64_t got = 0;
    int reads = 0;
    for (;;) {
      // Slow at first: the server runs into the window and must wait.
      if (reads++ < 10) co_await Sleep(20ms);
      max_buffered = std::max(max_buffered, (*stream)->buffered_bytes());
      auto m = co_await (*stream)->read();
      EXPECT_TRUE(m.ok()) << m.status().to_string();
      if (!m.ok() || !*m) break;
      got += (**m).size();
    }
    EXPECT_EQ(got, 8u << 20);
    // Over shared memory nothing is buffered: the ring bounds the server
    // (tests/shm_stream_plane_test.cc, SlowConsumerBoundsTheWriter).
    if (GetParam() != "shm") {
      EXPECT_GT(max_buffered, 0u);
    }
    EXPECT_LE(max_buffered, options.window);
    EXPECT_TRUE((co_await (*stream)->finish()).ok());
  });
}

TEST_P(StreamingTest, SlowServerBuffersAtMostItsWindow) {
  StartServer(/*stream_window=*/128 << 10);
  client_ = Connect();
  ASSERT_TRUE(client_);
  Run(*client_, [&]() -> asio::awaitable<void> {
    auto stream = co_await client_->async_open_stream("bulk", "slow_put", "");
    EXPECT_TRUE(stream.ok()) << stream.status().to_string();
    if (!stream.ok()) co_return;
    const std::string batch(16 << 10, 'p');
    for (int i = 0; i < 40; ++i) {
      Status s = co_await (*stream)->write(batch);
      EXPECT_TRUE(s.ok()) << s.to_string();
    }
    auto final = co_await (*stream)->finish();
    EXPECT_TRUE(final.ok()) << final.status().to_string();
    if (final.ok()) {
      EXPECT_EQ(*final, std::to_string(40 * (16 << 10)));
    }
  });
  std::lock_guard lock(seen_->mu);
  EXPECT_EQ(seen_->server_window, 128u << 10);
  if (GetParam() != "shm") {
    EXPECT_GT(seen_->max_server_buffered, 0u);
  }
  EXPECT_LE(seen_->max_server_buffered, 128u << 10);
}

TEST_P(StreamingTest, ServerErrorMidStreamIsTyped) {
  client_ = Connect();
  ASSERT_TRUE(client_);
  Run(*client_, [&]() -> asio::awaitable<void> {
    auto stream = co_await client_->async_open_stream("bulk", "fail_midway", "300000 100000 0");
    EXPECT_TRUE(stream.ok());
    if (!stream.ok()) co_return;
    const StreamTotals in = co_await ReadToEnd(**stream);
    EXPECT_EQ(in.messages, 3u);  // everything sent before the error arrives first
    EXPECT_EQ(in.end.code, make_error_code(Errc::kDataLoss)) << in.end.to_string();
    EXPECT_NE(in.end.message.find("disk on fire"), std::string::npos);
    // The connection stays usable.
    auto echo = co_await client_->async_call("bulk", "unary", "still here");
    EXPECT_TRUE(echo.ok() && *echo == "still here");
  });
}

TEST_P(StreamingTest, CancelStopsTheServerAndKeepsTheConnection) {
  client_ = Connect();
  ASSERT_TRUE(client_);
  auto vanished = seen_->vanished.get_future();
  Run(*client_, [&]() -> asio::awaitable<void> {
    StreamOptions options;
    options.window = 1 << 20;
    auto stream = co_await client_->async_open_stream("bulk", "get", "100000000000 65536 2", options);
    EXPECT_TRUE(stream.ok());
    if (!stream.ok()) co_return;
    for (int i = 0; i < 5; ++i) {
      auto m = co_await (*stream)->read();
      EXPECT_TRUE(m.ok() && *m);
    }
    (*stream)->cancel();
    auto after = co_await (*stream)->read();
    EXPECT_EQ(after.code(), make_error_code(Errc::kCancelled));
    auto echo = co_await client_->async_call("bulk", "unary", "after cancel");
    EXPECT_TRUE(echo.ok() && *echo == "after cancel") << (echo.ok() ? *echo : echo.status().to_string());
  });
  ASSERT_EQ(vanished.wait_for(10s), std::future_status::ready);
  std::lock_guard lock(seen_->mu);
  EXPECT_EQ(seen_->vanished_write.code, make_error_code(Errc::kCancelled))
      << seen_->vanished_write.to_string();
  EXPECT_TRUE(seen_->vanished_cancelled_flag);
}

TEST_P(StreamingTest, ClientVanishingMidStreamLeavesTheServerServing) {
  client_ = Connect();
  ASSERT_TRUE(client_);
  auto vanished = seen_->vanished.get_future();
  Run(*client_, [&]() -> asio::awaitable<void> {
    auto stream = co_await client_->async_open_stream("bulk", "get", "100000000000 131072 3");
    EXPECT_TRUE(stream.ok());
    if (!stream.ok()) co_return;
    auto m = co_await (*stream)->read();
    EXPECT_TRUE(m.ok() && *m);
    client_->close();  // the connection goes away under the stream
    auto after = co_await (*stream)->read();
    EXPECT_FALSE(after.ok());
    EXPECT_EQ(after.code(), make_error_code(Errc::kCancelled)) << after.status().to_string();
  });
  ASSERT_EQ(vanished.wait_for(10s), std::future_status::ready);
  {
    std::lock_guard lock(seen_->mu);
    EXPECT_FALSE(seen_->vanished_write.ok());
  }
  // A new client is served, streams included.
  auto other = Connect();
  ASSERT_TRUE(other);
  Run(*other, [&]() -> asio::awaitable<void> {
    auto stream = co_await other->async_open_stream("bulk", "get", "1000000 100000 4");
    EXPECT_TRUE(stream.ok());
    if (!stream.ok()) co_return;
    auto final = co_await (*stream)->finish();
    EXPECT_TRUE(final.ok()) << final.status().to_string();
  });
}

TEST_P(StreamingTest, ServerStoppingMidStreamIsTyped) {
  client_ = Connect();
  ASSERT_TRUE(client_);
  std::promise<void> started;
  auto reading = asio::co_spawn(
      client_->executor(),
      [&]() -> asio::awaitable<Status> {
        auto stream = co_await client_->async_open_stream("bulk", "get", "100000000000 65536 5");
        if (!stream.ok()) co_return stream.status();
        bool first = true;
        for (;;) {
          auto m = co_await (*stream)->read();
          if (!m.ok()) co_return m.status();
          if (!*m) co_return Status();
          if (first) started.set_value();
          first = false;
        }
      },
      asio::use_future);
  ASSERT_EQ(started.get_future().wait_for(10s), std::future_status::ready);
  server_->stop();  // GOAWAY, 1 s of grace for the endless call, then close
  ASSERT_EQ(reading.wait_for(10s), std::future_status::ready);
  // A connection-level failure: closed inside a message, reset or
  // UNAVAILABLE (retryable) — or, when the close cut a frame header or a
  // small frame, the truncated-frame PROTOCOL_ERROR every frame read reports
  // (docs/PROTOCOL.md section 10).
  const Status end = reading.get();
  EXPECT_FALSE(end.ok());
  if (end.code == make_error_code(Errc::kProtocolError)) {
    EXPECT_NE(end.message.find("truncated"), std::string::npos) << end.to_string();
  } else {
    EXPECT_EQ(retry_advice(end.code), RetryAdvice::kRetry) << end.to_string();
  }
}

TEST_P(StreamingTest, DeadlineEndsTheStream) {
  client_ = Connect();
  ASSERT_TRUE(client_);
  Run(*client_, [&]() -> asio::awaitable<void> {
    StreamOptions options;
    options.timeout = 100ms;
    auto stream = co_await client_->async_open_stream("bulk", "silent", "", options);
    EXPECT_TRUE(stream.ok());
    if (!stream.ok()) co_return;
    const auto start = std::chrono::steady_clock::now();
    auto m = co_await (*stream)->read();
    EXPECT_EQ(m.code(), make_error_code(Errc::kDeadlineExceeded)) << m.status().to_string();
    EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
    auto echo = co_await client_->async_call("bulk", "unary", "x");
    EXPECT_TRUE(echo.ok());
  });
}

TEST_P(StreamingTest, WrongKindOfCallIsRefused) {
  client_ = Connect();
  ASSERT_TRUE(client_);
  Run(*client_, [&]() -> asio::awaitable<void> {
    auto unary_on_stream = co_await client_->async_call("bulk", "get", "1 1 1");
    EXPECT_EQ(unary_on_stream.code(), make_error_code(Errc::kInvalidArgument));
    auto stream_on_unary = co_await client_->async_open_stream("bulk", "unary", "");
    EXPECT_TRUE(stream_on_unary.ok());
    if (stream_on_unary.ok()) {
      auto m = co_await (*stream_on_unary)->read();
      EXPECT_EQ(m.code(), make_error_code(Errc::kInvalidArgument)) << m.status().to_string();
    }
    auto missing = co_await client_->async_open_stream("bulk", "nope", "");
    EXPECT_TRUE(missing.ok());
    if (missing.ok()) {
      auto m = co_await (*missing)->read();
      EXPECT_EQ(m.code(), make_error_code(Errc::kNotFound));
    }
  });
}

TEST_P(StreamingTest, FileRegionIsByteExact) {
  const testing::ScopedTempDir dir("streaming-file");
  ASSERT_TRUE(dir.ok());
  const std::string path = dir.file("region");
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  ASSERT_GE(fd, 0);
  const std::size_t size = 3 * kFileChunk + 12345;
  std::string content(size, '\0');
  Pattern(77, 0, content.data(), size);
  ASSERT_EQ(::write(fd, content.data(), size), static_cast<ssize_t>(size));
  ::close(fd);
  client_ = Connect();
  ASSERT_TRUE(client_);
  struct Region {
    std::uint64_t offset, length;
  };
  for (const Region r : {Region{0, size}, Region{4095, 2 * kFileChunk + 1}, Region{size - 10, 10}}) {
    Run(*client_, [&]() -> asio::awaitable<void> {
      const std::string request =
          std::string(path) + " " + std::to_string(r.offset) + " " + std::to_string(r.length);
      auto stream = co_await client_->async_open_stream("bulk", "file", request);
      EXPECT_TRUE(stream.ok());
      if (!stream.ok()) co_return;
      std::string got;
      for (;;) {
        auto m = co_await (*stream)->read();
        EXPECT_TRUE(m.ok()) << m.status().to_string();
        if (!m.ok() || !*m) break;
        EXPECT_LE((**m).size(), kFileChunk);
        got.append((**m).view());
      }
      EXPECT_TRUE(got == content.substr(r.offset, r.length)) << got.size() << " bytes";
      auto final = co_await (*stream)->finish();
      EXPECT_TRUE(final.ok());
      if (final.ok()) {
        EXPECT_EQ(*final, GetParam() == "tls" ? "copied" : "zero-copy");
      }
    });
  }
  // A region past the end of the file fails the call, before anything is sent.
  Run(*client_, [&]() -> asio::awaitable<void> {
    const std::string request = std::string(path) + " 0 " + std::to_string(size + 100);
    auto stream = co_await client_->async_open_stream("bulk", "file", request);
    EXPECT_TRUE(stream.ok());
    if (!stream.ok()) co_return;
    const Status end = (co_await ReadToEnd(**stream)).end;
    EXPECT_EQ(end.code, make_error_code(Errc::kOutOfRange)) << end.to_string();
    auto echo = co_await client_->async_call("bulk", "unary", "x");
    EXPECT_TRUE(echo.ok());
  });
}

INSTANTIATE_TEST_SUITE_P(Transports, StreamingTest, ::testing::Values("tcp", "unix", "tls", "shm"),
                         [](const auto& param_info) { return param_info.param; });

}  // namespace
}  // namespace authrpc
