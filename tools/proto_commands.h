// `authrpc describe`: lists a server's services from sys.describe
// (tools/proto_schema.h), a protobuf service as .proto-like text with the
// message types its methods use, a service without a schema by its
// methods' names. Called by tools/authrpc_cli_main.cc; docs/CLI.md
// ("authrpc describe and call --json").
#pragma once

namespace authrpc::cli {

// argv: the arguments after `describe`. Returns the exit status.
int describe_command(int argc, char** argv);

}  // namespace authrpc::cli
