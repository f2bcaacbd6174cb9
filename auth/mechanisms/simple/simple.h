// The `simple` mechanism: the client asserts a user name and the server
// believes it. No secret, no proof — for trusted networks, tests and Unix
// sockets whose permissions already say who may connect. One message (the
// name in HELLO), so calls can follow in the same flight.
#pragma once

#include <memory>
#include <string>

#include "authrpc/auth/mechanism.h"

namespace authrpc {

inline constexpr std::string_view kSimpleMechanism = "simple";
// The client asserts a name: no proof (what authentication `required` refuses).
inline constexpr MechanismTraits kSimpleTraits{.proves_identity = false};

class MechanismRegistry;
// Registers both halves: server options none; client {"user"}, flag --user.
void register_simple(MechanismRegistry& registry);

// Accepts any well-formed user name: 1–255 bytes, no whitespace or control
// characters.
class SimpleServerMechanism final : public ServerMechanism {
 public:
  std::string_view name() const noexcept override { return kSimpleMechanism; }
  MechanismTraits traits() const noexcept override { return kSimpleTraits; }
  std::unique_ptr<ServerAuthSession> start(const ChannelInfo& channel) override;
};

class SimpleClientMechanism final : public ClientMechanism {
 public:
  // An empty user means the OS user running the process.
  explicit SimpleClientMechanism(std::string user = {});
  std::string_view name() const noexcept override { return kSimpleMechanism; }
  MechanismTraits traits() const noexcept override { return kSimpleTraits; }
  std::unique_ptr<ClientAuthSession> start(const ChannelInfo& channel) override;
  const std::string& user() const noexcept { return user_; }

 private:
  std::string user_;
};

// The name of the effective OS user ("uid:<n>" if it has no passwd entry).
std::string current_os_user();
// OK if `user` is acceptable as a simple user name, else INVALID_ARGUMENT
// saying why not (callers re-code it: a refused login, a refused config).
Status check_simple_user_name(std::string_view user);

}  // namespace authrpc
