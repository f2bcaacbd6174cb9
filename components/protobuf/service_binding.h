// The server half of a typed service: how generated code turns the
// virtual methods of an implementation into the handlers of an
// authrpc::Service (docs/PROTOBUF.md, "Generated API"). Each adapter parses
// the request (INVALID_ARGUMENT if it does not parse), calls the method and
// encodes its answer; a method's error Status reaches the caller as it is,
// and a method that throws is the server's INTERNAL (the details in its
// log with the call id). The typed stream handles wrap a ServerStream.
#pragma once

#include <asio/awaitable.hpp>
#include <optional>
#include <string>
#include <utility>

#include "authrpc/components/protobuf/message_codec.h"
#include "authrpc/server/service.h"

namespace authrpc::proto {

// The client's messages of a client-streaming or bidirectional call.
template <typename Request>
class ServerReader {
 public:
  explicit ServerReader(ServerStream& stream) : stream_(stream) {}

  // The next message; nullopt once the client has ended its messages;
  // INVALID_ARGUMENT for one that does not parse, or the call's status.
  asio::awaitable<Result<std::optional<Request>>> read() {
    return read_next<Request>(stream_, /*peer_is_client=*/true);
  }
  // The next message into `request` (reusing its memory): true, false at
  // the end, or an error as read().
  asio::awaitable<Result<bool>> read(Request& request) {
    request.Clear();
    return read_message(stream_, request, /*peer_is_client=*/true);
  }
  ServerStream& stream() noexcept { return stream_; }

 private:
  ServerStream& stream_;
};

// The server's messages of a server-streaming or bidirectional call.
template <typename Response>
class ServerWriter {
 public:
  explicit ServerWriter(ServerStream& stream) : stream_(stream) {}

  // Returns once the message is queued; waits while the client's window is
  // full; the call's status once it has ended.
  asio::awaitable<Status> write(const Response& response) { return write_message(stream_, response); }
  ServerStream& stream() noexcept { return stream_; }

 private:
  ServerStream& stream_;
};

template <typename Request, typename Response>
class ServerReaderWriter : public ServerReader<Request>, public ServerWriter<Response> {
 public:
  explicit ServerReaderWriter(ServerStream& call) : ServerReader<Request>(call), ServerWriter<Response>(call) {}
  using ServerReader<Request>::stream;
};

// Fn: Result<Response>(CallContext&, const Request&). `execution`: kInline
// or kBlocking.
template <typename Request, typename Fn>
void add_unary(Service& service, std::string method, Execution execution, Fn fn) {
  Handler handler = [fn = std::move(fn)](CallContext& ctx, std::string_view bytes) -> Result<std::string> {
    Request request;
    if (Status s = parse_request(bytes, request); !s.ok()) return s;
    auto response = fn(ctx, std::as_const(request));
    if (!response.ok()) return response.status();
    return serialize(*response);
  };
  if (execution == Execution::kBlocking) {
    service.add_blocking(std::move(method), std::move(handler));
  } else {
    service.add(std::move(method), std::move(handler));
  }
}

// The opening message of a client-streaming or bidirectional call carries
// nothing: INVALID_ARGUMENT if it does.
Status check_empty_opening(const ServerStream& stream);

// The coroutines behind the asynchronous adapters below. Each takes the
// method's function by reference: it lives in the Service's handler, which
// the server keeps while calls run (a coroutine lambda's captures would not
// outlive the lambda object it was called on).
namespace detail {

template <typename Request, typename Fn>
asio::awaitable<Result<std::string>> unary_async(const Fn& fn, CallContext& ctx, std::string bytes) {
  Request request;
  if (Status s = parse_request(bytes, request); !s.ok()) co_return s;
  auto response = co_await fn(ctx, std::as_const(request));
  if (!response.ok()) co_return response.status();
  co_return serialize(*response);
}

template <typename Request, typename Response, typename Fn>
asio::awaitable<Result<std::string>> server_stream(const Fn& fn, CallContext& ctx, ServerStream& stream) {
  Request request;
  if (Status s = parse_request(stream.request(), request); !s.ok()) co_return s;
  ServerWriter<Response> writer(stream);
  if (Status s = co_await fn(ctx, std::as_const(request), writer); !s.ok()) co_return s;
  co_return std::string();
}

template <typename Request, typename Response, typename Fn>
asio::awaitable<Result<std::string>> client_stream(const Fn& fn, CallContext& ctx, ServerStream& stream) {
  if (Status s = check_empty_opening(stream); !s.ok()) co_return s;
  ServerReader<Request> reader(stream);
  auto response = co_await fn(ctx, reader);
  if (!response.ok()) co_return response.status();
  co_return serialize(*response);
}

template <typename Request, typename Response, typename Fn>
asio::awaitable<Result<std::string>> bidi_stream(const Fn& fn, CallContext& ctx, ServerStream& stream) {
  if (Status s = check_empty_opening(stream); !s.ok()) co_return s;
  ServerReaderWriter<Request, Response> both(stream);
  if (Status s = co_await fn(ctx, both); !s.ok()) co_return s;
  co_return std::string();
}

}  // namespace detail

// Fn: asio::awaitable<Result<Response>>(CallContext&, const Request&).
template <typename Request, typename Fn>
void add_unary_async(Service& service, std::string method, Fn fn) {
  service.add_async(std::move(method), [fn = std::move(fn)](CallContext& ctx, std::string bytes) {
    return detail::unary_async<Request>(fn, ctx, std::move(bytes));
  });
}

// Fn: asio::awaitable<Status>(CallContext&, const Request&, ServerWriter<Response>&).
template <typename Request, typename Response, typename Fn>
void add_server_stream(Service& service, std::string method, Fn fn) {
  service.add_stream(std::move(method), [fn = std::move(fn)](CallContext& ctx, ServerStream& stream) {
    return detail::server_stream<Request, Response>(fn, ctx, stream);
  });
}

// Fn: asio::awaitable<Result<Response>>(CallContext&, ServerReader<Request>&).
template <typename Request, typename Response, typename Fn>
void add_client_stream(Service& service, std::string method, Fn fn) {
  service.add_stream(std::move(method), [fn = std::move(fn)](CallContext& ctx, ServerStream& stream) {
    return detail::client_stream<Request, Response>(fn, ctx, stream);
  });
}

// Fn: asio::awaitable<Status>(CallContext&, ServerReaderWriter<Request, Response>&).
template <typename Request, typename Response, typename Fn>
void add_bidi_stream(Service& service, std::string method, Fn fn) {
  service.add_stream(std::move(method), [fn = std::move(fn)](CallContext& ctx, ServerStream& stream) {
    return detail::bidi_stream<Request, Response>(fn, ctx, stream);
  });
}

}  // namespace authrpc::proto
