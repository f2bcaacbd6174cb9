#include "authrpc/server/service.h"

#include "authrpc/rpc/json_document.h"
#include "authrpc/security/base64url.h"

namespace authrpc {

namespace {

// The first pass of parse_json_request(): nlohmann's SAX events with a depth
// count, building nothing. Returning false stops the parser at once.
class DepthCheck final : public JsonSaxAcceptor {
 public:
  explicit DepthCheck(std::size_t max_depth) : max_depth_(max_depth) {}
  bool too_deep() const noexcept { return too_deep_; }

  bool start_object(std::size_t) override { return enter(); }
  bool end_object() override { return leave(); }
  bool start_array(std::size_t) override { return enter(); }
  bool end_array() override { return leave(); }

 private:
  bool enter() {
    if (++depth_ > max_depth_) too_deep_ = true;
    return !too_deep_;
  }
  bool leave() {
    --depth_;
    return true;
  }

  const std::size_t max_depth_;
  std::size_t depth_ = 0;
  bool too_deep_ = false;
};

}  // namespace

Result<nlohmann::json> parse_json_request(std::string_view text, const JsonLimits& limits) {
  if (text.size() > limits.max_bytes) {
    return Status(Errc::kInvalidArgument, "request of " + std::to_string(text.size()) +
                                              " bytes is over this method's limit of " +
                                              std::to_string(limits.max_bytes));
  }
  DepthCheck check(limits.max_depth);
  const bool well_formed = nlohmann::json::sax_parse(text, &check);
  if (check.too_deep()) {
    return Status(Errc::kInvalidArgument, "request nests deeper than this method's limit of " +
                                              std::to_string(limits.max_depth) + " levels");
  }
  if (!well_formed) return Status(Errc::kInvalidArgument, "request is not valid JSON");
  nlohmann::json parsed = nlohmann::json::parse(text, nullptr, false);
  if (parsed.is_discarded()) return Status(Errc::kInvalidArgument, "request is not valid JSON");
  return parsed;
}

Service::Service(std::string name) : name_(std::move(name)) {}

Service& Service::set_schema(ServiceSchema schema) {
  schema_ = std::move(schema);
  return *this;
}

nlohmann::json describe_service(const Service& service) {
  nlohmann::json methods = nlohmann::json::array();
  for (const auto& [name, method] : service.methods()) {
    methods.push_back({{"name", name}, {"kind", method.execution == Execution::kStream ? "stream" : "unary"}});
  }
  nlohmann::json out = {{"name", service.name()}, {"methods", std::move(methods)}};
  if (!service.schema().codec.empty()) {
    out["codec"] = service.schema().codec;
    out["schema"] = security::base64url_encode(service.schema().schema);
  }
  return out;
}

Service& Service::add(std::string method, Handler handler) {
  methods_[std::move(method)] = Method{Execution::kInline, std::move(handler), {}};
  return *this;
}

Service& Service::add_blocking(std::string method, Handler handler) {
  methods_[std::move(method)] = Method{Execution::kBlocking, std::move(handler), {}};
  return *this;
}

Service& Service::add_async(std::string method, AsyncHandler handler) {
  methods_[std::move(method)] = Method{Execution::kAsync, {}, std::move(handler)};
  return *this;
}

Service& Service::add_stream(std::string method, StreamHandler handler) {
  methods_[std::move(method)] = Method{Execution::kStream, {}, {}, std::move(handler)};
  return *this;
}

namespace {

// An EncodingHandler's response as a string: for calls that do not run
// inline (the blocking pool), whose response travels to the IO thread.
class StringResponse final : public ResponseBuffer {
 public:
  char* reserve(std::size_t size) override {
    bytes.resize(size);
    return bytes.data();
  }
  std::string bytes;
};

}  // namespace

Service& Service::add_encoding(std::string method, EncodingHandler handler, Execution execution) {
  if (!runs_plain("add_encoding", method, execution)) return *this;
  Method entry{execution, {}, {}};
  if (execution == Execution::kInline) {
    entry.encoding_handler = std::move(handler);
  } else {
    entry.handler = [handler = std::move(handler)](CallContext& ctx,
                                                   std::string_view request) -> Result<std::string> {
      StringResponse response;
      if (Status s = handler(ctx, request, response); !s.ok()) return s;
      return std::move(response.bytes);
    };
  }
  methods_[std::move(method)] = std::move(entry);
  return *this;
}

Service& Service::add_json(std::string method, JsonHandler handler, Execution execution) {
  return add_json(std::move(method), std::move(handler), JsonMethodOptions{execution, {}, {}});
}

Service& Service::add_json(std::string method, JsonHandler handler, JsonMethodOptions options) {
  if (!runs_plain("add_json", method, options.execution)) return *this;
  const Execution execution = options.execution;
  Handler wrapped = [h = std::move(handler), o = std::move(options)](
                        CallContext& ctx, std::string_view request) -> Result<std::string> {
    if (o.admit) {
      if (Status s = o.admit(ctx); !s.ok()) return s;
    }
    auto parsed = parse_json_request(request, o.limits);
    if (!parsed.ok()) return parsed.status();
    auto result = h(ctx, *parsed);
    if (!result.ok()) return result.status();
    return result->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  };
  methods_[std::move(method)] = Method{execution, std::move(wrapped), {}};
  return *this;
}

bool Service::runs_plain(std::string_view adder, const std::string& method, Execution execution) {
  if (execution == Execution::kInline || execution == Execution::kBlocking) return true;
  if (misuse_.ok()) {
    misuse_ = Status(Errc::kInvalidArgument, std::string(adder) + ": use kInline or kBlocking (method '" + name_ +
                                                 "." + method + "')");
  }
  return false;
}

const Service::Method* Service::find(std::string_view method) const {
  const auto it = methods_.find(method);
  return it == methods_.end() ? nullptr : &it->second;
}

}  // namespace authrpc
