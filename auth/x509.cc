#include "auth/x509.h"

#include "auth/simple.h"

namespace authrpc {
namespace {

class X509ServerSession final : public ServerAuthSession {
 public:
  X509ServerSession(const ChannelInfo& channel, security::X509UserFrom rule)
      : certificate_(channel.peer_certificate), peer_(channel.peer_address), rule_(rule) {}

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
    id.mechanism = std::string(kX509Mechanism);
    id.peer_address = peer_;
    co_return ServerStep::success(std::move(id));
  }

 private:
  std::string certificate_;
  std::string peer_;
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

}  // namespace authrpc
