#include "authrpc/server/admin_server.h"

#include <CivetServer.h>
#include <arpa/inet.h>
#include <civetweb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <exception>
#include <mutex>
#include <prometheus/client_metric.h>
#include <prometheus/metric_family.h>
#include <prometheus/text_serializer.h>

#include "authrpc/server/server.h"

namespace authrpc {
namespace {

Status config_error(std::string message) { return {Errc::kConfigError, std::move(message)}; }

// civetweb's feature bit for IPv6 (civetweb.h, mg_check_feature).
constexpr unsigned kCivetwebIpv6 = 8;

struct ListenAddress {
  bool ipv6 = false;
  bool loopback = false;
  sockaddr_storage address{};  // port included, for the bind probe
  std::string civetweb;        // listening_ports syntax: "A.B.C.D:P" or "[X::Y]:P"
};

// "HOST:PORT" with HOST an IPv4 address, "localhost" or "[IPv6]". Strict:
// civetweb's listening_ports also reads suffixes (s, r) and lists, which
// must not slip in through a configuration value.
Result<ListenAddress> parse_listen(const std::string& text) {
  const auto bad = [&text](const std::string& why) {
    return config_error("admin listen '" + escape_for_log(text) + "': " + why);
  };
  std::string host, port_text;
  if (!text.empty() && text.front() == '[') {
    const auto close = text.find(']');
    if (close == std::string::npos || close + 1 >= text.size() || text[close + 1] != ':') {
      return bad("expected [IPV6]:PORT");
    }
    host = text.substr(1, close - 1);
    port_text = text.substr(close + 2);
  } else {
    const auto colon = text.rfind(':');
    if (colon == std::string::npos) return bad("expected HOST:PORT");
    host = text.substr(0, colon);
    port_text = text.substr(colon + 1);
  }
  if (port_text.empty() || port_text.size() > 5 ||
      port_text.find_first_not_of("0123456789") != std::string::npos || std::stoul(port_text) > 65535) {
    return bad("the port must be a number from 0 to 65535");
  }
  const auto port = static_cast<std::uint16_t>(std::stoul(port_text));
  ListenAddress out;
  if (host == "localhost") host = "127.0.0.1";
  auto* v4 = reinterpret_cast<sockaddr_in*>(&out.address);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&out.address);
  if (text.front() != '[' && ::inet_pton(AF_INET, host.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(port);
    out.loopback = (ntohl(v4->sin_addr.s_addr) >> 24) == 127;
    out.civetweb = host + ":" + port_text;
  } else if (text.front() == '[' && ::inet_pton(AF_INET6, host.c_str(), &v6->sin6_addr) == 1) {
    if (mg_check_feature(kCivetwebIpv6) == 0) {
      return bad("this civetweb library was built without IPv6; listen on an IPv4 address");
    }
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(port);
    out.ipv6 = true;
    out.loopback = IN6_IS_ADDR_LOOPBACK(&v6->sin6_addr);
    out.civetweb = "[" + host + "]:" + port_text;
  } else {
    return bad("the host must be an IPv4 address, localhost or [an IPv6 address]");
  }
  return out;
}

// Why civetweb could not listen: its exception says only "null context",
// so bind the same address once more (as civetweb does, SO_REUSEADDR) and
// report the errno.
std::string bind_failure_reason(const ListenAddress& where) {
  const int family = where.ipv6 ? AF_INET6 : AF_INET;
  const int fd = ::socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return std::strerror(errno);
  const int on = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
  const socklen_t length = where.ipv6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
  std::string reason = "civetweb could not start";
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&where.address), length) != 0) {
    reason = std::strerror(errno);
  }
  ::close(fd);
  return reason;
}

prometheus::MetricType prometheus_type(MetricType type) {
  switch (type) {
    case MetricType::kCounter: return prometheus::MetricType::Counter;
    case MetricType::kGauge: return prometheus::MetricType::Gauge;
    case MetricType::kHistogram: return prometheus::MetricType::Histogram;
  }
  return prometheus::MetricType::Untyped;
}

// HELP text escapes backslash and newline (text format 0.0.4);
// prometheus-cpp's serializer writes it as given.
std::string escape_help(std::string_view help) {
  std::string out;
  out.reserve(help.size());
  for (const char c : help) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

constexpr const char* kPrometheusContentType = "text/plain; version=0.0.4; charset=utf-8";
constexpr const char* kTextContentType = "text/plain; charset=utf-8";

// One answer, whole: the status line, headers (Content-Length always; the
// connection closes after it) and, except for HEAD, the body.
void reply(mg_connection* conn, int status, std::string_view content_type, const std::string& body,
           bool with_body, std::string_view extra_headers = {}) {
  std::string head = "HTTP/1.1 " + std::to_string(status) + " " + mg_get_response_code_text(conn, status) +
                     "\r\nContent-Type: " + std::string(content_type) +
                     "\r\nContent-Length: " + std::to_string(body.size()) +
                     "\r\nCache-Control: no-store\r\nConnection: close\r\n" + std::string(extra_headers) +
                     "\r\n";
  mg_write(conn, head.data(), head.size());
  if (with_body && !body.empty()) mg_write(conn, body.data(), body.size());
}

}  // namespace

std::string prometheus_text(const MetricsSnapshot& snapshot) {
  std::vector<prometheus::MetricFamily> families;
  families.reserve(snapshot.size());
  for (const auto& family : snapshot) {
    prometheus::MetricFamily out;
    out.name = family.name;
    out.help = escape_help(family.help);
    out.type = prometheus_type(family.type);
    out.metric.reserve(family.samples.size());
    for (const auto& sample : family.samples) {
      prometheus::ClientMetric metric;
      for (const auto& [name, value] : sample.labels) metric.label.push_back({name, value});
      switch (family.type) {
        case MetricType::kCounter: metric.counter.value = sample.value; break;
        case MetricType::kGauge: metric.gauge.value = sample.value; break;
        case MetricType::kHistogram: {
          const auto& h = sample.histogram;
          metric.histogram.sample_count = h.count;
          metric.histogram.sample_sum = h.sum_seconds;
          // The +Inf bucket is the count; the serializer writes it.
          for (std::size_t i = 0; i < h.upper_bounds.size() && i < h.cumulative.size(); ++i) {
            metric.histogram.bucket.push_back({h.cumulative[i], h.upper_bounds[i]});
          }
          break;
        }
      }
      out.metric.push_back(std::move(metric));
    }
    families.push_back(std::move(out));
  }
  return prometheus::TextSerializer().Serialize(families);
}

std::function<Status()> server_serving_check(const Server& server) {
  return [&server]() -> Status {
    if (server.serving()) return {};
    return {Errc::kUnavailable, "not serving (not started, or stopping)"};
  };
}

// The handler of every path: civetweb calls it on its worker threads, one
// request each. Never lets an exception reach civetweb (C code).
class AdminServer::Impl final : public CivetHandler {
 public:
  explicit Impl(AdminOptions options) : options_(std::move(options)) {}

  bool handleGet(CivetServer*, mg_connection* conn) override { return answer(conn, true); }
  bool handleHead(CivetServer*, mg_connection* conn) override { return answer(conn, false); }
  bool handlePost(CivetServer*, mg_connection* conn) override { return not_allowed(conn); }
  bool handlePut(CivetServer*, mg_connection* conn) override { return not_allowed(conn); }
  bool handleDelete(CivetServer*, mg_connection* conn) override { return not_allowed(conn); }
  bool handleOptions(CivetServer*, mg_connection* conn) override { return not_allowed(conn); }
  bool handlePatch(CivetServer*, mg_connection* conn) override { return not_allowed(conn); }

  const AdminOptions& options() const { return options_; }

  std::mutex stop_mu;
  std::unique_ptr<CivetServer> civet;  // null once stopped
  std::uint16_t port = 0;

 private:
  bool answer(mg_connection* conn, bool with_body) noexcept {
    try {
      const mg_request_info* request = mg_get_request_info(conn);
      const std::string_view path = request != nullptr && request->local_uri != nullptr ? request->local_uri : "";
      if (path == "/metrics") {
        reply(conn, 200, kPrometheusContentType, prometheus_text(options_.metrics->snapshot()), with_body);
      } else if (path == "/healthz") {
        reply(conn, 200, kTextContentType, "ok\n", with_body);
      } else if (path == "/readyz") {
        const std::string failing = failing_checks();
        if (failing.empty()) {
          reply(conn, 200, kTextContentType, "ready\n", with_body);
        } else {
          reply(conn, 503, kTextContentType, failing, with_body);
        }
      } else {
        reply(conn, 404, kTextContentType, "not found: the admin listener serves /metrics, /healthz, /readyz\n",
              with_body);
      }
    } catch (const std::exception& e) {
      internal_error(conn, e.what());
    } catch (...) {
      internal_error(conn, "unknown exception");
    }
    return true;
  }

  // One line per failing check, "name: reason", the reason escaped as a
  // log line is (it may quote a peer or a file).
  std::string failing_checks() const {
    std::string out;
    for (const auto& [name, check] : options_.readiness) {
      Status status;
      try {
        status = check ? check() : Status();
      } catch (const std::exception& e) {
        status = Status(Errc::kInternal, std::string("the check threw: ") + e.what());
      }
      if (!status.ok()) out += escape_for_log(name) + ": " + escape_for_log(status.message) + "\n";
    }
    return out;
  }

  bool not_allowed(mg_connection* conn) noexcept {
    try {
      reply(conn, 405, kTextContentType, "method not allowed: GET or HEAD\n", true, "Allow: GET, HEAD\r\n");
    } catch (...) {
    }
    return true;
  }

  void internal_error(mg_connection* conn, std::string_view what) noexcept {
    try {
      options_.log(LogLevel::kError, "admin listener: " + std::string(what));
      reply(conn, 500, kTextContentType, "internal error\n", true);
    } catch (...) {
    }
  }

  const AdminOptions options_;
};

Result<std::unique_ptr<AdminServer>> AdminServer::start(AdminOptions options) {
  if (!options.metrics) return config_error("admin listener: AdminOptions::metrics is required");
  if (options.threads == 0 || options.threads > 16) {
    return config_error("admin listener: threads must be from 1 to 16");
  }
  auto where = parse_listen(options.listen);
  if (!where.ok()) return where.status();
  if (!where->loopback) {
    options.log(LogLevel::kWarning,
                "admin listener on " + options.listen +
                    ", not a loopback address: anyone who can connect learns what this server does "
                    "(/metrics); keep it behind a firewall (docs/OPERATIONS.md)");
  }
  const std::vector<std::string> civet_options = {
      "listening_ports", where->civetweb,
      "num_threads", std::to_string(options.threads),
      "request_timeout_ms", "10000",
      "enable_directory_listing", "no",
      "enable_keep_alive", "no",
  };
  auto impl = std::make_unique<Impl>(std::move(options));
  try {
    impl->civet = std::make_unique<CivetServer>(civet_options);
  } catch (const CivetException&) {
    return config_error("admin listener: cannot listen on " + impl->options().listen + ": " +
                        bind_failure_reason(*where));
  }
  impl->civet->addHandler("/", impl.get());
  const auto ports = impl->civet->getListeningPorts();
  if (ports.empty() || ports.front() <= 0 || ports.front() > 65535) {
    return Status(Errc::kInternal, "admin listener: civetweb reports no listening port");
  }
  impl->port = static_cast<std::uint16_t>(ports.front());
  return std::unique_ptr<AdminServer>(new AdminServer(std::move(impl)));
}

AdminServer::AdminServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

AdminServer::~AdminServer() { stop(); }

std::uint16_t AdminServer::port() const { return impl_->port; }

void AdminServer::stop() {
  std::lock_guard lock(impl_->stop_mu);
  if (!impl_->civet) return;
  impl_->civet->close();  // mg_stop: waits for the workers
  impl_->civet.reset();
}

}  // namespace authrpc
