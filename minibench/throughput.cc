#include "minibench/throughput.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <limits.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include <asio/co_spawn.hpp>
#include <asio/use_future.hpp>
#include <algorithm>
#include <bit>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "authrpc/auth/mechanisms/simple/simple.h"
#include "authrpc/client/client.h"
#include "authrpc/client/client_runtime.h"
#include "minibench/server_child.h"
#include "minibench/floor_check.h"
#include "minibench/rotation.h"
#include "minibench/run_info.h"
#include "minibench/stats.h"
#include "minibench/sessions.h"
#include "authrpc/base/log.h"
#include "authrpc/tools/cli_exit.h"
#include "authrpc/tools/flag_parser.h"
#include "authrpc/rpc/call_stream.h"
#include "authrpc/security/tls_context.h"
#include "authrpc/server/server.h"
#include "authrpc/server/service.h"

namespace minibench {

const char* const kThroughputHelp = R"(  throughput [--get|--put] [--streams S] [--batch BYTES] [--bytes TOTAL]
             [--transport tcp|unix|tls|shm|all] [--runs R] [--window BYTES]
             [--json FILE] [--quiet]
             Bulk transfer through authrpc streaming calls, arrow-flight-
             benchmark style: S concurrent streams (one connection each)
             carry TOTAL bytes (default 512 MiB) in BYTES-sized batches
             (default 131072); --get: server to client (default), --put:
             client to server. Rows get/tcp, get/unix, get/tls (put/...),
             each next to floor-stream/<transport>: a bare socket (bare
             OpenSSL, AES-128-GCM, for tls) stream of the same bytes in the
             same batch size, no framework, its writes gathered as authrpc
             gathers (a window's worth per sendmsg; TLS records per batch);
             a row that beats its floor in every run by more than 5 % gets
             a WARNING line. R runs (default 3), rows interleaved; each row
             prints Testing method, Number of concurrent gets/puts, Batch
             size, Batches read/written, Bytes read/written, Nanos, Speed
             (MB/s = 2^20 bytes/s), Throughput (batches/s), Latency mean/
             quantiles/max (per batch, µs), with the median run, and its CPU
             cost (client + server, ns per byte, from the kernel's ns CPU
             clocks). --json also records the run: settings, time, host,
             CPU, kernel, load, versions. Targets (128 KiB batches):
             get/tcp >= 0.9 x floor-stream/tcp, get/unix >= get/tcp,
             get/tls >= 0.8 x get/tcp
             (MB/s, medians of the runs; the same shape for --put).
             shm: the unix:// connection with the shared-memory data plane
             (docs/SHM.md); its row get/shm has no floor of its own (it is
             compared with get/unix: >= 2 x MB/s, p50 latency <= 0.5 x).
             Latency: get, the gap between batches at the reader; put, the
             time write() takes to accept a batch (queued up to the window,
             so near zero on sockets: put rows have no latency target).
)";

namespace {

using authrpc::Endpoint;
using authrpc::Errc;
using authrpc::Result;
using authrpc::Status;
using Json = nlohmann::json;

constexpr const char* kUsage =
    "usage: minibench throughput [--get|--put] [--streams S] [--batch BYTES] [--bytes TOTAL]\n"
    "       [--transport tcp|unix|tls|shm|all] [--runs R] [--window BYTES] [--json FILE] [--quiet]\n";

constexpr const char* kSee = "minibench throughput --help";

struct Args {
  bool put = false;
  std::size_t streams = 1;
  std::size_t batch = 128 * 1024;
  std::uint64_t bytes = 512ull << 20;
  std::vector<std::string> transports = {"tcp", "unix", "tls", "shm"};
  std::size_t runs = 3;
  std::uint32_t window = 0;  // 0: the framework's default
  std::string json;
  bool quiet = false;
};

// Reads argv: nullopt to go on; else the exit status (help printed: 0).
std::optional<int> parse_args(int argc, char** argv, Args& args) {
  using authrpc::cli::size;
  bool get = false;
  std::uint64_t window = 0;
  authrpc::cli::FlagParser parser;
  parser.flag("--get", &get)
      .flag("--put", &args.put)
      .flag("--quiet", &args.quiet)
      .value("--streams", authrpc::cli::count(&args.streams, 1, 256))
      .value("--batch", size(&args.batch, 1, 15 * 1024 * 1024))  // the frame limit is 16 MiB
      .value("--bytes", size(&args.bytes, 1, UINT64_MAX))
      .value("--runs", authrpc::cli::count(&args.runs, 1, 1000))
      .value("--window", size(&window, 1, 0x7fffffff))
      .value("--transport",
             [&args](std::string_view v) {
               std::string one;
               if (auto s = authrpc::cli::one_of(&one, {"tcp", "unix", "tls", "shm", "all"})(v); !s.ok()) return s;
               args.transports = one == "all" ? std::vector<std::string>{"tcp", "unix", "tls", "shm"}
                                              : std::vector<std::string>{one};
               return Status();
             })
      .value("--json", &args.json);
  const std::string help = std::string(kUsage) + "\n" + kThroughputHelp;
  if (auto code = authrpc::cli::parse_or_exit(parser, argc, argv, help, "minibench", kSee, "throughput: ")) {
    return code;
  }
  if (window > 0) args.window = static_cast<std::uint32_t>(window);
  if (get && args.put) return authrpc::cli::report_usage("minibench", "throughput: --get or --put, not both", kSee);
  if (args.bytes < args.streams) {
    return authrpc::cli::report_usage("minibench", "throughput: --bytes must give each stream a byte", kSee);
  }
  return std::nullopt;
}

// The bytes every batch carries: one buffer, written from (zero-copy) and
// never compared, so its contents do not matter beyond not being all zero.
// Thread-safe, and a pattern once handed out is never moved or freed:
// messages of it are queued as unowned Payloads while other streams (or a
// later request with a larger batch) ask for theirs. One string per power
// of two, so a run keeps at most a few.
const std::string& pattern(std::size_t size) {
  static std::mutex mutex;
  static std::map<std::size_t, std::unique_ptr<const std::string>> by_size;
  const std::size_t rounded = std::bit_ceil(std::max<std::size_t>(size, 1));
  std::lock_guard lock(mutex);
  auto& bytes = by_size[rounded];
  if (!bytes) {
    std::string b(rounded, '\0');
    for (std::size_t i = 0; i < rounded; ++i) b[i] = static_cast<char>(i * 131 + (i >> 9));
    bytes = std::make_unique<const std::string>(std::move(b));
  }
  return *bytes;
}

// ---------------------------------------------------------------------------
// The floor: a bare stream on a plain socket or bare OpenSSL. Request: 24
// bytes — 'G' (server sends) or 'P' (client sends), 7 zero bytes, u64 total,
// u64 batch (host order: both ends are this program on this machine); 'P'
// ends with a 1-byte acknowledgement from the server.
//
// It must be at least as lean as authrpc's own socket path (rpc/
// socket_transport.cc, rpc/tls_stream.cc), doing the same work with
// nothing on top, or a row that beats it says nothing (floor_check.h):
//  - a sender gathers as many batches as authrpc's stream window holds
//    (kDefaultStreamWindow, 8 MiB) into one writev(), as authrpc's
//    FrameChannel gathers its queued messages into one sendmsg(); the
//    socket is blocking, so the kernel returns once all of them have left,
//    with no wait in an event loop in between;
//  - a receiver reads each batch straight into its buffer (one recv while
//    the data is there), as authrpc reads a DATA body into the message;
//  - the same socket options as authrpc (TCP_NODELAY, default buffer sizes);
//  - TLS: OpenSSL's records are gathered into one send per batch by a
//    buffering BIO (authrpc's socket BIO gathers 64 KiB), and read with
//    read-ahead into a 64 KiB buffer, as authrpc's TLS context does.
// docs/PERFORMANCE.md ("What each floor does", "Throughput") has the measurements.

constexpr std::size_t kFloorGatherBytes = authrpc::kDefaultStreamWindow;

struct Conn {
  int fd = -1;
  SSL* ssl = nullptr;
  ~Conn() {
    if (ssl != nullptr) SSL_free(ssl);
    if (fd >= 0) ::close(fd);
  }
};

// Gives `ssl` the socket for reading and, for writing, a buffering BIO in
// front of it that gathers records until flush_tls() (or until it holds
// kFloorTlsGather bytes).
constexpr int kFloorTlsGather = 256 * 1024;
bool attach_tls(SSL* ssl, int fd) {
  BIO* socket_bio = BIO_new_socket(fd, BIO_NOCLOSE);
  BIO* buffer = BIO_new(BIO_f_buffer());
  if (socket_bio == nullptr || buffer == nullptr ||
      BIO_set_write_buffer_size(buffer, kFloorTlsGather) != 1) {
    BIO_free(socket_bio);
    BIO_free(buffer);
    return false;
  }
  BIO_up_ref(socket_bio);  // one reference for each direction
  SSL_set_bio(ssl, socket_bio, BIO_push(buffer, socket_bio));
  return true;
}

bool flush_tls(Conn& c) { return c.ssl == nullptr || BIO_flush(SSL_get_wbio(c.ssl)) == 1; }

// Reads (or with `write`, writes) all `n` bytes at `data`.
bool transfer_full(Conn& c, char* data, std::size_t n, bool write) {
  for (std::size_t done = 0; done < n;) {
    const std::size_t left = n - done;
    ssize_t r;
    if (c.ssl != nullptr) {
      const int chunk = static_cast<int>(std::min<std::size_t>(left, 1 << 30));
      r = write ? SSL_write(c.ssl, data + done, chunk) : SSL_read(c.ssl, data + done, chunk);
    } else {
      r = write ? ::send(c.fd, data + done, left, MSG_NOSIGNAL) : ::recv(c.fd, data + done, left, 0);
      if (r < 0 && errno == EINTR) continue;
    }
    if (r <= 0) return false;
    done += static_cast<std::size_t>(r);
  }
  return true;
}
bool read_full(Conn& c, char* out, std::size_t n) { return transfer_full(c, out, n, false); }
bool write_full(Conn& c, const char* data, std::size_t n) {
  return transfer_full(c, const_cast<char*>(data), n, true);
}

// Sends `count` bytes as batch-sized writes of `bytes` (at least `batch`
// long): one gathered sendmsg() for all of them on a plain socket (more
// only if the kernel takes part), or the records of every batch sent in
// gathered writes by the buffering BIO and flushed at the end (TLS).
bool write_batches(Conn& c, const char* bytes, std::size_t batch, std::size_t count) {
  if (c.ssl != nullptr) {
    for (std::size_t done = 0; done < count;) {
      const std::size_t n = std::min(batch, count - done);
      if (!write_full(c, bytes, n)) return false;
      done += n;
    }
    return flush_tls(c);
  }
  std::vector<iovec> iov;
  for (std::size_t at = 0; at < count; at += batch) {
    iov.push_back({const_cast<char*>(bytes), std::min(batch, count - at)});
  }
  for (std::size_t first = 0; first < iov.size();) {
    msghdr m{};
    m.msg_iov = iov.data() + first;
    m.msg_iovlen = std::min<std::size_t>(iov.size() - first, IOV_MAX);
    const ssize_t r = ::sendmsg(c.fd, &m, MSG_NOSIGNAL);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    for (auto left = static_cast<std::size_t>(r); left > 0;) {
      if (left >= iov[first].iov_len) {
        left -= iov[first++].iov_len;
      } else {
        iov[first].iov_base = static_cast<char*>(iov[first].iov_base) + left;
        iov[first].iov_len -= left;
        left = 0;
      }
    }
  }
  return true;
}

// The bytes one write_batches() call sends: whole batches up to the window.
std::size_t gather_bytes(std::size_t batch) {
  return std::max<std::size_t>(batch, kFloorGatherBytes / batch * batch);
}

struct FloorRequest {
  char mode;
  char pad[7];
  std::uint64_t total;
  std::uint64_t batch;
};
static_assert(sizeof(FloorRequest) == 24);

void serve_floor(int fd, SSL_CTX* ctx) {
  Conn c;
  c.fd = fd;
  if (ctx != nullptr) {
    c.ssl = SSL_new(ctx);
    if (c.ssl == nullptr || !attach_tls(c.ssl, fd) || SSL_accept(c.ssl) != 1) return;
  }
  FloorRequest req{};
  if (!read_full(c, reinterpret_cast<char*>(&req), sizeof req)) return;
  if (req.batch == 0 || req.batch > (64u << 20)) return;
  if (req.mode == 'G') {
    const std::string& bytes = pattern(req.batch);
    const std::size_t gather = gather_bytes(req.batch);
    for (std::uint64_t sent = 0; sent < req.total;) {
      const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(gather, req.total - sent));
      if (!write_batches(c, bytes.data(), req.batch, n)) return;
      sent += n;
    }
  } else if (req.mode == 'P') {
    std::string buffer(req.batch, '\0');
    for (std::uint64_t got = 0; got < req.total;) {
      const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(req.batch, req.total - got));
      if (!read_full(c, buffer.data(), n)) return;
      got += n;
    }
    const char ack = 'k';
    if (!write_full(c, &ack, 1) || !flush_tls(c)) return;
  }
  if (c.ssl != nullptr) SSL_shutdown(c.ssl);
}

void floor_accept_loop(int listen_fd, SSL_CTX* ctx, bool tcp) {
  for (;;) {
    const int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      return;
    }
    if (tcp) {
      const int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    }
    std::thread(serve_floor, fd, ctx).detach();
  }
}

// A socket for `ep` (tcp://ADDRESS:PORT or unix:@name) and its address.
int socket_for(const Endpoint& ep, sockaddr_storage& address, socklen_t& length) {
  const bool tcp = ep.scheme != Endpoint::Scheme::kUnix;
  address = {};
  if (tcp) {
    auto* a = reinterpret_cast<sockaddr_in*>(&address);
    a->sin_family = AF_INET;
    a->sin_port = htons(ep.port);
    ::inet_pton(AF_INET, ep.host.c_str(), &a->sin_addr);
    length = sizeof *a;
  } else {
    auto* a = reinterpret_cast<sockaddr_un*>(&address);
    a->sun_family = AF_UNIX;
    const std::string name = ep.path.substr(1);  // "@name": abstract
    std::memcpy(a->sun_path + 1, name.data(), name.size());
    length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  }
  return ::socket(tcp ? AF_INET : AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
}

// A socket listening on `ep`; a tcp port 0 becomes the bound one.
int listen_socket(Endpoint& ep) {
  sockaddr_storage a;
  socklen_t length;
  const int fd = socket_for(ep, a, length);
  if (fd < 0) return -1;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), length) != 0 || ::listen(fd, 128) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &length) != 0) {
    ::close(fd);
    return -1;
  }
  if (ep.scheme != Endpoint::Scheme::kUnix) ep.port = ntohs(reinterpret_cast<sockaddr_in*>(&a)->sin_port);
  return fd;
}

int connect_socket(const Endpoint& ep) {
  sockaddr_storage a;
  socklen_t length;
  const int fd = socket_for(ep, a, length);
  if (fd < 0) return -1;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), length) != 0) {
    ::close(fd);
    return -1;
  }
  if (ep.scheme != Endpoint::Scheme::kUnix) {
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  return fd;
}

// Both floor ends use TLS 1.3 with AES-128-GCM, what the authrpc contexts
// negotiate (security/tls_context.cc prefers it), and OpenSSL's defaults
// otherwise.
SSL_CTX* floor_tls_context(bool server, const std::string& dir) {
  SSL_CTX* ctx = SSL_CTX_new(server ? TLS_server_method() : TLS_client_method());
  if (ctx == nullptr) return nullptr;
  SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION);
  SSL_CTX_set_ciphersuites(ctx, "TLS_AES_128_GCM_SHA256");
  // As security/tls_context.cc: several records per recv().
  SSL_CTX_set_read_ahead(ctx, 1);
  SSL_CTX_set_default_read_buffer_len(ctx, 64 * 1024);
  bool ok = true;
  if (server) {
    ok = SSL_CTX_use_certificate_chain_file(ctx, (dir + "/server.pem").c_str()) == 1 &&
         SSL_CTX_use_PrivateKey_file(ctx, (dir + "/server.key").c_str(), SSL_FILETYPE_PEM) == 1;
  } else {
    ok = SSL_CTX_load_verify_locations(ctx, (dir + "/ca.pem").c_str(), nullptr) == 1;
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
  }
  if (!ok) {
    SSL_CTX_free(ctx);
    return nullptr;
  }
  return ctx;
}

// ---------------------------------------------------------------------------
// The child: an authrpc Server with the "bench" service and the floors.

void add_bench_service(authrpc::Server& server) {
  authrpc::Service bench("bench");
  // "<bytes> <batch>": sends the bytes as batch-sized messages, each
  // written from the one pattern buffer without a copy.
  bench.add_stream("get", [](authrpc::CallContext&, authrpc::ServerStream& stream)
                              -> asio::awaitable<Result<std::string>> {
    unsigned long long total = 0, batch = 0;
    if (std::sscanf(std::string(stream.request()).c_str(), "%llu %llu", &total, &batch) != 2 ||
        batch == 0) {
      co_return Status(Errc::kInvalidArgument, "want '<bytes> <batch>'");
    }
    const std::string& bytes = pattern(batch);
    for (std::uint64_t sent = 0; sent < total;) {
      const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(batch, total - sent));
      // The pattern lives as long as the process: hand it over as an unowned
      // Payload, which is queued (up to the client's window) instead of
      // waiting for each message to leave, and never copied.
      authrpc::Payload message(const_cast<char*>(bytes.data()), n, n, nullptr);
      if (Status s = co_await stream.write(std::move(message)); !s.ok()) co_return s;
      sent += n;
    }
    co_return std::string("ok");
  });
  // Reads every message; returns the byte count.
  bench.add_stream("put", [](authrpc::CallContext&, authrpc::ServerStream& stream)
                              -> asio::awaitable<Result<std::string>> {
    std::uint64_t total = 0;
    for (;;) {
      auto message = co_await stream.read();
      if (!message.ok()) co_return message.status();
      if (!*message) break;
      total += (*message)->size();
    }
    co_return std::to_string(total);
  });
  (void)server.add_service(std::move(bench));
}

// The child's body (ServerChild::fork): the Server, reported as
// "authrpc/<scheme>", and the floors, as "floor/<transport>".
void run_child(int report_fd, const std::string& certs_dir) {
  authrpc::ServerOptions o;
  const std::string unix_name = "minibench-throughput-" + std::to_string(::getpid());
  o.endpoints = {*Endpoint::parse("tcp://127.0.0.1:0"), *Endpoint::parse("unix:@" + unix_name)};
  if (!certs_dir.empty()) {
    authrpc::security::TlsServerOptions t;
    t.certificate_file = certs_dir + "/server.pem";
    t.private_key_file = certs_dir + "/server.key";
    auto context = authrpc::security::TlsServerContext::create(t);
    if (!context.ok()) fail_child(report_fd, "TLS context: " + context.status().message);
    o.tls = std::move(*context);
    o.endpoints.push_back(*Endpoint::parse("tls://127.0.0.1:0"));
    o.encryption = authrpc::SecurityRequirement::kOptional;  // tcp:// and unix: stay plaintext
  }
  o.mechanisms = {std::make_shared<authrpc::SimpleServerMechanism>()};
  o.io_threads = 1;
  o.log = authrpc::null_log_sink();
  o.shm.enabled = true;  // used only by clients that offer it (the shm rows)
  auto* server = new authrpc::Server(std::move(o));  // serves until the child ends
  add_bench_service(*server);
  if (Status s = server->start(); !s.ok()) fail_child(report_fd, s.to_string());
  for (const auto& ep : server->bound_endpoints()) {
    const char* scheme = ep.scheme == Endpoint::Scheme::kTcp    ? "tcp"
                         : ep.scheme == Endpoint::Scheme::kUnix ? "unix"
                                                                : "tls";
    report_endpoint(report_fd, std::string("authrpc/") + scheme, ep);
  }
  // floor/tcp, floor/unix and with certificates floor/tls.
  for (const std::string transport : {"tcp", "unix", "tls"}) {
    SSL_CTX* ctx = nullptr;
    if (transport == "tls") {
      if (certs_dir.empty()) break;
      if ((ctx = floor_tls_context(true, certs_dir)) == nullptr) fail_child(report_fd, "floor/tls context");
    }
    const bool tcp = transport != "unix";
    Endpoint ep = *Endpoint::parse(tcp ? "tcp://127.0.0.1:0" : "unix:@" + unix_name + "-floor");
    const int fd = listen_socket(ep);
    if (fd < 0) fail_child(report_fd, "floor/" + transport + " listen failed");
    report_endpoint(report_fd, "floor/" + transport, ep);
    std::thread(floor_accept_loop, fd, ctx, tcp).detach();
  }
}

// ---------------------------------------------------------------------------
// Measuring.

// CPU seconds a process has used (process_cpu_ns, minibench/stats.h: the
// scheduler's nanosecond clock, not /proc's ticks). A machine shared with
// other work slows the wall clock of a row but hardly its CPU cost per byte.
double cpu_seconds(pid_t pid) { return static_cast<double>(process_cpu_ns(pid).value_or(0)) / 1e9; }

struct RunResult {
  double client_cpu_s = 0;  // this process during the row
  double server_cpu_s = 0;  // the server child during the row
  double cpu_ns_per_byte() const {
    return bytes == 0 ? 0 : (client_cpu_s + server_cpu_s) * 1e9 / static_cast<double>(bytes);
  }
  std::uint64_t bytes = 0;
  std::uint64_t batches = 0;
  std::chrono::nanoseconds elapsed{0};
  std::vector<double> latencies_us;  // per batch
  std::string note;                  // e.g. the TLS cipher
  double mb_per_s() const {
    return elapsed.count() == 0 ? 0 : static_cast<double>(bytes) / (1 << 20) / (elapsed.count() / 1e9);
  }
  double batches_per_s() const {
    return elapsed.count() == 0 ? 0 : static_cast<double>(batches) / (elapsed.count() / 1e9);
  }
};

double us_since(Clock::time_point t) {
  return std::chrono::duration<double, std::micro>(Clock::now() - t).count();
}

// A row's run: `bytes` moved by the streams of `latencies` (per batch, µs).
RunResult gathered(Clock::duration elapsed, const std::vector<std::vector<double>>& latencies,
                   std::uint64_t bytes) {
  RunResult r;
  r.elapsed = elapsed;
  r.bytes = bytes;
  for (const auto& l : latencies) {
    r.batches += l.size();
    r.latencies_us.insert(r.latencies_us.end(), l.begin(), l.end());
  }
  return r;
}

// One floor stream: connect, ask, move `total` bytes in batches.
Status floor_stream(const Endpoint& ep, SSL_CTX* tls, bool put, std::uint64_t total,
                    std::size_t batch, std::vector<double>& latencies) {
  Conn c;
  c.fd = connect_socket(ep);
  if (c.fd < 0) return Status(std::error_code(errno, std::system_category()), "floor connect");
  if (tls != nullptr) {
    c.ssl = SSL_new(tls);
    if (c.ssl == nullptr || !attach_tls(c.ssl, c.fd)) return Status(Errc::kInternal, "floor TLS BIO");
    SSL_set_tlsext_host_name(c.ssl, "localhost");
    if (SSL_connect(c.ssl) != 1) {
      ERR_clear_error();
      return Status(Errc::kUnavailable, "floor TLS handshake failed");
    }
  }
  FloorRequest req{};
  req.mode = put ? 'P' : 'G';
  req.total = total;
  req.batch = batch;
  if (!write_full(c, reinterpret_cast<const char*>(&req), sizeof req) || !flush_tls(c)) {
    return Status(Errc::kConnectionClosed, "floor request");
  }
  std::string buffer(batch, '\0');
  const std::string& bytes = pattern(batch);
  const std::size_t gather = gather_bytes(batch);
  auto last = Clock::now();
  for (std::uint64_t moved = 0; moved < total;) {
    // A put sends a window's worth of batches per write; each batch is
    // credited an equal share of its time.
    const std::size_t n =
        static_cast<std::size_t>(std::min<std::uint64_t>(put ? gather : batch, total - moved));
    const bool ok = put ? write_batches(c, bytes.data(), batch, n) : read_full(c, buffer.data(), n);
    if (!ok) return Status(Errc::kConnectionClosed, "floor stream ended early");
    const std::size_t batches = (n + batch - 1) / batch;
    latencies.insert(latencies.end(), batches, us_since(last) / static_cast<double>(batches));
    last = Clock::now();
    moved += n;
  }
  if (put) {
    char ack = 0;
    if (!read_full(c, &ack, 1)) return Status(Errc::kConnectionClosed, "floor acknowledgement");
  }
  return {};
}

Result<RunResult> run_floor(const Endpoint& ep, SSL_CTX* tls, const Args& args) {
  const std::uint64_t per_stream = args.bytes / args.streams;
  std::vector<std::vector<double>> latencies(args.streams);
  std::vector<Status> results(args.streams);
  const auto start = Clock::now();
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < args.streams; ++i) {
    threads.emplace_back([&, i] {
      results[i] = floor_stream(ep, tls, args.put, per_stream, args.batch, latencies[i]);
    });
  }
  for (auto& t : threads) t.join();
  const auto elapsed = Clock::now() - start;
  for (const Status& s : results) {
    if (!s.ok()) return s;
  }
  return gathered(elapsed, latencies, per_stream * args.streams);
}

// One authrpc stream on its own connection.
asio::awaitable<Status> authrpc_stream(authrpc::Client& client, const Args& args,
                                       std::uint64_t total, std::vector<double>& latencies) {
  authrpc::StreamOptions options;
  options.window = args.window;
  const auto start = Clock::now();
  // (No temporaries or ?: inside the co_await: GCC 12 mishandles them.)
  std::string request;
  if (!args.put) request = std::to_string(total) + " " + std::to_string(args.batch);
  const std::string_view method = args.put ? "put" : "get";
  auto stream = co_await client.async_open_stream("bench", method, request, options);
  if (!stream.ok()) co_return stream.status();
  auto last = start;
  if (args.put) {
    const std::string& bytes = pattern(args.batch);
    for (std::uint64_t sent = 0; sent < total;) {
      const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(args.batch, total - sent));
      // As the get handler does: an unowned Payload of the process-long
      // pattern is queued up to the server's window, never copied.
      authrpc::Payload message(const_cast<char*>(bytes.data()), n, n, nullptr);
      if (Status s = co_await (*stream)->write(std::move(message)); !s.ok()) co_return s;
      latencies.push_back(us_since(last));
      last = Clock::now();
      sent += n;
    }
    auto final = co_await (*stream)->finish();
    if (!final.ok()) co_return final.status();
    if (*final != std::to_string(total)) {
      co_return Status(Errc::kDataLoss, "server received " + *final + " bytes of " + std::to_string(total));
    }
    co_return Status();
  }
  std::uint64_t got = 0;
  for (;;) {
    auto message = co_await (*stream)->read();
    if (!message.ok()) co_return message.status();
    if (!*message) break;
    got += (*message)->size();
    latencies.push_back(us_since(last));
    last = Clock::now();
  }
  if (got != total) co_return Status(Errc::kDataLoss, "received " + std::to_string(got) + " bytes");
  auto final = co_await (*stream)->finish();
  co_return final.status();
}

Result<RunResult> run_authrpc(authrpc::ClientRuntime& runtime, const Endpoint& ep,
                              const std::string& certs_dir, const Args& args, bool shm) {
  std::vector<std::unique_ptr<authrpc::Client>> clients;
  std::shared_ptr<authrpc::security::TlsClientContext> tls;
  if (ep.scheme == Endpoint::Scheme::kTls) {
    auto context = tls_client_context(certs_dir + "/ca.pem", true);
    if (!context.ok()) return context.status();
    tls = std::move(*context);
  }
  for (std::size_t i = 0; i < args.streams; ++i) {
    authrpc::ClientOptions o;
    o.endpoint = ep;
    o.mechanisms = {std::make_shared<authrpc::SimpleClientMechanism>("bench")};
    o.tls = tls;
    o.shm.enabled = shm;
    auto c = authrpc::Client::connect(runtime, std::move(o));
    if (!c.ok()) return c.status();
    clients.push_back(std::move(*c));
  }
  const std::uint64_t per_stream = args.bytes / args.streams;
  std::vector<std::vector<double>> latencies(args.streams);
  std::vector<std::future<Status>> done;
  const auto start = Clock::now();
  for (std::size_t i = 0; i < args.streams; ++i) {
    done.push_back(asio::co_spawn(clients[i]->executor(),
                                  authrpc_stream(*clients[i], args, per_stream, latencies[i]),
                                  asio::use_future));
  }
  Status failure;
  for (auto& f : done) {
    Status s = f.get();
    if (!s.ok() && failure.ok()) failure = std::move(s);
  }
  RunResult r = gathered(Clock::now() - start, latencies, per_stream * args.streams);
  if (!failure.ok()) return failure;
  if (tls) {
    if (auto info = clients.front()->tls_info()) r.note = info->version + " " + info->cipher;
  }
  return r;
}

// ---------------------------------------------------------------------------
// Reporting.

struct RowStats {
  std::string name;       // "get/tcp", "floor-stream/tcp"
  std::string transport;
  bool floor = false;
  std::vector<RunResult> runs;

  const RunResult& median_run() const {
    std::vector<std::size_t> order(runs.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(),
              [&](std::size_t a, std::size_t b) { return runs[a].mb_per_s() < runs[b].mb_per_s(); });
    return runs[order[(order.size() - 1) / 2]];
  }
  double median_mb_per_s() const { return median_run().mb_per_s(); }
};

void print_row(const RowStats& row, const Args& args) {
  const RunResult& m = row.median_run();
  std::vector<double> lat = m.latencies_us;
  std::sort(lat.begin(), lat.end());
  double sum = 0;
  for (double v : lat) sum += v;
  const char* verb = args.put ? "written" : "read";
  std::printf("Testing method: %s (%s)%s%s\n", args.put ? "DoPut" : "DoGet", row.name.c_str(),
              row.floor ? ", bare socket stream, no framework" : ", authrpc streaming call",
              m.note.empty() ? "" : (", " + m.note).c_str());
  std::printf("Number of concurrent %s: %zu\n", args.put ? "puts" : "gets", args.streams);
  std::printf("Batch size: %zu\n", args.batch);
  std::printf("Batches %s: %llu\n", verb, static_cast<unsigned long long>(m.batches));
  std::printf("Bytes %s: %llu\n", verb, static_cast<unsigned long long>(m.bytes));
  std::printf("Nanos: %lld\n", static_cast<long long>(m.elapsed.count()));
  std::printf("Speed: %.1f MB/s\n", m.mb_per_s());
  std::printf("Throughput: %.1f batches/s\n", m.batches_per_s());
  std::printf("Latency mean: %.0f us\n", lat.empty() ? 0.0 : sum / static_cast<double>(lat.size()));
  std::printf("Latency quantile=0.5: %.0f us\n", percentile(lat, 0.5));
  std::printf("Latency quantile=0.95: %.0f us\n", percentile(lat, 0.95));
  std::printf("Latency quantile=0.99: %.0f us\n", percentile(lat, 0.99));
  std::printf("Latency max: %.0f us\n", lat.empty() ? 0.0 : lat.back());
  std::printf("CPU: client %.4f s, server %.4f s: %.3f ns per byte\n", m.client_cpu_s,
              m.server_cpu_s, m.cpu_ns_per_byte());
  if (row.runs.size() > 1) {
    std::printf("Speed per run (MB/s):");
    for (const auto& r : row.runs) std::printf(" %.1f", r.mb_per_s());
    std::printf("  (the lines above: the median run)\n");
  }
  std::printf("\n");
}

// The bare stream a row is compared with: shm has none of its own (the
// component's floor is tests/shm_ring_bench.cc), its rows sit next to unix's.
std::string floor_transport(const std::string& transport) {
  return transport == "shm" ? "unix" : transport;
}

struct Target {
  std::string row;
  std::string against;
  double limit;
  // false: row MB/s >= limit x against's; true: row p50 latency <= limit x against's.
  bool latency = false;
  bool met(double ratio) const { return latency ? ratio <= limit : ratio >= limit; }
};

double p50_us(const RunResult& r) {
  std::vector<double> lat = r.latencies_us;
  std::sort(lat.begin(), lat.end());
  return percentile(lat, 0.5);
}

struct Evaluated {
  Target target;
  std::optional<double> ratio;  // medians
  std::vector<double> run_ratios;
};

const RowStats* find_row(const std::vector<RowStats>& rows, const std::string& name) {
  for (const auto& r : rows) {
    if (r.name == name && !r.runs.empty()) return &r;
  }
  return nullptr;
}

double mb_per_s(const RunResult& r) { return r.mb_per_s(); }

// `row`'s value over `against`'s: their median runs' (nullopt when
// against's is 0) and run by run.
void ratios(const RowStats& row, const RowStats& against, double (*value)(const RunResult&),
            std::optional<double>& median, std::vector<double>& per_run) {
  if (const double theirs = value(against.median_run()); theirs > 0) median = value(row.median_run()) / theirs;
  for (std::size_t i = 0; i < std::min(row.runs.size(), against.runs.size()); ++i) {
    if (const double theirs = value(against.runs[i]); theirs > 0) per_run.push_back(value(row.runs[i]) / theirs);
  }
}

Evaluated evaluate(const Target& t, const std::vector<RowStats>& rows) {
  Evaluated e{t, std::nullopt, {}};
  const RowStats* row = find_row(rows, t.row);
  const RowStats* against = find_row(rows, t.against);
  if (row == nullptr || against == nullptr || against->median_mb_per_s() <= 0) return e;
  ratios(*row, *against, t.latency ? p50_us : mb_per_s, e.ratio, e.run_ratios);
  return e;
}

// A row's floor check (floor_check.h): its MB/s over its floor's, the
// median runs' and run by run. Null for floors and rows without a floor of
// their own (shm).
struct FloorAdvantage {
  std::string floor;
  double advantage = 0;
  std::vector<double> per_run;
  bool beaten() const { return beats_floor(advantage, per_run); }
};

std::optional<FloorAdvantage> floor_advantage(const RowStats& row,
                                              const std::vector<RowStats>& rows) {
  if (row.floor || row.runs.empty() || row.transport == "shm") return std::nullopt;
  const RowStats* floor = find_row(rows, "floor-stream/" + row.transport);
  if (floor == nullptr || floor->median_mb_per_s() <= 0) return std::nullopt;
  std::optional<double> advantage;
  FloorAdvantage a{floor->name, 0, {}};
  ratios(row, *floor, mb_per_s, advantage, a.per_run);
  a.advantage = *advantage;
  return a;
}

Status write_json(const std::string& path, const std::vector<RowStats>& rows,
                  const std::vector<Evaluated>& targets, const Args& args,
                  const nlohmann::ordered_json& machine) {
  Json out_rows = Json::array();
  auto rounded = [](double v) { return std::round(v * 10) / 10; };
  for (const auto& row : rows) {
    if (row.runs.empty()) continue;
    const RunResult& m = row.median_run();
    std::vector<double> lat = m.latencies_us;
    std::sort(lat.begin(), lat.end());
    double sum = 0;
    for (double v : lat) sum += v;
    const std::string floor_name = "floor-stream/" + floor_transport(row.transport);
    const RowStats* floor = find_row(rows, floor_name);
    Json j = {{"name", row.name},
              {"method", row.floor ? "none" : "simple"},
              {"transport", row.transport},
              {"tls", row.transport == "tls"},
              {"n", m.batches},
              {"mean_us", rounded(lat.empty() ? 0.0 : sum / static_cast<double>(lat.size()))},
              {"p50_us", rounded(percentile(lat, 0.5))},
              {"p95_us", rounded(percentile(lat, 0.95))},
              {"p99_us", rounded(percentile(lat, 0.99))},
              {"max_us", rounded(lat.empty() ? 0.0 : lat.back())},
              {"per_s", rounded(m.batches_per_s())},
              {"floor", floor != nullptr ? Json(floor_name) : Json(nullptr)},
              {"ratio", floor != nullptr && floor->median_mb_per_s() > 0
                            ? Json(std::round(m.mb_per_s() / floor->median_mb_per_s() * 1000) / 1000)
                            : Json(nullptr)},
              {"mb_per_s", rounded(m.mb_per_s())},
              {"batches_per_s", rounded(m.batches_per_s())},
              {"cpu_ns_per_byte", std::round(m.cpu_ns_per_byte() * 1000) / 1000},
              {"bytes", m.bytes},
              {"nanos", m.elapsed.count()},
              {"streams", args.streams},
              {"batch", args.batch},
              {"mb_per_s_runs", Json::array()}};
    for (const auto& r : row.runs) j["mb_per_s_runs"].push_back(rounded(r.mb_per_s()));
    const auto advantage = floor_advantage(row, rows);
    j["beats_floor"] = advantage ? Json(advantage->beaten()) : Json(nullptr);
    out_rows.push_back(std::move(j));
  }
  Json out_targets = Json::array();
  for (const auto& e : targets) {
    out_targets.push_back({{"row", e.target.row},
                           {"floor", e.target.against},
                           {"limit", e.target.limit},
                           {"compare", e.target.latency ? "p50_us <= limit x floor's p50_us"
                                                         : "mb_per_s >= limit x floor's mb_per_s"},
                           {"ratio", e.ratio ? Json(std::round(*e.ratio * 1000) / 1000) : Json(nullptr)},
                           {"met", e.ratio ? Json(e.target.met(*e.ratio)) : Json(nullptr)}});
  }
  nlohmann::ordered_json run = {{"mode", args.put ? "put" : "get"},
                                {"streams", args.streams},
                                {"batch", args.batch},
                                {"bytes", args.bytes},
                                {"runs", args.runs},
                                {"window", args.window == 0 ? Json(nullptr) : Json(args.window)},
                                {"transports", args.transports}};
  run.update(machine);
  nlohmann::ordered_json doc;
  doc["rows"] = std::move(out_rows);
  doc["targets"] = std::move(out_targets);
  doc["run"] = std::move(run);
  return write_file(path, doc.dump(2) + "\n");
}

// The targets, each with its ratio and verdict, then the same comparisons by
// CPU cost and any row that beats its floor, on stdout.
std::vector<Evaluated> print_targets(const std::vector<RowStats>& rows, const Args& args) {
  const std::string m = args.put ? "put" : "get";
  std::vector<Target> targets = {{m + "/tcp", "floor-stream/tcp", 0.9},
                                 {m + "/unix", m + "/tcp", 1.0},
                                 {m + "/tls", m + "/tcp", 0.8},
                                 {m + "/shm", m + "/unix", 2.0}};
  // A get's latency is the gap between batches arriving at the reader. A
  // put's is the time write() takes to accept a batch (as Arrow's DoPut
  // measures it): near zero for the socket rows, whose writes are queued
  // until the window fills, and a copy into a slot for shm, so comparing
  // their p50s says nothing; the latency target is stated for get only.
  if (m == "get") targets.push_back({m + "/shm", m + "/unix", 0.5, /*latency=*/true});
  std::vector<Evaluated> evaluated;
  std::printf("targets (MB/s, medians of %zu run(s); batch %zu bytes%s):\n", args.runs, args.batch,
              args.batch == 128 * 1024 ? "" : ", the targets are stated for 131072");
  for (const auto& t : targets) {
    evaluated.push_back(evaluate(t, rows));
    const auto& e = evaluated.back();
    const char* what = t.latency ? "p50 latency" : "MB/s";
    const char* cmp = t.latency ? "<=" : ">=";
    if (!e.ratio) {
      std::printf("  %-10s %s %s %.2f x %s %s: not measured\n", t.row.c_str(), what, cmp, t.limit,
                  t.against.c_str(), what);
      continue;
    }
    std::printf("  %-10s %s %s %.2f x %s %s: ratio %.2f -> %s", t.row.c_str(), what, cmp, t.limit,
                t.against.c_str(), what, *e.ratio, t.met(*e.ratio) ? "met" : "NOT met");
    if (!e.run_ratios.empty()) {
      const auto [lo, hi] = std::minmax_element(e.run_ratios.begin(), e.run_ratios.end());
      std::printf("  (per-run ratio: median %.2f, range %.2f-%.2f)", median(e.run_ratios), *lo, *hi);
    }
    std::printf("\n");
  }
  // The same comparisons by CPU cost (bytes per CPU-second of client and
  // server together), which a loaded machine distorts far less than the
  // wall clock; for information.
  std::printf("by CPU cost (ns per byte, client + server; ratio = the other's cost / the row's):\n");
  for (const auto& t : targets) {
    if (t.latency) continue;
    const RowStats* row = find_row(rows, t.row);
    const RowStats* against = find_row(rows, t.against);
    if (row == nullptr || against == nullptr) continue;
    const double mine = row->median_run().cpu_ns_per_byte();
    const double theirs = against->median_run().cpu_ns_per_byte();
    std::printf("  %-10s %.2f ns/byte vs %s %.2f: ratio %.2f\n", t.row.c_str(), mine,
                t.against.c_str(), theirs, mine > 0 ? theirs / mine : 0.0);
  }
  for (const auto& row : rows) {
    const auto advantage = floor_advantage(row, rows);
    if (advantage && advantage->beaten()) {
      std::printf("%s\n", beats_floor_warning(row.name, advantage->floor, advantage->advantage, "run").c_str());
    }
  }
  return evaluated;
}

}  // namespace

int run_throughput(int argc, char** argv) {
  Args args;
  if (auto code = parse_args(argc, argv, args)) return *code;
  std::signal(SIGPIPE, SIG_IGN);
  const bool want_tls =
      std::find(args.transports.begin(), args.transports.end(), "tls") != args.transports.end();
  std::unique_ptr<ThrowawayCerts> certs;
  if (want_tls) {
    auto made = ThrowawayCerts::make();
    if (!made.ok()) {
      std::fprintf(stderr, "minibench throughput: the tls rows are skipped: %s\n",
                   made.status().to_string().c_str());
      std::erase(args.transports, std::string("tls"));
    } else {
      certs = std::move(*made);
    }
  }
  const std::string certs_dir = certs ? certs->dir() : std::string();
  pattern(args.batch);  // before the fork: the child shares it
  // When the run began (the load average then, before this run adds to it).
  const nlohmann::ordered_json machine = machine_info();
  // Forks: no thread may exist in this process yet.
  auto child = ServerChild::fork([&certs_dir](int report_fd) { run_child(report_fd, certs_dir); });
  if (!child.ok()) {
    std::fprintf(stderr, "minibench throughput: %s\n", child.status().to_string().c_str());
    return 1;
  }
  const std::map<std::string, Endpoint>& endpoints = (*child)->endpoints();
  SSL_CTX* floor_tls = certs ? floor_tls_context(false, certs_dir) : nullptr;
  struct FreeCtx {
    SSL_CTX* ctx;
    ~FreeCtx() {
      if (ctx != nullptr) SSL_CTX_free(ctx);
    }
  } free_floor_tls{floor_tls};

  const char* mode = args.put ? "put" : "get";
  std::vector<RowStats> rows;
  for (const auto& t : args.transports) {
    if (t != "shm") rows.push_back({"floor-stream/" + t, t, true, {}});
    rows.push_back({std::string(mode) + "/" + t, t, false, {}});
  }
  std::printf("minibench throughput: %s, %zu stream(s), batch %zu bytes, %llu bytes per row and "
              "run, %zu run(s); server: child pid %d, 1 IO thread; client: 1 IO thread (floors: "
              "a thread per stream)\n\n",
              args.put ? "put (client to server)" : "get (server to client)", args.streams,
              args.batch, static_cast<unsigned long long>(args.bytes), args.runs,
              static_cast<int>((*child)->pid()));
  std::fflush(stdout);

  // Each floor with its row (or a row alone: shm); the runs alternate which
  // goes first (rotation.h).
  std::vector<std::size_t> groups;
  for (std::size_t k = 0; k < rows.size(); k += groups.back()) {
    groups.push_back(rows[k].floor && k + 1 < rows.size() ? 2 : 1);
  }
  authrpc::ClientRuntime runtime(1);
  for (const Turn& t : rotation(groups, args.runs, false)) {
    RowStats& row = rows[t.side];
    const std::string key = row.floor ? "floor/" + row.transport : "authrpc/" + floor_transport(row.transport);
    const auto it = endpoints.find(key);
    if (it == endpoints.end()) {
      std::fprintf(stderr, "minibench throughput: no %s endpoint\n", key.c_str());
      return 1;
    }
    if (!args.quiet) std::fprintf(stderr, "[run %zu/%zu] %s ...\n", t.block + 1, args.runs, row.name.c_str());
    const double client_before = cpu_seconds(::getpid());
    const double server_before = cpu_seconds((*child)->pid());
    auto result = row.floor ? run_floor(it->second, row.transport == "tls" ? floor_tls : nullptr, args)
                            : run_authrpc(runtime, it->second, certs_dir, args, row.transport == "shm");
    if (!result.ok()) {
      std::fprintf(stderr, "minibench throughput: %s: %s\n", row.name.c_str(), result.status().to_string().c_str());
      return 1;
    }
    result->client_cpu_s = cpu_seconds(::getpid()) - client_before;
    result->server_cpu_s = cpu_seconds((*child)->pid()) - server_before;
    row.runs.push_back(std::move(*result));
  }
  (*child)->stop();

  for (const auto& row : rows) print_row(row, args);
  const std::vector<Evaluated> evaluated = print_targets(rows, args);
  if (!args.json.empty()) {
    if (Status s = write_json(args.json, rows, evaluated, args, machine); !s.ok()) {
      std::fprintf(stderr, "minibench throughput: %s\n", s.to_string().c_str());
      return 1;
    }
  }
  return 0;
}

}  // namespace minibench
