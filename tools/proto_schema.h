// The services a server describes (sys.describe: docs/PROTOCOL.md,
// "Describing services") as `authrpc describe` and `authrpc call --json`
// read them (tools/proto_commands.cc, tools/json_call.cc): each service's
// methods and, for a protobuf service, the descriptors built from the
// schema it serves. The answer is the server's: its shape is checked, and
// a name from it is escaped before it is printed.
#pragma once

#include <google/protobuf/descriptor.h>

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "authrpc/base/result.h"
#include "authrpc/client/client.h"

namespace authrpc::cli {

struct DescribedMethod {
  std::string name;
  bool stream = false;  // "kind": "stream"
};

// One service of a sys.describe answer.
struct DescribedService {
  std::string name;
  std::vector<DescribedMethod> methods;
  // Empty: the service carries bytes (often JSON) without a schema.
  std::string codec;
  // With the protobuf codec: the pool built from the schema, and the
  // service of this name in it.
  std::shared_ptr<const google::protobuf::DescriptorPool> pool;
  const google::protobuf::ServiceDescriptor* descriptor = nullptr;
};

// Calls sys.describe, for `service` alone unless it is empty. The call's
// failure as the server gave it (NOT_FOUND for an unknown service);
// DATA_LOSS for an answer not of sys.describe's shape, or a protobuf
// schema that does not build or lacks its service.
Result<std::vector<DescribedService>> describe_services(Client& client, std::string_view service,
                                                        std::chrono::milliseconds timeout);

// A pool of the files of a serialized FileDescriptorSet, built in order
// (each after the files it imports); DATA_LOSS naming the file and the
// error if one does not build.
Result<std::shared_ptr<const google::protobuf::DescriptorPool>> build_pool(std::string_view file_descriptor_set);

}  // namespace authrpc::cli
