#include "tests/testing/one_message_mechanism.h"

#include <utility>

namespace authrpc::testing {
namespace {

class ServerSession final : public ServerAuthSession {
 public:
  explicit ServerSession(OneMessageVerdict verdict) : verdict_(std::move(verdict)) {}
  asio::awaitable<ServerStep> step(std::string_view message) override { co_return verdict_(message); }

 private:
  OneMessageVerdict verdict_;
};

class ClientSession final : public ClientAuthSession {
 public:
  ClientSession(std::string_view name, std::string message) : name_(name), message_(std::move(message)) {}
  asio::awaitable<ClientStep> initial() override { co_return ClientStep::send(message_, true); }
  asio::awaitable<ClientStep> challenge(std::string_view) override {
    co_return ClientStep::failure({Errc::kProtocolError, name_ + ": unexpected challenge"});
  }
  asio::awaitable<Status> complete(std::string_view) override { co_return Status(); }

 private:
  std::string name_;
  std::string message_;
};

}  // namespace

ServerStep BelieveTheName(std::string_view message) {
  Identity id;
  id.user = id.principal = std::string(message);
  return ServerStep::success(std::move(id));
}

OneMessageServer::OneMessageServer(std::string name, MechanismTraits traits, OneMessageVerdict verdict)
    : name_(std::move(name)), traits_(traits), verdict_(std::move(verdict)) {}

std::unique_ptr<ServerAuthSession> OneMessageServer::start(const ChannelInfo&) {
  ++started;
  return std::make_unique<ServerSession>(verdict_);
}

OneMessageClient::OneMessageClient(std::string name, std::string message, MechanismTraits traits)
    : name_(std::move(name)), message_(std::move(message)), traits_(traits) {}

std::unique_ptr<ClientAuthSession> OneMessageClient::start(const ChannelInfo&) {
  return std::make_unique<ClientSession>(name_, message_);
}

}  // namespace authrpc::testing
