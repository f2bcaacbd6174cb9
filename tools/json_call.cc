#include "authrpc/tools/json_call.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/dynamic_message.h>
#include <google/protobuf/util/json_util.h>

#include <asio/co_spawn.hpp>
#include <asio/experimental/awaitable_operators.hpp>
#include <asio/use_future.hpp>
#include <cerrno>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <system_error>
#include <variant>
#include <vector>

#include "authrpc/base/log.h"
#include "authrpc/components/protobuf/message_codec.h"
#include "authrpc/tools/cli_exit.h"
#include "authrpc/tools/proto_schema.h"

namespace authrpc::cli {

namespace {

namespace pb = google::protobuf;
using MessagePtr = std::unique_ptr<pb::Message>;
using asio::experimental::awaitable_operators::operator&&;

constexpr const char* kProgram = "authrpc";
constexpr const char* kHelp = "authrpc call --help";

// The method called and a factory of its messages over the pool of the
// service's schema; messages made here must go before it does.
struct TypedMethod {
  std::shared_ptr<const pb::DescriptorPool> pool;
  const pb::MethodDescriptor* method = nullptr;
  std::unique_ptr<pb::DynamicMessageFactory> factory;

  MessagePtr make(const pb::Descriptor* type) const { return MessagePtr(factory->GetPrototype(type)->New()); }
  const std::string& service_name() const { return method->service()->full_name(); }
};

// The method from the service's schema, or the failure printed and its
// exit status.
std::variant<TypedMethod, int> resolve(Client& client, const JsonCall& call) {
  auto services = describe_services(client, call.service, call.timeout);
  if (!services.ok()) return report_failure(kProgram, services.status());
  if (services->size() != 1 || services->front().name != call.service) {
    return report_failure(kProgram, Status(Errc::kDataLoss, "sys.describe answered for another service"));
  }
  const DescribedService& service = services->front();
  if (service.descriptor == nullptr) {
    return report_usage(kProgram, "service " + escape_for_log(call.service) + " has no protobuf schema: use --data",
                        kHelp);
  }
  const pb::MethodDescriptor* method = service.descriptor->FindMethodByName(call.method);
  if (method == nullptr) {
    std::string names;
    for (int i = 0; i < service.descriptor->method_count(); ++i) {
      names += (names.empty() ? "" : ", ") + service.descriptor->method(i)->name();
    }
    return report_failure(kProgram, Status(Errc::kNotFound, "service " + escape_for_log(call.service) +
                                                                " has no method " + escape_for_log(call.method) +
                                                                " (its methods: " + names + ")"));
  }
  return TypedMethod{service.pool, method, std::make_unique<pb::DynamicMessageFactory>(service.pool.get())};
}

// One request message from its JSON; INVALID_ARGUMENT with the parser's
// words (an unknown field is named) otherwise.
Result<MessagePtr> parse_request(const TypedMethod& typed, std::string_view json, const std::string& where) {
  MessagePtr message = typed.make(typed.method->input_type());
  const auto s = pb::util::JsonStringToMessage(pb::StringPiece(json.data(), json.size()), message.get());
  if (!s.ok()) {
    std::string why(s.message());
    if (why.starts_with(": ")) why.erase(0, 2);  // an error at the top level: no field path before it
    return Status(Errc::kInvalidArgument, "--json" + where + " as " + typed.method->input_type()->full_name() +
                                              ": " + escape_for_log(why));
  }
  return message;
}

// --json as the request messages: one JSON object, or for a method the
// client streams to, an array of them. INVALID_ARGUMENT saying what is
// wrong.
Result<std::vector<MessagePtr>> parse_requests(const TypedMethod& typed, std::string_view json) {
  const bool many = typed.method->client_streaming();
  const std::string type = typed.method->input_type()->full_name();
  nlohmann::json parsed;
  try {
    parsed = nlohmann::json::parse(json);
  } catch (const nlohmann::json::parse_error& e) {
    std::string what = e.what();
    what.erase(0, what.find("] ") == std::string::npos ? 0 : what.find("] ") + 2);
    return Status(Errc::kInvalidArgument, "--json is not JSON: " + escape_for_log(what));
  }
  if (many && !parsed.is_array()) {
    return Status(Errc::kInvalidArgument, "--json: " + typed.method->name() + " takes a stream of requests: give " +
                                              "a JSON array of " + type + " messages");
  }
  if (!many && !parsed.is_object()) {
    return Status(Errc::kInvalidArgument, "--json: give one " + type + " message as a JSON object");
  }
  std::vector<MessagePtr> requests;
  if (!many) {
    auto request = parse_request(typed, json, "");
    if (!request.ok()) return request.status();
    requests.push_back(std::move(*request));
  }
  for (std::size_t i = 0; many && i < parsed.size(); ++i) {
    const std::string element = parsed[i].dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    auto request = parse_request(typed, element, "[" + std::to_string(i) + "]");
    if (!request.ok()) return request.status();
    requests.push_back(std::move(*request));
  }
  return requests;
}

// Prints `message` as JSON with the .proto's field names, indented or on
// one line, and flushes it so that a stream's messages show as they come.
Status print_json(const pb::Message& message, bool indented) {
  pb::util::JsonPrintOptions options;
  options.add_whitespace = indented;
  options.preserve_proto_field_names = true;
  std::string out;
  if (const auto s = pb::util::MessageToJsonString(message, &out, options); !s.ok()) {
    return Status(Errc::kDataLoss, "the response does not convert to JSON: " + std::string(s.message()));
  }
  // protobuf's printer indents by one space; re-indented by two, in the
  // printer's order of fields.
  if (indented) out = nlohmann::ordered_json::parse(out).dump(2);
  if (out.empty() || out.back() != '\n') out += '\n';
  std::fwrite(out.data(), 1, out.size(), stdout);
  if (std::fflush(stdout) != 0) return Status(std::error_code(errno, std::generic_category()), "writing the response");
  return Status();
}

// A response payload as the method's response type, printed indented.
Status print_response(const TypedMethod& typed, std::string_view bytes) {
  MessagePtr response = typed.make(typed.method->output_type());
  if (Status s = proto::parse_response(bytes, *response); !s.ok()) return s;
  return print_json(*response, true);
}

Status unary(Client& client, const TypedMethod& typed, const pb::Message& request, std::chrono::milliseconds timeout) {
  CallOptions options;
  options.timeout = timeout;
  auto response = client.call(typed.service_name(), typed.method->name(), proto::serialize(request), options);
  if (!response.ok()) return response.status();
  return print_response(typed, *response);
}

// Prints the server's messages, one line each, until it ends the call.
asio::awaitable<Status> print_messages(ClientStream& stream, const TypedMethod& typed) {
  MessagePtr message = typed.make(typed.method->output_type());
  for (;;) {
    message->Clear();
    auto more = co_await proto::read_message(stream, *message, /*peer_is_client=*/false);
    if (!more.ok() || !*more) co_return more.status();
    if (Status s = print_json(*message, false); !s.ok()) co_return s;
  }
}

// Writes every request, then ends the client's messages.
asio::awaitable<Status> write_requests(ClientStream& stream, const std::vector<MessagePtr>& requests) {
  for (const auto& request : requests) {
    if (Status s = co_await proto::write_message(stream, *request); !s.ok()) co_return s;
  }
  stream.end_writes();
  co_return Status();
}

// print_messages(); a failure to read or print ends the call, so that a
// write waiting for the server's window does not wait forever.
asio::awaitable<Status> print_or_cancel(ClientStream& stream, const TypedMethod& typed) {
  Status s = co_await print_messages(stream, typed);
  if (!s.ok()) stream.cancel();
  co_return s;
}

// Bidirectional: writes and reads at once, so that neither side waits for
// the other's window.
asio::awaitable<Status> chat(ClientStream& stream, const TypedMethod& typed, const std::vector<MessagePtr>& requests) {
  auto [written, printed] = co_await (write_requests(stream, requests) && print_or_cancel(stream, typed));
  // The server's end of the call decides; a write it did not take after
  // finishing successfully is not a failure of the call.
  co_return printed.ok() ? Status() : printed;
}

asio::awaitable<Status> streaming(Client& client, const TypedMethod& typed, const std::vector<MessagePtr>& requests,
                                  std::chrono::milliseconds timeout) {
  StreamOptions options;
  options.timeout = timeout;
  const bool writes = typed.method->client_streaming();
  const std::string opening = writes ? std::string() : proto::serialize(*requests.front());
  auto opened = co_await client.async_open_stream(typed.service_name(), typed.method->name(), opening, options);
  if (!opened.ok()) co_return opened.status();
  ClientStream& stream = **opened;
  if (!writes) co_return co_await print_messages(stream, typed);
  if (typed.method->server_streaming()) co_return co_await chat(stream, typed, requests);
  co_await write_requests(stream, requests);  // a failed write: finish() says why
  auto response = co_await stream.finish();
  if (!response.ok()) co_return response.status();
  co_return print_response(typed, *response);
}

}  // namespace

int json_call(Client& client, const JsonCall& call) {
  auto resolved = resolve(client, call);
  if (const int* code = std::get_if<int>(&resolved)) return *code;
  const TypedMethod& typed = std::get<TypedMethod>(resolved);
  auto requests = parse_requests(typed, call.json);
  if (!requests.ok()) return report_usage(kProgram, requests.status().message, kHelp);
  Status s;
  if (!typed.method->client_streaming() && !typed.method->server_streaming()) {
    s = unary(client, typed, *requests->front(), call.timeout);
  } else {
    s = asio::co_spawn(client.executor(), streaming(client, typed, *requests, call.timeout), asio::use_future).get();
  }
  return s.ok() ? 0 : report_failure(kProgram, s);
}

}  // namespace authrpc::cli
