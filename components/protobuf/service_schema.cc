#include "authrpc/components/protobuf/service_schema.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/descriptor.pb.h>
#include <set>
#include <string>

namespace authrpc::proto {

namespace {

// Adds `file` after every file it imports, each once.
void add_with_imports(const google::protobuf::FileDescriptor* file, std::set<std::string>& seen,
                      google::protobuf::FileDescriptorSet& set) {
  if (!seen.insert(file->name()).second) return;
  for (int i = 0; i < file->dependency_count(); ++i) add_with_imports(file->dependency(i), seen, set);
  file->CopyTo(set.add_file());
}

}  // namespace

ServiceSchema schema_of(std::string_view service_full_name) {
  const auto* service = google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(
      std::string(service_full_name));
  if (service == nullptr) return {};
  google::protobuf::FileDescriptorSet set;
  std::set<std::string> seen;
  add_with_imports(service->file(), seen, set);
  return ServiceSchema{std::string(kCodecName), set.SerializeAsString()};
}

std::string rpc_declaration(const google::protobuf::MethodDescriptor& method) {
  return "rpc " + method.name() + "(" + (method.client_streaming() ? "stream " : "") +
         method.input_type()->full_name() + ") returns (" + (method.server_streaming() ? "stream " : "") +
         method.output_type()->full_name() + ")";
}

}  // namespace authrpc::proto
