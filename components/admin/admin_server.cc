#include "authrpc/components/admin/admin_server.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <exception>
#include <mutex>
#include <span>
#include <prometheus/client_metric.h>
#include <prometheus/metric_family.h>
#include <prometheus/text_serializer.h>

#include "authrpc/components/admin/admin_request.h"
#include "authrpc/server/server.h"

namespace authrpc {
namespace {

Status config_error(std::string message) { return {Errc::kConfigError, std::move(message)}; }

// Bounds on what peers hold (docs/SECURITY.md, "The admin listener"):
// libmicrohttpd closes a connection idle this long, refuses connections
// over the total or over the per-address limit (the same 64 as the RPC
// listener's max_unauthenticated_per_address), and answers 414 or 431 to a
// request line or headers that do not fit a connection's memory.
constexpr unsigned kIdleTimeoutSeconds = 10;
constexpr unsigned kMaxConnections = 1024;
constexpr unsigned kMaxConnectionsPerAddress = 64;
constexpr std::size_t kConnectionMemory = 16 * 1024;

struct ListenAddress {
  bool ipv6 = false;
  bool loopback = false;
  sockaddr_storage address{};  // port included
};

// "HOST:PORT" with HOST an IPv4 address, "localhost" or "[IPv6]".
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
  } else if (text.front() == '[' && ::inet_pton(AF_INET6, host.c_str(), &v6->sin6_addr) == 1) {
    if (MHD_is_feature_supported(MHD_FEATURE_IPv6) != MHD_YES) {
      return bad("this libmicrohttpd library was built without IPv6; listen on an IPv4 address");
    }
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(port);
    out.ipv6 = true;
    out.loopback = IN6_IS_ADDR_LOOPBACK(&v6->sin6_addr);
  } else {
    return bad("the host must be an IPv4 address, localhost or [an IPv6 address]");
  }
  return out;
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

// One answer, queued whole: Content-Length (libmicrohttpd's, also on HEAD,
// whose body it leaves out), no caching, and the connection closes after
// it, so a connection lives for one request. False if libmicrohttpd could
// not queue it (the connection is then closed).
bool reply(MHD_Connection* connection, unsigned status, const char* content_type, std::string_view body,
           const char* allow = nullptr) {
  MHD_Response* response = MHD_create_response_from_buffer(body.size(), const_cast<char*>(body.data()),
                                                           MHD_RESPMEM_MUST_COPY);
  if (response == nullptr) return false;
  bool ok = MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE, content_type) == MHD_YES &&
            MHD_add_response_header(response, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store") == MHD_YES &&
            MHD_add_response_header(response, MHD_HTTP_HEADER_CONNECTION, "close") == MHD_YES &&
            (allow == nullptr || MHD_add_response_header(response, MHD_HTTP_HEADER_ALLOW, allow) == MHD_YES);
  ok = ok && MHD_queue_response(connection, status, response) == MHD_YES;
  MHD_destroy_response(response);
  return ok;
}

// Keeps the request target as sent: libmicrohttpd would percent-decode it.
std::size_t keep_escaped(void*, MHD_Connection*, char* text) { return std::strlen(text); }

// A request's Host fields: the first two values (a second is already a
// refusal) and how many there are. Filled without allocating, from a C
// callback.
struct HostFields {
  std::array<std::string_view, 2> values;
  std::size_t count = 0;

  std::span<const std::string_view> seen() const { return {values.data(), std::min(count, values.size())}; }
};

MHD_Result collect_host(void* fields, MHD_ValueKind, const char* key, std::size_t key_size, const char* value,
                        std::size_t value_size) noexcept {
  constexpr std::string_view kHost = "host";  // header names are case-insensitive
  const std::string_view name(key, key_size);
  if (name.size() != kHost.size() ||
      !std::equal(name.begin(), name.end(), kHost.begin(), [](char c, char h) { return (c | 0x20) == h; })) {
    return MHD_YES;
  }
  auto& hosts = *static_cast<HostFields*>(fields);
  if (hosts.count < hosts.values.size()) hosts.values[hosts.count] = std::string_view(value, value_size);
  ++hosts.count;
  return MHD_YES;
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

// The handler of every request: libmicrohttpd calls it on its polling
// threads, once a request's headers are in, and answers at once (a body is
// never read). Never lets an exception reach libmicrohttpd (C code).
class AdminServer::Impl {
 public:
  Impl(AdminOptions options, std::vector<std::string> host_names)
      : options_(std::move(options)), host_names_(std::move(host_names)) {}

  static MHD_Result on_request(void* self, MHD_Connection* connection, const char* target, const char* method,
                               const char*, const char*, std::size_t*, void**) noexcept {
    return static_cast<Impl*>(self)->answer(connection, method, target) ? MHD_YES : MHD_NO;
  }

  // libmicrohttpd's messages: kept while start() runs, to say why it
  // failed; after that, logged at debug (a peer can cause them).
  static void on_message(void* self, const char* format, va_list args) noexcept {
    auto& impl = *static_cast<Impl*>(self);
    try {
      char text[512];
      std::vsnprintf(text, sizeof text, format, args);
      std::string_view message(text);
      while (!message.empty() && (message.back() == '\n' || message.back() == '.')) message.remove_suffix(1);
      std::lock_guard lock(impl.messages_mu_);
      if (impl.starting_) {
        impl.start_messages_ += (impl.start_messages_.empty() ? "" : "; ") + std::string(message);
      } else if (impl.options_.log.enabled(LogLevel::kDebug)) {
        impl.options_.log(LogLevel::kDebug, "admin listener: libmicrohttpd: " + std::string(message));
      }
    } catch (...) {
    }
  }

  // Why start() failed, from libmicrohttpd's messages; ends the start.
  std::string end_start() {
    std::lock_guard lock(messages_mu_);
    starting_ = false;
    return start_messages_.empty() ? "libmicrohttpd could not start" : std::move(start_messages_);
  }

  const AdminOptions& options() const { return options_; }

  std::mutex stop_mu;
  MHD_Daemon* daemon = nullptr;  // null once stopped
  std::uint16_t port = 0;

 private:
  bool answer(MHD_Connection* connection, const char* method, const char* target) noexcept {
    try {
      HostFields hosts;
      MHD_get_connection_values_n(connection, MHD_HEADER_KIND, collect_host, &hosts);
      const AdminRequest request{method != nullptr ? method : "", target != nullptr ? target : "", hosts.seen()};
      switch (decide_admin_request(request, host_names_)) {
        case AdminAnswer::kMetrics:
          return reply(connection, 200, kPrometheusContentType, prometheus_text(options_.metrics->snapshot()));
        case AdminAnswer::kHealthz: return reply(connection, 200, kTextContentType, "ok\n");
        case AdminAnswer::kReadyz: {
          const std::string failing = failing_checks();
          if (failing.empty()) return reply(connection, 200, kTextContentType, "ready\n");
          return reply(connection, 503, kTextContentType, failing);
        }
        case AdminAnswer::kNotFound:
          return reply(connection, 404, kTextContentType,
                       "not found: the admin listener serves /metrics, /healthz, /readyz\n");
        case AdminAnswer::kMethodNotAllowed:
          return reply(connection, 405, kTextContentType, "method not allowed: GET or HEAD\n", "GET, HEAD");
        case AdminAnswer::kMisdirected:
          return reply(connection, 421, kTextContentType,
                       "misdirected request: this listener answers to an IP address, localhost or its "
                       "configured host names\n");
        case AdminAnswer::kBadRequest:
          return reply(connection, 400, kTextContentType, "bad request: more than one Host header\n");
      }
      return false;
    } catch (const std::exception& e) {
      return internal_error(connection, e.what());
    } catch (...) {
      return internal_error(connection, "unknown exception");
    }
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

  bool internal_error(MHD_Connection* connection, std::string_view what) noexcept {
    try {
      options_.log(LogLevel::kError, "admin listener: " + std::string(what));
      return reply(connection, 500, kTextContentType, "internal error\n");
    } catch (...) {
      return false;
    }
  }

  const AdminOptions options_;
  const std::vector<std::string> host_names_;  // lower case
  std::mutex messages_mu_;
  bool starting_ = true;
  std::string start_messages_;
};

Status AdminServer::check(const AdminOptions& options) {
  if (auto where = parse_listen(options.listen); !where.ok()) return where.status();
  if (auto host_names = admin_host_names(options.hosts); !host_names.ok()) return host_names.status();
  return {};
}

Result<std::unique_ptr<AdminServer>> AdminServer::start(AdminOptions options) {
  if (!options.metrics) return config_error("admin listener: AdminOptions::metrics is required");
  if (options.threads == 0 || options.threads > 16) {
    return config_error("admin listener: threads must be from 1 to 16");
  }
  auto where = parse_listen(options.listen);
  if (!where.ok()) return where.status();
  auto host_names = admin_host_names(options.hosts);
  if (!host_names.ok()) return host_names.status();
  if (!where->loopback) {
    options.log(LogLevel::kWarning,
                "admin listener on " + options.listen +
                    ", not a loopback address: anyone who can connect learns what this server does "
                    "(/metrics); keep it behind a firewall (docs/OPERATIONS.md)");
  }
  auto impl = std::make_unique<Impl>(std::move(options), std::move(*host_names));
  // epoll, never select(): the process may hold more descriptors than
  // select() can watch (the RPC listener's connections).
  unsigned flags = MHD_USE_EPOLL_INTERNAL_THREAD | MHD_USE_ERROR_LOG;
  if (where->ipv6) flags |= MHD_USE_IPv6;
  const auto port_arg = ntohs(where->ipv6 ? reinterpret_cast<const sockaddr_in6*>(&where->address)->sin6_port
                                          : reinterpret_cast<const sockaddr_in*>(&where->address)->sin_port);
  // The pool's size; a pool of one is no pool, and its option is left out.
  MHD_OptionItem pool[] = {{MHD_OPTION_THREAD_POOL_SIZE, static_cast<intptr_t>(impl->options().threads), nullptr},
                           {MHD_OPTION_END, 0, nullptr}};
  impl->daemon = MHD_start_daemon(
      flags, port_arg, nullptr, nullptr, &Impl::on_request, impl.get(),
      MHD_OPTION_EXTERNAL_LOGGER, &Impl::on_message, impl.get(),
      MHD_OPTION_SOCK_ADDR, reinterpret_cast<sockaddr*>(&where->address),
      MHD_OPTION_ARRAY, impl->options().threads > 1 ? pool : pool + 1,
      MHD_OPTION_CONNECTION_TIMEOUT, kIdleTimeoutSeconds,
      MHD_OPTION_CONNECTION_LIMIT, kMaxConnections,
      MHD_OPTION_PER_IP_CONNECTION_LIMIT, kMaxConnectionsPerAddress,
      MHD_OPTION_CONNECTION_MEMORY_LIMIT, kConnectionMemory,
      MHD_OPTION_UNESCAPE_CALLBACK, &keep_escaped, nullptr,
      // 400 for HTTP/1.1 without Host, or with a space in the target.
      MHD_OPTION_STRICT_FOR_CLIENT, 1,
      MHD_OPTION_END);
  const std::string why = impl->end_start();
  if (impl->daemon == nullptr) {
    return Status(Errc::kUnavailable, "admin listener: cannot listen on " + impl->options().listen + ": " + why);
  }
  const MHD_DaemonInfo* bound = MHD_get_daemon_info(impl->daemon, MHD_DAEMON_INFO_BIND_PORT);
  if (bound == nullptr || bound->port == 0) {
    MHD_stop_daemon(impl->daemon);
    return Status(Errc::kInternal, "admin listener: libmicrohttpd reports no listening port");
  }
  impl->port = bound->port;
  return std::unique_ptr<AdminServer>(new AdminServer(std::move(impl)));
}

AdminServer::AdminServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

AdminServer::~AdminServer() { stop(); }

std::uint16_t AdminServer::port() const { return impl_->port; }

void AdminServer::stop() {
  std::lock_guard lock(impl_->stop_mu);
  if (impl_->daemon == nullptr) return;
  MHD_stop_daemon(impl_->daemon);  // joins its threads, closes every connection
  impl_->daemon = nullptr;
}

}  // namespace authrpc
