// `authrpc call --json`: a call to a protobuf service written and printed
// in JSON (the proto3 JSON mapping). The CLI reads the service's schema
// from sys.describe (tools/proto_schema.h), turns the JSON into the request
// message or messages, makes the call, unary or streaming as the method is
// declared, and prints each response message as JSON. Called by
// tools/authrpc_cli_main.cc; docs/CLI.md ("authrpc describe and call --json").
#pragma once

#include <chrono>
#include <string>

#include "authrpc/client/client.h"

namespace authrpc::cli {

struct JsonCall {
  std::string service;  // full name: pkg.Name
  std::string method;
  // One request message as a JSON object; for a method the client streams
  // to (client-streaming, bidirectional), a JSON array of them.
  std::string json;
  std::chrono::milliseconds timeout{0};  // 0: none
};

// Makes the call and prints the response on stdout: a unary or
// client-streaming method's response indented, a server-streaming or
// bidirectional method's messages one JSON document per line as they
// arrive. Returns the exit status (tools/cli_exit.h): JSON that is not a
// request of the method's type, or a service without a protobuf schema,
// is a usage error; a method the schema lacks is NOT_FOUND.
int json_call(Client& client, const JsonCall& call);

}  // namespace authrpc::cli
