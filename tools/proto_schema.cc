#include "authrpc/tools/proto_schema.h"

#include <google/protobuf/descriptor.pb.h>

#include <nlohmann/json.hpp>

#include "authrpc/base/log.h"
#include "authrpc/components/protobuf/service_schema.h"
#include "authrpc/security/base64url.h"

namespace authrpc::cli {

namespace {

namespace pb = google::protobuf;

// Keeps the first error BuildFileCollectingErrors reports (it would
// otherwise log every one on stderr).
class FirstError final : public pb::DescriptorPool::ErrorCollector {
 public:
  void AddError(const std::string& filename, const std::string& element_name, const pb::Message*,
                ErrorLocation, const std::string& message) override {
    if (first_.empty()) first_ = filename + ": " + (element_name.empty() ? "" : element_name + ": ") + message;
  }
  const std::string& first() const { return first_; }

 private:
  std::string first_;
};

Status bad_answer(std::string_view what) {
  return Status(Errc::kDataLoss, "sys.describe's answer is not what authrpc expects: " + std::string(what));
}

// The service's methods and codec as the answer gives them; the schema is
// built by the caller.
Result<DescribedService> read_service(const nlohmann::json& entry) {
  if (!entry.is_object() || !entry.contains("name") || !entry["name"].is_string() || !entry.contains("methods") ||
      !entry["methods"].is_array()) {
    return bad_answer("a service without a name or methods");
  }
  DescribedService service;
  service.name = entry["name"].get<std::string>();
  for (const auto& method : entry["methods"]) {
    if (!method.is_object() || !method.contains("name") || !method["name"].is_string()) {
      return bad_answer("a method without a name");
    }
    const bool stream = method.contains("kind") && method["kind"] == "stream";
    service.methods.push_back({method["name"].get<std::string>(), stream});
  }
  if (entry.contains("codec")) {
    if (!entry["codec"].is_string() || !entry.contains("schema") || !entry["schema"].is_string()) {
      return bad_answer("a codec without a schema");
    }
    service.codec = entry["codec"].get<std::string>();
  }
  return service;
}

// Builds `service`'s pool from the answer's schema and finds the service in it.
Status attach_schema(DescribedService& service, const std::string& schema_text) {
  const auto bytes = security::base64url_decode(schema_text);
  if (!bytes) return bad_answer("the schema of " + peer_text(service.name) + " is not base64url");
  auto pool = build_pool(*bytes);
  if (!pool.ok()) {
    return Status(Errc::kDataLoss, "the schema of service " + peer_text(service.name) +
                                       " does not build: " + pool.status().message);
  }
  service.descriptor = (*pool)->FindServiceByName(service.name);
  if (service.descriptor == nullptr) {
    return Status(Errc::kDataLoss, "the schema of service " + peer_text(service.name) + " does not define it");
  }
  service.pool = std::move(*pool);
  return Status();
}

}  // namespace

Result<std::shared_ptr<const pb::DescriptorPool>> build_pool(std::string_view file_descriptor_set) {
  pb::FileDescriptorSet set;
  if (!set.ParseFromArray(file_descriptor_set.data(), static_cast<int>(file_descriptor_set.size()))) {
    return Status(Errc::kDataLoss, "not a serialized FileDescriptorSet");
  }
  auto pool = std::make_shared<pb::DescriptorPool>();
  for (const auto& file : set.file()) {
    FirstError errors;
    if (pool->BuildFileCollectingErrors(file, &errors) == nullptr) {
      return Status(Errc::kDataLoss, escape_for_log(errors.first().empty() ? file.name() : errors.first()));
    }
  }
  return std::shared_ptr<const pb::DescriptorPool>(std::move(pool));
}

Result<std::vector<DescribedService>> describe_services(Client& client, std::string_view service,
                                                        std::chrono::milliseconds timeout) {
  CallOptions options;
  options.timeout = timeout;
  const std::string request = service.empty() ? "" : nlohmann::json{{"service", service}}.dump();
  auto answer = client.call("sys", "describe", request, options);
  if (!answer.ok() && answer.status().code == Errc::kNotFound && !service.empty()) {
    return Status(Errc::kNotFound, "service " + escape_for_log(service) + ": " + answer.status().message);
  }
  if (!answer.ok()) return answer.status();
  const auto parsed = nlohmann::json::parse(*answer, nullptr, false);
  if (!parsed.is_object() || !parsed.contains("services") || !parsed["services"].is_array()) {
    return bad_answer("no list of services");
  }
  std::vector<DescribedService> services;
  for (const auto& entry : parsed["services"]) {
    auto described = read_service(entry);
    if (!described.ok()) return described.status();
    if (described->codec == proto::kCodecName) {
      if (Status s = attach_schema(*described, entry["schema"].get<std::string>()); !s.ok()) return s;
    }
    services.push_back(std::move(*described));
  }
  return services;
}

}  // namespace authrpc::cli
