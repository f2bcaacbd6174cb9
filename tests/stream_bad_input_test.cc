// Integration tests: a running Server fed misbehaving streaming-call frames
// (docs/PROTOCOL.md section 6: STREAM_REQUEST, DATA, WINDOW_UPDATE,
// END_STREAM, CANCEL on a stream) and shared-memory frames (section 7:
// SHM_HELLO, SHM_ACCEPT, SHM_RING and its SCM_RIGHTS descriptors) by a
// hand-written, authenticated client on a raw loopback socket. Each case
// checks what the server answers — an ERROR frame with the right code and a
// close, a typed RESPONSE, or nothing at all while the connection goes on —
// that no descriptor stays behind in this process (the server runs in it),
// and that a well-behaved Client on another connection is still served.
// Every read is bounded in time. tests/bad_input_test.cc covers the
// preamble, negotiation and unary calls.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <asio/co_spawn.hpp>
#include <asio/redirect_error.hpp>
#include <asio/steady_timer.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/use_future.hpp>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "authrpc/auth/mechanisms/simple/simple.h"
#include "authrpc/base/log.h"
#include "authrpc/base/status.h"
#include "authrpc/client/client.h"
#include "authrpc/rpc/endpoint.h"
#include "authrpc/rpc/shm_ring.h"
#include "authrpc/rpc/unique_fd.h"
#include "authrpc/rpc/wire.h"
#include "authrpc/server/server.h"
#include "authrpc/server/server_stream.h"
#include "tests/testing/test_server.h"
#include "tests/testing/test_support.h"

namespace authrpc {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using testing::Describe;
using testing::Eventually;
using testing::Load16;
using testing::Load32;
using testing::Put16;
using testing::Put32;
using testing::RawFrameBytes;
using testing::RawPreamble;
using testing::StopAndDestroy;

// Frame types, as on the wire.
constexpr std::uint8_t kHello = 0x01;
constexpr std::uint8_t kAuthSuccess = 0x05;
constexpr std::uint8_t kError = 0x06;
constexpr std::uint8_t kPing = 0x08;
constexpr std::uint8_t kPong = 0x09;
constexpr std::uint8_t kRequest = 0x10;
constexpr std::uint8_t kResponse = 0x11;
constexpr std::uint8_t kCancel = 0x12;
constexpr std::uint8_t kStreamRequest = 0x20;
constexpr std::uint8_t kData = 0x21;
constexpr std::uint8_t kWindowUpdate = 0x22;
constexpr std::uint8_t kEndStream = 0x23;
constexpr std::uint8_t kShmHello = 0x30;
constexpr std::uint8_t kShmAccept = 0x31;
constexpr std::uint8_t kShmRing = 0x32;

constexpr std::uint32_t kFeatureStreams = 0x2;
constexpr std::uint32_t kFeatureShm = 0x4;

// The server's receive window per stream (ServerOptions::stream_window).
constexpr std::uint32_t kServerWindow = 64 * 1024;

// --- bytes -----------------------------------------------------------------------

void PutStr(std::string& out, std::string_view s) {
  Put16(out, static_cast<std::uint16_t>(s.size()));
  out.append(s);
}
std::string U32(std::uint32_t v) {
  std::string out;
  Put32(out, v);
  return out;
}


std::string StreamRequestBody(std::string_view service, std::string_view method,
                              std::uint32_t window, std::string_view payload = {},
                              std::uint32_t timeout_ms = 0) {
  std::string body;
  PutStr(body, service);
  PutStr(body, method);
  Put32(body, timeout_ms);
  Put32(body, window);
  body.append(payload);
  return body;
}

std::string RequestBody(std::string_view service, std::string_view method,
                        std::string_view payload, std::uint32_t timeout_ms = 0) {
  std::string body;
  PutStr(body, service);
  PutStr(body, method);
  Put32(body, timeout_ms);
  body.append(payload);
  return body;
}

// SHM_RING's body: u32 slot_size, u32 slot_count, u32 region high, u32 region low.
std::string RingBody(std::uint32_t slot_size, std::uint32_t slot_count, std::uint64_t region) {
  return U32(slot_size) + U32(slot_count) + U32(static_cast<std::uint32_t>(region >> 32)) +
         U32(static_cast<std::uint32_t>(region));
}

struct ReceivedFrame {
  std::uint8_t type = 0;
  std::uint32_t call_id = 0;
  std::string body;
};

struct Reply {  // a RESPONSE body
  std::uint16_t status = 0;
  std::string message;
  std::string payload;
};
std::optional<Reply> ParseResponse(const std::string& body) {
  if (body.size() < 4) return std::nullopt;
  const std::uint16_t n = Load16(body, 2);
  if (body.size() < 4u + n) return std::nullopt;
  return Reply{Load16(body, 0), body.substr(4, n), body.substr(4 + n)};
}

// Descriptors open in this process (server and test alike).
std::size_t OpenFds() {
  std::size_t n = 0;
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator("/proc/self/fd", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    ++n;
  }
  return n;
}

// --- a raw client ------------------------------------------------------------------

// A blocking socket to the server; sends bytes, optionally with descriptors
// (SCM_RIGHTS on the first byte), and reads frames with a bound on every
// wait. Descriptors the server sends us are closed at once.
class RawPeer {
 public:
  explicit RawPeer(const Endpoint& endpoint) {
    if (endpoint.scheme == Endpoint::Scheme::kUnix) {
      fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
      sockaddr_un addr{};
      addr.sun_family = AF_UNIX;
      socklen_t len = 0;
      if (endpoint.path.starts_with("@")) {
        const std::string name = endpoint.path.substr(1);
        std::memcpy(addr.sun_path + 1, name.data(), std::min(name.size(), sizeof addr.sun_path - 1));
        len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
      } else {
        std::memcpy(addr.sun_path, endpoint.path.data(),
                    std::min(endpoint.path.size(), sizeof addr.sun_path - 1));
        len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + endpoint.path.size() + 1);
      }
      if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), len) != 0) Close();
    } else {
      fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      sockaddr_in addr{};
      addr.sin_family = AF_INET;
      addr.sin_port = htons(endpoint.port);
      ::inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
      if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) Close();
    }
  }
  ~RawPeer() { Close(); }
  RawPeer(const RawPeer&) = delete;
  RawPeer& operator=(const RawPeer&) = delete;

  bool connected() const { return fd_ >= 0; }
  // Ends both directions (a Send() blocked in another thread returns).
  void Shutdown() {
    if (fd_ >= 0) ::shutdown(fd_, SHUT_RDWR);
  }
  void Close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

  bool Send(const std::string& bytes) { return SendWithFds(bytes, {}); }

  // `fds` ride on the first byte (one sendmsg for the whole of `bytes`
  // unless the socket's buffer is full).
  bool SendWithFds(const std::string& bytes, const std::vector<int>& fds) {
    std::size_t sent = 0;
    while (sent < bytes.size()) {
      const ssize_t n = testing::SendWithRights(fd_, bytes.data() + sent, bytes.size() - sent,
                                                sent == 0 ? fds : std::vector<int>{}, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      sent += static_cast<std::size_t>(n);
    }
    return true;
  }

  // Reads exactly n bytes; false on end of stream, error or timeout.
  bool ReadExact(std::string& out, std::size_t n, Clock::time_point until) {
    out.clear();
    while (out.size() < n) {
      if (!testing::WaitReadable(fd_, until)) return false;
      const ssize_t got = Receive(out, n - out.size());
      if (got < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (got <= 0) return false;
    }
    return true;
  }

  std::optional<ReceivedFrame> ReadFrame(Clock::duration timeout = 5s) {
    const auto until = Clock::now() + timeout;
    std::string header;
    if (!ReadExact(header, 12, until)) return std::nullopt;
    const std::uint32_t length = Load32(header, 0);
    if (length < 8 || length > (1u << 24)) return std::nullopt;
    ReceivedFrame f;
    f.type = static_cast<std::uint8_t>(header[4]);
    f.call_id = Load32(header, 8);
    if (!ReadExact(f.body, length - 8, until)) return std::nullopt;
    return f;
  }

  // True if the server ends the stream (FIN or reset) within `timeout`;
  // whatever arrives before is dropped.
  bool SeesEndOfStream(Clock::duration timeout = 5s) {
    const auto until = Clock::now() + timeout;
    for (;;) {
      if (!testing::WaitReadable(fd_, until)) return false;
      std::string sink;
      const ssize_t got = Receive(sink, 4096);
      if (got == 0) return true;
      if (got < 0 && errno != EINTR && errno != EAGAIN) return true;
    }
  }

 private:
  // recvmsg of up to n bytes appended to `out`; any descriptors closed.
  ssize_t Receive(std::string& out, std::size_t n) {
    char buf[4096];
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 16)];
    iovec iov{buf, std::min(sizeof buf, n)};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    const ssize_t got = ::recvmsg(fd_, &msg, MSG_CMSG_CLOEXEC);
    if (got > 0) out.append(buf, static_cast<std::size_t>(got));
    if (got >= 0 && msg.msg_controllen > 0) {
      for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
        const std::size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (std::size_t i = 0; i < count; ++i) {
          int fd;
          std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
          ::close(fd);
        }
      }
    }
    return got;
  }

  int fd_ = -1;
};

// --- descriptors to send -------------------------------------------------------------

// Descriptors for an SHM_RING, owned by the test until sent (the server gets
// copies; ours are closed when this goes away).
struct FdSet {
  std::vector<UniqueFd> owned;
  std::optional<ShmRing> ring;  // the creator's side of a real ring, if any
  std::vector<int> list() const {
    std::vector<int> out;
    for (const auto& fd : owned) out.push_back(fd.get());
    return out;
  }
};

UniqueFd DevNull() { return UniqueFd(::open("/dev/null", O_RDWR | O_CLOEXEC)); }

UniqueFd PipeEnd() {
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) return UniqueFd();
  ::close(p[1]);
  return UniqueFd(p[0]);
}

// The write end of a new pipe, to send, and its read end, kept to watch:
// once every copy of the write end is closed — ours, and any the server or
// the kernel holds — the read end reports EOF.
struct WatchedPipe {
  UniqueFd write_end;
  UniqueFd read_end;
};
WatchedPipe Watched() {
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) return {};
  return {UniqueFd(p[1]), UniqueFd(p[0])};
}
bool AtEof(const UniqueFd& read_end) {
  pollfd pfd{read_end.get(), POLLIN, 0};
  if (::poll(&pfd, 1, 0) != 1) return false;
  char c;
  return ::read(read_end.get(), &c, 1) == 0;
}

UniqueFd EventFdLike() {  // an eventfd, from a real ring's descriptors
  auto ring = ShmRing::create({.slot_size = 4096, .slot_count = 2});
  if (!ring.ok()) return UniqueFd();
  auto fds = ring->take_peer_fds();
  return fds.ok() ? std::move(fds->data_ready) : UniqueFd();
}

// A real ring of `slot_size` × `slot_count`: memfd, data_ready, space_ready,
// liveness, as the reference writer sends them.
FdSet RealRing(std::uint32_t slot_size = 64 * 1024, std::uint32_t slot_count = 4) {
  FdSet set;
  auto ring = ShmRing::create({.slot_size = slot_size, .slot_count = slot_count});
  EXPECT_TRUE(ring.ok()) << Describe(ring);
  if (!ring.ok()) return set;
  auto fds = ring->take_peer_fds();
  EXPECT_TRUE(fds.ok()) << Describe(fds);
  if (!fds.ok()) return set;
  set.owned.push_back(std::move(fds->memfd));
  set.owned.push_back(std::move(fds->data_ready));
  set.owned.push_back(std::move(fds->space_ready));
  set.owned.push_back(std::move(fds->liveness));
  set.ring.emplace(std::move(*ring));
  return set;
}

// The header size the ring layout gives `slot_count` slots (docs/SHM.md).
constexpr std::uint64_t HeaderSizeFor(std::uint32_t slot_count) {
  const std::uint64_t raw = 320 + 8ull * slot_count;
  return (raw + 4095) / 4096 * 4096;
}

// A region written by hand: a memfd (or, `memfd` false, an unlinked regular
// file) of `file_size` bytes whose header claims the given geometry, sealed
// against resizing when `seal`.
struct CraftedRegion {
  std::uint32_t slot_size = 64 * 1024;
  std::uint32_t slot_count = 4;
  std::optional<std::uint64_t> region_size = std::nullopt;  // default: what the geometry implies
  std::optional<std::uint64_t> file_size = std::nullopt;    // default: region_size
  bool seal = true;
  bool memfd = true;
};

UniqueFd Craft(const CraftedRegion& c) {
  const std::uint64_t implied = HeaderSizeFor(c.slot_count) + std::uint64_t{c.slot_size} * c.slot_count;
  const std::uint64_t region = c.region_size.value_or(implied);
  const std::uint64_t size = c.file_size.value_or(region);
  int fd = -1;
  if (c.memfd) {
    fd = ::memfd_create("stream-bad-input", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  } else {
    std::string path = (std::filesystem::temp_directory_path() / "authrpc-sbad-XXXXXX").string();
    fd = ::mkostemp(path.data(), O_CLOEXEC);
    if (fd >= 0) ::unlink(path.c_str());
  }
  if (fd < 0) return UniqueFd();
  UniqueFd owned(fd);
  if (::ftruncate(fd, static_cast<off_t>(size)) != 0) return UniqueFd();
  unsigned char header[64] = {};
  const std::uint64_t magic = 0x314d485343505241ull;
  const std::uint32_t version = 1;
  const auto header_size = static_cast<std::uint32_t>(HeaderSizeFor(c.slot_count));
  std::memcpy(header + 0, &magic, 8);
  std::memcpy(header + 8, &version, 4);
  std::memcpy(header + 12, &header_size, 4);
  std::memcpy(header + 16, &c.slot_size, 4);
  std::memcpy(header + 20, &c.slot_count, 4);
  std::memcpy(header + 24, &region, 8);
  if (size >= sizeof header && ::pwrite(fd, header, sizeof header, 0) != sizeof header) {
    return UniqueFd();
  }
  if (c.seal && c.memfd) ::fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL);
  return owned;
}

// A ring whose memfd is replaced by `region` (the eventfds and liveness end
// stay real).
FdSet RingWithRegion(UniqueFd region) {
  FdSet set = RealRing();
  if (set.owned.size() == 4) set.owned[0] = std::move(region);
  return set;
}

// --- the server ----------------------------------------------------------------------

using Kind = testing::SocketKind;
Endpoint StreamTestEndpoint(Kind kind) { return testing::FreshEndpoint(kind, "authrpc-stream-bad-input"); }

asio::awaitable<void> Pause(std::chrono::milliseconds d) {
  asio::steady_timer timer(co_await asio::this_coro::executor, d);
  std::error_code ec;
  co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
}

// Service "t":
//   stall (stream): never reads or writes; ends when cancelled (the
//     connection's end, CANCEL) or after 20 s. Its window is never returned.
//   put (stream): reads every message; returns "<messages> <bytes>".
//   get (stream): request "<n> <size>": sends n messages of size bytes; "done".
//   block (blocking unary): returns "released" once the test releases it
//     (or it is cancelled, or 10 s pass).
//   hold (async unary), hold_blocking (blocking unary), hold_stream (stream):
//     ignore cancellation and return "held <request>" once `hold` is set (or
//     10 s pass), counting themselves in `holding` when they start and in
//     `held` just before they return, so a cancelled call is surely still
//     running until the test lets it go.
Service TestService(std::shared_ptr<std::atomic<bool>> release,
                    std::shared_ptr<std::atomic<bool>> hold,
                    std::shared_ptr<std::atomic<int>> holding,
                    std::shared_ptr<std::atomic<int>> held) {
  Service t("t");
  t.add_stream("stall", [](CallContext& ctx, ServerStream&) -> asio::awaitable<Result<std::string>> {
    const auto until = Clock::now() + 20s;
    while (!ctx.cancelled() && Clock::now() < until) co_await Pause(5ms);
    co_return std::string("stalled");
  });
  t.add_stream("put", [](CallContext&, ServerStream& s) -> asio::awaitable<Result<std::string>> {
    std::uint64_t messages = 0, bytes = 0;
    for (;;) {
      auto m = co_await s.read();
      if (!m.ok()) co_return m.status();
      if (!*m) break;
      ++messages;
      bytes += (*m)->size();
    }
    co_return std::to_string(messages) + " " + std::to_string(bytes);
  });
  t.add_stream("get", [](CallContext&, ServerStream& s) -> asio::awaitable<Result<std::string>> {
    unsigned n = 0, size = 0;
    if (std::sscanf(std::string(s.request()).c_str(), "%u %u", &n, &size) != 2) {
      co_return Status(Errc::kInvalidArgument, "want '<n> <size>'");
    }
    const std::string message(size, 'g');
    for (unsigned i = 0; i < n; ++i) {
      if (Status st = co_await s.write(message); !st.ok()) co_return st;
    }
    co_return std::string("done");
  });
  t.add_blocking("block", [release](CallContext& ctx, std::string_view) -> Result<std::string> {
    const auto until = Clock::now() + 10s;
    while (!release->load() && !ctx.cancelled() && Clock::now() < until) {
      std::this_thread::sleep_for(2ms);
    }
    return std::string("released");
  });
  t.add_async("hold", [hold, holding, held](CallContext&, std::string request)
                          -> asio::awaitable<Result<std::string>> {
    ++*holding;
    const auto until = Clock::now() + 10s;
    while (!hold->load() && Clock::now() < until) co_await Pause(2ms);
    ++*held;  // the connection's finish_call runs right after, on this thread
    co_return "held " + request;
  });
  t.add_blocking("hold_blocking", [hold, holding, held](CallContext&, std::string_view request)
                                      -> Result<std::string> {
    ++*holding;
    const auto until = Clock::now() + 10s;
    while (!hold->load() && Clock::now() < until) std::this_thread::sleep_for(2ms);
    ++*held;
    return "held " + std::string(request);
  });
  t.add_stream("hold_stream", [hold, holding, held](CallContext&, ServerStream& s)
                                  -> asio::awaitable<Result<std::string>> {
    ++*holding;
    const auto until = Clock::now() + 10s;
    while (!hold->load() && Clock::now() < until) co_await Pause(2ms);
    ++*held;
    co_return "held " + std::string(s.request());
  });
  return t;
}

// A frame of a call, for tables.
struct CallFrame {
  const char* name;
  std::uint8_t type;
  std::string body;
};

std::vector<CallFrame> LateFrames() {
  return {
      {"small DATA", kData, "late"},
      {"large DATA (read into its own buffer)", kData, std::string(20000, 'L')},
      {"WINDOW_UPDATE", kWindowUpdate, U32(4096)},
      {"END_STREAM", kEndStream, ""},
      {"CANCEL", kCancel, ""},
  };
}

class StreamBadInputTest : public ::testing::TestWithParam<Kind> {
 protected:
  void SetUp() override { ASSERT_NO_FATAL_FAILURE(StartServer()); }
  void TearDown() override {
    release_->store(true);
    hold_->store(true);
    server_.reset();
  }

  void StartServer(const std::function<void(ServerOptions&)>& tweak = {}) {
    if (server_) ASSERT_TRUE(server_->stop());
    server_ = std::make_unique<testing::TestServer>();
    server_->endpoint(StreamTestEndpoint(GetParam())).io_threads(2);
    server_->service(TestService(release_, hold_, holding_, held_));
    server_->options([tweak](ServerOptions& o) {
      o.idle_timeout = 60s;
      o.stop_grace = 3s;
      o.stream_window = kServerWindow;
      o.shm.enabled = true;
      if (tweak) tweak(o);
    });
    const Status started = server_->start();
    ASSERT_TRUE(started.ok()) << started.to_string();
    endpoint_ = server_->endpoint();
  }

  bool unix_kind() const { return GetParam() == Kind::kUnix; }

  std::unique_ptr<RawPeer> Raw() {
    auto raw = std::make_unique<RawPeer>(endpoint_);
    EXPECT_TRUE(raw->connected()) << "cannot connect to " << endpoint_.to_string();
    return raw;
  }

  // Negotiates `simple` by hand; returns AUTH_SUCCESS's features.
  std::uint32_t Authenticate(RawPeer& raw, const std::string& extra = {}) {
    std::string hello;
    Put32(hello, 0);
    PutStr(hello, "simple");
    Put32(hello, 7);
    hello += "mallory";
    EXPECT_TRUE(raw.Send(RawPreamble() + RawFrameBytes(kHello, 0, hello) + extra));
    auto frame = raw.ReadFrame();
    EXPECT_TRUE(frame.has_value()) << "no answer to HELLO";
    if (!frame) return 0;
    EXPECT_EQ(frame->type, kAuthSuccess) << "frame type " << int(frame->type);
    if (frame->body.size() < 4) return 0;
    const std::uint32_t features = Load32(frame->body, 0);
    EXPECT_TRUE(features & kFeatureStreams) << "the server did not announce STREAMS";
    return features;
  }

  std::unique_ptr<RawPeer> Authenticated() {
    auto raw = Raw();
    Authenticate(*raw);
    return raw;
  }

  // STREAM_REQUEST for t.<method>, then the server's accepting WINDOW_UPDATE.
  void OpenStream(RawPeer& raw, std::uint32_t id, std::string_view method,
                  std::uint32_t window = 1 << 20, std::string_view payload = {}) {
    ASSERT_TRUE(raw.Send(RawFrameBytes(kStreamRequest, id, StreamRequestBody("t", method, window, payload))));
    auto accepted = raw.ReadFrame();
    ASSERT_TRUE(accepted.has_value()) << "no answer to STREAM_REQUEST";
    ASSERT_EQ(accepted->type, kWindowUpdate) << "frame type " << int(accepted->type) << ": "
                                             << accepted->body;
    ASSERT_EQ(accepted->call_id, id);
    ASSERT_EQ(accepted->body, U32(kServerWindow));
  }

  // SHM_HELLO, and the server's SHM_ACCEPT with `status`.
  void OfferShm(RawPeer& raw, std::uint32_t status = 0) {
    ASSERT_TRUE(raw.Send(RawFrameBytes(kShmHello, 0)));
    auto accept = raw.ReadFrame();
    ASSERT_TRUE(accept.has_value()) << "no answer to SHM_HELLO";
    ASSERT_EQ(accept->type, kShmAccept) << "frame type " << int(accept->type);
    EXPECT_EQ(accept->call_id, 0u);
    ASSERT_EQ(accept->body, U32(status) + U32(0));
  }

  // The next frames up to an ERROR: its code must be `code`, and the server
  // must then close. Frames before it (a RESPONSE, WINDOW_UPDATE, or the
  // PONG of a PING the error came with) are skipped.
  void ExpectErrorThenClose(RawPeer& raw, Errc code) {
    for (int skipped = 0; skipped < 16; ++skipped) {
      auto frame = raw.ReadFrame();
      ASSERT_TRUE(frame.has_value()) << "no ERROR frame before end of stream or timeout";
      if (frame->type != kError) {
        ASSERT_TRUE(frame->call_id != 0 || frame->type == kPong)
            << "connection frame " << int(frame->type) << " instead of ERROR";
        continue;
      }
      EXPECT_EQ(frame->call_id, 0u);
      ASSERT_GE(frame->body.size(), 4u);
      const std::uint16_t got = Load16(frame->body, 0);
      EXPECT_EQ(got, static_cast<std::uint16_t>(code))
          << "got " << errc_name(errc_from_wire(got)) << ": " << frame->body.substr(4);
      EXPECT_GT(frame->body.size(), 4u) << "ERROR without a message";
      EXPECT_TRUE(raw.SeesEndOfStream()) << "the server kept the connection open after ERROR";
      return;
    }
    FAIL() << "too many frames before the ERROR";
  }

  // PING → PONG on `raw`, within bounded time: the connection is alive and
  // in order. Frames for calls that arrive before the PONG are returned.
  std::vector<ReceivedFrame> ExpectAlive(RawPeer& raw) {
    static std::atomic<int> n{0};
    const std::string body = "alive-" + std::to_string(n++);
    std::vector<ReceivedFrame> before;
    EXPECT_TRUE(raw.Send(RawFrameBytes(kPing, 0, body)));
    for (int i = 0; i < 16; ++i) {
      auto frame = raw.ReadFrame();
      EXPECT_TRUE(frame.has_value()) << "the connection ended (or stalled) instead of answering PING";
      if (!frame) return before;
      if (frame->type == kPong && frame->body == body) return before;
      EXPECT_NE(frame->type, kError) << "ERROR " << Load16(frame->body, 0) << ": "
                                     << frame->body.substr(4);
      if (frame->type == kError) return before;
      before.push_back(std::move(*frame));
    }
    ADD_FAILURE() << "no PONG";
    return before;
  }

  // The next frame, which must be the RESPONSE of call `id`: its reply
  // (none, and a test failure, if it is not).
  std::optional<Reply> ReadResponse(RawPeer& raw, std::uint32_t id) {
    auto frame = raw.ReadFrame();
    EXPECT_TRUE(frame.has_value()) << "no RESPONSE for call " << id;
    if (!frame) return std::nullopt;
    EXPECT_EQ(frame->type, kResponse) << "frame type " << int(frame->type);
    EXPECT_EQ(frame->call_id, id);
    if (frame->type != kResponse || frame->call_id != id) return std::nullopt;
    auto reply = ParseResponse(frame->body);
    EXPECT_TRUE(reply.has_value()) << "a RESPONSE body that does not parse";
    return reply;
  }

  // The next frame is call `id`'s successful RESPONSE with `payload`.
  void ExpectSuccess(RawPeer& raw, std::uint32_t id, const std::string& payload) {
    auto reply = ReadResponse(raw, id);
    ASSERT_TRUE(reply.has_value());
    EXPECT_EQ(reply->status, 0) << reply->message;
    EXPECT_EQ(reply->payload, payload);
  }

  // A unary call on `raw` is still answered.
  void ExpectServesCalls(RawPeer& raw, std::uint32_t id) {
    ASSERT_TRUE(raw.Send(RawFrameBytes(kRequest, id, RequestBody("sys", "echo", "still here"))));
    ExpectSuccess(raw, id, "still here");
  }

  // Sends each of LateFrames() for call `id` (CANCEL too, unless
  // `skip_cancel`): the server answers none and stays alive.
  void ExpectLateFramesDropped(RawPeer& raw, std::uint32_t id, bool skip_cancel = false) {
    for (const auto& f : LateFrames()) {
      if (skip_cancel && f.type == kCancel) continue;
      SCOPED_TRACE(f.name);
      ASSERT_TRUE(raw.Send(RawFrameBytes(f.type, id, f.body)));
      EXPECT_TRUE(ExpectAlive(raw).empty()) << "the server answered a frame for call " << id;
    }
  }

  // A normal Client connects and is served: a unary call and a put stream
  // (through shared memory on unix://).
  void ExpectServerStillServes() {
    ClientOptions o;
    o.endpoint = endpoint_;
    o.mechanisms = {std::make_shared<SimpleClientMechanism>("alice")};
    o.connect_timeout = 5s;
    o.default_call_timeout = 10s;
    o.shm.enabled = unix_kind();
    auto client = Client::connect(o);
    ASSERT_TRUE(client.ok()) << "a good client could not connect: " << Describe(client);
    auto reply = (*client)->call("sys", "echo", "still serving");
    ASSERT_TRUE(reply.ok()) << Describe(reply);
    EXPECT_EQ(*reply, "still serving");
    Client& c = **client;
    auto done = asio::co_spawn(
        c.executor(),
        [&c]() -> asio::awaitable<Result<std::string>> {
          auto stream = co_await c.async_open_stream("t", "put", "");
          if (!stream.ok()) co_return stream.status();
          if (Status s = co_await (*stream)->write(std::string_view("hello")); !s.ok()) co_return s;
          if (Status s = co_await (*stream)->write(std::string_view("world!")); !s.ok()) co_return s;
          co_return co_await (*stream)->finish();
        },
        asio::use_future);
    ASSERT_EQ(done.wait_for(15s), std::future_status::ready) << "a good stream hung";
    auto put = done.get();
    ASSERT_TRUE(put.ok()) << Describe(put);
    EXPECT_EQ(*put, "2 11");
  }

  // Waits until this process's descriptors are back to `baseline`.
  void ExpectFdsBackTo(std::size_t baseline) {
    EXPECT_TRUE(Eventually([&] { return OpenFds() <= baseline; }, 5s))
        << OpenFds() << " descriptors open, " << baseline << " before: the server kept some";
  }

  std::shared_ptr<std::atomic<bool>> release_ = std::make_shared<std::atomic<bool>>(false);
  std::shared_ptr<std::atomic<bool>> hold_ = std::make_shared<std::atomic<bool>>(false);
  std::shared_ptr<std::atomic<int>> holding_ = std::make_shared<std::atomic<int>>(0);
  std::shared_ptr<std::atomic<int>> held_ = std::make_shared<std::atomic<int>>(0);
  std::unique_ptr<testing::TestServer> server_;
  Endpoint endpoint_;
};

INSTANTIATE_TEST_SUITE_P(Transports, StreamBadInputTest,
                         ::testing::Values(Kind::kTcp, Kind::kUnix), testing::SocketKindName);

// --- frames for calls that are not (or no longer) open ------------------------------

// PROTOCOL.md 6: the server drops DATA, WINDOW_UPDATE and END_STREAM for a
// call id it has no open stream for (it cannot tell a finished call from one
// never opened: ids are the client's); the connection goes on.
TEST_P(StreamBadInputTest, FramesForACallThatWasNeverOpenedAreDropped) {
  auto raw = Authenticated();
  ASSERT_NO_FATAL_FAILURE(ExpectLateFramesDropped(*raw, 4242));
  ExpectServesCalls(*raw, 1);
  ExpectServerStillServes();
}

TEST_P(StreamBadInputTest, FramesForAFinishedStreamAreDropped) {
  auto raw = Authenticated();
  ASSERT_NO_FATAL_FAILURE(OpenStream(*raw, 5, "put"));
  ASSERT_TRUE(raw->Send(RawFrameBytes(kData, 5, "abc") + RawFrameBytes(kEndStream, 5)));
  ASSERT_NO_FATAL_FAILURE(ExpectSuccess(*raw, 5, "1 3"));
  ASSERT_NO_FATAL_FAILURE(ExpectLateFramesDropped(*raw, 5));
  ExpectServesCalls(*raw, 6);
  ExpectServerStillServes();
}

// PROTOCOL.md 10: "a call frame with id 0" is a PROTOCOL_ERROR, not
// silently dropped.
TEST_P(StreamBadInputTest, CallFramesWithCallIdZeroAreProtocolErrors) {
  std::vector<CallFrame> rows = {
      {"DATA", kData, "zero"},
      {"large DATA", kData, std::string(20000, 'z')},
      {"WINDOW_UPDATE", kWindowUpdate, U32(1)},
      {"END_STREAM", kEndStream, ""},
      {"CANCEL", kCancel, ""},
      {"SHM_RING", kShmRing, RingBody(4096, 2, 3 * 4096)},
      {"STREAM_REQUEST", kStreamRequest, StreamRequestBody("t", "put", 1024)},
  };
  const auto before = server_->stats().protocol_errors;
  for (const auto& f : rows) {
    SCOPED_TRACE(f.name);
    auto raw = Authenticated();
    ASSERT_TRUE(raw->Send(RawFrameBytes(f.type, 0, f.body)));
    ExpectErrorThenClose(*raw, Errc::kProtocolError);
  }
  EXPECT_TRUE(Eventually([&] { return server_->stats().protocol_errors >= before + rows.size(); }));
  ExpectServerStillServes();
}

// --- flow control ---------------------------------------------------------------------

// The server's window W = 64 KiB, never returned by `stall`: a message of n
// bytes is allowed while what is outstanding is at most W - min(n, W/2).
TEST_P(StreamBadInputTest, DataBeyondTheWindowIsAProtocolError) {
  constexpr std::uint32_t W = kServerWindow;
  struct Row {
    const char* name;
    std::vector<std::uint32_t> sizes;
    bool overrun;
  };
  const std::vector<Row> rows = {
      {"two halves fill the window exactly", {W / 2, W / 2}, false},
      {"one byte after the window is full", {W / 2, W / 2, 1}, true},
      {"a message larger than the window, alone", {2 * W}, false},
      {"anything after a message larger than the window", {2 * W, 1}, true},
      {"a full window after one byte (W/2 rule)", {1, W}, false},
      {"then one more byte", {1, W, 1}, true},
      {"many small messages up to the window", std::vector<std::uint32_t>(64, W / 64), false},
      {"many small messages, one too many", std::vector<std::uint32_t>(65, W / 64), true},
  };
  for (const auto& row : rows) {
    SCOPED_TRACE(row.name);
    auto raw = Authenticated();
    ASSERT_NO_FATAL_FAILURE(OpenStream(*raw, 3, "stall"));
    std::string bytes;
    for (std::uint32_t n : row.sizes) bytes += RawFrameBytes(kData, 3, std::string(n, 'w'));
    ASSERT_TRUE(raw->Send(bytes));
    if (row.overrun) {
      ExpectErrorThenClose(*raw, Errc::kProtocolError);
    } else {
      EXPECT_TRUE(ExpectAlive(*raw).empty());
      ExpectServesCalls(*raw, 4);
    }
  }
  ExpectServerStillServes();
}

// WINDOW_UPDATE's increment is > 0, and credit never exceeds the window the
// client announced (no wrap: credit is 64-bit, increments 32-bit).
TEST_P(StreamBadInputTest, BadWindowUpdatesAreProtocolErrors) {
  struct Row {
    const char* name;
    std::uint32_t client_window;
    std::string body;
  };
  const std::vector<Row> rows = {
      {"increment 0", 1 << 20, U32(0)},
      {"increment 1 with full credit", 1 << 20, U32(1)},
      {"increment 2^32-1", 1 << 20, U32(0xFFFFFFFFu)},
      {"increment 2^32-1 on a window of 2^32-1", 0xFFFFFFFFu, U32(0xFFFFFFFFu)},
      {"increment 1 on a window of 2^32-1", 0xFFFFFFFFu, U32(1)},
      {"truncated body", 1 << 20, std::string("\x00\x01", 2)},
      {"empty body", 1 << 20, ""},
      {"body too long", 1 << 20, U32(1) + U32(1)},
  };
  for (const auto& row : rows) {
    SCOPED_TRACE(row.name);
    auto raw = Authenticated();
    ASSERT_NO_FATAL_FAILURE(OpenStream(*raw, 9, "stall", row.client_window));
    ASSERT_TRUE(raw->Send(RawFrameBytes(kWindowUpdate, 9, row.body)));
    ExpectErrorThenClose(*raw, Errc::kProtocolError);
  }
  ExpectServerStillServes();
}

// The server sends `get` messages of 512 bytes into a client window of
// 1024: two, then it waits for credit. Returning what was consumed lets it
// finish; returning one byte more than that is an overrun of the window.
TEST_P(StreamBadInputTest, CreditIsReturnedUpToTheWindowAndNotBeyond) {
  for (const bool overrun : {false, true}) {
    SCOPED_TRACE(overrun ? "1025 returned" : "1024 returned");
    auto raw = Authenticated();
    ASSERT_NO_FATAL_FAILURE(OpenStream(*raw, 21, "get", 1024, "4 512"));
    for (int i = 0; i < 2; ++i) {
      auto data = raw->ReadFrame();
      ASSERT_TRUE(data.has_value());
      ASSERT_EQ(data->type, kData);
      ASSERT_EQ(data->body.size(), 512u);
    }
    EXPECT_FALSE(raw->ReadFrame(100ms).has_value()) << "the server sent beyond its credit";
    ASSERT_TRUE(raw->Send(RawFrameBytes(kWindowUpdate, 21, U32(overrun ? 1025 : 1024))));
    if (overrun) {
      ExpectErrorThenClose(*raw, Errc::kProtocolError);
      continue;
    }
    for (int i = 0; i < 2; ++i) {
      auto data = raw->ReadFrame();
      ASSERT_TRUE(data.has_value());
      ASSERT_EQ(data->type, kData);
    }
    ASSERT_NO_FATAL_FAILURE(ExpectSuccess(*raw, 21, "done"));
  }
  ExpectServerStillServes();
}

// --- memory across connections --------------------------------------------------------

// Clients that send calls and never read the answers: each connection stops
// reading at max_pending_output, and all of them together at about
// max_buffered_bytes (each keeps at most a mebibyte and a batch past it),
// not at connections × max_pending_output. A client that reads is served.
TEST_P(StreamBadInputTest, NonReadersTogetherHoldAboutTheServersBudget) {
  constexpr std::size_t kMiB = 1 << 20;
  ASSERT_NO_FATAL_FAILURE(StartServer([](ServerOptions& o) {
    o.max_frame_size = kMiB + 4096;
    o.max_pending_output = 8 * kMiB;
    o.max_buffered_bytes = 8 * kMiB;
  }));
  constexpr int kConnections = 8, kCalls = 32;
  std::string calls;
  for (std::uint32_t id = 1; id <= kCalls; ++id) {
    calls += RawFrameBytes(kRequest, id, RequestBody("sys", "echo", std::string(kMiB, 'e')));
  }
  std::vector<std::unique_ptr<RawPeer>> peers;
  std::vector<std::thread> senders;
  for (int i = 0; i < kConnections; ++i) {
    peers.push_back(Authenticated());
    senders.emplace_back([&calls, peer = peers.back().get()] { peer->Send(calls); });
  }
  // Until what the server holds stops growing.
  std::uint64_t held = 0;
  for (auto until = Clock::now() + 10s; Clock::now() < until;) {
    std::this_thread::sleep_for(500ms);
    const std::uint64_t now = server_->stats().buffered_bytes;
    if (now == held && now > 0) break;
    held = now;
  }
  const ServerStats stats = server_->stats();
  EXPECT_GT(stats.reads_paused_for_memory, 0u);
  EXPECT_GE(stats.buffered_bytes, 8 * kMiB) << "the non-readers did not reach the budget";
  EXPECT_LE(stats.buffered_bytes, (8 + 3 * kConnections) * kMiB)
      << "one limit per connection (" << kConnections * 8 << " MiB), not the server's";
  ExpectServerStillServes();
  for (auto& peer : peers) peer->Shutdown();
  for (auto& sender : senders) sender.join();
  peers.clear();
  EXPECT_TRUE(Eventually([&] { return server_->stats().buffered_bytes == 0; }, 5s))
      << server_->stats().buffered_bytes << " bytes still counted after every peer left";
}

// --- opening streams -----------------------------------------------------------------

// One connection may open max_streams_per_connection streams at once; one
// more is answered RESOURCE_EXHAUSTED and the connection goes on serving.
// Once one has ended, another opens.
TEST_P(StreamBadInputTest, StreamsBeyondTheConnectionsLimitAreResourceExhausted) {
  ASSERT_NO_FATAL_FAILURE(StartServer([](ServerOptions& o) { o.max_streams_per_connection = 4; }));
  auto raw = Authenticated();
  for (std::uint32_t id = 1; id <= 4; ++id) ASSERT_NO_FATAL_FAILURE(OpenStream(*raw, id, "stall"));
  ASSERT_TRUE(raw->Send(RawFrameBytes(kStreamRequest, 5, StreamRequestBody("t", "stall", 4096))));
  auto reply = ReadResponse(*raw, 5);
  ASSERT_TRUE(reply.has_value());
  EXPECT_EQ(reply->status, static_cast<std::uint16_t>(Errc::kResourceExhausted)) << reply->message;
  EXPECT_NE(reply->message.find("max_streams_per_connection"), std::string::npos) << reply->message;
  ExpectServesCalls(*raw, 6);
  // CANCEL ends one: a new stream opens in its place.
  ASSERT_TRUE(raw->Send(RawFrameBytes(kCancel, 1, "")));
  const auto until = Clock::now() + 5s;
  bool opened = false;
  for (std::uint32_t id = 7; !opened && Clock::now() < until; ++id) {
    ASSERT_TRUE(raw->Send(RawFrameBytes(kStreamRequest, id, StreamRequestBody("t", "stall", 4096))));
    for (auto frame = raw->ReadFrame(); frame; frame = raw->ReadFrame()) {
      if (frame->call_id != id) continue;  // the cancelled call's end
      opened = frame->type == kWindowUpdate;
      break;
    }
  }
  EXPECT_TRUE(opened) << "no stream opened after one ended";
  ExpectServerStillServes();
}

// Streams whose handlers do not read hold at most their windows each; over
// max_stream_bytes_per_connection in all, the connection reads nothing
// more (a PING behind the data goes unanswered) until they are read or end.
TEST_P(StreamBadInputTest, UnreadStreamBytesAcrossStreamsStopTheConnectionReading) {
  constexpr std::size_t kLimit = 4 * kServerWindow;
  ASSERT_NO_FATAL_FAILURE(StartServer([](ServerOptions& o) {
    o.max_stream_bytes_per_connection = kLimit;
  }));
  auto raw = Authenticated();
  constexpr std::uint32_t kStreams = 16;
  for (std::uint32_t id = 1; id <= kStreams; ++id) ASSERT_NO_FATAL_FAILURE(OpenStream(*raw, id, "stall"));
  // A full window to each (two halves), 16 windows in all, then a PING.
  std::string bytes;
  for (std::uint32_t id = 1; id <= kStreams; ++id) {
    bytes += RawFrameBytes(kData, id, std::string(kServerWindow / 2, 'w'));
    bytes += RawFrameBytes(kData, id, std::string(kServerWindow / 2, 'w'));
  }
  bytes += RawFrameBytes(kPing, 0, "behind the data");
  std::thread sender([&] { raw->Send(bytes); });  // blocks once the server stops reading
  const auto frame = raw->ReadFrame(1s);
  EXPECT_FALSE(frame.has_value()) << "the server kept reading: frame type " << int(frame->type);
  raw->Shutdown();
  sender.join();
  ExpectServerStillServes();
}

TEST_P(StreamBadInputTest, MalformedStreamRequestsAreProtocolErrors) {
  std::string no_window;
  PutStr(no_window, "t");
  PutStr(no_window, "put");
  Put32(no_window, 0);  // timeout, then nothing
  struct Row {
    const char* name;
    std::uint32_t id;
    std::string body;
  };
  const std::vector<Row> rows = {
      {"window 0", 1, StreamRequestBody("t", "put", 0)},
      {"empty body", 1, ""},
      {"service name cut short", 1, std::string("\x00\x09t", 3)},
      {"no window field", 1, no_window},
      {"window field cut short", 1, no_window + std::string("\x00\x01", 2)},
      {"call id 0", 0, StreamRequestBody("t", "put", 1024)},
  };
  for (const auto& row : rows) {
    SCOPED_TRACE(row.name);
    auto raw = Authenticated();
    ASSERT_TRUE(raw->Send(RawFrameBytes(kStreamRequest, row.id, row.body)));
    ExpectErrorThenClose(*raw, Errc::kProtocolError);
  }
  ExpectServerStillServes();
}

// Calls the server will not run are refused with a typed RESPONSE; the
// connection goes on.
TEST_P(StreamBadInputTest, StreamRequestsTheServerWillNotRunGetTypedResponses) {
  struct Row {
    const char* name;
    const char* service;
    const char* method;
    Errc expected;
  };
  const std::vector<Row> rows = {
      {"no such method", "t", "nope", Errc::kNotFound},
      {"no such service", "nope", "put", Errc::kNotFound},
      {"a unary method", "sys", "echo", Errc::kInvalidArgument},
  };
  auto raw = Authenticated();
  std::uint32_t id = 1;
  for (const auto& row : rows) {
    SCOPED_TRACE(row.name);
    ASSERT_TRUE(raw->Send(RawFrameBytes(kStreamRequest, id, StreamRequestBody(row.service, row.method, 4096))));
    auto reply = ReadResponse(*raw, id);
    ASSERT_TRUE(reply.has_value());
    EXPECT_EQ(reply->status, static_cast<std::uint16_t>(row.expected)) << reply->message;
    // The refused id is not open: its DATA is dropped.
    ASSERT_TRUE(raw->Send(RawFrameBytes(kData, id, "after refusal")));
    EXPECT_TRUE(ExpectAlive(*raw).empty());
    ++id;
  }
  ExpectServesCalls(*raw, id);
  ExpectServerStillServes();
}

TEST_P(StreamBadInputTest, AStreamRequestReusingAnOpenStreamsIdIsAProtocolError) {
  auto raw = Authenticated();
  ASSERT_NO_FATAL_FAILURE(OpenStream(*raw, 9, "stall"));
  ASSERT_TRUE(raw->Send(RawFrameBytes(kStreamRequest, 9, StreamRequestBody("t", "put", 4096))));
  ExpectErrorThenClose(*raw, Errc::kProtocolError);
  ExpectServerStillServes();
}

TEST_P(StreamBadInputTest, AStreamRequestReusingAUnaryCallsIdIsAProtocolError) {
  auto raw = Authenticated();
  ASSERT_TRUE(raw->Send(RawFrameBytes(kRequest, 11, RequestBody("t", "block", ""))));
  EXPECT_TRUE(ExpectAlive(*raw).empty());  // the blocking call is in flight
  ASSERT_TRUE(raw->Send(RawFrameBytes(kStreamRequest, 11, StreamRequestBody("t", "put", 4096))));
  ExpectErrorThenClose(*raw, Errc::kProtocolError);
  ExpectServerStillServes();
}

// The reverse: a REQUEST with the id of an open stream. (Run both under one
// id, the server would send two RESPONSEs and replace one cancel flag.)
TEST_P(StreamBadInputTest, ARequestReusingAStreamsCallIdIsAProtocolError) {
  for (const char* method : {"echo", "block"}) {
    SCOPED_TRACE(method);
    auto raw = Authenticated();
    ASSERT_NO_FATAL_FAILURE(OpenStream(*raw, 12, "stall"));
    ASSERT_TRUE(raw->Send(RawFrameBytes(kRequest, 12, RequestBody(method == std::string("echo") ? "sys" : "t",
                                                          method, "same id"))));
    ExpectErrorThenClose(*raw, Errc::kProtocolError);
  }
  ExpectServerStillServes();
}

// --- reusing a call id -----------------------------------------------------------------

// A call the server keeps running, whatever the client says, until hold_ is
// set: t.hold (async), t.hold_blocking (blocking pool) or t.hold_stream.
enum class Held { kAsync, kBlocking, kStream };
const char* HeldName(Held held) {
  switch (held) {
    case Held::kAsync: return "async unary";
    case Held::kBlocking: return "blocking unary";
    case Held::kStream: return "stream";
  }
  return "?";
}

// After CANCEL the server sends nothing more for the id, so the client may
// use it again at once (PROTOCOL.md sections 3 and 6): the new call runs
// and is answered with its own result, and the cancelled call's result is
// dropped when its handler returns. The handlers here ignore cancellation,
// so the old call surely still runs when the id comes back. (Were the reuse
// a PROTOCOL_ERROR while the old handler runs, timing would decide on a
// real handler.)
TEST_P(StreamBadInputTest, ACallReusingACancelledCallsIdIsServedAndTheOldResultDropped) {
  enum class Next { kEcho, kStream, kHeld };
  const std::vector<std::pair<Next, const char*>> nexts = {
      {Next::kEcho, "REQUEST sys.echo"},
      {Next::kStream, "STREAM_REQUEST t.get"},
      {Next::kHeld, "REQUEST t.hold (held too)"},
  };
  constexpr std::uint32_t kId = 13;
  for (const Held old : {Held::kAsync, Held::kBlocking, Held::kStream}) {
    for (const auto& [next, next_name] : nexts) {
      SCOPED_TRACE(std::string(HeldName(old)) + " cancelled, then " + next_name);
      hold_->store(false);
      holding_->store(0);
      held_->store(0);
      auto raw = Authenticated();
      if (old == Held::kStream) {
        ASSERT_NO_FATAL_FAILURE(OpenStream(*raw, kId, "hold_stream", 1 << 20, "old"));
      } else {
        ASSERT_TRUE(raw->Send(RawFrameBytes(kRequest, kId, RequestBody("t", old == Held::kAsync ? "hold" : "hold_blocking", "old"))));
      }
      EXPECT_TRUE(ExpectAlive(*raw).empty());
      // Running, not just queued (a blocking call cancelled while queued never runs).
      ASSERT_TRUE(Eventually([&] { return holding_->load() == 1; }, 5s));
      ASSERT_TRUE(raw->Send(RawFrameBytes(kCancel, kId)));
      EXPECT_TRUE(ExpectAlive(*raw).empty()) << "a frame for the call after its CANCEL";

      switch (next) {
        case Next::kEcho:
          ExpectServesCalls(*raw, kId);
          break;
        case Next::kStream: {
          ASSERT_NO_FATAL_FAILURE(OpenStream(*raw, kId, "get", 1 << 20, "2 3"));
          int messages = 0;
          for (;;) {
            auto frame = raw->ReadFrame();
            ASSERT_TRUE(frame.has_value()) << "no RESPONSE for the new stream";
            ASSERT_EQ(frame->call_id, kId) << "frame type " << int(frame->type);
            if (frame->type == kData) {
              EXPECT_EQ(frame->body, "ggg");
              ++messages;
              continue;
            }
            ASSERT_EQ(frame->type, kResponse) << "frame type " << int(frame->type);
            auto reply = ParseResponse(frame->body);
            ASSERT_TRUE(reply.has_value());
            EXPECT_EQ(reply->status, 0) << reply->message;
            EXPECT_EQ(reply->payload, "done");
            break;
          }
          EXPECT_EQ(messages, 2);
          break;
        }
        case Next::kHeld:
          ASSERT_TRUE(raw->Send(RawFrameBytes(kRequest, kId, RequestBody("t", "hold", "new"))));
          EXPECT_TRUE(ExpectAlive(*raw).empty());
          break;
      }
      ASSERT_EQ(held_->load(), 0) << "the cancelled call was not running any more";

      // Let the cancelled call (and a held new one) return.
      hold_->store(true);
      const int calls = next == Next::kHeld ? 2 : 1;
      ASSERT_TRUE(Eventually([&] { return held_->load() == calls; }, 5s));
      // A blocking call's end is posted to the IO thread, and a cancelled
      // call's end sends nothing that could be waited for: a window for a
      // wrong RESPONSE to show before the PING below.
      std::this_thread::sleep_for(50ms);
      const auto after = ExpectAlive(*raw);
      if (next == Next::kHeld) {
        ASSERT_EQ(after.size(), 1u) << "want the new call's RESPONSE only";
        EXPECT_EQ(after[0].type, kResponse);
        EXPECT_EQ(after[0].call_id, kId);
        auto reply = ParseResponse(after[0].body);
        ASSERT_TRUE(reply.has_value());
        EXPECT_EQ(reply->status, 0) << reply->message;
        EXPECT_EQ(reply->payload, "held new") << "answered with the cancelled call's result";
      } else {
        for (const auto& frame : after) {
          ADD_FAILURE() << "frame " << int(frame.type) << " for call " << frame.call_id
                        << " when the cancelled call returned";
        }
      }
      // Both calls are over: the id is free again, and the connection fine.
      ExpectServesCalls(*raw, kId);
    }
  }
  ExpectServerStillServes();
}

// An id whose call the server still runs and the client has not cancelled
// stays taken: reusing it is a PROTOCOL_ERROR, also when that call itself
// reused the id of a cancelled one.
TEST_P(StreamBadInputTest, ReusingAnOutstandingCallsIdIsStillAProtocolError) {
  struct Outstanding {
    const char* name;
    Held held;
    bool over_a_cancelled_call;  // it reused the id of a cancelled t.hold
  };
  const std::vector<Outstanding> outstandings = {
      {"async unary", Held::kAsync, false},
      {"blocking unary", Held::kBlocking, false},
      {"stream", Held::kStream, false},
      {"async unary reusing a cancelled call's id", Held::kAsync, true},
      {"stream reusing a cancelled call's id", Held::kStream, true},
  };
  const std::vector<std::pair<const char*, std::string>> reuses = {
      {"REQUEST", RawFrameBytes(kRequest, 14, RequestBody("sys", "echo", "reuse"))},
      {"STREAM_REQUEST", RawFrameBytes(kStreamRequest, 14, StreamRequestBody("t", "put", 4096))},
  };
  for (const auto& outstanding : outstandings) {
    for (const auto& [reuse_name, reuse] : reuses) {
      SCOPED_TRACE(std::string(outstanding.name) + ", then " + reuse_name);
      hold_->store(false);
      holding_->store(0);
      held_->store(0);
      {
        auto raw = Authenticated();
        if (outstanding.over_a_cancelled_call) {
          ASSERT_TRUE(raw->Send(RawFrameBytes(kRequest, 14, RequestBody("t", "hold", "old"))));
          ASSERT_TRUE(Eventually([&] { return holding_->load() == 1; }, 5s));
          ASSERT_TRUE(raw->Send(RawFrameBytes(kCancel, 14)));
          EXPECT_TRUE(ExpectAlive(*raw).empty());
        }
        if (outstanding.held == Held::kStream) {
          ASSERT_NO_FATAL_FAILURE(OpenStream(*raw, 14, "hold_stream"));
        } else {
          ASSERT_TRUE(raw->Send(RawFrameBytes(
              kRequest, 14,
              RequestBody("t", outstanding.held == Held::kAsync ? "hold" : "hold_blocking", ""))));
        }
        EXPECT_TRUE(ExpectAlive(*raw).empty());
        const int calls = outstanding.over_a_cancelled_call ? 2 : 1;
        ASSERT_TRUE(Eventually([&] { return holding_->load() == calls; }, 5s));
        ASSERT_TRUE(raw->Send(reuse));
        ExpectErrorThenClose(*raw, Errc::kProtocolError);
      }
      hold_->store(true);
      EXPECT_TRUE(Eventually([&] { return held_->load() == holding_->load(); }, 5s));
    }
  }
  ExpectServerStillServes();
}

// --- the client's end of a stream --------------------------------------------------

// After END_STREAM the client has no more messages (PROTOCOL.md 6). While
// the call runs, a second END_STREAM or more DATA is a PROTOCOL_ERROR
// (dropped, data the client thought it sent would be lost without an
// error); after the call's RESPONSE they are dropped (above).
TEST_P(StreamBadInputTest, FramesAfterEndStreamOnARunningCallAreProtocolErrors) {
  const std::vector<CallFrame> rows = {
      {"a second END_STREAM", kEndStream, ""},
      {"DATA after END_STREAM", kData, "one more"},
      {"large DATA after END_STREAM", kData, std::string(20000, 'm')},
  };
  for (const auto& row : rows) {
    SCOPED_TRACE(row.name);
    auto raw = Authenticated();
    ASSERT_NO_FATAL_FAILURE(OpenStream(*raw, 7, "stall"));
    ASSERT_TRUE(raw->Send(RawFrameBytes(kEndStream, 7)));
    EXPECT_TRUE(ExpectAlive(*raw).empty());
    ASSERT_TRUE(raw->Send(RawFrameBytes(row.type, 7, row.body)));
    ExpectErrorThenClose(*raw, Errc::kProtocolError);
  }
  ExpectServerStillServes();
}

TEST_P(StreamBadInputTest, AnEndStreamWithABodyIsAProtocolError) {
  auto raw = Authenticated();
  ASSERT_NO_FATAL_FAILURE(OpenStream(*raw, 7, "put"));
  ASSERT_TRUE(raw->Send(RawFrameBytes(kEndStream, 7, "body")));
  ExpectErrorThenClose(*raw, Errc::kProtocolError);
  ExpectServerStillServes();
}

// ByteStream frames with the id of a unary call in flight are dropped; the
// unary call is answered normally.
TEST_P(StreamBadInputTest, StreamFramesForAUnaryCallAreDropped) {
  auto raw = Authenticated();
  ASSERT_TRUE(raw->Send(RawFrameBytes(kRequest, 8, RequestBody("t", "block", ""))));
  // Not CANCEL: that one would cancel the unary call.
  ASSERT_NO_FATAL_FAILURE(ExpectLateFramesDropped(*raw, 8, /*skip_cancel=*/true));
  release_->store(true);
  ASSERT_NO_FATAL_FAILURE(ExpectSuccess(*raw, 8, "released"));
  ExpectServerStillServes();
}

// CANCEL ends a stream without a RESPONSE; its later frames are dropped and
// the connection goes on.
TEST_P(StreamBadInputTest, CancelEndsAStreamAndItsLaterFramesAreDropped) {
  auto raw = Authenticated();
  ASSERT_NO_FATAL_FAILURE(OpenStream(*raw, 6, "stall"));
  ASSERT_NO_FATAL_FAILURE(OpenStream(*raw, 16, "put"));
  ASSERT_TRUE(raw->Send(RawFrameBytes(kCancel, 6) + RawFrameBytes(kData, 16, "x") + RawFrameBytes(kCancel, 16)));
  // Let the handlers see it. A cancelled stream answers nothing (that is
  // what is tested), so there is no event to wait for: a window instead.
  std::this_thread::sleep_for(50ms);
  for (const auto& f : LateFrames()) {
    SCOPED_TRACE(f.name);
    ASSERT_TRUE(raw->Send(RawFrameBytes(f.type, 6, f.body) + RawFrameBytes(f.type, 16, f.body)));
    for (const auto& frame : ExpectAlive(*raw)) {
      ADD_FAILURE() << "frame " << int(frame.type) << " for call " << frame.call_id
                    << " after CANCEL";
    }
  }
  ExpectServesCalls(*raw, 17);
  ExpectServerStillServes();
}

// --- shared memory: SHM_HELLO and SHM_ACCEPT ---------------------------------------------

// tcp:// never announces SHM; an SHM_HELLO there is refused like a disabled
// server's (SHM_ACCEPT UNIMPLEMENTED), unix:// accepts. Either way the
// second SHM_HELLO is a PROTOCOL_ERROR (a refused link does not answer
// every SHM_HELLO again).
TEST_P(StreamBadInputTest, ASecondShmHelloIsAProtocolError) {
  auto raw = Raw();
  const std::uint32_t features = Authenticate(*raw);
  EXPECT_EQ((features & kFeatureShm) != 0, unix_kind());
  ASSERT_NO_FATAL_FAILURE(
      OfferShm(*raw, unix_kind() ? 0 : static_cast<std::uint32_t>(Errc::kUnimplemented)));
  EXPECT_TRUE(ExpectAlive(*raw).empty());
  ExpectServesCalls(*raw, 1);
  ASSERT_TRUE(raw->Send(RawFrameBytes(kShmHello, 0)));
  ExpectErrorThenClose(*raw, Errc::kProtocolError);
  ExpectServerStillServes();
}

TEST_P(StreamBadInputTest, ASecondShmHelloAfterARefusalIsAProtocolError) {
  ASSERT_NO_FATAL_FAILURE(StartServer([](ServerOptions& o) { o.shm.enabled = false; }));
  auto raw = Authenticated();  // (SHM is announced on unix:// all the same: section 3)
  ASSERT_NO_FATAL_FAILURE(OfferShm(*raw, static_cast<std::uint32_t>(Errc::kUnimplemented)));
  ASSERT_TRUE(raw->Send(RawFrameBytes(kShmHello, 0)));
  ExpectErrorThenClose(*raw, Errc::kProtocolError);
  ExpectServerStillServes();
}

TEST_P(StreamBadInputTest, ShmFramesOutOfPlaceAreProtocolErrors) {
  struct Row {
    const char* name;
    bool authenticate;
    std::string bytes;
  };
  const std::vector<Row> rows = {
      {"SHM_HELLO before authentication", false, RawPreamble() + RawFrameBytes(kShmHello, 0)},
      {"SHM_HELLO with a body", true, RawFrameBytes(kShmHello, 0, "x")},
      {"SHM_ACCEPT from the client", true, RawFrameBytes(kShmAccept, 0, U32(0) + U32(0))},
      {"SHM_RING before SHM_HELLO", true, RawFrameBytes(kShmRing, 1, RingBody(4096, 2, 3 * 4096))},
  };
  for (const auto& row : rows) {
    SCOPED_TRACE(row.name);
    auto raw = Raw();
    if (row.authenticate) Authenticate(*raw);
    ASSERT_TRUE(raw->Send(row.bytes));
    ExpectErrorThenClose(*raw, Errc::kProtocolError);
  }
  ExpectServerStillServes();
}

// A refused link (tcp://, or shm disabled) has no rings either.
TEST_P(StreamBadInputTest, ShmRingAfterARefusedShmHelloIsAProtocolError) {
  ASSERT_NO_FATAL_FAILURE(StartServer([](ServerOptions& o) { o.shm.enabled = false; }));
  auto raw = Authenticated();
  ASSERT_NO_FATAL_FAILURE(OfferShm(*raw, static_cast<std::uint32_t>(Errc::kUnimplemented)));
  ASSERT_NO_FATAL_FAILURE(OpenStream(*raw, 1, "put"));
  ASSERT_TRUE(raw->Send(RawFrameBytes(kShmRing, 1, RingBody(64 * 1024, 4, 0))));
  ExpectErrorThenClose(*raw, Errc::kProtocolError);
  ExpectServerStillServes();
}

// --- shared memory: SHM_RING and its descriptors (unix:// only) ----------------------------

class ShmBadInputTest : public StreamBadInputTest {};

INSTANTIATE_TEST_SUITE_P(Unix, ShmBadInputTest, ::testing::Values(Kind::kUnix), testing::SocketKindName);

// Each row sends one SHM_RING for an open stream; everything about the ring
// is wrong in one way. The server answers PROTOCOL_ERROR and closes, and no
// descriptor stays open in this process afterwards.
TEST_P(ShmBadInputTest, BadShmRingsAreProtocolErrorsAndLeakNoDescriptors) {
  static constexpr std::uint32_t kSlot = 64 * 1024;
  static constexpr std::uint64_t kRegion = HeaderSizeFor(4) + 4ull * kSlot;
  struct Row {
    const char* name;
    std::function<FdSet()> fds;
    std::string body;  // the frame's geometry
  };
  auto geometry = RingBody(kSlot, 4, kRegion);
  const std::vector<Row> rows = {
      {"no descriptors", [] { return FdSet{}; }, geometry},
      {"three descriptors",
       [] {
         FdSet s = RealRing();
         s.owned.pop_back();
         return s;
       },
       geometry},
      {"five descriptors (a ring and one more)",
       [] {
         FdSet s = RealRing();
         s.owned.push_back(DevNull());
         return s;
       },
       geometry},
      {"eight descriptors (two rings on one frame)",
       [] {
         FdSet s = RealRing();
         FdSet t = RealRing();
         for (auto& fd : t.owned) s.owned.push_back(std::move(fd));
         return s;
       },
       geometry},
      {"four times /dev/null",
       [] {
         FdSet s;
         for (int i = 0; i < 4; ++i) s.owned.push_back(DevNull());
         return s;
       },
       geometry},
      {"a pipe as the region", [] { return RingWithRegion(PipeEnd()); }, geometry},
      {"/dev/null as the region", [] { return RingWithRegion(DevNull()); }, geometry},
      {"an eventfd as the region", [] { return RingWithRegion(EventFdLike()); }, geometry},
      {"pipes as the eventfds",
       [] {
         FdSet s = RealRing();
         s.owned[1] = PipeEnd();
         s.owned[2] = PipeEnd();
         return s;
       },
       geometry},
      {"/dev/null as the liveness socket",
       [] {
         FdSet s = RealRing();
         s.owned[3] = DevNull();
         return s;
       },
       geometry},
      {"the descriptors in the wrong order",
       [] {
         FdSet s = RealRing();
         std::swap(s.owned[0], s.owned[3]);
         return s;
       },
       geometry},
      {"an unsealed memfd", [] { return RingWithRegion(Craft({.seal = false})); }, geometry},
      {"a regular file as the region", [] { return RingWithRegion(Craft({.memfd = false})); }, geometry},
      {"header: slot count 0",
       [] { return RingWithRegion(Craft({.slot_count = 0, .region_size = kRegion, .file_size = kRegion})); },
       geometry},
      {"header: slot size 1 GiB in a small region",
       [] { return RingWithRegion(Craft({.slot_size = 1u << 30, .slot_count = 4, .file_size = kRegion})); },
       geometry},
      {"header: slot size not a multiple of 4096",
       [] { return RingWithRegion(Craft({.slot_size = 5000, .slot_count = 4})); },
       geometry},
      {"header: region size not the file's",
       [] { return RingWithRegion(Craft({.region_size = kRegion + 4096, .file_size = kRegion})); },
       geometry},
      {"header right, file one page larger",
       [] { return RingWithRegion(Craft({.region_size = kRegion, .file_size = kRegion + 4096})); },
       geometry},
      {"an empty memfd", [] { return RingWithRegion(Craft({.file_size = 0})); }, geometry},
      {"frame: slot count 0", [] { return RealRing(); }, RingBody(kSlot, 0, kRegion)},
      {"frame: slot size 2^32-1", [] { return RealRing(); }, RingBody(0xFFFFFFFFu, 4, kRegion)},
      {"frame: region size one page more", [] { return RealRing(); }, RingBody(kSlot, 4, kRegion + 4096)},
      {"frame: region size 2^64-1", [] { return RealRing(); }, RingBody(kSlot, 4, ~0ull)},
      {"frame: body cut short", [] { return RealRing(); }, RingBody(kSlot, 4, kRegion).substr(0, 12)},
      {"frame: body too long", [] { return RealRing(); }, RingBody(kSlot, 4, kRegion) + "x"},
  };
  const std::size_t baseline = OpenFds();
  for (const auto& row : rows) {
    SCOPED_TRACE(row.name);
    {
      auto raw = Authenticated();
      ASSERT_NO_FATAL_FAILURE(OfferShm(*raw));
      ASSERT_NO_FATAL_FAILURE(OpenStream(*raw, 1, "put"));
      {
        FdSet fds = row.fds();
        ASSERT_TRUE(raw->SendWithFds(RawFrameBytes(kShmRing, 1, row.body), fds.list()));
      }  // our copies are closed: only the server's remain
      ExpectErrorThenClose(*raw, Errc::kProtocolError);
    }
    ExpectFdsBackTo(baseline);
  }
  ExpectServerStillServes();
  ExpectFdsBackTo(baseline);
}

// A valid ring for a call id that has no open stream is dropped (the writer
// sees its ring gone), its descriptors closed at once, and the connection
// goes on.
TEST_P(ShmBadInputTest, AShmRingForACallThatIsNotAStreamIsDroppedAndClosed) {
  auto raw = Authenticated();
  ASSERT_NO_FATAL_FAILURE(OfferShm(*raw));
  // A finished stream (5) and a unary call in flight (8).
  ASSERT_NO_FATAL_FAILURE(OpenStream(*raw, 5, "put"));
  ASSERT_TRUE(raw->Send(RawFrameBytes(kEndStream, 5)));
  auto end = raw->ReadFrame();
  ASSERT_TRUE(end.has_value());
  ASSERT_EQ(end->type, kResponse);
  ASSERT_TRUE(raw->Send(RawFrameBytes(kRequest, 8, RequestBody("t", "block", ""))));
  EXPECT_TRUE(ExpectAlive(*raw).empty());
  const std::size_t baseline = OpenFds();
  for (const std::uint32_t id : {4242u, 5u, 8u}) {
    SCOPED_TRACE(id);
    {
      FdSet fds = RealRing();
      ASSERT_TRUE(raw->SendWithFds(
          RawFrameBytes(kShmRing, id, RingBody(64 * 1024, 4, HeaderSizeFor(4) + 4 * 64 * 1024)), fds.list()));
      EXPECT_TRUE(ExpectAlive(*raw).empty());
    }
    ExpectFdsBackTo(baseline);
  }
  release_->store(true);
  auto unary = raw->ReadFrame();
  ASSERT_TRUE(unary.has_value());
  EXPECT_EQ(unary->type, kResponse);
  EXPECT_EQ(unary->call_id, 8u);
  ExpectServesCalls(*raw, 9);
  ExpectServerStillServes();
}

// Descriptors that arrive with anything but an SHM_RING (here: PING frames,
// a REQUEST) on a connection whose shared memory was accepted are refused
// with PROTOCOL_ERROR and closed; none stays open once the connection is
// gone, and none is held until the connection closes. Without an accepted link (and during negotiation: the
// HELLO) the server reads the socket as a TCP one, so the kernel closes
// them: none reaches the server, and the connection goes on — each row sends
// the write end of a watched pipe, whose read end then reports EOF.
TEST_P(ShmBadInputTest, DescriptorsWithoutAnShmFrameAreRefusedAndNotLeaked) {
  struct Row {
    const char* name;
    bool link;          // SHM_HELLO accepted first
    int messages;       // sendmsg calls, each with `per_message` descriptors
    int per_message;
    bool on_hello;      // the first batch rides on the HELLO
  };
  const std::vector<Row> rows = {
      {"16 on one PING, no link", false, 1, 16, false},
      {"8 × 16 on PINGs, no link", false, 8, 16, false},
      {"8 × 16 on PINGs, with a link", true, 8, 16, false},
      {"200 on one PING (more than a read takes)", false, 1, 200, false},
      {"one on a REQUEST, with a link", true, 1, 1, false},
      {"4 on the HELLO", false, 1, 4, true},
  };
  const std::size_t baseline = OpenFds();
  for (const auto& row : rows) {
    SCOPED_TRACE(row.name);
    std::vector<UniqueFd> watches;  // read ends: EOF once no copy of the sent write end is left
    // One message's descriptors, kept open in `owned`: the write end of a
    // pipe watched in `watches`, then pipe ends (and /dev/null, in turn).
    const auto batch = [&](bool with_dev_null, std::vector<UniqueFd>& owned) {
      std::vector<int> list;
      for (int i = 0; i < row.per_message; ++i) {
        if (i == 0) {
          auto pipe = Watched();
          owned.push_back(std::move(pipe.write_end));
          watches.push_back(std::move(pipe.read_end));
        } else {
          owned.push_back(with_dev_null && i % 2 == 1 ? DevNull() : PipeEnd());
        }
        list.push_back(owned.back().get());
      }
      return list;
    };
    {
      auto raw = Raw();
      if (row.on_hello) {
        std::string hello;
        Put32(hello, 0);
        PutStr(hello, "simple");
        Put32(hello, 7);
        hello += "mallory";
        std::vector<UniqueFd> owned;
        const std::vector<int> list = batch(/*with_dev_null=*/false, owned);
        ASSERT_TRUE(raw->SendWithFds(RawPreamble() + RawFrameBytes(kHello, 0, hello), list));
        auto success = raw->ReadFrame();
        ASSERT_TRUE(success.has_value());
        EXPECT_EQ(success->type, kAuthSuccess);
      } else {
        Authenticate(*raw);
        if (row.link) {
          ASSERT_NO_FATAL_FAILURE(OfferShm(*raw));
        }
        for (int m = 0; m < row.messages; ++m) {
          std::vector<UniqueFd> owned;
          const std::vector<int> list = batch(/*with_dev_null=*/true, owned);
          const std::string frame = row.per_message == 1
                                        ? RawFrameBytes(kRequest, 3, RequestBody("sys", "echo", "fd"))
                                        : RawFrameBytes(kPing, 0, "fds-" + std::to_string(m));
          if (!raw->SendWithFds(frame, list)) break;  // the server may have hung up already
        }
      }
      if (row.link) {
        ExpectErrorThenClose(*raw, Errc::kProtocolError);
      } else {
        // Answered as if no descriptor had come: each PING's PONG, then ours.
        const auto before = ExpectAlive(*raw);
        for (const auto& frame : before) EXPECT_EQ(frame.type, kPong);
        // With the connection still up, no copy of a sent descriptor is left.
        for (const auto& watch : watches) {
          EXPECT_TRUE(Eventually([&] { return AtEof(watch); }, 2s))
              << "a descriptor sent without an accepted link is still open somewhere";
        }
      }
    }
    for (const auto& watch : watches) {
      EXPECT_TRUE(Eventually([&] { return AtEof(watch); }, 2s)) << "a sent descriptor is still open";
    }
    watches.clear();
    ExpectFdsBackTo(baseline);
  }
  ExpectServerStillServes();
  ExpectFdsBackTo(baseline);
}

// Every stray descriptor is closed as soon as the server sees it is stray,
// not when the connection ends: measured while the server still lingers on
// the connection after its ERROR (its socket still open: the count is back
// to exactly what it was with the connection up), with a link accepted
// too: none waits in the link until the connection is gone.
TEST_P(ShmBadInputTest, EveryStrayDescriptorIsClosedAtOnceWhileTheConnectionLingers) {
  struct Row {
    const char* name;
    bool link;  // SHM_HELLO accepted first
    int count;  // descriptors on one frame
    bool ping;  // on a PING (else on a REQUEST)
  };
  const std::vector<Row> rows = {
      {"8 on a PING, with a link", true, 8, true},
      {"16 on a PING, with a link", true, 16, true},
      {"5 on a REQUEST, with a link", true, 5, false},
      // Without a link none reaches the server (DescriptorsWithoutAnShmFrame...).
  };
  for (const auto& row : rows) {
    SCOPED_TRACE(row.name);
    const std::size_t before = OpenFds();
    {
      auto raw = Authenticated();
      if (row.link) {
        ASSERT_NO_FATAL_FAILURE(OfferShm(*raw));
      }
      const std::size_t connected = OpenFds();  // both ends of this connection included
      {
        std::vector<UniqueFd> owned;
        std::vector<int> list;
        for (int i = 0; i < row.count; ++i) {
          owned.push_back(i % 2 == 0 ? PipeEnd() : DevNull());
          list.push_back(owned.back().get());
        }
        const std::string frame = row.ping ? RawFrameBytes(kPing, 0, "fds")
                                           : RawFrameBytes(kRequest, 3, RequestBody("sys", "echo", "fd"));
        ASSERT_TRUE(raw->SendWithFds(frame, list));
      }
      ExpectErrorThenClose(*raw, Errc::kProtocolError);
      // The server lingers up to 2 s reading until we close: check well within.
      EXPECT_TRUE(Eventually([&] { return OpenFds() == connected; }, 1800ms))
          << OpenFds() << " descriptors open, " << connected
          << " with the connection up: stray descriptors still held";
    }
    ExpectFdsBackTo(before);
  }
  ExpectServerStillServes();
}

// A client that never lets the server read a frame whole — each sendmsg
// carries the rest of one SHM_RING and the first byte of the next, with
// four valid rings' descriptors — makes the server match descriptors to
// frames not yet read. That is bounded: PROTOCOL_ERROR once more than 64
// wait (they do not pile up for as long as the connection lives), and none
// stays open.
TEST_P(ShmBadInputTest, DescriptorsPiledUpBehindPartialFramesAreBounded) {
  const std::size_t baseline = OpenFds();
  {
    auto raw = Authenticated();
    ASSERT_NO_FATAL_FAILURE(OfferShm(*raw));
    const std::string ring =
        RawFrameBytes(kShmRing, 4242, RingBody(64 * 1024, 4, HeaderSizeFor(4) + 4 * 64 * 1024));
    for (int round = 0; round < 20; ++round) {
      const std::string bytes = round == 0 ? ring.substr(0, 1) : ring.substr(1) + ring.substr(0, 1);
      std::vector<FdSet> rings;
      std::vector<int> list;
      for (int r = 0; r < 4; ++r) {
        rings.push_back(RealRing());
        for (int fd : rings.back().list()) list.push_back(fd);
      }
      if (!raw->SendWithFds(bytes, list)) break;  // the server has hung up
    }
    ExpectErrorThenClose(*raw, Errc::kProtocolError);
  }
  ExpectFdsBackTo(baseline);
  ExpectServerStillServes();
  ExpectFdsBackTo(baseline);
}

// Many connections that leave descriptors behind and close without a word:
// the server's descriptors return to where they were.
TEST_P(ShmBadInputTest, ConnectionsThatCloseWithDescriptorsInFlightLeakNothing) {
  const std::size_t baseline = OpenFds();
  for (int i = 0; i < 20; ++i) {
    auto raw = Authenticated();
    if (i % 2 == 0) {
      ASSERT_NO_FATAL_FAILURE(OfferShm(*raw));
    }
    FdSet ring = RealRing();
    // Half a frame with the descriptors, then close.
    const std::string frame = RawFrameBytes(kShmRing, 1, RingBody(64 * 1024, 4, HeaderSizeFor(4) + 4 * 64 * 1024));
    ASSERT_TRUE(raw->SendWithFds(frame.substr(0, 10), ring.list()));
  }
  ExpectFdsBackTo(baseline);
  ExpectServerStillServes();
  ExpectFdsBackTo(baseline);
}

}  // namespace
}  // namespace authrpc
