// What several tests share (tests/testing/test_support.cc, library authrpc_test_support):
// readable Status/Result failures, temporary directories, polling, stopping a
// Server without hanging the test, running a coroutine to completion, and a
// blocking raw socket that speaks frames, for tests that must send bytes a
// real Client never would. Test code only: functions may fail the current
// test (ADD_FAILURE) instead of returning errors.
#pragma once

#include <gtest/gtest.h>

#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>
#include <asio/use_future.hpp>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>
#include <sys/types.h>

#include "authrpc/base/result.h"
#include "authrpc/client/client.h"
#include "authrpc/rpc/endpoint.h"
#include "authrpc/rpc/transport.h"
#include "authrpc/rpc/wire.h"
#include "authrpc/server/server.h"
#include "authrpc/server/service.h"

namespace authrpc {

// How gtest prints a RetryAdvice ("retry", "re-login", ...) and an Endpoint
// (its URI).
void PrintTo(RetryAdvice advice, std::ostream* os);
void PrintTo(const Endpoint& endpoint, std::ostream* os);

}  // namespace authrpc

namespace authrpc::testing {

// The error code of `e`, for comparing with a Status's code.
inline std::error_code Code(Errc e) { return make_error_code(e); }

// "OK" or the status, for `<< Describe(r)` after an expectation.
template <typename T>
std::string Describe(const Result<T>& r) {
  return r.ok() ? std::string("OK") : r.status().to_string();
}

// ASSERT_OK(status expression): fails with the expression and the status.
#define ASSERT_OK(expr)                                      \
  do {                                                       \
    const ::authrpc::Status _s = (expr);                     \
    ASSERT_TRUE(_s.ok()) << #expr << ": " << _s.to_string(); \
  } while (0)

// A new directory under $TMPDIR named authrpc-<tag>-XXXXXX; empty on failure.
std::string TempDir(const std::string& tag);

// A TCP port on 127.0.0.1 that was free a moment ago (bound to port 0 and
// released), for a server the test starts as a process; -1 if none. Another
// socket may take it before that server binds it: callers retry on "Address
// already in use" (tests/testing/mini_zk.h, tests/testing/glewlwyd_idp.cc).
int FreeLoopbackPort();

// A TCP socket on 127.0.0.1 that listens and never accepts nor speaks: a
// client's connect succeeds and nothing answers it; a server asked to bind
// its port finds it in use. Closed when destroyed.
class SilentListener {
 public:
  SilentListener();  // port() is 0 (and the test has failed) if it could not listen
  ~SilentListener();
  SilentListener(const SilentListener&) = delete;
  SilentListener& operator=(const SilentListener&) = delete;
  std::uint16_t port() const { return port_; }

 private:
  int fd_ = -1;
  std::uint16_t port_ = 0;
};

// True once `fd` has bytes (or its end of stream) to read; false if `until`
// passes first or poll fails.
bool WaitReadable(int fd, std::chrono::steady_clock::time_point until);

// One sendmsg of `size` bytes on the Unix socket `fd`, with `fds` as
// SCM_RIGHTS (none: no control message): what sendmsg returns.
ssize_t SendWithRights(int fd, const void* data, std::size_t size, const std::vector<int>& fds,
                       int flags = 0);

// "<pid>-<n>", a different n at each call: names (abstract sockets, ccaches,
// principals) no earlier test of this process or of another used.
std::string UniqueSuffix();

// Sets an environment variable for one scope, then puts back what was there.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value);
  ~ScopedEnv();
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

// Polls `done` every 5 ms until it holds (true) or `timeout` passes (false).
bool Eventually(const std::function<bool()>& done,
                std::chrono::steady_clock::duration timeout = std::chrono::seconds(3));

// Stops and destroys `server`, failing the test instead of hanging if stop()
// does not return within `limit`. A server whose stop() hung is leaked:
// destroying it would std::terminate on its still-joinable IO threads.
bool StopAndDestroy(std::unique_ptr<Server>& server,
                    std::chrono::steady_clock::duration limit = std::chrono::seconds(10));

// What a handler counts down and a test waits for ("the handler has
// started", "three calls are waiting"), instead of sleeping for a guessed
// while. std::latch has no timed wait; a test must not hang on a handler
// that never runs. Counting down past zero is harmless.
class Latch {
 public:
  explicit Latch(int count = 1) : count_(count) {}
  void CountDown() {
    {
      std::lock_guard lock(mu_);
      if (count_ > 0) --count_;
    }
    cv_.notify_all();
  }
  // True once the count reached zero; false if `timeout` passed first.
  bool WaitFor(std::chrono::steady_clock::duration timeout) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [this] { return count_ == 0; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int count_;
};

// Runs a coroutine to completion on a private io_context.
template <typename T>
T Await(asio::awaitable<T> a) {
  asio::io_context io;
  auto f = asio::co_spawn(io, std::move(a), asio::use_future);
  io.run();
  return f.get();
}

// Services for authorization tests: data.read ("r"), data.write ("w"),
// admin.shutdown ("ok").
Service DataService();
Service AdminService();

// A client of `endpoint` authenticating with `mechanism` only, with generous
// connect and call timeouts for a loaded machine.
Result<std::unique_ptr<Client>> ConnectWith(const Endpoint& endpoint,
                                            std::shared_ptr<ClientMechanism> mechanism,
                                            std::chrono::milliseconds timeout = std::chrono::seconds(10));

// An authrpc-server process (`binary --config CONFIG --print-endpoints`)
// and the endpoint it printed first; the caller kills and reaps it.
struct ServerProcess {
  pid_t pid = -1;
  Endpoint endpoint;
};
Result<ServerProcess> SpawnServer(const char* binary, const std::string& config);

// A frame as a server sent it: the header's fields as they are on the wire
// (type and reserved bits unchecked, so a test can assert on them) and the body.
struct RawFrame {
  wire::FrameType type = wire::FrameType::kError;
  std::uint8_t flags = 0;
  std::uint16_t reserved = 0;
  std::uint32_t call_id = 0;
  std::string body;
};

// The bytes of a preamble of `version`, and of a HELLO frame (no features)
// for `mechanism` with its first `message`, as RawConnection sends them.
std::string RawPreamble(std::uint8_t version = 1);
std::string RawHello(const std::string& mechanism, const std::string& message);

// Both ends of a new connection over an abstract Unix socket whose name
// carries `tag` (and UniqueSuffix()), made by running `io` until both are
// there: the stream the listener accepted and the one connect() returned.
struct UnixStreamPair {
  std::unique_ptr<ByteStream> accepted;
  std::unique_ptr<ByteStream> connected;
};
Result<UnixStreamPair> ConnectUnixPair(asio::io_context& io, const std::string& tag);

// A frame written by hand, as docs/PROTOCOL.md lays it out: length, type,
// flags 0, reserved 0, call id, body (no encoder of rpc/wire.h involved).
std::string RawFrameBytes(std::uint8_t type, std::uint32_t call_id, const std::string& body = {});

// Big-endian integers as the wire carries them, for frames written by hand:
// appended to `out`, or read from `s` at byte `at`.
void Put16(std::string& out, std::uint16_t v);
void Put32(std::string& out, std::uint32_t v);
std::uint16_t Load16(const std::string& s, std::size_t at);
std::uint32_t Load32(const std::string& s, std::size_t at);

// A blocking TCP socket connected to 127.0.0.1:`port`, bound first to
// `source` (any 127.0.0.0/8 address, the kernel picking the port) if given;
// -1 if it could not.
int ConnectLoopback(std::uint16_t port, const char* source = nullptr);

// A blocking socket to a server on loopback (tcp://127.0.0.1:PORT or a unix:
// endpoint, abstract ones too), every read bounded in time. Used by tests
// that send what a real Client never would (bad_input_test, kerberos_itest,
// kerberos_sasl_itest).
class RawConnection {
 public:
  explicit RawConnection(const Endpoint& endpoint);
  explicit RawConnection(std::uint16_t tcp_port);
  // A socket connected (or accepted) elsewhere, closed with this.
  struct AdoptFd {
    int fd;
  };
  explicit RawConnection(AdoptFd adopted) : fd_(adopted.fd) {}
  ~RawConnection();
  RawConnection(const RawConnection&) = delete;
  RawConnection& operator=(const RawConnection&) = delete;

  bool connected() const { return fd_ >= 0; }
  int fd() const { return fd_; }
  bool Send(const std::string& bytes);
  // The preamble and a HELLO frame for `mechanism` with its first message.
  bool SendHello(const std::string& mechanism, const std::string& message);
  // An AUTH_RESPONSE frame.
  bool SendResponse(const std::string& message);
  // The next whole frame, or nullopt (end of stream, error, timeout or a
  // length field below the header's or above wire::kDefaultMaxFrameSize).
  std::optional<RawFrame> ReadFrame(std::chrono::milliseconds timeout = std::chrono::seconds(5));
  // Reads exactly n bytes into `out`; false on end of stream, error or timeout.
  bool ReadExact(std::string& out, std::size_t n, std::chrono::milliseconds timeout);
  // True if the server ends the stream (FIN or reset) within `timeout`;
  // whatever arrives before is dropped.
  bool SeesEndOfStream(std::chrono::milliseconds timeout = std::chrono::seconds(3));
  // Half-closes: the server reads end of stream, this side can still read.
  void ShutdownWrite();
  void Close();

 private:
  int fd_ = -1;
};

// The two socket transports, for tests parameterised over both.
enum class SocketKind { kTcp, kUnix };
void PrintTo(SocketKind kind, std::ostream* os);
// "Tcp" or "Unix", for INSTANTIATE_TEST_SUITE_P's name generator.
std::string SocketKindName(const ::testing::TestParamInfo<SocketKind>& info);
// A listening endpoint nobody else uses: tcp port 0 on 127.0.0.1, or a
// fresh abstract unix name "@<prefix>-<pid>-<n>".
Endpoint FreshEndpoint(SocketKind kind, const std::string& prefix);

}  // namespace authrpc::testing
