#include "authrpc/auth/mechanisms/simple/simple.h"

#include <pwd.h>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <vector>

#include "authrpc/auth/mechanism_options.h"
#include "authrpc/auth/mechanism_registry.h"

namespace authrpc {
namespace {

class SimpleServerSession final : public ServerAuthSession {
 public:
  asio::awaitable<ServerStep> step(std::string_view client_message) override {
    if (auto refused = check_simple_user_name(client_message); !refused.ok()) {
      co_return ServerStep::failure({Errc::kAuthenticationFailed, "simple: " + refused.message});
    }
    // Built in place: an Identity is a dozen members, each move of it
    // (through success() and the aggregate) costs more than the check above.
    ServerStep step;
    step.kind = ServerStep::Kind::kSuccess;
    step.identity.user = client_message;
    step.identity.principal = client_message;
    co_return step;
  }
};

class SimpleClientSession final : public ClientAuthSession {
 public:
  explicit SimpleClientSession(std::string user) : user_(std::move(user)) {}

  asio::awaitable<ClientStep> initial() override { co_return ClientStep::send(user_, true); }

  asio::awaitable<ClientStep> challenge(std::string_view) override {
    co_return ClientStep::failure({Errc::kProtocolError, "simple: unexpected server challenge"});
  }

  asio::awaitable<Status> complete(std::string_view server_final_message) override {
    if (!server_final_message.empty()) {
      co_return Status(Errc::kProtocolError, "simple: unexpected final message from server");
    }
    co_return Status();
  }

 private:
  std::string user_;
};

}  // namespace

std::unique_ptr<ServerAuthSession> SimpleServerMechanism::start(const ChannelInfo&) {
  return std::make_unique<SimpleServerSession>();
}

SimpleClientMechanism::SimpleClientMechanism(std::string user)
    : user_(user.empty() ? current_os_user() : std::move(user)) {}

std::unique_ptr<ClientAuthSession> SimpleClientMechanism::start(const ChannelInfo&) {
  return std::make_unique<SimpleClientSession>(user_);
}

std::string current_os_user() {
  const uid_t uid = ::geteuid();
  std::vector<char> buf(16384);
  passwd pw{};
  passwd* found = nullptr;
  if (::getpwuid_r(uid, &pw, buf.data(), buf.size(), &found) == 0 && found != nullptr) {
    return found->pw_name;
  }
  return "uid:" + std::to_string(uid);
}

namespace {

bool valid_utf8(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    const std::size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3
                        : (c >> 3) == 0x1E ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (std::size_t k = 1; k < n; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) >> 6) != 0x2) return false;
    }
    if ((n == 2 && c < 0xC2) || (n == 4 && c > 0xF4)) return false;  // overlong / > U+10FFFF
    i += n;
  }
  return true;
}

}  // namespace

Status check_simple_user_name(std::string_view user) {
  const auto refuse = [](std::string why) { return Status(Errc::kInvalidArgument, std::move(why)); };
  if (user.empty()) return refuse("empty user name");
  if (user.size() > 255) return refuse("user name longer than 255 bytes");
  for (const unsigned char c : user) {
    if (c <= 0x20 || c == 0x7F) return refuse("user name contains whitespace or control characters");
  }
  if (!valid_utf8(user)) return refuse("user name is not valid UTF-8");
  return {};
}

void register_simple(MechanismRegistry& registry) {
  const std::string name(kSimpleMechanism);
  registry.register_server(
      name, without_options<ServerMechanism, SimpleServerMechanism>(kSimpleMechanism),
      kSimpleTraits);
  registry.register_client(
      name,
      [](const nlohmann::json& json) -> Result<std::shared_ptr<ClientMechanism>> {
        MechanismOptions o(kSimpleMechanism, json);
        std::string user;
        if (Status s = o.read_only("user", user); !s.ok()) return s;
        if (!user.empty()) {
          if (Status refused = check_simple_user_name(user); !refused.ok()) return o.error(refused.message);
        }
        return std::shared_ptr<ClientMechanism>(std::make_shared<SimpleClientMechanism>(user));
      },
      kSimpleTraits, {{"--user", "user", "NAME  the user name to assert (default: the OS user)"}});
}

}  // namespace authrpc
