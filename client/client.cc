#include "authrpc/client/client.h"

#include <asio/co_spawn.hpp>
#include <asio/dispatch.hpp>
#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <asio/use_future.hpp>

#include "authrpc/client/client_connection.h"

namespace authrpc {

Client::Client(std::shared_ptr<Connection> connection, std::unique_ptr<ClientRuntime> own_runtime,
               asio::io_context* context)
    : own_runtime_(std::move(own_runtime)), connection_(std::move(connection)), context_(context) {}

Client::~Client() { close(); }

asio::awaitable<Result<std::unique_ptr<Client>>> Client::async_connect(
    asio::any_io_executor executor, ClientOptions options) {
  auto connection = std::make_shared<Connection>(executor, std::move(options));
  Status s = co_await connection->open();
  if (!s.ok()) {
    connection->close(s);
    co_return s;
  }
  co_return std::unique_ptr<Client>(new Client(std::move(connection), nullptr, nullptr));
}

Result<std::unique_ptr<Client>> Client::connect(ClientRuntime& runtime, ClientOptions options) {
  asio::io_context& io = runtime.next_context();
  if (io.get_executor().running_in_this_thread()) {
    return Status(Errc::kFailedPrecondition, "blocking connect on the runtime's own IO thread");
  }
  auto future = asio::co_spawn(io, async_connect(io.get_executor(), std::move(options)),
                               asio::use_future);
  auto result = future.get();
  if (result.ok()) (*result)->context_ = &io;
  return result;
}

Result<std::unique_ptr<Client>> Client::connect(ClientOptions options) {
  auto runtime = std::make_unique<ClientRuntime>(1);
  auto result = connect(*runtime, std::move(options));
  if (!result.ok()) return result;
  (*result)->own_runtime_ = std::move(runtime);
  return result;
}

// Whatever made the client (a runtime, or async_connect on an executor of
// the caller's): a thread running the connection's io_context.
Status Client::check_not_on_io_thread() const {
  const auto* io = connection_->executor().target<asio::io_context::executor_type>();
  if (io != nullptr && io->running_in_this_thread()) {
    return {Errc::kFailedPrecondition,
            "blocking call on the client's own IO thread would deadlock; use async_call"};
  }
  return {};
}

asio::awaitable<Result<std::string>> Client::async_call(std::string_view service,
                                                        std::string_view method,
                                                        std::string_view request,
                                                        CallOptions options) {
  // Keep the connection alive even if the Client is destroyed meanwhile.
  // Not a coroutine of its own: the call's keeps the connection alive.
  return connection_->call(connection_, service, method, request, options);
}

asio::awaitable<Status> Client::async_call_decoded(std::string_view service,
                                                   std::string_view method,
                                                   std::string_view request,
                                                   const ResponseDecoder& decode,
                                                   CallOptions options) {
  return connection_->call_decoded(connection_, service, method, request, decode, options);
}

std::future<Result<std::string>> Client::call_future(std::string_view service,
                                                     std::string_view method,
                                                     std::string_view request,
                                                     CallOptions options) {
  return asio::co_spawn(
      connection_->executor(),
      [connection = connection_, service = std::string(service), method = std::string(method),
       request = std::string(request), options]() -> asio::awaitable<Result<std::string>> {
        co_return co_await connection->call(connection, service, method, request, options);
      },
      asio::use_future);
}

Result<std::string> Client::call(std::string_view service, std::string_view method,
                                 std::string_view request, CallOptions options) {
  if (Status s = check_not_on_io_thread(); !s.ok()) return s;
  return call_future(service, method, request, options).get();
}

asio::awaitable<Result<std::unique_ptr<ClientStream>>> Client::async_open_stream(
    std::string_view service, std::string_view method, std::string_view request,
    StreamOptions options) {
  auto connection = connection_;
  auto stream = co_await connection->open_stream(service, method, request, options);
  if (!stream.ok()) co_return stream.status();
  co_return std::make_unique<ClientStream>(std::move(*stream), std::move(connection));
}

Result<nlohmann::json> Client::call_json(std::string_view service, std::string_view method,
                                         const nlohmann::json& request, CallOptions options) {
  auto raw = call(service, method,
                  request.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), options);
  if (!raw.ok()) return raw.status();
  auto parsed = nlohmann::json::parse(raw.value(), nullptr, false);
  if (parsed.is_discarded()) return Status(Errc::kDataLoss, "response is not valid JSON");
  return parsed;
}

asio::awaitable<Status> Client::async_wait_authenticated() {
  auto connection = connection_;
  co_return co_await connection->wait_authenticated();
}

std::string Client::mechanism() const { return connection_->mechanism(); }
std::string Client::authenticated_user() const { return connection_->authenticated_user(); }
std::optional<TlsInfo> Client::tls_info() const { return connection_->tls_info(); }
Status Client::connection_status() const { return connection_->status(); }
const asio::any_io_executor& Client::executor() const noexcept { return connection_->executor(); }

void Client::close() {
  if (!connection_) return;
  auto do_close = [connection = connection_] {
    connection->close(Status(Errc::kCancelled, "client closed the connection"));
  };
  if (context_ != nullptr && !context_->get_executor().running_in_this_thread()) {
    // Wait, so that the runtime (perhaps our own) outlives the close.
    std::promise<void> closed;
    asio::post(connection_->executor(), [&] {
      do_close();
      closed.set_value();
    });
    closed.get_future().wait();
    return;
  }
  // On the connection's own thread (the usual case for a coroutine client):
  // close at once, without wrapping the work for the executor.
  const auto* io = connection_->executor().target<asio::io_context::executor_type>();
  if (io != nullptr && io->running_in_this_thread()) {
    do_close();
    return;
  }
  asio::dispatch(connection_->executor(), do_close);
}

}  // namespace authrpc
