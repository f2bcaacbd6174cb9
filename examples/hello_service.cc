// A complete authrpc application in one file: a server with a JSON "greeter"
// service and a client that calls it over a Unix socket, authenticated with
// the `simple` mechanism. Exits 0 when every call behaves as expected.
#include <authrpc/auth/mechanisms/simple/simple.h>
#include <authrpc/client/client.h>
#include <authrpc/server/server.h>

#include <cstdio>
#include <string>
#include <unistd.h>

int main() {
  using namespace authrpc;

  Service greeter("greeter");
  greeter.add_json("hello", [](CallContext& ctx, const nlohmann::json& request)
                                -> Result<nlohmann::json> {
    if (!request.contains("name") || !request["name"].is_string()) {
      return Status(Errc::kInvalidArgument, "expected {\"name\": \"...\"}");
    }
    return nlohmann::json{{"greeting", "hello " + request["name"].get<std::string>()},
                          {"caller", ctx.identity().user}};
  });

  ServerOptions server_options;
  const std::string socket = "unix:@authrpc-example-" + std::to_string(::getpid());
  server_options.endpoints = {*Endpoint::parse(socket)};
  server_options.mechanisms = {std::make_shared<SimpleServerMechanism>()};
  server_options.io_threads = 1;
  server_options.log = null_log_sink();
  Server server(std::move(server_options));
  if (Status s = server.add_service(std::move(greeter)); !s.ok()) return 1;
  if (Status s = server.start(); !s.ok()) {
    std::fprintf(stderr, "start: %s\n", s.to_string().c_str());
    return 1;
  }

  ClientOptions client_options;
  client_options.endpoint = server.bound_endpoints().front();
  client_options.mechanisms = {std::make_shared<SimpleClientMechanism>("alice")};
  auto client = Client::connect(std::move(client_options));
  if (!client.ok()) {
    std::fprintf(stderr, "connect: %s\n", client.status().to_string().c_str());
    return 1;
  }

  auto reply = (*client)->call_json("greeter", "hello", {{"name", "world"}});
  if (!reply.ok()) {
    std::fprintf(stderr, "call: %s\n", reply.status().to_string().c_str());
    return 1;
  }
  std::printf("%s\n", reply->dump().c_str());

  auto refused = (*client)->call_json("greeter", "hello", {{"nom", "world"}});
  const bool ok = (*reply)["greeting"] == "hello world" && (*reply)["caller"] == "alice" &&
                  refused.code() == Errc::kInvalidArgument;
  std::printf("invalid request -> %s\n", refused.status().to_string().c_str());
  client->reset();
  server.stop();
  return ok ? 0 : 1;
}
