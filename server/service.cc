#include "server/service.h"

#include <stdexcept>

namespace authrpc {

Service::Service(std::string name) : name_(std::move(name)) {}

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

Service& Service::add_json(std::string method, JsonHandler handler, Execution execution) {
  if (execution == Execution::kAsync) {
    throw std::invalid_argument("add_json: use kInline or kBlocking");
  }
  Handler wrapped = [h = std::move(handler)](CallContext& ctx,
                                             std::string_view request) -> Result<std::string> {
    nlohmann::json parsed = nlohmann::json::parse(request, nullptr, false);
    if (parsed.is_discarded()) {
      return Status(Errc::kInvalidArgument, "request is not valid JSON");
    }
    auto result = h(ctx, parsed);
    if (!result.ok()) return result.status();
    return result->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  };
  methods_[std::move(method)] = Method{execution, std::move(wrapped), {}};
  return *this;
}

const Service::Method* Service::find(std::string_view method) const {
  const auto it = methods_.find(method);
  return it == methods_.end() ? nullptr : &it->second;
}

}  // namespace authrpc
