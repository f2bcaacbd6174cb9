// An application that plugs in its own authentication mechanism: `psk`
// (psk_mechanism.h), which authrpc does not ship. The program registers it,
// starts a server whose configuration names it, and connects clients that
// hold the right key, a wrong key, and nothing but a recording of an earlier
// session. Exits 0 when each is treated as it should be.
#include <authrpc/auth/mechanism_registry.h>
#include <authrpc/client/client.h>
#include <authrpc/server/server.h>
#include <authrpc/server/server_config.h>

#include <fcntl.h>
#include <openssl/rand.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "psk_mechanism.h"

namespace {

using namespace authrpc;

// A new random key as the key file holds it (what `openssl rand -hex 32` prints).
std::string random_hex_key() {
  unsigned char raw[psk::kKeyBytes];
  if (RAND_bytes(raw, sizeof raw) != 1) std::abort();
  std::string hex;
  for (unsigned char b : raw) {
    static const char digits[] = "0123456789abcdef";
    hex += digits[b >> 4];
    hex += digits[b & 0xF];
  }
  return hex;
}

bool write_file(const std::string& path, const std::string& content, mode_t mode) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  if (fd < 0) return false;
  const bool ok = ::write(fd, content.data(), content.size()) ==
                      static_cast<ssize_t>(content.size()) &&
                  ::fchmod(fd, mode) == 0;  // exactly `mode`, whatever the umask
  return ::close(fd) == 0 && ok;
}

// What an eavesdropper keeps of a session: the client's messages, in order.
using Recording = std::vector<std::string>;

// Passes a real client session through and records what it sends.
class RecordingMechanism final : public ClientMechanism {
 public:
  RecordingMechanism(std::shared_ptr<ClientMechanism> inner, Recording* out)
      : inner_(std::move(inner)), out_(out) {}
  std::string_view name() const noexcept override { return inner_->name(); }
  std::unique_ptr<ClientAuthSession> start(const ChannelInfo& channel) override {
    return std::make_unique<Session>(inner_->start(channel), out_);
  }

 private:
  class Session final : public ClientAuthSession {
   public:
    Session(std::unique_ptr<ClientAuthSession> inner, Recording* out)
        : inner_(std::move(inner)), out_(out) {}
    asio::awaitable<ClientStep> initial() override { co_return keep(co_await inner_->initial()); }
    asio::awaitable<ClientStep> challenge(std::string_view message) override {
      co_return keep(co_await inner_->challenge(message));
    }
    asio::awaitable<Status> complete(std::string_view message) override {
      co_return co_await inner_->complete(message);
    }

   private:
    ClientStep keep(ClientStep step) {
      if (step.kind == ClientStep::Kind::kSend) out_->push_back(step.message);
      return step;
    }
    std::unique_ptr<ClientAuthSession> inner_;
    Recording* out_;
  };
  std::shared_ptr<ClientMechanism> inner_;
  Recording* out_;
};

// Plays a recording back to the server, whatever it says: a replay attack.
class ReplayMechanism final : public ClientMechanism {
 public:
  explicit ReplayMechanism(Recording recording) : recording_(std::move(recording)) {}
  std::string_view name() const noexcept override { return psk::kMechanismName; }
  std::unique_ptr<ClientAuthSession> start(const ChannelInfo&) override {
    return std::make_unique<Session>(recording_);
  }

 private:
  class Session final : public ClientAuthSession {
   public:
    explicit Session(Recording recording) : recording_(std::move(recording)) {}
    asio::awaitable<ClientStep> initial() override { co_return next(); }
    asio::awaitable<ClientStep> challenge(std::string_view) override { co_return next(); }
    asio::awaitable<Status> complete(std::string_view) override { co_return Status(); }

   private:
    ClientStep next() {
      if (sent_ >= recording_.size()) return ClientStep::failure({Errc::kInternal, "recording ended"});
      ++sent_;
      return ClientStep::send(recording_[sent_ - 1], sent_ == recording_.size());
    }
    Recording recording_;
    std::size_t sent_ = 0;
  };
  Recording recording_;
};

Result<std::unique_ptr<Client>> connect(const Endpoint& endpoint,
                                        std::shared_ptr<ClientMechanism> mechanism) {
  ClientOptions options;
  options.endpoint = endpoint;
  options.mechanisms = {std::move(mechanism)};
  return Client::connect(std::move(options));
}

bool check(const char* what, bool ok, const std::string& detail) {
  std::printf("%-34s %s  (%s)\n", what, ok ? "ok" : "FAILED", detail.c_str());
  return ok;
}

int run(const std::string& dir) {
  // The server's key file names every identity; each client's holds its own.
  const std::string alice_key = random_hex_key();
  const std::string server_keys = dir + "/server.keys";
  const std::string alice_keys = dir + "/alice.keys";
  const std::string mallory_keys = dir + "/mallory.keys";
  const std::string open_keys = dir + "/open.keys";
  if (!write_file(server_keys, "# identity key\nalice " + alice_key + "\nbob " + random_hex_key() + "\n", 0600) ||
      !write_file(alice_keys, "alice " + alice_key + "\n", 0600) ||
      !write_file(mallory_keys, "alice " + random_hex_key() + "\n", 0600) ||
      !write_file(open_keys, "alice " + alice_key + "\n", 0644)) {
    std::perror("writing key files");
    return 1;
  }

  // The application's registry: psk only (MechanismRegistry::with_builtins()
  // would add authrpc's own). A configuration file can now name "psk".
  MechanismRegistry registry;
  psk::register_psk(registry);

  const nlohmann::json config = {
      {"listen", {"tcp://127.0.0.1:0"}},
      {"authentication", "required"},  // psk proves who the client is
      {"io_threads", 1},
      {"auth", {{"mechanisms", {"psk"}}, {"options", {{"psk", {{"key_file", server_keys}}}}}}}};
  auto server_options = server_options_from_json(config, registry);
  if (!server_options.ok()) {
    std::fprintf(stderr, "config: %s\n", server_options.status().to_string().c_str());
    return 1;
  }
  server_options->log = null_log_sink();
  Server server(std::move(*server_options));
  if (Status s = server.start(); !s.ok()) {
    std::fprintf(stderr, "start: %s\n", s.to_string().c_str());
    return 1;
  }
  const Endpoint endpoint = server.bound_endpoints().front();
  bool all_ok = true;

  // 1. The right key: authenticated, and the service sees who.
  Recording recording;
  {
    auto alice = registry.make_client("psk", {{"identity", "alice"}, {"key_file", alice_keys}});
    if (!alice.ok()) {
      std::fprintf(stderr, "client: %s\n", alice.status().to_string().c_str());
      return 1;
    }
    auto client = connect(endpoint, std::make_shared<RecordingMechanism>(*alice, &recording));
    auto whoami = client.ok() ? (*client)->call("sys", "whoami", "") : Result<std::string>(client.status());
    const auto id = whoami.ok() ? nlohmann::json::parse(*whoami, nullptr, false) : nlohmann::json();
    all_ok &= check("alice with the right key", id.is_object() && id.value("user", "") == "alice" &&
                                                    id.value("mechanism", "") == "psk",
                    whoami.ok() ? *whoami : whoami.status().to_string());
  }

  // 2. A wrong key for the same identity.
  {
    auto mallory = registry.make_client("psk", {{"identity", "alice"}, {"key_file", mallory_keys}});
    auto client = mallory.ok() ? connect(endpoint, *mallory)
                               : Result<std::unique_ptr<Client>>(mallory.status());
    all_ok &= check("alice with a wrong key", client.code() == Errc::kAuthenticationFailed,
                    client.status().to_string());
  }

  // 3. The first session's messages, sent again on a new connection: the
  // server's fresh nonce makes the recorded proof worthless.
  {
    auto client = connect(endpoint, std::make_shared<ReplayMechanism>(recording));
    all_ok &= check("a replayed session", recording.size() == 2 &&
                                              client.code() == Errc::kAuthenticationFailed,
                    client.status().to_string());
  }

  // 4. A key file that others may read is refused before any connection.
  {
    auto careless = registry.make_client("psk", {{"identity", "alice"}, {"key_file", open_keys}});
    all_ok &= check("a key file open to others", careless.code() == Errc::kConfigError,
                    careless.status().to_string());
  }

  server.stop();
  return all_ok ? 0 : 1;
}

}  // namespace

int main() {
  std::string dir = (std::filesystem::temp_directory_path() / "authrpc-psk-XXXXXX").string();
  if (::mkdtemp(dir.data()) == nullptr) {
    std::perror("mkdtemp");
    return 1;
  }
  const int rc = run(dir);
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  return rc;
}
