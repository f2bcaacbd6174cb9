// TCP and Unix-domain socket transports (one template over the Asio protocol).
#include <asio/ip/tcp.hpp>
#include <asio/local/stream_protocol.hpp>
#include <asio/post.hpp>
#include <asio/redirect_error.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/version.hpp>
#include <asio/write.hpp>
#include <algorithm>
#include <cerrno>
#include <climits>
#include <csignal>
#include <cstring>
#include <optional>
#include <string_view>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include "authrpc/rpc/deadline_queue.h"
#include "authrpc/rpc/transport.h"

namespace authrpc {
namespace {

using asio::redirect_error;
using asio::use_awaitable;
using Tcp = asio::ip::tcp;
using Local = asio::local::stream_protocol;

// Writes the decimal digits of `v` at `p`; returns the end.
char* write_decimal(char* p, unsigned v) {
  char digits[10];
  int n = 0;
  do {
    digits[n++] = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v != 0);
  while (n > 0) *p++ = digits[--n];
  return p;
}

// How an accepted TCP peer is named (peer_address()): "a.b.c.d:port" or
// "[v6]:port". IPv4 is formatted by hand: inet_ntop's sprintf cost too much
// per accepted connection (docs/PERFORMANCE.md, "Measured costs behind the code").
std::string format_tcp_peer(const asio::ip::tcp::endpoint& ep) {
  const auto addr = ep.address();
  if (addr.is_v6()) return "[" + addr.to_string() + "]:" + std::to_string(ep.port());
  const auto bytes = addr.to_v4().to_bytes();
  char text[sizeof "255.255.255.255:65535"];
  char* p = text;
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    if (i != 0) *p++ = '.';
    p = write_decimal(p, bytes[i]);
  }
  *p++ = ':';
  p = write_decimal(p, ep.port());
  return std::string(text, static_cast<std::size_t>(p - text));
}

// What a failed non-blocking socket call's errno means: would_block for
// "try again later", the system error otherwise.
std::error_code errno_status() {
  return errno == EAGAIN || errno == EWOULDBLOCK ? std::error_code(asio::error::would_block)
                                                 : std::error_code(errno, std::system_category());
}

// make_address() for the host of a connect, remembering the last literal
// parsed on this thread: clients connect to the same few servers again and
// again, and inet_pton costs too much per connect (docs/PERFORMANCE.md,
// "Measured costs behind the code").
asio::ip::address parse_address(const std::string& host, std::error_code& ec) {
  thread_local std::string last_host;
  thread_local asio::ip::address last_address;
  if (!last_host.empty() && host == last_host) {
    ec.clear();
    return last_address;
  }
  auto address = asio::ip::make_address(host, ec);
  if (!ec) {
    last_host = host;
    last_address = address;
  }
  return address;
}

// Opens `s` (a socket or an acceptor) close-on-exec, as accept4() below
// makes accepted sockets: a process that starts a program (a token
// command, components/jwt/jwt_credential_source.cc, or the application's
// own) hands it none of authrpc's sockets, so a connection ends when
// authrpc closes it (close() needs no shutdown() first) and a listener's
// port is free once the server stops. Asio's open() and accept() leave the
// flag off.
template <typename Socket, typename Protocol>
void open_cloexec(Socket& s, const Protocol& protocol, std::error_code& ec) {
  const int fd = ::socket(protocol.family(), protocol.type() | SOCK_CLOEXEC, protocol.protocol());
  if (fd < 0) {
    ec = std::error_code(errno, std::system_category());
    return;
  }
  s.assign(protocol, fd, ec);
  if (ec) ::close(fd);
}

// The stream sockets this file makes are its own: created (socket(),
// accept4()) close-on-exec and non-blocking, and never dup()ed. Asio cannot
// know that of a descriptor it is handed with assign(): it would switch it
// to non-blocking again (an ioctl, at the first wait) and, taking it for a
// possible duplicate, remove it from epoll before close() (an epoll_ctl)
// — two system calls per socket, four per session (docs/DESIGN.md,
// "Accept"). This tells Asio what its own open() and accept()
// would: the descriptor is non-blocking (`user`: as non_blocking(true) set
// it) and closing it ends its registration. The state lives in Asio's
// reactive socket implementation (socket_ops' flags, unchanged since Asio
// 1.11), reached through the protected member basic_socket gives derived
// classes.
static_assert(ASIO_VERSION >= 101100 && ASIO_VERSION < 103500,
              "adopt_own_socket() reads Asio's reactive socket state: check it against this Asio");
template <typename Socket>
struct AsioSocketState : Socket {
  static asio::detail::socket_ops::state_type& of(Socket& socket) {
    return (socket.*(&AsioSocketState::impl_)).get_implementation().state_;
  }
};
template <typename Socket>
void adopt_own_socket(Socket& socket, bool user) {
  namespace ops = asio::detail::socket_ops;
  auto& state = AsioSocketState<Socket>::of(socket);
  state = static_cast<ops::state_type>((state & ~ops::possible_dup) | ops::internal_non_blocking |
                                       (user ? ops::user_set_non_blocking : 0));
}

// Opens the stream socket `socket` for `protocol`, as open_cloexec(), non-
// blocking (as non_blocking(true) would, without the ioctl) and adopted
// (adopt_own_socket()).
template <typename Socket, typename Protocol>
void open_own_socket(Socket& socket, const Protocol& protocol, std::error_code& ec) {
  const int fd = ::socket(protocol.family(), protocol.type() | SOCK_CLOEXEC | SOCK_NONBLOCK,
                          protocol.protocol());
  if (fd < 0) {
    ec = std::error_code(errno, std::system_category());
    return;
  }
  socket.assign(protocol, fd, ec);
  if (ec) {
    ::close(fd);
    return;
  }
  adopt_own_socket(socket, true);
}

// Connects `socket` to `peer`: at once when the kernel can (a Unix socket,
// a loopback TCP connect), otherwise by waiting for the socket to become
// writable, until `deadline`. Trying the connect inline saves a trip
// through the event loop, and an epoll_ctl, on every session.
// `local` (TCP only; null: the kernel's choice): the source address.
template <typename Protocol>
asio::awaitable<std::error_code> connect_socket(typename Protocol::socket& socket,
                                                const typename Protocol::endpoint& peer,
                                                std::chrono::steady_clock::time_point deadline,
                                                bool& timed_out,
                                                const asio::ip::address* local = nullptr) {
  std::error_code ec;
  if (socket.is_open()) socket.close(ec);  // a try at another of a host's addresses
  open_own_socket(socket, peer.protocol(), ec);
  if (ec) co_return ec;
  if constexpr (std::is_same_v<Protocol, Tcp>) {
    if (local != nullptr) {
      // The port is left to connect(): bound now, every connection from the
      // address would need a port of its own across all destinations.
      const int one = 1;
      ::setsockopt(socket.native_handle(), IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof one);
      // A bind failure is the address's fault (not this host's, or not
      // the server's family), not the network's: no retry will mend it.
      socket.bind(Tcp::endpoint(*local, 0), ec);
      if (ec) co_return make_error_code(Errc::kInvalidArgument);
    }
  }
  if (::connect(socket.native_handle(), peer.data(), static_cast<socklen_t>(peer.size())) == 0) {
    co_return std::error_code();
  }
  // EAGAIN is not a connect in progress: a Unix listener's queue is full (or
  // TCP has no local port left), and nothing will complete.
  if (errno != EINPROGRESS && errno != EINTR) {
    co_return std::error_code(errno, std::system_category());
  }
  // A loopback TCP handshake has usually finished, or been refused, inside
  // connect(), which still says EINPROGRESS: ask without waiting first.
  pollfd ready{socket.native_handle(), POLLOUT, 0};
  if (::poll(&ready, 1, 0) != 1) {
    SocketDeadline guard(socket);
    guard.start(socket.get_executor(), deadline);
    co_await socket.async_wait(Protocol::socket::wait_write, redirect_error(use_awaitable, ec));
    if (guard.timed_out()) {
      timed_out = true;
      co_return asio::error::timed_out;
    }
    if (ec) co_return ec;
  }
  int error = 0;
  socklen_t length = sizeof error;
  if (::getsockopt(socket.native_handle(), SOL_SOCKET, SO_ERROR, &error, &length) != 0) {
    error = errno;
  }
  co_return error == 0 ? std::error_code() : std::error_code(error, std::system_category());
}

template <typename Protocol>
class SocketStream final : public ByteStream {
 public:
  // `peer` is how peer_address() describes the other end; passing it in
  // saves a getpeername() per connection.
  // `drained`: nothing can be waiting yet (a client's socket: the client
  // speaks first); an accepted socket may already hold the client's first
  // bytes.
  // A Unix stream expects no descriptors until told
  // (ByteStream::expect_descriptors): until then the kernel discards any.
  SocketStream(typename Protocol::socket socket, std::string peer, bool drained)
      : socket_(std::move(socket)), executor_(socket_.get_executor()), peer_(std::move(peer)),
        drained_(drained), descriptors_(false) {}

  asio::awaitable<std::size_t> read_some(asio::mutable_buffer buffer,
                                         std::error_code& ec) override {
    // Try at once, wait for readability only if nothing is there: input that
    // is waiting costs one recv and no trip through the event loop (asio's
    // async_read_some would post the completion of a read that succeeds at
    // once). On Unix sockets recvmsg keeps room for descriptors, so that
    // SCM_RIGHTS never get lost (docs/SHM.md).
    for (;;) {
      if (std::is_same_v<Protocol, Tcp> || !descriptors_) {
        // On TCP asio's own read waits: its op tries the socket (so we skip
        // our try when the last read drained it: one empty recv per wait,
        // not two), waits with the socket's registration as it is, and
        // reads when woken. async_wait would re-register the socket
        // (epoll_ctl) on every wait, and once it has waited for writability
        // (a client's connect) that also reports it writable at once: a
        // wake-up for nothing per wait.
        if (!drained_) {
          const std::size_t n = try_read_some(buffer, ec);
          if (ec != asio::error::would_block) co_return n;
        }
        const std::size_t got =
            co_await socket_.async_read_some(buffer, redirect_error(use_awaitable, ec));
        drained_ = got < buffer.size();
        co_return got;
      } else {
        const std::size_t n = try_read_some(buffer, ec);
        if (ec != asio::error::would_block) co_return n;
        co_await socket_.async_wait(Protocol::socket::wait_read,
                                    redirect_error(use_awaitable, ec));
        if (ec) co_return 0;
      }
    }
  }

  int native_unix_handle() const noexcept override {
    if constexpr (std::is_same_v<Protocol, Tcp>) return -1;
    else return const_cast<typename Protocol::socket&>(socket_).native_handle();
  }

  std::vector<UniqueFd> take_received_fds() override { return std::exchange(received_fds_, {}); }
  void expect_descriptors() noexcept override { descriptors_ = true; }

  Tcp::socket* tcp_socket() noexcept override {
    if constexpr (std::is_same_v<Protocol, Tcp>) return &socket_;
    else return nullptr;
  }

  std::size_t try_read_some(asio::mutable_buffer buffer, std::error_code& ec) override {
    for (;;) {
      const ssize_t n = recv_some(buffer);
      drained_ = n < static_cast<ssize_t>(buffer.size());
      if (n > 0) {
        ec.clear();
        return static_cast<std::size_t>(n);
      }
      if (n == 0) {
        ec = buffer.size() == 0 ? std::error_code() : asio::error::eof;
        return 0;
      }
      if (errno == EINTR) continue;
      ec = errno_status();
      return 0;
    }
  }

  // One sendmsg() with every buffer, as many times as the socket takes it,
  // waiting for writability only when it is full. (asio::async_write would
  // cut the write into 64 KiB calls, each followed by a trip through the
  // event loop: a 128 KiB message took three sendmsg() calls and three polls.)
  void write_all(std::span<const asio::const_buffer> buffers, WriteCompletion& done) override {
    // Most writes are one or two buffers: kept in the stream, no allocation.
    iov_count_ = 0;
    iov_at_ = 0;
    if (buffers.size() > kInlineIov) {
      iov_heap_.resize(buffers.size());
      iov_ = iov_heap_.data();
    } else {
      iov_ = iov_inline_;
    }
    for (const auto& b : buffers) {
      if (b.size() > 0) iov_[iov_count_++] = iovec{const_cast<void*>(b.data()), b.size()};
    }
    pump_write(done, true);
  }

  std::size_t try_write(asio::const_buffer buffer, std::error_code& ec) override {
    for (;;) {
      const ssize_t n = ::send(socket_.native_handle(), buffer.data(), buffer.size(),
                               MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n >= 0) {
        ec.clear();
        return static_cast<std::size_t>(n);
      }
      if (errno == EINTR) continue;
      ec = errno_status();
      return 0;
    }
  }

  bool can_send_file() const noexcept override { return true; }

  void send_file(int fd, std::uint64_t offset, std::size_t length, WriteCompletion& done) override {
    std::error_code ec;
    socket_.native_non_blocking(true, ec);
    file_fd_ = fd;
    file_offset_ = offset;
    file_left_ = length;
    if (ec) return finish_write(done, ec, true);
    pump_file(done, true);
  }

  bool can_wait_readable() const noexcept override { return socket_.is_open(); }

  void wait_readable(std::shared_ptr<ReadReady> done) override {
    // Woken, the next read finds input: it tries the socket first.
    drained_ = false;
    socket_.async_wait(Protocol::socket::wait_read,
                       [done = std::move(done)](std::error_code ec) { done->readable(ec); });
  }

  void cancel_read() noexcept override {
    std::error_code ignored;
    socket_.cancel(ignored);
  }

  void shutdown_send() noexcept override {
    std::error_code ignored;
    socket_.shutdown(Protocol::socket::shutdown_send, ignored);
  }

  void close() noexcept override {
    std::error_code ignored;
    if (!socket_.is_open()) return;
    // No shutdown() first: the descriptor is close-on-exec and never
    // duplicated, so close() is its last reference and ends the connection.
    socket_.close(ignored);
  }

  const std::string& peer_address() const override { return peer_; }

  Endpoint::Scheme scheme() const noexcept override {
    return std::is_same_v<Protocol, Tcp> ? Endpoint::Scheme::kTcp : Endpoint::Scheme::kUnix;
  }

  const asio::any_io_executor& executor() const noexcept override { return executor_; }

 private:
  // sendfile(2) has no MSG_NOSIGNAL: block SIGPIPE on this thread around it
  // and take a SIGPIPE it raised, so that a vanished peer is an EPIPE error
  // and the process's signal handling stays untouched.
  ssize_t sendfile_nosignal(std::size_t count) {
    sigset_t pipe_set, old_set;
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_set, &old_set);
    off_t offset = static_cast<off_t>(file_offset_);
    ssize_t n;
    do {
      n = ::sendfile(socket_.native_handle(), file_fd_, &offset, count);
    } while (n < 0 && errno == EINTR);
    const int error = errno;
    if (n < 0 && error == EPIPE) {
      const timespec zero{};
      sigtimedwait(&pipe_set, nullptr, &zero);
    }
    pthread_sigmask(SIG_SETMASK, &old_set, nullptr);
    errno = error;
    return n;
  }

  void pump_file(WriteCompletion& done, bool first) {
    while (file_left_ > 0) {
      const ssize_t n = sendfile_nosignal(std::min<std::size_t>(file_left_, 1u << 30));
      if (n > 0) {
        file_offset_ += static_cast<std::uint64_t>(n);
        file_left_ -= static_cast<std::size_t>(n);
        continue;
      }
      if (n == 0) return finish_write(done, asio::error::eof, first);
      if (errno == EAGAIN || errno == EWOULDBLOCK) return when_writable(done, &SocketStream::pump_file);
      return finish_write(done, std::error_code(errno, std::system_category()), first);
    }
    finish_write(done, {}, first);
  }

  // Goes on with the current write (`pump`) once the socket takes more.
  void when_writable(WriteCompletion& done, void (SocketStream::*pump)(WriteCompletion&, bool)) {
    socket_.async_wait(Protocol::socket::wait_write, [this, &done, pump](std::error_code ec) {
      // On error the stream may be gone: touch only `done`.
      if (ec) return done.write_done(ec);
      (this->*pump)(done, false);
    });
  }

  // Completion is never reported from inside write_all() or send_file()
  // itself.
  void finish_write(WriteCompletion& done, std::error_code ec, bool first) {
    if (first) {
      asio::post(executor_, [&done, ec] { done.write_done(ec); });
    } else {
      done.write_done(ec);
    }
  }

  void pump_write(WriteCompletion& done, bool first) {
    while (iov_at_ < iov_count_) {
      msghdr msg{};
      msg.msg_iov = iov_ + iov_at_;
      msg.msg_iovlen = std::min<std::size_t>(iov_count_ - iov_at_, IOV_MAX);
      const ssize_t n = ::sendmsg(socket_.native_handle(), &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n >= 0) {
        consume_iov(static_cast<std::size_t>(n));
        continue;
      }
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return when_writable(done, &SocketStream::pump_write);
      return finish_write(done, std::error_code(errno, std::system_category()), first);
    }
    finish_write(done, {}, first);
  }

  void consume_iov(std::size_t n) {
    while (n > 0 && iov_at_ < iov_count_) {
      iovec& v = iov_[iov_at_];
      if (n < v.iov_len) {
        v.iov_base = static_cast<char*>(v.iov_base) + n;
        v.iov_len -= n;
        return;
      }
      n -= v.iov_len;
      ++iov_at_;
    }
  }

  // recv() on TCP and on a Unix stream not expecting descriptors; recvmsg()
  // keeping any descriptors that came along on one that does.
  ssize_t recv_some(asio::mutable_buffer buffer) {
    if (std::is_same_v<Protocol, Tcp> || !descriptors_) {
      // Without room for them, the kernel closes any descriptors that came.
      return ::recv(socket_.native_handle(), buffer.data(), buffer.size(), MSG_DONTWAIT);
    } else {
      constexpr std::size_t kMaxFds = 16;
      alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFds)];
      iovec iov{buffer.data(), buffer.size()};
      msghdr msg{};
      msg.msg_iov = &iov;
      msg.msg_iovlen = 1;
      msg.msg_control = control;
      msg.msg_controllen = sizeof(control);
      const ssize_t n = ::recvmsg(socket_.native_handle(), &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
      if (n < 0 || msg.msg_controllen == 0) return n;
      for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
        const std::size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (std::size_t i = 0; i < count; ++i) {
          int fd;
          std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
          // A peer that sends descriptors nobody takes cannot pile them up.
          if (received_fds_.size() < 64) received_fds_.emplace_back(fd);
          else ::close(fd);
        }
      }
      return n;
    }
  }

  typename Protocol::socket socket_;
  asio::any_io_executor executor_;
  std::string peer_;
  std::vector<UniqueFd> received_fds_;
  // The last read took less than it asked for (or found nothing): the next
  // read_some on TCP waits through asio without trying first.
  bool drained_;
  bool descriptors_;  // Unix: read with recvmsg (expect_descriptors())
  // The current write_all(), from iov_at_ on: in iov_inline_ or iov_heap_.
  static constexpr std::size_t kInlineIov = 4;
  iovec iov_inline_[kInlineIov];
  std::vector<iovec> iov_heap_;
  iovec* iov_ = iov_inline_;
  std::size_t iov_count_ = 0;
  std::size_t iov_at_ = 0;
  int file_fd_ = -1;
  std::uint64_t file_offset_ = 0;
  std::size_t file_left_ = 0;
};

// The outcome of a client connect: a ByteStream, or why not.
template <typename Protocol>
Result<std::unique_ptr<ByteStream>> connected(typename Protocol::socket socket, bool timed_out,
                                          std::error_code ec, const Endpoint& endpoint) {
  if (timed_out) {
    return Status(Errc::kDeadlineExceeded, "connect " + endpoint.to_string() + ": timed out");
  }
  if constexpr (!std::is_same_v<Protocol, Tcp>) {
    if (ec == std::errc::resource_unavailable_try_again) {
      return Status(ec, "connect " + endpoint.to_string() +
                            ": the server's listen queue is full (it accepts more slowly than clients arrive)");
    }
  }
  if (ec) return Status(ec, "connect " + endpoint.to_string());
  if constexpr (std::is_same_v<Protocol, Tcp>) socket.set_option(Tcp::no_delay(true), ec);
  return std::unique_ptr<ByteStream>(new SocketStream<Protocol>(std::move(socket), endpoint.to_string(), true));
}

template <typename Protocol>
class SocketListener final : public Listener {
 public:
  SocketListener(typename Protocol::acceptor acceptor, Endpoint bound, bool owns_path)
      : acceptor_(std::move(acceptor)), bound_(std::move(bound)), owns_path_(owns_path) {
    // Unix peers are unnamed: each is named by where it came in, formatted
    // once rather than per accepted connection.
    if constexpr (!std::is_same_v<Protocol, Tcp>) unix_peer_name_ = bound_.to_string();
  }

  ~SocketListener() override { close(); }

  asio::awaitable<Result<std::unique_ptr<ByteStream>>> accept() override {
    std::error_code ec;
    typename Protocol::endpoint peer;
    typename Protocol::socket socket(acceptor_.get_executor());
    bool waited = false;
    for (;;) {
      if (!acceptor_.is_open()) co_return Status(asio::error::operation_aborted, "accept on " + bound_.to_string());
      // accept4() for SOCK_CLOEXEC (open_cloexec above); the listener is
      // non-blocking, so this waits only when no client is queued. A Unix
      // peer's address is not asked for: it is named by the listener, and a
      // client bound to a full 108-byte path has a longer address (Linux
      // adds a NUL) than an endpoint holds.
      UniqueFd fd;
      constexpr int kFlags = SOCK_CLOEXEC | SOCK_NONBLOCK;
      if constexpr (std::is_same_v<Protocol, Tcp>) {
        socklen_t length = static_cast<socklen_t>(peer.capacity());
        fd.reset(::accept4(acceptor_.native_handle(), peer.data(), &length, kFlags));
        if (fd.get() >= 0) peer.resize(std::min<std::size_t>(length, peer.capacity()));
      } else {
        fd.reset(::accept4(acceptor_.native_handle(), nullptr, nullptr, kFlags));
      }
      if (fd.get() >= 0) {
        socket.assign(peer.protocol(), fd.get(), ec);  // a Unix endpoint's protocol is a constant
        if (!ec) {
          fd.release();
          adopt_own_socket(socket, false);  // as asio's accept leaves it: blocking to the user
        }
        break;
      }
      // As asio's accept: a connection the client aborted while queued is
      // skipped, not reported.
      if (errno == EINTR || errno == ECONNABORTED || errno == EPROTO) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) {
        ec = std::error_code(errno, asio::error::get_system_category());
        break;
      }
      co_await acceptor_.async_wait(Protocol::acceptor::wait_read, redirect_error(use_awaitable, ec));
      if (ec) break;
      waited = true;
    }
    // Through the event loop once per connection, as asio's accept: a queue
    // of waiting clients does not keep this thread from its other work.
    if (!waited) co_await asio::post(acceptor_.get_executor(), use_awaitable);
    if (ec) co_return Status(ec, "accept on " + bound_.to_string());
    std::string peer_name;
    if constexpr (std::is_same_v<Protocol, Tcp>) {
      socket.set_option(Tcp::no_delay(true), ec);
      peer_name = format_tcp_peer(peer);
    } else {
      peer_name = unix_peer_name_;
    }
    co_return std::unique_ptr<ByteStream>(new SocketStream<Protocol>(std::move(socket), std::move(peer_name), false));
  }

  void close() noexcept override {
    std::error_code ignored;
    if (acceptor_.is_open()) acceptor_.close(ignored);
    if (owns_path_) {
      ::unlink(bound_.path.c_str());
      owns_path_ = false;
    }
  }

  Endpoint local_endpoint() const override { return bound_; }

  Result<std::unique_ptr<Listener>> share_with(asio::io_context& io) override {
    const int fd = ::fcntl(acceptor_.native_handle(), F_DUPFD_CLOEXEC, 0);
    if (fd < 0) return Status(std::error_code(errno, std::system_category()), "dup listener");
    typename Protocol::acceptor acceptor(io);
    std::error_code ec;
    if constexpr (std::is_same_v<Protocol, Tcp>) {
      acceptor.assign(acceptor_.local_endpoint(ec).protocol(), fd, ec);
    } else {
      acceptor.assign(Protocol(), fd, ec);  // no getsockname: the protocol is the only one
    }
    if (ec) {
      ::close(fd);
      return Status(ec, "share listener");
    }
    return std::unique_ptr<Listener>(new SocketListener(std::move(acceptor), bound_, false));
  }

 private:
  typename Protocol::acceptor acceptor_;
  Endpoint bound_;
  std::string unix_peer_name_;  // what an accepted Unix peer is called
  bool owns_path_;
};

// A TCP acceptor listening on `endpoint` (host resolved if not an address;
// port 0 = any) for tcp:// and tls:// alike; `bound` gets the port.
Result<asio::ip::tcp::acceptor> listen_tcp(asio::io_context& io, const Endpoint& endpoint,
                                           const ListenOptions& options, Endpoint& bound) {
  std::error_code ec;
  auto address = asio::ip::make_address(endpoint.host, ec);
  if (ec) {
    Tcp::resolver resolver(io);
    auto results = resolver.resolve(endpoint.host, std::to_string(endpoint.port), ec);
    if (ec || results.empty()) return Status(ec, "resolve " + endpoint.host);
    address = results.begin()->endpoint().address();
  }
  Tcp::acceptor acceptor(io);
  const Tcp::endpoint ep(address, endpoint.port);
  open_cloexec(acceptor, ep.protocol(), ec);
  if (!ec) acceptor.set_option(Tcp::acceptor::reuse_address(true), ec);
  if (!ec) acceptor.bind(ep, ec);
  if (!ec) acceptor.listen(options.backlog, ec);
  if (!ec) acceptor.non_blocking(true, ec);  // SocketListener::accept() tries first
  if (ec) return Status(ec, "listen on " + endpoint.to_string());
  bound = endpoint;
  bound.port = acceptor.local_endpoint().port();
  return acceptor;
}

class TcpTransport final : public Transport {
 public:
  Endpoint::Scheme scheme() const noexcept override { return Endpoint::Scheme::kTcp; }

  asio::awaitable<Result<std::unique_ptr<ByteStream>>> connect(
      asio::any_io_executor ex, const Endpoint& endpoint,
      std::chrono::steady_clock::time_point deadline, std::string_view local_address) override {
    std::error_code ec;
    Tcp::socket socket(ex);
    bool timed_out = false;
    std::optional<asio::ip::address> local;
    if (!local_address.empty()) {
      local = asio::ip::make_address(std::string(local_address), ec);
      if (ec) {
        co_return Status(Errc::kInvalidArgument,
                         "local address '" + std::string(local_address) + "' is not an IP address");
      }
    }
    const auto address = parse_address(endpoint.host, ec);
    if (!ec) {
      ec = co_await connect_socket<Tcp>(socket, Tcp::endpoint(address, endpoint.port), deadline,
                                        timed_out, local ? &*local : nullptr);
    } else {
      SocketDeadline guard(socket);
      guard.start(ex, deadline);
      Tcp::resolver resolver(ex);
      ec.clear();
      auto results = co_await resolver.async_resolve(
          endpoint.host, std::to_string(endpoint.port), redirect_error(use_awaitable, ec));
      if (ec) co_return Status(ec, "resolve " + endpoint.host);
      guard.cancel();
      if (guard.timed_out()) {
        timed_out = true;
        ec = asio::error::timed_out;
      } else {
        // The host's addresses in turn until one connects (not
        // asio::async_connect: its sockets are not close-on-exec); from a
        // chosen address, the first of the host's addresses of its family.
        ec = local ? std::error_code(asio::error::address_family_not_supported)
                   : std::error_code(asio::error::host_not_found);
        for (const auto& r : results) {
          if (local && r.endpoint().address().is_v4() != local->is_v4()) continue;
          ec = co_await connect_socket<Tcp>(socket, r.endpoint(), deadline, timed_out,
                                            local ? &*local : nullptr);
          if (!ec || timed_out || local) break;
        }
      }
    }
    if (ec == Errc::kInvalidArgument) {
      co_return Status(ec, "cannot connect from " + local->to_string() +
                               ": not an address of this host, or not of " +
                               endpoint.to_string() + "'s family");
    }
    if (ec && local && !timed_out) {
      co_return Status(ec, "connect " + endpoint.to_string() + " from " + local->to_string());
    }
    co_return connected<Tcp>(std::move(socket), timed_out, ec, endpoint);
  }

  Result<std::unique_ptr<Listener>> listen(asio::io_context& io, const Endpoint& endpoint,
                                           const ListenOptions& options) override {
    Endpoint bound;
    auto acceptor = listen_tcp(io, endpoint, options, bound);
    if (!acceptor.ok()) return acceptor.status();
    return std::unique_ptr<Listener>(
        new SocketListener<Tcp>(std::move(*acceptor), bound, false));
  }
};

class UnixTransport final : public Transport {
 public:
  Endpoint::Scheme scheme() const noexcept override { return Endpoint::Scheme::kUnix; }

  asio::awaitable<Result<std::unique_ptr<ByteStream>>> connect(
      asio::any_io_executor ex, const Endpoint& endpoint,
      std::chrono::steady_clock::time_point deadline, std::string_view local_address) override {
    if (!local_address.empty()) {
      co_return Status(Errc::kInvalidArgument,
                       "a local address applies to tcp:// and tls:// only, not " +
                           endpoint.to_string());
    }
    Local::socket socket(ex);
    bool timed_out = false;
    const auto ec = co_await connect_socket<Local>(socket, native(endpoint), deadline, timed_out);
    co_return connected<Local>(std::move(socket), timed_out, ec, endpoint);
  }

  Result<std::unique_ptr<Listener>> listen(asio::io_context& io, const Endpoint& endpoint,
                                           const ListenOptions& options) override {
    const bool abstract = endpoint.path.starts_with("@");
    if (!abstract && options.remove_stale_unix_socket) remove_if_stale(io, endpoint);
    std::error_code ec;
    Local::acceptor acceptor(io);
    const auto ep = native(endpoint);
    open_cloexec(acceptor, ep.protocol(), ec);
    if (!ec) acceptor.bind(ep, ec);
    if (!ec && !abstract && options.unix_socket_mode != 0 &&
        ::chmod(endpoint.path.c_str(), options.unix_socket_mode) != 0) {
      ec = std::error_code(errno, std::system_category());
    }
    if (!ec) acceptor.listen(options.backlog, ec);
    if (!ec) acceptor.non_blocking(true, ec);  // SocketListener::accept() tries first
    if (ec) return Status(ec, "listen on " + endpoint.to_string());
    return std::unique_ptr<Listener>(
        new SocketListener<Local>(std::move(acceptor), endpoint, !abstract));
  }

 private:
  static Local::endpoint native(const Endpoint& endpoint) {
    if (endpoint.path.starts_with("@")) {
      // Abstract: a NUL, then the name. Built on the stack — a client
      // connects per session (two string allocations before); one too long
      // for sun_path goes the long way, for asio's name_too_long.
      char name[sizeof(sockaddr_un::sun_path)];
      const std::size_t n = endpoint.path.size();
      if (n > sizeof name) return Local::endpoint(std::string(1, '\0') + endpoint.path.substr(1));
      name[0] = '\0';
      std::memcpy(name + 1, endpoint.path.data() + 1, n - 1);
      return Local::endpoint(asio::string_view(name, n));
    }
    return Local::endpoint(endpoint.path);
  }

  // A socket file nobody accepts on is left over from a dead process.
  static void remove_if_stale(asio::io_context& io, const Endpoint& endpoint) {
    struct stat st {};
    if (::lstat(endpoint.path.c_str(), &st) != 0 || !S_ISSOCK(st.st_mode)) return;
    Local::socket probe(io);
    std::error_code ec;
    open_cloexec(probe, Local(), ec);
    if (!ec) probe.connect(native(endpoint), ec);
    if (ec == asio::error::connection_refused) ::unlink(endpoint.path.c_str());
  }
};

}  // namespace

Transport& transport_for(Endpoint::Scheme scheme) {
  static TcpTransport tcp;
  static UnixTransport unix_transport;
  if (scheme == Endpoint::Scheme::kUnix) return unix_transport;
  return tcp;  // tcp:// and tls://: TLS is made over the TCP stream (rpc/tls_stream.h)
}

}  // namespace authrpc
