// The client of kv.proto's Store (kv_server.cc): puts keys one at a time
// and as a stream, reads them back, and scans a prefix through the
// server-streaming method. Exits 0 when every answer is the expected one.
//
//   kv_client ENDPOINT [--kerberos [--service-principal NAME]] [--user NAME]
//
// --kerberos authenticates with the ticket cache (KRB5CCNAME) and expects
// the server to be NAME (default: rpc/<host of ENDPOINT>, rpc/localhost for
// unix:); otherwise the client calls itself --user (default alice) with
// `simple`. Either way the server must say who it authenticated the caller
// as, and that must be who the client is.
#include <authrpc/auth/mechanisms/simple/simple.h>
#include <authrpc/client/client.h>
#include <authrpc/components/kerberos/kerberos.h>

#include <asio/co_spawn.hpp>
#include <asio/use_future.hpp>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kv.authrpc.h"

namespace {

using authrpc::Client;
using authrpc::Errc;
using authrpc::Result;
using authrpc::Status;

struct Args {
  std::string endpoint, service_principal, user = "alice";
  bool kerberos = false;
};

bool parse_args(int argc, char** argv, Args& args) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--kerberos") {
      args.kerberos = true;
    } else if ((arg == "--service-principal" || arg == "--user") && i + 1 < argc) {
      (arg == "--user" ? args.user : args.service_principal) = argv[++i];
    } else if (args.endpoint.empty() && !arg.starts_with("--")) {
      args.endpoint = arg;
    } else {
      return false;
    }
  }
  return !args.endpoint.empty();
}

// The client's mechanism, and the name the server should know it by.
Result<std::pair<std::shared_ptr<authrpc::ClientMechanism>, std::string>> mechanism(const Args& args) {
  if (!args.kerberos) {
    return std::pair{std::shared_ptr<authrpc::ClientMechanism>(
                         std::make_shared<authrpc::SimpleClientMechanism>(args.user)),
                     args.user};
  }
  authrpc::KerberosClientOptions kerberos_options;
  kerberos_options.service_principal = args.service_principal;
  auto kerberos = authrpc::KerberosClientMechanism::create(kerberos_options);
  if (!kerberos.ok()) return kerberos.status();
  return std::pair{std::shared_ptr<authrpc::ClientMechanism>(*kerberos), (*kerberos)->principal()};
}

// Prints one check and counts the failures.
class Checks {
 public:
  void expect(bool ok, const std::string& what, const Status& status = Status()) {
    std::printf("%-40s %s%s%s\n", what.c_str(), ok ? "ok" : "FAILED",
                status.ok() ? "" : "  ", status.ok() ? "" : status.to_string().c_str());
    failures_ += ok ? 0 : 1;
  }
  int failures() const { return failures_; }

 private:
  int failures_ = 0;
};

kv::PutRequest put_request(std::string key, std::string value) {
  kv::PutRequest request;
  request.set_key(std::move(key));
  request.set_value(std::move(value));
  return request;
}

// Client streaming: two puts in one call.
asio::awaitable<Result<kv::PutManyResponse>> put_many(kv::StoreStub& stub) {
  auto writer = co_await stub.PutMany();
  if (!writer.ok()) co_return writer.status();
  for (auto [key, value] : {std::pair{"fruit/cherry", "dark red"}, std::pair{"fruit/date", "brown"}}) {
    if (Status s = co_await writer->write(put_request(key, value)); !s.ok()) co_return s;
  }
  co_return co_await writer->finish();
}

// Server streaming: every entry under `prefix`, in the server's order.
asio::awaitable<Result<std::vector<kv::Entry>>> scan(kv::StoreStub& stub, std::string prefix) {
  kv::ScanRequest request;
  request.set_prefix(std::move(prefix));
  auto reader = co_await stub.Scan(request);
  if (!reader.ok()) co_return reader.status();
  std::vector<kv::Entry> entries;
  for (;;) {
    Result<std::optional<kv::Entry>> entry = co_await reader->read();
    if (!entry.ok()) co_return entry.status();
    if (!entry->has_value()) break;
    entries.push_back(std::move(**entry));
  }
  co_return entries;
}

void check_unary(kv::StoreStub& stub, const std::string& me, Checks& checks) {
  for (auto [key, value] : {std::pair{"fruit/apple", "red"}, std::pair{"fruit/banana", "yellow"},
                            std::pair{"veg/leek", "green"}}) {
    auto put = stub.Put(put_request(key, value));
    checks.expect(put.ok() && !put->replaced() && put->caller() == me,
                  std::string("Put ") + key + (put.ok() ? " by " + put->caller() : ""), put.status());
  }
  kv::GetRequest get;
  get.set_key("fruit/apple");
  auto apple = stub.Get(get);
  checks.expect(apple.ok() && apple->found() && apple->value() == "red", "Get fruit/apple", apple.status());
  get.set_key("fruit/kiwi");
  auto kiwi = stub.Get(get);
  checks.expect(kiwi.ok() && !kiwi->found(), "Get fruit/kiwi: not found", kiwi.status());
  get.clear_key();
  auto refused = stub.Get(get);
  checks.expect(refused.code() == Errc::kInvalidArgument, "Get with an empty key: INVALID_ARGUMENT");
}

void check_streams(Client& client, kv::StoreStub& stub, const std::string& me, Checks& checks) {
  auto many = asio::co_spawn(client.executor(), put_many(stub), asio::use_future).get();
  checks.expect(many.ok() && many->written() == 2, "PutMany of 2", many.status());
  auto fruit = asio::co_spawn(client.executor(), scan(stub, "fruit/"), asio::use_future).get();
  std::string keys;
  bool mine = true;
  for (const kv::Entry& entry : fruit.ok() ? *fruit : std::vector<kv::Entry>{}) {
    keys += (keys.empty() ? "" : " ") + entry.key();
    mine = mine && entry.writer() == me;
  }
  checks.expect(fruit.ok() && mine && keys == "fruit/apple fruit/banana fruit/cherry fruit/date",
                "Scan fruit/: " + keys, fruit.status());
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  if (!parse_args(argc, argv, args)) {
    std::fprintf(stderr, "usage: kv_client ENDPOINT [--kerberos [--service-principal NAME]] [--user NAME]\n");
    return 2;
  }
  auto endpoint = authrpc::Endpoint::parse(args.endpoint);
  if (!endpoint.ok()) {
    std::fprintf(stderr, "kv_client: %s\n", endpoint.status().to_string().c_str());
    return 2;
  }
  auto auth = mechanism(args);
  if (!auth.ok()) {
    std::fprintf(stderr, "kv_client: %s\n", auth.status().to_string().c_str());
    return 1;
  }
  authrpc::ClientOptions options;
  options.endpoint = *endpoint;
  options.mechanisms = {auth->first};
  auto client = Client::connect(std::move(options));
  if (!client.ok()) {
    std::fprintf(stderr, "kv_client: connect: %s\n", client.status().to_string().c_str());
    return 1;
  }
  kv::StoreStub stub(**client);
  Checks checks;
  check_unary(stub, auth->second, checks);
  check_streams(**client, stub, auth->second, checks);
  return checks.failures() == 0 ? 0 : 1;
}
