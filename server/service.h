// Service: a named set of methods an application registers with a Server.
// A method takes the request bytes and returns response bytes or a Status;
// it runs in one of three ways:
//   add()          plain function on the IO thread — must not block;
//   add_async()    Asio coroutine on the IO thread — may co_await;
//   add_blocking() plain function on the server's blocking pool.
//   add_stream()   streaming call (Asio coroutine on the IO thread): reads the
//                  client's messages and writes its own through a ServerStream
//                  (server/server_stream.h, docs/DATAPLANE.md).
// add_json() wraps a handler that takes and returns nlohmann::json.
// A service may carry the schema of its payloads (set_schema), which the
// built-in sys.describe hands to callers (docs/PROTOBUF.md).
#pragma once

#include <asio/awaitable.hpp>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "authrpc/auth/identity.h"
#include "authrpc/base/result.h"
#include "authrpc/server/server_stream.h"

namespace authrpc {

// What a handler knows about its call. Valid until the handler returns (for a
// coroutine: until its awaitable completes).
class CallContext {
 public:
  using Clock = std::chrono::steady_clock;

  CallContext(const Identity& identity, std::string_view service, std::string_view method,
              std::uint32_t call_id, Clock::time_point deadline,
              const std::atomic<bool>* cancelled = nullptr, bool plaintext_network = false)
      : identity_(identity), service_(service), method_(method), call_id_(call_id),
        deadline_(deadline), cancelled_(cancelled), plaintext_network_(plaintext_network) {}

  const Identity& identity() const noexcept { return identity_; }
  std::string_view service() const noexcept { return service_; }
  std::string_view method() const noexcept { return method_; }
  std::uint32_t call_id() const noexcept { return call_id_; }
  // Clock::time_point::max() when the caller set no deadline.
  Clock::time_point deadline() const noexcept { return deadline_; }
  bool deadline_passed() const noexcept { return Clock::now() >= deadline_; }
  // True once the client cancelled the call or the connection went away.
  bool cancelled() const noexcept { return cancelled_ != nullptr && cancelled_->load(); }
  // True when the call came over plaintext tcp://: anyone on the network
  // path can read the request and its response. A method that answers with
  // a secret refuses such calls (token.get: docs/TOKENS.md).
  bool plaintext_network() const noexcept { return plaintext_network_; }

 private:
  const Identity& identity_;
  std::string_view service_;
  std::string_view method_;
  std::uint32_t call_id_;
  Clock::time_point deadline_;
  const std::atomic<bool>* cancelled_;
  bool plaintext_network_;
};

using Handler = std::function<Result<std::string>(CallContext& ctx, std::string_view request)>;

// Where an EncodingHandler writes its response's payload: reserve(size)
// gives `size` bytes to fill, in the buffer the server sends from when the
// call runs inline (else in a string the server then sends). Once per call;
// a second reserve() replaces the first.
class ResponseBuffer {
 public:
  virtual char* reserve(std::size_t size) = 0;

 protected:
  ~ResponseBuffer() = default;
};
// A payload codec's handler (Service::add_encoding): encodes its response
// into `response` rather than returning a string, so that an inline call's
// response is encoded where it is sent. OK with nothing reserved is an
// empty payload; an error discards what was written.
using EncodingHandler =
    std::function<Status(CallContext& ctx, std::string_view request, ResponseBuffer& response)>;
using AsyncHandler =
    std::function<asio::awaitable<Result<std::string>>(CallContext& ctx, std::string request)>;
// Returns the final response's payload (sent after every message written),
// or the status that ends the call.
using StreamHandler =
    std::function<asio::awaitable<Result<std::string>>(CallContext& ctx, ServerStream& stream)>;
enum class Execution {
  kInline,     // on the IO thread (the handler must not block)
  kAsync,      // a coroutine on the IO thread
  kBlocking,   // on the blocking pool
  kStream,     // a streaming call: a coroutine on the IO thread
};

using JsonHandler =
    std::function<Result<nlohmann::json>(CallContext& ctx, const nlohmann::json& request)>;
// Who may call a method, decided from the caller alone (before the request
// is read): an error Status refuses the call with it.
using CallerCheck = std::function<Status(const CallContext& ctx)>;

// How add_json() reads a request (docs/AUTHZ.md, "Request bodies"). A body
// over max_bytes or nested deeper than max_depth is INVALID_ARGUMENT before
// any of it is turned into nlohmann::json values: a parsed value costs tens
// of bytes per input byte ("[[[[..." of 8 MiB was ~520 MB).
struct JsonLimits {
  std::size_t max_bytes = std::size_t{1} << 20;
  std::size_t max_depth = 64;
};

// `text` as JSON within `limits`; INVALID_ARGUMENT (saying which limit) if
// it is over them or is not JSON. The nesting is checked by a first pass
// that builds nothing, so an over-deep body costs no memory.
Result<nlohmann::json> parse_json_request(std::string_view text, const JsonLimits& limits);

struct JsonMethodOptions {
  Execution execution = Execution::kInline;  // kInline or kBlocking
  JsonLimits limits;
  // Checked before the body is parsed (e.g. "needs a Kerberos caller"), so
  // a caller who may not use the method cannot make the server parse for it.
  CallerCheck admit;
};

// What a caller needs to encode a service's payloads, as sys.describe
// serves it: the codec's name ("protobuf") and its schema in that codec's
// own form (for protobuf, a serialized FileDescriptorSet holding the
// service's file and every file it imports). Empty: bytes or JSON without
// a schema.
struct ServiceSchema {
  std::string codec;
  std::string schema;
};

class Service {
 public:
  struct Method {
    Execution execution = Execution::kInline;
    Handler handler;              // kInline, kBlocking
    AsyncHandler async_handler;   // kAsync
    StreamHandler stream_handler = {};  // kStream
    // add_encoding's handler, for kInline (a kBlocking one is wrapped in
    // `handler`, its response a string the pool hands back).
    EncodingHandler encoding_handler = {};
  };

  explicit Service(std::string name);

  Service& add(std::string method, Handler handler);
  Service& add_blocking(std::string method, Handler handler);
  Service& add_async(std::string method, AsyncHandler handler);
  // A streaming method: called with STREAM_REQUEST (Client::async_open_stream);
  // a plain REQUEST to it is refused with INVALID_ARGUMENT.
  Service& add_stream(std::string method, StreamHandler handler);
  // A method whose handler encodes its response in place (EncodingHandler);
  // `execution` must be kInline or kBlocking, as for add_json.
  Service& add_encoding(std::string method, EncodingHandler handler, Execution execution);
  // Request bytes must parse as JSON within options.limits (else
  // INVALID_ARGUMENT), after options.admit allowed the caller; the result is
  // serialized compactly. `execution` must be kInline or kBlocking; any other
  // leaves the method out and status() INVALID_ARGUMENT.
  Service& add_json(std::string method, JsonHandler handler, JsonMethodOptions options);
  Service& add_json(std::string method, JsonHandler handler,
                    Execution execution = Execution::kInline);

  Service& set_schema(ServiceSchema schema);

  const std::string& name() const noexcept { return name_; }
  const ServiceSchema& schema() const noexcept { return schema_; }
  // OK unless a method was added wrongly; then why (the first such), and
  // Server::add_service() refuses the service with it. A builder that
  // threw instead would be the one exception crossing the API.
  const Status& status() const noexcept { return misuse_; }
  // nullptr if there is no such method.
  const Method* find(std::string_view method) const;
  const std::map<std::string, Method, std::less<>>& methods() const noexcept { return methods_; }

 private:
  // Whether `execution` is kInline or kBlocking; if not, records the
  // misuse of `adder` (status()).
  bool runs_plain(std::string_view adder, const std::string& method, Execution execution);

  std::string name_;
  std::map<std::string, Method, std::less<>> methods_;
  ServiceSchema schema_;
  Status misuse_;
};

// sys.describe's answer for `service`: {"name", "methods": [{"name",
// "kind": "unary"|"stream"}], and, with a schema, "codec" and "schema" (its
// bytes in unpadded base64url)} (docs/PROTOCOL.md, "Describing services").
nlohmann::json describe_service(const Service& service);

}  // namespace authrpc
