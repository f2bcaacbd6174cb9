#include "tests/testing/test_support.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstddef>
#include <cstring>
#include <filesystem>
#include <future>
#include <thread>

#include "authrpc/rpc/messages.h"

namespace authrpc {

void PrintTo(RetryAdvice advice, std::ostream* os) { *os << to_string(advice); }
void PrintTo(const Endpoint& endpoint, std::ostream* os) { *os << endpoint.to_string(); }

}  // namespace authrpc

namespace authrpc::testing {
bool WaitReadable(int fd, std::chrono::steady_clock::time_point until) {
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          until - std::chrono::steady_clock::now())
                          .count();
    if (left <= 0) return false;
    pollfd p{fd, POLLIN, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(left));
    if (ready < 0 && errno == EINTR) continue;
    return ready > 0;
  }
}

ssize_t SendWithRights(int fd, const void* data, std::size_t size, const std::vector<int>& fds,
                       int flags) {
  iovec iov{const_cast<void*>(data), size};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  std::vector<char> control;
  if (!fds.empty()) {
    control.resize(CMSG_SPACE(sizeof(int) * fds.size()));
    msg.msg_control = control.data();
    msg.msg_controllen = control.size();
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
    std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
  }
  return ::sendmsg(fd, &msg, flags);
}

std::string UniqueSuffix() {
  static std::atomic<int> counter{0};
  return std::to_string(::getpid()) + "-" + std::to_string(++counter);
}

ScopedEnv::ScopedEnv(const char* name, const std::string& value) : name_(name) {
  if (const char* old = std::getenv(name)) old_ = old;
  ::setenv(name, value.c_str(), 1);
}

ScopedEnv::~ScopedEnv() {
  if (old_) {
    ::setenv(name_, old_->c_str(), 1);
  } else {
    ::unsetenv(name_);
  }
}

std::string RawPreamble(std::uint8_t version) {
  return std::string("ARPC", 4) + static_cast<char>(version) + std::string(3, '\0');
}

Result<UnixStreamPair> ConnectUnixPair(asio::io_context& io, const std::string& tag) {
  using namespace std::chrono_literals;
  auto ep = Endpoint::parse("unix:@authrpc-" + tag + "-" + UniqueSuffix());
  if (!ep.ok()) return ep.status();
  auto listener = transport_for(Endpoint::Scheme::kUnix).listen(io, *ep, {});
  if (!listener.ok()) return listener.status();
  Result<std::unique_ptr<ByteStream>> accepted = Status(Errc::kInternal, "accept did not finish");
  Result<std::unique_ptr<ByteStream>> connected = Status(Errc::kInternal, "connect did not finish");
  const auto rethrow = [](std::exception_ptr e) {
    if (e) std::rethrow_exception(e);
  };
  asio::co_spawn(io, [&]() -> asio::awaitable<void> { accepted = co_await (*listener)->accept(); },
                 rethrow);
  asio::co_spawn(io, [&]() -> asio::awaitable<void> {
    connected = co_await transport_for(Endpoint::Scheme::kUnix)
                    .connect(io.get_executor(), *ep, std::chrono::steady_clock::now() + 5s);
  }, rethrow);
  io.run_for(5s);
  io.restart();
  if (!accepted.ok()) return accepted.status();
  if (!connected.ok()) return connected.status();
  return UnixStreamPair{std::move(*accepted), std::move(*connected)};
}

std::string RawFrameBytes(std::uint8_t type, std::uint32_t call_id, const std::string& body) {
  std::string out;
  Put32(out, static_cast<std::uint32_t>(8 + body.size()));
  out.push_back(static_cast<char>(type));
  out.append(3, '\0');
  Put32(out, call_id);
  return out + body;
}

std::string RawHello(const std::string& mechanism, const std::string& message) {
  std::string out;
  wire::append_hello(out, {wire::kNoFeatures, mechanism, message});
  return out;
}

void Put16(std::string& out, std::uint16_t v) {
  out.push_back(static_cast<char>(v >> 8));
  out.push_back(static_cast<char>(v));
}

void Put32(std::string& out, std::uint32_t v) {
  Put16(out, static_cast<std::uint16_t>(v >> 16));
  Put16(out, static_cast<std::uint16_t>(v));
}

std::uint16_t Load16(const std::string& s, std::size_t at) {
  return static_cast<std::uint16_t>((static_cast<std::uint8_t>(s[at]) << 8) |
                                    static_cast<std::uint8_t>(s[at + 1]));
}

std::uint32_t Load32(const std::string& s, std::size_t at) {
  return (std::uint32_t{Load16(s, at)} << 16) | Load16(s, at + 2);
}

namespace {

// Binds `fd` to 127.0.0.1 on a port the kernel picks; that port, or -1.
int BindLoopback(int fd) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    return -1;
  }
  return ntohs(addr.sin_port);
}

}  // namespace

int FreeLoopbackPort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  const int port = BindLoopback(fd);
  ::close(fd);
  return port;
}

SilentListener::SilentListener() : fd_(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
  const int port = fd_ < 0 ? -1 : BindLoopback(fd_);
  if (port < 0 || ::listen(fd_, 8) != 0) {
    ADD_FAILURE() << "cannot listen on 127.0.0.1: " << std::strerror(errno);
    return;
  }
  port_ = static_cast<std::uint16_t>(port);
}

SilentListener::~SilentListener() {
  if (fd_ >= 0) ::close(fd_);
}

std::string TempDir(const std::string& tag) {
  std::string t = (std::filesystem::temp_directory_path() / ("authrpc-" + tag + "-XXXXXX")).string();
  return ::mkdtemp(t.data()) != nullptr ? t : std::string();
}

bool Eventually(const std::function<bool()>& done, std::chrono::steady_clock::duration timeout) {
  const auto until = std::chrono::steady_clock::now() + timeout;
  while (!done()) {
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

bool StopAndDestroy(std::unique_ptr<Server>& server, std::chrono::steady_clock::duration limit) {
  if (!server) return true;
  Server* raw = server.release();
  auto stopped = std::make_shared<std::promise<void>>();
  auto future = stopped->get_future();
  std::thread stopper([raw, stopped] {
    raw->stop();
    stopped->set_value();
  });
  if (future.wait_for(limit) != std::future_status::ready) {
    stopper.detach();
    ADD_FAILURE() << "Server::stop() did not return within "
                  << std::chrono::duration_cast<std::chrono::seconds>(limit).count() << " s";
    return false;
  }
  stopper.join();
  delete raw;
  return true;
}

Service DataService() {
  Service data("data");
  data.add("read", [](CallContext&, std::string_view) -> Result<std::string> { return std::string("r"); });
  data.add("write", [](CallContext&, std::string_view) -> Result<std::string> { return std::string("w"); });
  return data;
}

Service AdminService() {
  Service admin("admin");
  admin.add("shutdown", [](CallContext&, std::string_view) -> Result<std::string> { return std::string("ok"); });
  return admin;
}

int ConnectLoopback(std::uint16_t port, const char* source) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(port);
  ::inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
  sockaddr_in from{};
  from.sin_family = AF_INET;
  if (source != nullptr) ::inet_pton(AF_INET, source, &from.sin_addr);
  if ((source != nullptr && ::bind(fd, reinterpret_cast<sockaddr*>(&from), sizeof from) != 0) ||
      ::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

RawConnection::RawConnection(std::uint16_t tcp_port) : fd_(ConnectLoopback(tcp_port)) {}

RawConnection::RawConnection(const Endpoint& endpoint) {
  if (endpoint.scheme != Endpoint::Scheme::kUnix) {
    fd_ = ConnectLoopback(endpoint.port);
    return;
  }
  fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  socklen_t len = 0;
  if (endpoint.path.starts_with("@")) {  // abstract: a leading NUL, no terminator
    const std::string name = endpoint.path.substr(1);
    std::memcpy(addr.sun_path + 1, name.data(), std::min(name.size(), sizeof addr.sun_path - 1));
    len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  } else {
    std::memcpy(addr.sun_path, endpoint.path.data(), std::min(endpoint.path.size(), sizeof addr.sun_path - 1));
    len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + endpoint.path.size() + 1);
  }
  if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), len) != 0) Close();
}

RawConnection::~RawConnection() { Close(); }

void RawConnection::Close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

bool RawConnection::Send(const std::string& bytes) {
  std::size_t sent = 0;
  while (sent < bytes.size()) {
    const ssize_t n = ::send(fd_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    sent += static_cast<std::size_t>(n);
  }
  return true;
}

bool RawConnection::SendHello(const std::string& mechanism, const std::string& message) {
  std::string out;
  const auto preamble = wire::make_preamble();
  out.append(reinterpret_cast<const char*>(preamble.data()), preamble.size());
  wire::append_hello(out, {wire::kNoFeatures, mechanism, message});
  return Send(out);
}

bool RawConnection::SendResponse(const std::string& message) {
  std::string out;
  wire::append_auth_message(out, wire::FrameType::kAuthResponse, message);
  return Send(out);
}

bool RawConnection::ReadExact(std::string& out, std::size_t n, std::chrono::milliseconds timeout) {
  const auto until = std::chrono::steady_clock::now() + timeout;
  out.clear();
  while (out.size() < n) {
    if (!WaitReadable(fd_, until)) return false;
    char buf[4096];
    const ssize_t got = ::recv(fd_, buf, std::min(sizeof buf, n - out.size()), 0);
    if (got < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (got <= 0) return false;
    out.append(buf, static_cast<std::size_t>(got));
  }
  return true;
}

std::optional<RawFrame> RawConnection::ReadFrame(std::chrono::milliseconds timeout) {
  std::string header;
  if (!ReadExact(header, wire::kFrameHeaderSize, timeout)) return std::nullopt;
  const auto byte = [&](std::size_t i) { return static_cast<std::uint8_t>(header[i]); };
  const auto load32 = [&](std::size_t i) {
    return std::uint32_t{byte(i)} << 24 | std::uint32_t{byte(i + 1)} << 16 |
           std::uint32_t{byte(i + 2)} << 8 | std::uint32_t{byte(i + 3)};
  };
  const std::uint32_t length = load32(0);  // bytes after the length field
  if (length < wire::kMinFrameLength ||
      std::size_t{length} + wire::kLengthFieldSize > wire::kDefaultMaxFrameSize) {
    return std::nullopt;
  }
  RawFrame frame;
  frame.type = static_cast<wire::FrameType>(byte(4));
  frame.flags = byte(5);
  frame.reserved = static_cast<std::uint16_t>(byte(6) << 8 | byte(7));
  frame.call_id = load32(8);
  if (!ReadExact(frame.body, length - wire::kMinFrameLength, timeout)) return std::nullopt;
  return frame;
}

bool RawConnection::SeesEndOfStream(std::chrono::milliseconds timeout) {
  const auto until = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (!WaitReadable(fd_, until)) return false;
    char buf[4096];
    const ssize_t got = ::recv(fd_, buf, sizeof buf, 0);
    if (got == 0) return true;
    if (got < 0 && errno != EINTR && errno != EAGAIN) return true;
  }
}

void RawConnection::ShutdownWrite() { ::shutdown(fd_, SHUT_WR); }

Result<std::unique_ptr<Client>> ConnectWith(const Endpoint& endpoint,
                                            std::shared_ptr<ClientMechanism> mechanism,
                                            std::chrono::milliseconds timeout) {
  ClientOptions o;
  o.endpoint = endpoint;
  o.mechanisms = {std::move(mechanism)};
  o.connect_timeout = timeout;
  o.default_call_timeout = timeout;
  return Client::connect(std::move(o));
}

Result<ServerProcess> SpawnServer(const char* binary, const std::string& config) {
  int out[2];
  if (::pipe(out) != 0) return Status(Errc::kInternal, "pipe");
  const pid_t pid = ::fork();
  if (pid < 0) return Status(Errc::kInternal, "fork");
  if (pid == 0) {
    ::dup2(out[1], 1);
    ::close(out[0]);
    ::close(out[1]);
    ::execl(binary, binary, "--config", config.c_str(), "--print-endpoints",
            static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(out[1]);
  std::string line;
  char c;
  while (::read(out[0], &c, 1) == 1 && c != '\n') line.push_back(c);
  ::close(out[0]);
  auto ep = Endpoint::parse(line);
  if (!ep.ok()) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    return Status(Errc::kInternal, std::string(binary) + " printed '" + line + "'");
  }
  return ServerProcess{pid, *ep};
}

void PrintTo(SocketKind kind, std::ostream* os) {
  *os << (kind == SocketKind::kTcp ? "tcp" : "unix");
}

std::string SocketKindName(const ::testing::TestParamInfo<SocketKind>& info) {
  return info.param == SocketKind::kTcp ? "Tcp" : "Unix";
}

Endpoint FreshEndpoint(SocketKind kind, const std::string& prefix) {
  static std::atomic<int> counter{0};
  const std::string uri = kind == SocketKind::kTcp
                              ? std::string("tcp://127.0.0.1:0")
                              : "unix:@" + prefix + "-" + std::to_string(::getpid()) + "-" +
                                    std::to_string(counter++);
  auto ep = Endpoint::parse(uri);
  EXPECT_TRUE(ep.ok()) << Describe(ep);
  return ep.ok() ? *ep : Endpoint{};
}

}  // namespace authrpc::testing
