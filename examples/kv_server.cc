// The server of kv.proto's Store: an in-memory map behind a mutex, served
// until SIGTERM or SIGINT.
//
//   kv_server ENDPOINT [--keytab FILE [--principal NAME]]
//
// ENDPOINT is where it listens (tcp://127.0.0.1:0, unix:/run/kv.sock...); it
// prints the endpoint it bound (the port chosen for :0) as its first line
// on stdout. With --keytab, clients authenticate with Kerberos as the
// service principal NAME ("rpc/localhost@REALM"; default: the keytab's
// rpc/<this host>); without, with `simple` (a name and no proof: for a try
// on one machine only). kv_client.cc calls it.
#include <authrpc/auth/mechanisms/simple/simple.h>
#include <authrpc/components/kerberos/kerberos.h>
#include <authrpc/server/server.h>

#include <csignal>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "kv.authrpc.h"

namespace {

using authrpc::CallContext;
using authrpc::Errc;
using authrpc::Result;
using authrpc::Status;

// The store: kv::StoreService's methods over one map. Get runs on an IO
// thread, Put on the blocking pool, Scan and PutMany as coroutines on an
// IO thread, so every access takes the mutex, and none holds it across a
// co_await.
class MemoryStore final : public kv::StoreService {
 public:
  Result<kv::GetResponse> Get(CallContext&, const kv::GetRequest& request) override {
    if (request.key().empty()) return Status(Errc::kInvalidArgument, "empty key");
    kv::GetResponse response;
    std::lock_guard lock(mu_);
    if (auto it = entries_.find(request.key()); it != entries_.end()) {
      response.set_found(true);
      response.set_value(it->second.value());
    }
    return response;
  }

  Result<kv::PutResponse> Put(CallContext& ctx, const kv::PutRequest& request) override {
    if (request.key().empty()) return Status(Errc::kInvalidArgument, "empty key");
    kv::PutResponse response;
    response.set_replaced(store(ctx, request));
    response.set_caller(ctx.identity().user);
    return response;
  }

  asio::awaitable<Status> Scan(CallContext&, const kv::ScanRequest& request,
                               authrpc::proto::ServerWriter<kv::Entry>& writer) override {
    for (const kv::Entry& entry : matching(request)) {
      if (Status s = co_await writer.write(entry); !s.ok()) co_return s;
    }
    co_return Status();
  }

  asio::awaitable<Result<kv::PutManyResponse>> PutMany(
      CallContext& ctx, authrpc::proto::ServerReader<kv::PutRequest>& reader) override {
    kv::PutManyResponse response;
    kv::PutRequest request;
    for (;;) {
      Result<bool> more = co_await reader.read(request);
      if (!more.ok()) co_return more.status();
      if (!*more) break;
      if (request.key().empty()) co_return Status(Errc::kInvalidArgument, "empty key");
      store(ctx, request);
      response.set_written(response.written() + 1);
    }
    co_return response;
  }

 private:
  // Whether the key held a value before.
  bool store(const CallContext& ctx, const kv::PutRequest& request) {
    kv::Entry entry;
    entry.set_key(request.key());
    entry.set_value(request.value());
    entry.set_writer(ctx.identity().user);
    std::lock_guard lock(mu_);
    auto [it, added] = entries_.insert_or_assign(request.key(), std::move(entry));
    return !added;
  }

  // A copy, so that the lock is not held while the entries are sent.
  std::vector<kv::Entry> matching(const kv::ScanRequest& request) {
    std::vector<kv::Entry> out;
    std::lock_guard lock(mu_);
    for (auto it = entries_.lower_bound(request.prefix());
         it != entries_.end() && it->first.starts_with(request.prefix()); ++it) {
      if (request.limit() != 0 && out.size() == request.limit()) break;
      out.push_back(it->second);
    }
    return out;
  }

  std::mutex mu_;
  std::map<std::string, kv::Entry> entries_;
};

struct Args {
  std::string endpoint, keytab, principal;
};

bool parse_args(int argc, char** argv, Args& args) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if ((arg == "--keytab" || arg == "--principal") && i + 1 < argc) {
      (arg == "--keytab" ? args.keytab : args.principal) = argv[++i];
    } else if (args.endpoint.empty() && !arg.starts_with("--")) {
      args.endpoint = arg;
    } else {
      return false;
    }
  }
  return !args.endpoint.empty() && (args.principal.empty() || !args.keytab.empty());
}

Result<std::shared_ptr<authrpc::ServerMechanism>> mechanism(const Args& args) {
  if (args.keytab.empty()) {
    return std::shared_ptr<authrpc::ServerMechanism>(std::make_shared<authrpc::SimpleServerMechanism>());
  }
  authrpc::KerberosServerOptions kerberos_options;
  kerberos_options.keytab = args.keytab;
  kerberos_options.principal = args.principal;
  auto kerberos = authrpc::KerberosServerMechanism::create(kerberos_options);
  if (!kerberos.ok()) return kerberos.status();
  return std::shared_ptr<authrpc::ServerMechanism>(*kerberos);
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  if (!parse_args(argc, argv, args)) {
    std::fprintf(stderr, "usage: kv_server ENDPOINT [--keytab FILE [--principal NAME]]\n");
    return 2;
  }
  // Blocked before the server's threads start, so that they inherit it and
  // only sigwait() below sees the two signals.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  auto endpoint = authrpc::Endpoint::parse(args.endpoint);
  if (!endpoint.ok()) {
    std::fprintf(stderr, "kv_server: %s\n", endpoint.status().to_string().c_str());
    return 2;
  }
  auto auth = mechanism(args);
  if (!auth.ok()) {
    std::fprintf(stderr, "kv_server: %s\n", auth.status().to_string().c_str());
    return 1;
  }
  authrpc::ServerOptions options;
  options.endpoints = {*endpoint};
  options.mechanisms = {*auth};
  options.io_threads = 1;
  options.log = authrpc::stderr_log_sink(authrpc::LogLevel::kWarning);
  authrpc::Server server(std::move(options));
  Status s = server.add_service(kv::StoreService::make_service(std::make_shared<MemoryStore>()));
  if (s.ok()) s = server.start();
  if (!s.ok()) {
    std::fprintf(stderr, "kv_server: %s\n", s.to_string().c_str());
    return 1;
  }
  std::printf("%s\n", server.bound_endpoints().front().to_string().c_str());
  std::fflush(stdout);

  int signal = 0;
  sigwait(&stop_signals, &signal);
  std::fprintf(stderr, "kv_server: %s, stopping\n", strsignal(signal));
  server.stop();
  return 0;
}
