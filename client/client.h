// Client: one authenticated connection to a server, carrying any number of
// concurrent calls (multiplexed by call id). Calls are blocking (call),
// future-based (call_future) or coroutines (async_call, on the client's
// executor). Errors are typed: see base/status.h and retry_advice().
//
// A Client lives on one executor; its blocking methods may be called from any
// thread except that executor's own (they would deadlock and fail instead).
#pragma once

#include <asio/any_io_executor.hpp>
#include <asio/awaitable.hpp>
#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "authrpc/auth/mechanism.h"
#include "authrpc/base/metrics.h"
#include "authrpc/base/result.h"
#include "authrpc/client/client_runtime.h"
#include "authrpc/client/client_stream.h"
#include "authrpc/rpc/endpoint.h"
#include "authrpc/rpc/security_requirement.h"
#include "authrpc/rpc/shm_options.h"
#include "authrpc/rpc/transport.h"

namespace authrpc {
namespace security {
class TlsClientContext;
}

struct ClientOptions {
  Endpoint endpoint;
  // Shared memory for streaming calls on unix:// connections (docs/SHM.md,
  // "Integration"): offered after authentication if enabled and the
  // server's SO_PEERCRED passes `shm.peer`; else streams use the socket.
  ShmOptions shm;
  // Mechanisms the client allows, in its order of preference. The first is
  // proposed at once; if the server refuses it, the client picks the first of
  // the server's mechanisms it allows. It never uses a mechanism not listed.
  std::vector<std::shared_ptr<ClientMechanism>> mechanisms;
  // Bound on connect + negotiation.
  std::chrono::milliseconds connect_timeout{10'000};
  // tcp:// and tls:// only (a unix: endpoint refuses it, kInvalidArgument):
  // the IP address the connection comes from (empty: the kernel's choice).
  // A process that holds many connections to one server spreads them over
  // several source addresses (127.0.0.2, 127.0.0.3, ... on loopback), since
  // one address has only the ephemeral port range (~28,000) for them.
  std::string local_address;
  // 0: none. Otherwise, once authenticated, the client looks every
  // `keepalive` and sends a PING if it sent nothing since it last looked, so
  // that a connection kept open for later is not closed by the server's idle
  // timeout (docs/CONFIG.md, idle_timeout_ms) or by state-keeping
  // middleboxes. The gap between frames can reach twice this: set it below
  // half the server's idle timeout. The server answers PONG; a PING is 12
  // bytes.
  std::chrono::milliseconds keepalive{0};
  // Deadline for calls that set none; 0: none.
  std::chrono::milliseconds default_call_timeout{0};
  std::size_t max_frame_size = 16 * 1024 * 1024;
  // true: connect returns once the server has authenticated us (and we it).
  // false: connect returns once the client's last negotiation message is queued;
  // the first calls then travel in the same flight as the negotiation and
  // report any authentication failure themselves (fewest round trips).
  bool wait_for_authentication = true;
  // TLS (docs/TLS.md): the context (CA bundle, optional client certificate,
  // session cache), shared by every client of the process. Encryption policy
  // unset: required for a tls:// endpoint, else disabled. `optional` tries
  // TLS and falls back to plaintext if the server does not speak it.
  // Authentication: `required` never uses `simple`; `disabled` only `simple`.
  std::shared_ptr<security::TlsClientContext> tls;
  std::optional<SecurityRequirement> encryption;
  SecurityRequirement authentication = SecurityRequirement::kOptional;
  // Non-empty: act as this user (proxy user, "doAs"). The server must allow
  // the authenticated user to impersonate it (docs/AUTHZ.md), else the
  // connection fails with PERMISSION_DENIED. Never allowed over tokens.
  std::string do_as;
  // Where the client counts (docs/OPERATIONS.md): by default the process's
  // registry. Null: nothing is counted.
  std::shared_ptr<MetricsRegistry> metrics = default_metrics_registry();
};

struct CallOptions {
  std::chrono::milliseconds timeout{0};  // 0: ClientOptions::default_call_timeout
};

// Reads a successful response's payload where the client received it (a
// payload codec parsing it in place); its Status becomes the call's.
using ResponseDecoder = std::function<Status(std::string_view payload)>;

class Client {
 public:
  // Blocking connect on a private runtime with one IO thread.
  static Result<std::unique_ptr<Client>> connect(ClientOptions options);
  // Blocking connect on a shared runtime.
  static Result<std::unique_ptr<Client>> connect(ClientRuntime& runtime, ClientOptions options);
  // Coroutine connect; the client then lives on `executor`.
  static asio::awaitable<Result<std::unique_ptr<Client>>> async_connect(
      asio::any_io_executor executor, ClientOptions options);

  ~Client();  // closes the connection; pending calls fail with kCancelled
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  Result<std::string> call(std::string_view service, std::string_view method,
                           std::string_view request, CallOptions options = {});
  std::future<Result<std::string>> call_future(std::string_view service, std::string_view method,
                                               std::string_view request, CallOptions options = {});
  // Must be awaited on the client's executor. The views must stay valid until
  // the call completes (the coroutine reads them after it starts).
  asio::awaitable<Result<std::string>> async_call(std::string_view service,
                                                  std::string_view method,
                                                  std::string_view request,
                                                  CallOptions options = {});
  // As async_call, for payload codecs: a successful response's payload goes
  // to `decode` where it was received (no copy), and the call's status is
  // decode's; an error response is the call's status and decode is not
  // called. `decode` must stay valid until the call completes.
  asio::awaitable<Status> async_call_decoded(std::string_view service, std::string_view method,
                                             std::string_view request,
                                             const ResponseDecoder& decode,
                                             CallOptions options = {});
  // Opens a streaming call (Service::add_stream on the server) with
  // `request` as its opening message; must be awaited on the client's
  // executor. Waits for authentication first. kUnimplemented if the server
  // does not support streaming calls. docs/DATAPLANE.md.
  asio::awaitable<Result<std::unique_ptr<ClientStream>>> async_open_stream(
      std::string_view service, std::string_view method, std::string_view request,
      StreamOptions options = {});
  // JSON in, JSON out; a response that is not JSON is kDataLoss.
  Result<nlohmann::json> call_json(std::string_view service, std::string_view method,
                                   const nlohmann::json& request, CallOptions options = {});

  // Waits until negotiation has finished (immediate with wait_for_authentication).
  asio::awaitable<Status> async_wait_authenticated();
  // The mechanism negotiated ("" until then) and the user the server saw.
  std::string mechanism() const;
  std::string authenticated_user() const;
  // The TLS parameters of the connection; nullopt if it is not TLS.
  std::optional<TlsInfo> tls_info() const;
  // Why the connection is unusable, or OK while it is usable.
  Status connection_status() const;
  const asio::any_io_executor& executor() const noexcept;

  // Closes the connection; pending calls fail with kCancelled. Idempotent.
  void close();

  class Connection;

 private:
  Client(std::shared_ptr<Connection> connection, std::unique_ptr<ClientRuntime> own_runtime,
         asio::io_context* context);
  Status check_not_on_io_thread() const;

  std::unique_ptr<ClientRuntime> own_runtime_;  // destroyed last
  std::shared_ptr<Connection> connection_;
  asio::io_context* context_;  // the runtime's, which close() waits on; null after async_connect
};

}  // namespace authrpc
