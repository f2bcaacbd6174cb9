// Channel: where a typed stub's calls go (docs/PROTOBUF.md, "Clients"): an
// authenticated Client and, for calls that act as another user
// (CallOptions::do_as), one more connection per such user. authrpc carries
// a proxy user per connection, not per call (docs/PROTOCOL.md, "Proxy
// users"), so a channel opens that user's connection on first use, with the
// ClientOptions it was given, and keeps it. Generated stubs call it through
// the templates of stub_calls.h.
//
// Threading: every connection lives on the executor of the Client the
// channel was made from. The blocking calls may be made from any thread but
// that executor's; the coroutines must be awaited on it.
#pragma once

#include <asio/any_io_executor.hpp>
#include <asio/awaitable.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "authrpc/base/result.h"
#include "authrpc/client/client.h"

namespace authrpc::proto {

struct CallOptions {
  // Deadline for the call (for a stream, the whole call); 0: the client's
  // ClientOptions::default_call_timeout.
  std::chrono::milliseconds timeout{0};
  // Non-empty: act as this user (proxy user). The server must allow the
  // authenticated user to impersonate it (docs/AUTHZ.md), else the call
  // fails with PERMISSION_DENIED.
  std::string do_as;
  // Streaming calls: bytes of the server's messages buffered at most
  // (StreamOptions::window); 0: the default.
  std::uint32_t window = 0;
};

class Channel {
 public:
  // Calls go to `client`, which must outlive the channel. A call with
  // do_as fails with FAILED_PRECONDITION: there is nothing to connect with.
  explicit Channel(Client& client);
  // As above; a call with do_as goes over a connection opened with
  // `options`, its do_as set to that user, on `client`'s executor.
  Channel(Client& client, ClientOptions options);
  ~Channel();
  Channel(const Channel&) = delete;
  Channel& operator=(const Channel&) = delete;

  const asio::any_io_executor& executor() const noexcept { return client_.executor(); }

  // A unary call with the request already encoded; the response's bytes.
  Result<std::string> call(std::string_view service, std::string_view method, std::string_view request,
                           const CallOptions& options);
  // A successful response's payload goes to `decode` where it was received
  // (Client::async_call_decoded). The views and `decode` must stay valid
  // until the call completes. Without do_as, the Client's own coroutine (no
  // frame of the channel's).
  asio::awaitable<Status> async_call(std::string_view service, std::string_view method, std::string_view request,
                                     const ResponseDecoder& decode, const CallOptions& options);
  asio::awaitable<Result<std::unique_ptr<ClientStream>>> open_stream(std::string_view service,
                                                                     std::string_view method,
                                                                     std::string_view opening,
                                                                     const CallOptions& options);
  // Makes the call on the channel's executor and hands its outcome to
  // `done` there (the future calls of stub_calls.h); the channel must
  // outlive the call (call_future's `done` holds it).
  void spawn_call(std::string_view service, std::string_view method, std::string request, CallOptions options,
                  std::function<void(Result<std::string>)> done);

 private:
  asio::awaitable<Status> async_call_as(std::string_view service, std::string_view method, std::string_view request,
                                        const ResponseDecoder& decode, CallOptions options);
  asio::awaitable<Result<std::unique_ptr<ClientStream>>> open_stream_as(std::string_view service,
                                                                        std::string_view method,
                                                                        std::string_view opening,
                                                                        CallOptions options);
  Result<Client*> client_for(const std::string& do_as);
  asio::awaitable<Result<Client*>> async_client_for(const std::string& do_as);
  Client* cached(const std::string& do_as);
  Client* keep(const std::string& do_as, std::unique_ptr<Client> client);

  Client& client_;
  std::optional<ClientOptions> options_;
  std::mutex mu_;
  std::map<std::string, std::unique_ptr<Client>, std::less<>> proxies_;  // by do_as user
};

}  // namespace authrpc::proto
