// A mechanism pair for tests whose whole exchange is one client message,
// under any name and traits: a test stands in for a mechanism the framework
// knows only by its traits (a delegation token, a bearer secret) without the
// real one. OneMessageClient sends its message with the first step and fails
// on a challenge; OneMessageServer hands the message to the test's verdict.
// Part of authrpc_test_support.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "authrpc/auth/mechanism.h"

namespace authrpc::testing {

// What the server makes of the client's message: success with an identity,
// or failure.
using OneMessageVerdict = std::function<ServerStep(std::string_view message)>;

// The message as the user's name and principal, as `simple` takes it.
ServerStep BelieveTheName(std::string_view message);

class OneMessageServer final : public ServerMechanism {
 public:
  explicit OneMessageServer(std::string name, MechanismTraits traits = {},
                            OneMessageVerdict verdict = BelieveTheName);
  std::string_view name() const noexcept override { return name_; }
  MechanismTraits traits() const noexcept override { return traits_; }
  std::unique_ptr<ServerAuthSession> start(const ChannelInfo& channel) override;

  // Sessions started (a channel the negotiation refused starts none).
  std::atomic<int> started{0};

 private:
  std::string name_;
  MechanismTraits traits_;
  OneMessageVerdict verdict_;
};

class OneMessageClient final : public ClientMechanism {
 public:
  OneMessageClient(std::string name, std::string message, MechanismTraits traits = {});
  std::string_view name() const noexcept override { return name_; }
  MechanismTraits traits() const noexcept override { return traits_; }
  std::unique_ptr<ClientAuthSession> start(const ChannelInfo& channel) override;

 private:
  std::string name_;
  std::string message_;
  MechanismTraits traits_;
};

}  // namespace authrpc::testing
