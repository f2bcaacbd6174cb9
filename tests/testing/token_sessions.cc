#include "tests/testing/token_sessions.h"

#include <utility>

#include <nlohmann/json.hpp>

#include "authrpc/components/kerberos/kerberos.h"
#include "tests/testing/test_support.h"
#include "tests/testing/test_tls.h"

namespace authrpc::testing {

void TokenServiceSuite::StartRealmWithTls(KerberosRealmOptions options) {
  StartRealm(std::move(options));
  server_tls_ = TestTls::shared().server();
  client_tls_ = TestTls::shared().client();
  if (setup_.ok() && (!server_tls_ || !client_tls_)) setup_ = Status(Errc::kInternal, "TLS contexts");
}

std::string TokenServiceSuite::Principal(const std::string& name) {
  return name + "@" + kdc_->realm();
}

std::shared_ptr<ClientMechanism> TokenServiceSuite::KerberosAs(const std::string& user) {
  auto m = KerberosClientMechanism::create(KeytabClientOptions(*kdc_, user));
  EXPECT_TRUE(m.ok()) << Describe(m);
  return m.ok() ? *m : nullptr;
}

Result<std::unique_ptr<Client>> TokenServiceSuite::Connect(const Endpoint& ep,
                                                           std::shared_ptr<ClientMechanism> m) {
  TestClient client(ep);
  if (ep.scheme == Endpoint::Scheme::kTls) client.tls(client_tls_);
  return client.mechanism(std::move(m)).connect();
}

Result<security::Token> TokenServiceSuite::FetchToken(const Endpoint& ep, const std::string& as,
                                                      const std::string& renewer,
                                                      const std::string& service) {
  auto client = Connect(ep, KerberosAs(as));
  if (!client.ok()) return client.status();
  nlohmann::json request = {{"renewer", renewer}};
  if (!service.empty()) request["service"] = service;
  auto r = (*client)->call_json("token", "get", request);
  if (!r.ok()) return r.status();
  auto t = security::Token::from_string((*r)["token"].get<std::string>());
  if (!t.ok()) return Status(Errc::kDataLoss, t.status().to_string());
  return std::move(*t);
}

Result<TokenServiceSuite::TokenServer> TokenServiceSuite::OpenTokenServer(
    TokenServiceOptions options, const std::string& uri) {
  TokenServer out;
  auto tokens = TokenService::open(std::move(options));
  if (!tokens.ok()) return tokens.status();
  out.tokens = std::move(*tokens);
  auto kerberos = KerberosServerMechanism::create(KerberosServerOptionsFor(*kdc_));
  if (!kerberos.ok()) return kerberos.status();
  out.server = std::make_unique<TestServer>();
  out.server->endpoint(uri).client_tls(client_tls_);
  if (uri.starts_with("tls:")) out.server->tls_context(server_tls_);
  out.server->mechanisms({*kerberos, out.tokens->mechanism()}).service(out.tokens->service());
  return out;
}

}  // namespace authrpc::testing
