// The server half of a typed service: how generated code turns the
// virtual methods of an implementation into the handlers of an
// authrpc::Service (docs/PROTOBUF.md, "Generated API"). Each adapter parses
// the request (INVALID_ARGUMENT if it does not parse), calls the method and
// encodes its answer; a method's error Status reaches the caller as it is,
// and a method that throws is the server's INTERNAL (the details in its
// log with the call id). The typed stream handles wrap a ServerStream.
#pragma once

#include <asio/awaitable.hpp>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

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

// Messages of one type kept per thread for unary requests to be parsed
// into: a parse into a used message reuses its fields' memory (a string
// field allocates nothing), and no message is built or destroyed per call.
// Parsing clears a message first, so nothing of one request reaches the
// next. Only messages whose encoding was at most kMaxBytes come back, and
// at most kMaxKept per thread: a pool holds no large request's memory.
// A thread whose pool is gone (it is exiting) keeps nothing.
template <typename Message>
class RecycledMessages {
 public:
  static constexpr std::size_t kMaxBytes = 4096;
  static constexpr std::size_t kMaxKept = 8;

  static std::unique_ptr<Message> take() {
    auto* kept = pool();
    if (kept == nullptr || kept->messages.empty()) return std::make_unique<Message>();
    auto message = std::move(kept->messages.back());
    kept->messages.pop_back();
    return message;
  }
  static void give_back(std::unique_ptr<Message> message, std::size_t encoded_size) {
    auto* kept = pool();
    if (kept != nullptr && encoded_size <= kMaxBytes && kept->messages.size() < kMaxKept) {
      kept->messages.push_back(std::move(message));
    }
  }

 private:
  struct Kept {
    ~Kept() { gone() = true; }
    std::vector<std::unique_ptr<Message>> messages;
  };
  static bool& gone() {
    thread_local bool flag = false;
    return flag;
  }
  static Kept* pool() {
    if (gone()) return nullptr;
    thread_local Kept kept;
    return &kept;
  }
};

// A unary request message taken from its thread's RecycledMessages and
// given back when the call is done (on whichever thread that is).
template <typename Request>
class RecycledRequest {
 public:
  explicit RecycledRequest(std::size_t encoded_size)
      : message_(RecycledMessages<Request>::take()), encoded_size_(encoded_size) {}
  ~RecycledRequest() { RecycledMessages<Request>::give_back(std::move(message_), encoded_size_); }
  RecycledRequest(const RecycledRequest&) = delete;
  RecycledRequest& operator=(const RecycledRequest&) = delete;

  Request& operator*() noexcept { return *message_; }

 private:
  std::unique_ptr<Request> message_;
  std::size_t encoded_size_;
};

// Fn: Result<Response>(CallContext&, const Request&). `execution`: kInline
// or kBlocking. The response is encoded where the server sends it.
template <typename Request, typename Fn>
void add_unary(Service& service, std::string method, Execution execution, Fn fn) {
  EncodingHandler handler = [fn = std::move(fn)](CallContext& ctx, std::string_view bytes,
                                                 ResponseBuffer& out) -> Status {
    RecycledRequest<Request> recycled(bytes.size());
    Request& request = *recycled;
    if (Status s = parse_request(bytes, request); !s.ok()) return s;
    auto response = fn(ctx, std::as_const(request));
    if (!response.ok()) return response.status();
    encode_into(*response, out);
    return Status();
  };
  service.add_encoding(std::move(method), std::move(handler), execution);
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
  RecycledRequest<Request> recycled(bytes.size());
  Request& request = *recycled;
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
