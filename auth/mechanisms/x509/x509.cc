#include "authrpc/auth/mechanisms/x509/x509.h"

#include <nlohmann/json.hpp>

#include "authrpc/auth/mechanism_options.h"
#include "authrpc/auth/mechanism_registry.h"
#include "authrpc/auth/mechanisms/simple/simple.h"

namespace authrpc {
namespace {

class X509ServerSession final : public ServerAuthSession {
 public:
  X509ServerSession(const ChannelInfo& channel, security::X509UserFrom rule)
      : certificate_(channel.peer_certificate), rule_(rule) {}

  asio::awaitable<ServerStep> step(std::string_view) override {
    if (certificate_.empty()) {
      co_return ServerStep::failure(
          {Errc::kAuthenticationFailed, "x509: no verified client certificate on this connection"});
    }
    auto mapped = security::x509_identity(certificate_, rule_);
    if (!mapped.ok()) {
      co_return ServerStep::failure({mapped.code(), "x509: " + mapped.status().message});
    }
    if (auto refused = check_simple_user_name(mapped->user); !refused.ok()) {
      co_return ServerStep::failure({Errc::kAuthenticationFailed, "x509: " + refused.message});
    }
    Identity id;
    id.user = std::move(mapped->user);
    id.principal = std::move(mapped->subject);
    co_return ServerStep::success(std::move(id));
  }

 private:
  std::string certificate_;
  security::X509UserFrom rule_;
};

class X509ClientSession final : public ClientAuthSession {
 public:
  asio::awaitable<ClientStep> initial() override { co_return ClientStep::send({}, true); }
  asio::awaitable<ClientStep> challenge(std::string_view) override {
    co_return ClientStep::failure({Errc::kProtocolError, "x509: unexpected challenge"});
  }
  asio::awaitable<Status> complete(std::string_view) override { co_return Status(); }
};

}  // namespace

std::unique_ptr<ServerAuthSession> X509ServerMechanism::start(const ChannelInfo& channel) {
  return std::make_unique<X509ServerSession>(channel, rule_);
}

std::unique_ptr<ClientAuthSession> X509ClientMechanism::start(const ChannelInfo&) {
  return std::make_unique<X509ClientSession>();
}

void register_x509(MechanismRegistry& registry) {
  const std::string name(kX509Mechanism);
  registry.register_server(
      name,
      [](const nlohmann::json& json) -> Result<std::shared_ptr<ServerMechanism>> {
        MechanismOptions o(kX509Mechanism, json);
        std::string user_from;
        if (Status s = o.read_only("user_from", user_from); !s.ok()) return s;
        auto rule = security::X509UserFrom::kCommonName;
        if (!user_from.empty() || (json.is_object() && json.contains("user_from"))) {
          if (!security::parse_x509_user_from(user_from, &rule)) {
            return o.error("'user_from' must be cn, san-email, san-email-local or san-dns");
          }
        }
        return std::shared_ptr<ServerMechanism>(std::make_shared<X509ServerMechanism>(rule));
      },
      kX509Traits);
  registry.register_client(
      name, without_options<ClientMechanism, X509ClientMechanism>(kX509Mechanism), kX509Traits);
}

}  // namespace authrpc
