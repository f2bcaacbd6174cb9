#include "authrpc/components/protobuf/channel.h"

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/io_context.hpp>
#include <asio/use_future.hpp>

namespace authrpc::proto {

namespace {

Status no_proxy_options() {
  return Status(Errc::kFailedPrecondition,
                "this channel has no ClientOptions to open a connection acting as another user "
                "(CallOptions::do_as): make it with Channel(client, options)");
}

asio::awaitable<void> call_and_deliver(Channel& channel, std::string service, std::string method, std::string request,
                                       CallOptions options, std::function<void(Result<std::string>)> done) {
  Result<std::string> response(std::in_place);
  const ResponseDecoder keep = [&response](std::string_view payload) {
    response->assign(payload);
    return Status();
  };
  const Status status = co_await channel.async_call(service, method, request, keep, options);
  done(status.ok() ? std::move(response) : Result<std::string>(status));
}

}  // namespace

Channel::Channel(Client& client) : client_(client) {}

Channel::Channel(Client& client, ClientOptions options) : client_(client), options_(std::move(options)) {}

Channel::~Channel() = default;

Client* Channel::cached(const std::string& do_as) {
  std::lock_guard lock(mu_);
  const auto it = proxies_.find(do_as);
  return it == proxies_.end() ? nullptr : it->second.get();
}

// Keeps the first connection made for `do_as`; one made meanwhile by
// another caller is closed.
Client* Channel::keep(const std::string& do_as, std::unique_ptr<Client> client) {
  std::lock_guard lock(mu_);
  auto& slot = proxies_[do_as];
  if (!slot) slot = std::move(client);
  return slot.get();
}

asio::awaitable<Result<Client*>> Channel::async_client_for(const std::string& do_as) {
  if (do_as.empty()) co_return &client_;
  if (Client* c = cached(do_as)) co_return c;
  if (!options_) co_return no_proxy_options();
  ClientOptions options = *options_;
  options.do_as = do_as;
  auto connected = co_await Client::async_connect(executor(), std::move(options));
  if (!connected.ok()) co_return connected.status();
  co_return keep(do_as, std::move(*connected));
}

// A proxy connection already made: its Client::call refuses to block its
// own IO thread. One to make: connecting would, so this refuses the same.
Result<Client*> Channel::client_for(const std::string& do_as) {
  if (do_as.empty()) return &client_;
  if (Client* c = cached(do_as)) return c;
  if (!options_) return no_proxy_options();
  const auto* io = executor().target<asio::io_context::executor_type>();
  if (io != nullptr && io->running_in_this_thread()) {
    return Status(Errc::kFailedPrecondition,
                  "a blocking call on the client's own executor would wait for itself: use the coroutine stub");
  }
  return asio::co_spawn(executor(), async_client_for(do_as), asio::use_future).get();
}

Result<std::string> Channel::call(std::string_view service, std::string_view method, std::string_view request,
                                  const CallOptions& options) {
  if (options.do_as.empty()) return client_.call(service, method, request, {options.timeout});
  auto client = client_for(options.do_as);
  if (!client.ok()) return client.status();
  return (*client)->call(service, method, request, {options.timeout});
}

asio::awaitable<Status> Channel::async_call(std::string_view service, std::string_view method,
                                            std::string_view request, const ResponseDecoder& decode,
                                            const CallOptions& options) {
  if (options.do_as.empty()) return client_.async_call_decoded(service, method, request, decode, {options.timeout});
  return async_call_as(service, method, request, decode, options);
}

asio::awaitable<Status> Channel::async_call_as(std::string_view service, std::string_view method,
                                               std::string_view request, const ResponseDecoder& decode,
                                               CallOptions options) {
  auto client = co_await async_client_for(options.do_as);
  if (!client.ok()) co_return client.status();
  co_return co_await (*client)->async_call_decoded(service, method, request, decode, {options.timeout});
}

asio::awaitable<Result<std::unique_ptr<ClientStream>>> Channel::open_stream(std::string_view service,
                                                                            std::string_view method,
                                                                            std::string_view opening,
                                                                            const CallOptions& options) {
  if (options.do_as.empty()) {
    return client_.async_open_stream(service, method, opening, StreamOptions{options.timeout, options.window});
  }
  return open_stream_as(service, method, opening, options);
}

asio::awaitable<Result<std::unique_ptr<ClientStream>>> Channel::open_stream_as(std::string_view service,
                                                                               std::string_view method,
                                                                               std::string_view opening,
                                                                               CallOptions options) {
  auto client = co_await async_client_for(options.do_as);
  if (!client.ok()) co_return client.status();
  co_return co_await (*client)->async_open_stream(service, method, opening,
                                                  StreamOptions{options.timeout, options.window});
}

void Channel::spawn_call(std::string_view service, std::string_view method, std::string request,
                         CallOptions options, std::function<void(Result<std::string>)> done) {
  asio::co_spawn(executor(),
                 call_and_deliver(*this, std::string(service), std::string(method), std::move(request),
                                  std::move(options), std::move(done)),
                 asio::detached);
}

}  // namespace authrpc::proto
