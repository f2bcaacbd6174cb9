#include "minibench/tokens.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include "authrpc/auth/mechanism_registry.h"
#include "authrpc/client/client.h"
#include "authrpc/security/credentials_file.h"
#include "authrpc/security/secret_bytes.h"

namespace minibench {
namespace {

using authrpc::Errc;
using authrpc::Status;
using Clock = std::chrono::steady_clock;

authrpc::Result<std::unique_ptr<authrpc::Client>> connect_kerberos(
    const authrpc::ClientOptions& server, const nlohmann::json& options) {
  const auto registry = authrpc::MechanismRegistry::with_builtins();
  const std::string issuer = token_issuer(registry);
  if (issuer.empty()) return Status(Errc::kMechanismUnavailable, "no mechanism may be issued tokens");
  auto mechanism = registry.make_client(issuer, options);
  if (!mechanism.ok()) return mechanism.status();
  authrpc::ClientOptions o = server;
  o.mechanisms = {*mechanism};
  return authrpc::Client::connect(std::move(o));
}

// The renewer: ourselves, as the server names us.
authrpc::Result<std::string> whoami(authrpc::Client& client) {
  auto who = client.call_json("sys", "whoami", nlohmann::json::object());
  if (!who.ok()) return who.status();
  return (*who)["principal"].get<std::string>();
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<std::size_t>(p * static_cast<double>(v.size())))];
}

}  // namespace

std::string token_issuer(const authrpc::MechanismRegistry& registry) {
  for (const auto& name : registry.client_names()) {
    const auto* server = registry.server(name);
    if (server != nullptr && server->traits.may_be_issued_tokens &&
        !server->traits.delegation_token) {
      return name;
    }
  }
  return {};
}

authrpc::Result<nlohmann::json> fetch_token(const authrpc::ClientOptions& server,
                                            const nlohmann::json& kerberos_client_options,
                                            const std::string& path) {
  auto client = connect_kerberos(server, kerberos_client_options);
  if (!client.ok()) return Status(client.code(), "token fetch: " + client.status().message);
  auto me = whoami(**client);
  if (!me.ok()) return me.status();
  auto r = (*client)->call_json("token", "get", {{"renewer", *me}, {"service", kBenchTokenService}});
  if (!r.ok()) return Status(r.code(), "token.get: " + r.status().message);
  auto& text = (*r)["token"].get_ref<std::string&>();
  auto token = authrpc::security::Token::from_string(text);
  authrpc::security::cleanse(text.data(), text.size());
  if (!token.ok()) return Status(Errc::kDataLoss, token.status().to_string());
  authrpc::security::CredentialsFile file;
  file.add(std::move(*token));
  if (auto s = file.write(path); !s.ok()) return Status(Errc::kInternal, s.to_string());
  return nlohmann::json{{"token_file", path}, {"service", kBenchTokenService}};
}

authrpc::Status run_token_ops(const authrpc::Endpoint& server,
                              const nlohmann::json& kerberos_client_options, std::size_t n,
                              std::FILE* out) {
  authrpc::ClientOptions o;
  o.endpoint = server;
  auto client = connect_kerberos(o, kerberos_client_options);
  if (!client.ok()) return client.status();
  auto me = whoami(**client);
  if (!me.ok()) return me.status();
  std::vector<double> t_issue, t_renew, t_cancel;
  Clock::duration total_issue{}, total_renew{}, total_cancel{};
  auto timed = [](auto&& f, std::vector<double>& samples, Clock::duration& total) {
    const auto start = Clock::now();
    auto r = f();
    const auto d = Clock::now() - start;
    samples.push_back(std::chrono::duration<double, std::micro>(d).count());
    total += d;
    return r;
  };
  for (std::size_t i = 0; i < n; ++i) {
    auto issued = timed([&] {
      return (*client)->call_json("token", "get", {{"renewer", *me}, {"service", kBenchTokenService}});
    }, t_issue, total_issue);
    if (!issued.ok()) return Status(issued.code(), "token.get: " + issued.status().message);
    const nlohmann::json req = {{"token", (*issued)["token"]}};
    auto renewed = timed([&] { return (*client)->call_json("token", "renew", req); }, t_renew, total_renew);
    if (!renewed.ok()) return Status(renewed.code(), "token.renew: " + renewed.status().message);
    auto cancelled = timed([&] { return (*client)->call_json("token", "cancel", req); }, t_cancel, total_cancel);
    if (!cancelled.ok()) return Status(cancelled.code(), "token.cancel: " + cancelled.status().message);
  }
  std::fprintf(out, "\ntoken service through the file store (%zu of each, one connection, sequential):\n", n);
  std::fprintf(out, "%-8s %10s %10s %10s\n", "op", "ops/s", "p50 µs", "p99 µs");
  for (auto [name, samples, total] :
       {std::tuple{"issue", &t_issue, total_issue}, std::tuple{"renew", &t_renew, total_renew},
        std::tuple{"cancel", &t_cancel, total_cancel}}) {
    const double secs = std::chrono::duration<double>(total).count();
    std::fprintf(out, "%-8s %10.0f %10.1f %10.1f\n", name, secs > 0 ? static_cast<double>(n) / secs : 0.0,
                 percentile(*samples, 0.5), percentile(*samples, 0.99));
  }
  return {};
}

}  // namespace minibench
