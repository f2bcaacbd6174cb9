// The schema a typed service answers sys.describe with: its .proto file
// and every file that file imports, as a serialized FileDescriptorSet
// (files before those that import them). Called by generated code when it
// builds an authrpc::Service; read back by `authrpc describe` and
// `authrpc call` (tools/proto_commands.cc).
#pragma once

#include <string>
#include <string_view>

#include "authrpc/server/service.h"

namespace google::protobuf {
class MethodDescriptor;
}

namespace authrpc::proto {

// Codec name of ServiceSchema::codec for protobuf services.
inline constexpr std::string_view kCodecName = "protobuf";

// The schema of the service of this fully qualified name ("kv.Store") in
// the generated descriptor pool (its .pb.cc linked in); no schema (empty
// codec) if the pool has no such service.
ServiceSchema schema_of(std::string_view service_full_name);

// "rpc Get(kv.GetRequest) returns (stream kv.Entry)": a method as a .proto
// file declares it, without the ';' (the generator's comments, `authrpc
// describe`'s listing).
std::string rpc_declaration(const google::protobuf::MethodDescriptor& method);

}  // namespace authrpc::proto
