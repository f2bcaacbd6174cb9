#include "authrpc/tools/proto_commands.h"

#include <google/protobuf/descriptor.h>

#include <cerrno>
#include <cstdio>
#include <set>
#include <string>
#include <system_error>
#include <variant>
#include <vector>

#include "authrpc/base/log.h"
#include "authrpc/components/protobuf/service_schema.h"
#include "authrpc/tools/cli_exit.h"
#include "authrpc/tools/flag_parser.h"
#include "authrpc/tools/proto_schema.h"
#include "authrpc/tools/server_flags.h"

namespace authrpc::cli {

namespace {

namespace pb = google::protobuf;

constexpr const char* kProgram = "authrpc";

constexpr const char* kDescribeHelp = R"(usage: authrpc describe --server URI [options] [SERVICE]

Calls sys.describe and prints the server's services (only SERVICE, a full
name such as pkg.Name, if given). A protobuf service is printed as in a
.proto file: its rpc lines, then every message and enum type its methods
use (their fields' types too, each once per service). A service without a
schema (sys, and services of bytes or JSON) is listed with its methods'
names; call those with authrpc call --data, protobuf services with
authrpc call --json.

  --server, --auth, --do-as, --timeout, --connect-timeout, TLS and the
  mechanisms' options: as for authrpc call (authrpc call --help)

Example:
  authrpc describe --server tcp://localhost:7000 --auth kerberos kv.Store

Exit status: 0 success, 1 other failure (NOT_FOUND: no such service),
2 usage, 3 credentials, 4 unavailable (retry), 5 permission denied
(authrpc help).
)";

// The top-level types (a nested type is printed inside its outermost
// message) a service's methods use, in the order first met.
class TypeCollector {
 public:
  void add(const pb::Descriptor* type) {
    while (type->containing_type() != nullptr) type = type->containing_type();
    if (!seen_.insert(type->full_name()).second) return;
    messages_.push_back(type);
    add_fields_of(type);
  }
  void add(const pb::EnumDescriptor* type) {
    if (type->containing_type() != nullptr) return add(type->containing_type());
    if (seen_.insert(type->full_name()).second) enums_.push_back(type);
  }
  const std::vector<const pb::Descriptor*>& messages() const { return messages_; }
  const std::vector<const pb::EnumDescriptor*>& enums() const { return enums_; }

 private:
  // The types of `type`'s fields and of its nested types' fields.
  void add_fields_of(const pb::Descriptor* type) {
    for (int i = 0; i < type->field_count(); ++i) {
      const pb::FieldDescriptor* field = type->field(i);
      if (field->message_type() != nullptr) add(field->message_type());
      if (field->enum_type() != nullptr) add(field->enum_type());
    }
    for (int i = 0; i < type->nested_type_count(); ++i) add_fields_of(type->nested_type(i));
  }

  std::set<std::string> seen_;
  std::vector<const pb::Descriptor*> messages_;
  std::vector<const pb::EnumDescriptor*> enums_;
};

// A protobuf service: its rpc lines, then its types, each after a comment
// with its full name and file (DebugString() names a type by its short name).
std::string proto_listing(const pb::ServiceDescriptor& service) {
  std::string out = "service " + service.full_name() + " {\n";
  TypeCollector types;
  for (int i = 0; i < service.method_count(); ++i) {
    const pb::MethodDescriptor& method = *service.method(i);
    out += "  " + authrpc::proto::rpc_declaration(method) + ";\n";
    types.add(method.input_type());
    types.add(method.output_type());
  }
  out += "}\n";
  for (const pb::Descriptor* type : types.messages()) {
    out += "\n// " + type->full_name() + " (" + type->file()->name() + ")\n" + type->DebugString();
  }
  for (const pb::EnumDescriptor* type : types.enums()) {
    out += "\n// " + type->full_name() + " (" + type->file()->name() + ")\n" + type->DebugString();
  }
  return out;
}

// A service without a protobuf schema: its methods' names and kinds.
std::string schemaless_listing(const DescribedService& service) {
  std::string out = "service " + escape_for_log(service.name) + " {\n";
  if (service.codec.empty()) {
    out += "  // no schema: its methods carry bytes or JSON (authrpc call --data)\n";
  } else {
    out += "  // codec " + escape_for_log(service.codec) + ": a schema authrpc cannot read (authrpc call --data)\n";
  }
  for (const auto& method : service.methods) {
    out += "  " + escape_for_log(method.name) + (method.stream ? "  // stream\n" : "  // unary\n");
  }
  return out + "}\n";
}

}  // namespace

int describe_command(int argc, char** argv) {
  constexpr const char* kHelp = "authrpc describe --help";
  ServerFlags flags;
  std::vector<std::string> positional;
  FlagParser parser;
  flags.add_to(parser);
  parser.positional(&positional);
  if (auto code = parse_or_exit(parser, argc, argv, kDescribeHelp, kProgram, kHelp)) return *code;
  if (positional.size() > 1) return report_usage(kProgram, "expected at most one SERVICE", kHelp);
  auto connected = flags.connect(kHelp);
  if (const int* code = std::get_if<int>(&connected)) return *code;
  auto& client = std::get<std::unique_ptr<Client>>(connected);
  auto services = describe_services(*client, positional.empty() ? "" : positional[0], flags.timeout());
  if (!services.ok()) return report_failure(kProgram, services.status());
  std::string out;
  for (const auto& service : *services) {
    if (!out.empty()) out += "\n";
    out += service.descriptor != nullptr ? proto_listing(*service.descriptor) : schemaless_listing(service);
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
  if (std::fflush(stdout) != 0) {
    return report_failure(kProgram, {std::error_code(errno, std::generic_category()), "writing the answer"});
  }
  return 0;
}

}  // namespace authrpc::cli
