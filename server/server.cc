#include "authrpc/server/server.h"

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/post.hpp>
#include <asio/steady_timer.hpp>
#include <asio/redirect_error.hpp>
#include <asio/use_awaitable.hpp>

#include <fcntl.h>
#include <sys/resource.h>

#include <algorithm>
#include <cerrno>
#include <exception>
#include <future>

#include "authrpc/auth/authz/authorizer.h"
#include "authrpc/base/cycle_clock.h"
#include "authrpc/rpc/messages.h"
#include "authrpc/server/audit_log.h"
#include "authrpc/server/metrics_json.h"

#include "authrpc/server/server_connection.h"
#include "authrpc/server/listen_endpoint.h"
#include "authrpc/server/server_policy.h"
#include "authrpc/server/server_impl.h"

namespace authrpc {
namespace {

// PERMISSION_DENIED for an admin-only sys method, audited.
Status deny_admin_method(Server::Impl& server, CallContext& ctx, const std::string& reason) {
  const Identity& id = ctx.identity();
  if (server.metrics) server.metrics->denied(ServerMetrics::Denial::kAdmin);
  if (server.options.audit_log) {
    server.options.audit_log->record({"authorization", "denied", id.peer_address, id.mechanism,
                                      id.principal, id.user, id.real_user, ctx.service(),
                                      ctx.method(), reason});
  }
  return Status(Errc::kPermissionDenied, reason);
}

// The admin-only sys methods (reload_authz, stats): denied unless the
// policy in force lists the caller as an admin. Without a policy there are
// no admins: denied to everyone. Who may call is settled first; only an
// admin learns what the server cannot do (FAILED_PRECONDITION).
Status require_admin(Server::Impl& server, CallContext& ctx) {
  const auto& authorizer = server.options.authorizer;
  if (!authorizer) {
    return deny_admin_method(server, ctx,
                             "sys." + std::string(ctx.method()) +
                                 " needs an authorization policy with admins");
  }
  const auto policy = authorizer->current();
  const Identity& id = ctx.identity();
  const auto groups = policy->groups_of(id);
  if (policy->is_admin({id.user, &groups, id.peer_address})) return {};
  return deny_admin_method(server, ctx, "user '" + id.user + "' is not an authorization admin");
}

// sys.reload_authz: re-reads the ACL file; only for the policy's admins.
Result<std::string> reload_authz(Server::Impl& server, CallContext& ctx) {
  if (Status s = require_admin(server, ctx); !s.ok()) return s;
  const auto& authorizer = server.options.authorizer;
  const Identity& id = ctx.identity();
  if (Status s = authorizer->reload(); !s.ok()) {
    server.log(LogLevel::kWarning, "authorization reload refused, old policy stays: " + s.message);
    return Status(Errc::kFailedPrecondition, "reload refused, old policy stays: " + s.message);
  }
  server.log(LogLevel::kInfo, "authorization policy reloaded by " + id.user + " (generation " +
                                  std::to_string(authorizer->generation()) + ")");
  return "{\"generation\":" + std::to_string(authorizer->generation()) + "}";
}

// sys.stats: the server's metrics as JSON (server/metrics_json.h); only
// for the policy's admins, since counts by method and mechanism describe
// the deployment.
Result<std::string> stats(Server::Impl& server, CallContext& ctx) {
  if (Status s = require_admin(server, ctx); !s.ok()) return s;
  if (!server.options.metrics) return Status(Errc::kFailedPrecondition, "this server counts nothing (metrics off)");
  return metrics_json(server.options.metrics->snapshot()).dump();
}

// sys.describe: the server's services, their methods and schemas
// (describe_service(), made once in start()); a request of {"service":
// NAME} asks for one, and NOT_FOUND if there is no such service. Services
// are fixed once the server runs, so no lock is needed to read them.
Result<std::string> describe(const Server::Impl& server, std::string_view request) {
  if (!request.empty()) {
    auto parsed = parse_json_request(request, JsonLimits{4096, 4});
    if (!parsed.ok()) return parsed.status();
    const auto it = parsed->find("service");
    if (!parsed->is_object() || it == parsed->end() || !it->is_string() || parsed->size() != 1) {
      return Status(Errc::kInvalidArgument, "sys.describe takes an empty request or {\"service\": NAME}");
    }
    const auto one = server.descriptions.find(it->get_ref<const std::string&>());
    if (one == server.descriptions.end()) return Status(Errc::kNotFound, "no service of that name");
    return "{\"services\":[" + one->second + "]}";
  }
  std::string all = "{\"services\":[";
  for (const auto& [name, description] : server.descriptions) {
    if (all.back() != '[') all += ',';
    all += description;
  }
  return all + "]}";
}

Service make_sys_service(Server::Impl& server) {
  Service sys("sys");
  sys.add_blocking("reload_authz", [&server](CallContext& ctx, std::string_view) {
    return reload_authz(server, ctx);
  });
  // Blocking: a snapshot reads /proc and takes the registry's lock.
  sys.add_blocking("stats", [&server](CallContext& ctx, std::string_view) { return stats(server, ctx); });
  sys.add("whoami", [](CallContext& ctx, std::string_view) -> Result<std::string> {
    return ctx.identity().to_json();
  });
  sys.add("describe", [&server](CallContext&, std::string_view request) { return describe(server, request); });
  sys.add("echo", [](CallContext&, std::string_view request) -> Result<std::string> {
    return Result<std::string>(std::in_place, request);
  });
  return sys;
}

// Warns of each service no caller can reach under the authorization policy
// (AuthzPolicy::nobody_may_call()): an ACL file with `default: deny` that
// does not list a service refuses every call to it, which is rarely meant.
void warn_unreachable_services(Server::Impl& impl) {
  if (!impl.options.authorizer) return;
  const auto policy = impl.options.authorizer->current();
  for (const auto& [name, service] : impl.services) {
    if (!policy->nobody_may_call(name)) continue;
    std::string methods;
    for (const auto& [method, _] : service.methods()) methods += (methods.empty() ? "" : ", ") + name + "." + method;
    const std::string& path = impl.options.authorizer->path();
    impl.log(LogLevel::kWarning, "authorization: no caller may use service '" + name + "' (" + methods + "): " +
                                     (path.empty() ? "the policy" : "the ACL file " + path) +
                                     " does not list it and its default is deny, or its ACL lists nobody; "
                                     "list it under \"services\" (docs/AUTHZ.md)");
  }
}

// (Asio reports accept errors in its own system category.)
bool out_of_descriptors(std::error_code ec) {
  return ec == asio::error::no_descriptors ||
         ec == std::error_code(ENFILE, asio::error::get_system_category()) ||
         ec == std::errc::too_many_files_open || ec == std::errc::too_many_files_open_in_system;
}

// Answers a connection accepted through the reserve descriptor: SERVER_BUSY
// if the stream takes it at once (plaintext; a TLS client would need a
// handshake first and only sees the close), then closes and destroys it.
// Input already there is read first, so that the close does not reset the
// connection and destroy the answer; nothing waits, as the descriptor must
// come back.
//
// no_sanitize("vptr"): until the stream is closed this runs with one
// descriptor free, and UBSan's vptr check reads vtables through a pipe(2),
// which needs two: it would report every virtual call here as "invalid
// vptr" (a false positive of the sanitizer runtime, seen in the ASan+UBSan
// build of preauth_budget_test). ASan still checks the memory accesses.
#if defined(__clang__) || defined(__GNUC__)
__attribute__((no_sanitize("vptr")))
#endif
void refuse_out_of_descriptors(std::unique_ptr<ByteStream> stream, std::size_t max_connections) {
  std::string frame;
  wire::append_error(frame, static_cast<std::uint16_t>(Errc::kServerBusy),
                     "server out of file descriptors (max_connections " +
                         std::to_string(max_connections) + " exceeds what its limit allows)");
  std::error_code ec;
  stream->try_write(asio::buffer(frame), ec);
  char scratch[4096];
  while (stream->try_read_some(asio::buffer(scratch), ec) > 0) {
  }
  stream->shutdown_send();
  stream->close();
  delete stream.release();  // here, where the vptr check is off, not in unique_ptr's deleter
}

// Reports accept() failures at most once per interval, with the number left
// unreported: out of descriptors, accept fails for every waiting client.
class AcceptFailureLog {
 public:
  void failed(Server::Impl& server, const Status& status) {
    const auto now = std::chrono::steady_clock::now();
    if (now < next_) {
      ++suppressed_;
      return;
    }
    std::string line = "accept failed: " + status.to_string();
    if (suppressed_ > 0) line += " (and " + std::to_string(suppressed_) + " more since the last report)";
    server.log(LogLevel::kError, line);
    suppressed_ = 0;
    next_ = now + std::chrono::seconds(10);
  }

 private:
  std::chrono::steady_clock::time_point next_{};
  std::uint64_t suppressed_ = 0;
};

// The reserve: two descriptors, one for the client waiting to be told
// SERVER_BUSY and one spare, so that the refused stream is torn down with
// descriptors free (UBSan's vptr check, for one, opens a pipe: with none
// free it reports every virtual call as an invalid vptr). Reopens what is
// missing; true when both are held.
bool reopen_reserve(Reactor& reactor) {
  for (auto& fd : reactor.reserve_fds) {
    if (!fd) fd = UniqueFd(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  }
  return reactor.reserve_fds[0] && reactor.reserve_fds[1];
}

// Closes an unauthenticated connection the budget chose to make room, on its
// own reactor.
void shed(Server::Impl& server, const PreauthBudget::Victim& victim) {
  ++server.connections_shed;
  if (victim.same_address) ++server.connections_shed_per_address;
  if (server.metrics) server.metrics->shed(victim.same_address);
  asio::post(victim.reactor->io, [connection = victim.connection] {
    if (auto c = connection.lock()) c->shed();
  });
}

asio::awaitable<void> accept_loop(Server::Impl& server, Reactor& reactor, Listener& listener) {
  AcceptFailureLog failures;
  for (;;) {
    auto stream = co_await listener.accept();
    if (!stream.ok()) {
      if (stream.code() == asio::error::operation_aborted) co_return;
      {
        std::lock_guard lock(server.mu);
        if (server.state != Server::Impl::State::kRunning) co_return;
      }
      failures.failed(server, stream.status());
      if (out_of_descriptors(stream.code())) {
        ++server.accept_out_of_descriptors;
        // The waiting client would otherwise hang until its own timeout:
        // free the reserve descriptor, take the connection, refuse it.
        if (reactor.reserve_fds[0] && reactor.reserve_fds[1]) {
          for (auto& fd : reactor.reserve_fds) fd.reset();
          auto refused = co_await listener.accept();
          if (refused.ok()) {
            ++server.connections_accepted;
            ++server.connections_refused_busy;
            if (server.metrics) {
              const auto t = ServerMetrics::transport_of((*refused)->scheme());
              server.metrics->accepted(t);
              server.metrics->refused_out_of_descriptors();
              server.metrics->closed(t, ServerMetrics::Close::kRefused);
            }
            refuse_out_of_descriptors(std::move(*refused), server.options.max_connections);
          }
          if (reopen_reserve(reactor)) continue;
        }
      }
      // Other failures, or no reserve: back off, keep serving.
      asio::steady_timer pause(reactor.io, std::chrono::milliseconds(100));
      co_await pause.async_wait(asio::use_awaitable);
      reopen_reserve(reactor);
      continue;
    }
    ++server.connections_accepted;
    if (server.metrics) server.metrics->accepted(ServerMetrics::transport_of((*stream)->scheme()));
    auto connection = std::make_shared<ServerConnection>(server, reactor, std::move(*stream));
    Status refuse;
    const auto admission = server.budget.admit(connection->peer(), connection, &reactor);
    if (admission.refused == PreauthBudget::Refusal::kMaxConnections) {
      ++server.connections_refused_busy;
      if (server.metrics) server.metrics->refused_max_connections();
      refuse = Status(Errc::kServerBusy, "too many connections (limit " +
                                              std::to_string(server.options.max_connections) + ")");
    } else if (admission.refused == PreauthBudget::Refusal::kPerAddress) {
      ++server.connections_refused_busy;
      ++server.connections_refused_per_address;
      if (server.metrics) server.metrics->refused_per_address();
      refuse = Status(Errc::kServerBusy,
                      "too many connections from this address (limit " +
                          std::to_string(server.options.max_connections_per_address) + ")");
    } else {
      connection->set_budget_ticket(admission.ticket);
      ++server.connections_active;
      if (admission.shed) shed(server, *admission.shed);
    }
    reactor.connections.insert(*connection);
    // The connection's own coroutine, ended by a handler (not a coroutine
    // wrapping it: one frame fewer per connection).
    asio::co_spawn(reactor.io, connection->run(std::move(refuse)),
                   [connection](const std::exception_ptr&) { connection->run_ended(); });
  }
}

// How often the sweeper visits every awake connection: a quarter of the
// shortest timeout (the negotiation timeout counting as at most 2 s), so
// between 10 and 500 ms.
std::chrono::milliseconds sweep_interval(const ServerOptions& o) {
  auto shortest = std::min(o.negotiation_timeout, std::chrono::milliseconds(2000));
  if (o.idle_timeout.count() > 0) shortest = std::min(shortest, o.idle_timeout);
  return std::clamp(shortest / 4, std::chrono::milliseconds(10), std::chrono::milliseconds(1000));
}

// Every `interval` a tick visits the awake connections and the parked ones
// come due; quick ticks in between, every kReleaseBuffersAfter, visit only
// the fresh ones (ReactorConnections).
asio::awaitable<void> sweep_loop(Reactor& reactor, std::chrono::milliseconds interval) {
  // `interval` in whole quick ticks of at most kReleaseBuffersAfter each.
  const auto quick_per_tick = std::max<std::chrono::milliseconds::rep>(
      1, (interval + kReleaseBuffersAfter - std::chrono::milliseconds(1)) / kReleaseBuffersAfter);
  const auto quick = interval / quick_per_tick;
  for (std::chrono::milliseconds::rep n = 1;; ++n) {
    reactor.sweeper.expires_after(quick);
    std::error_code ec;
    co_await reactor.sweeper.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    if (ec || reactor.stopping) co_return;
    const auto now = std::chrono::steady_clock::now();
    // on_tick may end a connection, which erases it from the set later (on
    // its own handlers), never during this loop. Parked connections are
    // visited only once their idle deadline is due (ReactorConnections).
    const auto visit = [now](ServerConnection& c) { c.on_tick(now); };
    if (n % quick_per_tick == 0) {
      reactor.connections.sweep(now, visit);
    } else {
      reactor.connections.sweep_fresh(visit);
    }
  }
}

// Descriptors the options need: one per connection, a listener per reactor
// and endpoint, two reserve descriptors per reactor, and a margin for the rest of the process
// (log and keytab files, replay caches, shared-memory rings in transit).
constexpr rlim_t kDescriptorMargin = 64;

// Raises the soft RLIMIT_NOFILE towards the hard limit if max_connections
// needs more, and says once if it still falls short: then clients past the
// limit get SERVER_BUSY through the reserve descriptor rather than a session
// (not refused at start: the limit may be raised later, and a smaller one is
// a working if smaller server).
void check_descriptor_limit(Server::Impl& server, std::size_t threads) {
  const rlim_t needed = server.options.max_connections +
                        threads * (server.options.endpoints.size() + 2) + kDescriptorMargin;
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return;
  if (limit.rlim_cur != RLIM_INFINITY && limit.rlim_cur < needed) {
    const rlim_t before = limit.rlim_cur;
    rlimit raised = limit;
    raised.rlim_cur = limit.rlim_max == RLIM_INFINITY ? needed : std::min(needed, limit.rlim_max);
    if (raised.rlim_cur > before && ::setrlimit(RLIMIT_NOFILE, &raised) == 0) {
      limit = raised;
      server.log(LogLevel::kInfo, "raised the soft descriptor limit (RLIMIT_NOFILE) from " +
                                      std::to_string(before) + " to " +
                                      std::to_string(limit.rlim_cur));
    }
  }
  if (limit.rlim_cur != RLIM_INFINITY && limit.rlim_cur < needed) {
    server.log(LogLevel::kWarning,
               "descriptor limit (RLIMIT_NOFILE) is " + std::to_string(limit.rlim_cur) +
                   " (hard " + std::to_string(limit.rlim_max) + "), below the " +
                   std::to_string(needed) + " that max_connections " +
                   std::to_string(server.options.max_connections) +
                   " needs: clients past the limit get SERVER_BUSY; raise the limit "
                   "(ulimit -n, systemd LimitNOFILE=) or lower max_connections");
  }
}

}  // namespace

Server::Impl::Impl(ServerOptions o)
    : options(std::move(o)),
      budget({options.max_unauthenticated, options.max_unauthenticated_per_address,
              options.max_connections, options.max_connections_per_address,
              options.max_connections_per_user}) {
  services.emplace("sys", make_sys_service(*this));
}

const Service::Method* Server::Impl::find_method(std::string_view service,
                                                 std::string_view method,
                                                 std::string_view* service_name,
                                                 std::string_view* method_name,
                                                 std::string_view* names_wire) const {
  const auto s = services.find(service);
  if (s == services.end()) return nullptr;
  const auto m = s->second.methods().find(method);
  if (m == s->second.methods().end()) return nullptr;
  *service_name = s->first;
  *method_name = m->first;
  if (names_wire != nullptr) {
    const auto names = request_names.find(&m->second);
    *names_wire = names != request_names.end() ? std::string_view(names->second) : std::string_view();
  }
  return &m->second;
}

Server::Server(ServerOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}

Server::~Server() {
  stop();
  if (impl_->unauthenticated_gauge != 0) {
    impl_->options.metrics->remove_callback(impl_->unauthenticated_gauge);
  }
}

Status Server::add_service(Service service) {
  std::lock_guard lock(impl_->mu);
  if (impl_->state != Impl::State::kNew) {
    return {Errc::kFailedPrecondition, "add_service after start"};
  }
  if (service.name().empty()) return {Errc::kInvalidArgument, "service name is empty"};
  if (!service.status().ok()) return service.status();
  const std::string name = service.name();
  if (!impl_->services.emplace(name, std::move(service)).second) {
    return {Errc::kAlreadyExists, "service '" + name + "' already registered (or reserved)"};
  }
  return {};
}

Status Server::start() {
  std::unique_lock lock(impl_->mu);
  if (impl_->state != Impl::State::kNew) return {Errc::kFailedPrecondition, "already started"};
  if (Status s = validate_server_options(impl_->options); !s.ok()) return s;
  for (const auto& [service_name, service] : impl_->services) {
    for (const auto& [method_name, method] : service.methods()) {
      impl_->request_names[&method] = wire::encode_request_names(service_name, method_name);
    }
    impl_->descriptions[service_name] = describe_service(service).dump();
  }

  std::size_t threads = impl_->options.io_threads;
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  for (std::size_t i = 0; i < threads; ++i) impl_->reactors.push_back(std::make_unique<Reactor>());
  check_descriptor_limit(*impl_, threads);

  for (const auto& endpoint : impl_->options.endpoints) {
    auto& first = *impl_->reactors.front();
    auto listener = listen_endpoint(first.io, endpoint, impl_->options);
    if (!listener.ok()) {
      impl_->reactors.clear();
      impl_->bound.clear();
      return listener.status();
    }
    impl_->bound.push_back((*listener)->local_endpoint());
    for (std::size_t i = 1; i < threads; ++i) {
      auto shared = (*listener)->share_with(impl_->reactors[i]->io);
      if (!shared.ok()) {
        impl_->reactors.clear();
        impl_->bound.clear();
        return shared.status();
      }
      impl_->reactors[i]->listeners.push_back(std::move(*shared));
    }
    first.listeners.push_back(std::move(*listener));
  }

  if (impl_->options.metrics && !impl_->metrics) {
    impl_->metrics = std::make_unique<ServerMetrics>(impl_->options.metrics, impl_->options,
                                                     impl_->services);
    impl_->unauthenticated_gauge = impl_->options.metrics->gauge_callback(
        "authrpc_server_connections_unauthenticated", "Connections negotiating now.", {},
        [impl = impl_.get()] { return static_cast<double>(impl->budget.unauthenticated()); });
    // The clock of the calls' processing time measures its rate at its
    // first read (~200 µs): here, not in the first call.
    (void)CycleClock::now();
  }
  impl_->blocking_pool = std::make_unique<asio::thread_pool>(impl_->options.blocking_threads);
  for (auto& reactor : impl_->reactors) {
    reactor->work.emplace(reactor->io.get_executor());
    reopen_reserve(*reactor);
    for (auto& listener : reactor->listeners) {
      asio::co_spawn(reactor->io, accept_loop(*impl_, *reactor, *listener), asio::detached);
    }
    asio::co_spawn(reactor->io, sweep_loop(*reactor, sweep_interval(impl_->options)),
                   asio::detached);
    reactor->thread = std::thread([r = reactor.get()] {
      r->io.run();
      r->exited.set_value();
    });
  }
  impl_->state = Impl::State::kRunning;
  std::string where;
  for (const auto& ep : impl_->bound) where += " " + ep.to_string();
  impl_->log(LogLevel::kInfo, "serving on" + where);
  warn_unreachable_services(*impl_);
  return {};
}

std::vector<Endpoint> Server::bound_endpoints() const {
  std::lock_guard lock(impl_->mu);
  return impl_->bound;
}

void Server::stop() {
  {
    std::lock_guard lock(impl_->mu);
    if (impl_->state != Impl::State::kRunning) {
      if (impl_->state == Impl::State::kNew) impl_->state = Impl::State::kStopped;
      return;
    }
    impl_->state = Impl::State::kStopping;
  }
  auto each_reactor = [this](auto fn) {
    for (auto& reactor : impl_->reactors) {
      asio::post(reactor->io, [r = reactor.get(), fn] { fn(*r); });
    }
  };
  // Each connection is held while it is told: telling one may end it (and
  // move or erase list entries) before the walk is over.
  auto held = [](Reactor& r) {
    std::vector<std::shared_ptr<ServerConnection>> all;
    r.connections.for_each([&all](ServerConnection& c) {
      if (auto self = c.weak_from_this().lock()) all.push_back(std::move(self));
    });
    return all;
  };
  each_reactor([held](Reactor& r) {
    for (auto& l : r.listeners) l->close();
    for (auto& c : held(r)) c->go_away();
  });
  {
    std::unique_lock lock(impl_->mu);
    impl_->cv.wait_for(lock, impl_->options.stop_grace,
                       [this] { return impl_->connections_active.load() == 0; });
  }
  each_reactor([held](Reactor& r) {
    for (auto& c : held(r)) c->force_close();
  });
  for (auto& reactor : impl_->reactors) {
    asio::post(reactor->io, [r = reactor.get()] {
      r->stopping = true;
      r->sweeper.cancel();
      r->work.reset();
    });
  }
  // Closed connections end within a turn or two of the loop. An async
  // handler that ignores cancellation would keep its loop running: after a
  // short drain the loop is stopped and such handlers are abandoned.
  for (auto& reactor : impl_->reactors) {
    if (reactor->exited.get_future().wait_for(std::chrono::milliseconds(250)) !=
        std::future_status::ready) {
      impl_->log(LogLevel::kWarning, "abandoning async handlers still running at stop");
      reactor->io.stop();
    }
    if (reactor->thread.joinable()) reactor->thread.join();
  }
  impl_->blocking_pool->join();
  for (auto& reactor : impl_->reactors) reactor->listeners.clear();
  {
    std::lock_guard lock(impl_->mu);
    impl_->state = Impl::State::kStopped;
  }
  impl_->cv.notify_all();
  impl_->log(LogLevel::kInfo, "stopped");
}

void Server::wait() {
  std::unique_lock lock(impl_->mu);
  impl_->cv.wait(lock, [this] {
    return impl_->state == Impl::State::kStopped || impl_->state == Impl::State::kNew;
  });
}

bool Server::serving() const {
  std::lock_guard lock(impl_->mu);
  return impl_->state == Impl::State::kRunning;
}

const std::shared_ptr<MetricsRegistry>& Server::metrics() const { return impl_->options.metrics; }

ServerStats Server::stats() const {
  ServerStats s;
  s.connections_accepted = impl_->connections_accepted.load();
  s.connections_active = impl_->connections_active.load();
  s.connections_parked = impl_->connections_parked.load();
  s.connections_refused_busy = impl_->connections_refused_busy.load();
  s.connections_refused_per_address = impl_->connections_refused_per_address.load();
  s.connections_refused_per_user = impl_->connections_refused_per_user.load();
  s.connections_unauthenticated = impl_->budget.unauthenticated();
  s.connections_shed = impl_->connections_shed.load();
  s.connections_shed_per_address = impl_->connections_shed_per_address.load();
  s.accept_out_of_descriptors = impl_->accept_out_of_descriptors.load();
  s.negotiation_failures = impl_->negotiation_failures.load();
  s.protocol_errors = impl_->protocol_errors.load();
  s.calls_ok = impl_->calls_ok.load();
  s.calls_failed = impl_->calls_failed.load();
  s.buffered_bytes = static_cast<std::uint64_t>(std::max<std::int64_t>(0, impl_->buffered_bytes.load()));
  s.reads_paused_for_memory = impl_->reads_paused_for_memory.load();
  return s;
}

}  // namespace authrpc
