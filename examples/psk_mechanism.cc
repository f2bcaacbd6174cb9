#include "psk_mechanism.h"

#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <optional>

namespace psk {
namespace {

using authrpc::ChannelInfo;
using authrpc::ClientStep;
using authrpc::Errc;
using authrpc::Result;
using authrpc::ServerStep;
using authrpc::Status;

// --- messages ----------------------------------------------------------------
// Every message starts with a version byte, so that a later exchange can be
// told apart; decoders refuse any other version, any other length and
// trailing bytes.

constexpr std::uint8_t kVersion = 1;
constexpr std::size_t kNonceBytes = 32;
constexpr std::size_t kProofBytes = 32;
using Nonce = std::array<std::uint8_t, kNonceBytes>;
using Proof = std::array<std::uint8_t, kProofBytes>;

struct Hello {
  std::string identity;
  Nonce client_nonce{};
};

std::string bytes(const std::uint8_t* p, std::size_t n) {
  return std::string(reinterpret_cast<const char*>(p), n);
}

std::string encode_hello(const Hello& h) {
  std::string out(1, static_cast<char>(kVersion));
  out += static_cast<char>(h.identity.size());
  out += h.identity;
  out += bytes(h.client_nonce.data(), h.client_nonce.size());
  return out;
}

std::optional<Hello> decode_hello(std::string_view in) {
  if (in.size() < 2 || static_cast<std::uint8_t>(in[0]) != kVersion) return std::nullopt;
  const std::size_t length = static_cast<std::uint8_t>(in[1]);
  if (in.size() != 2 + length + kNonceBytes) return std::nullopt;
  Hello h;
  h.identity = std::string(in.substr(2, length));
  std::memcpy(h.client_nonce.data(), in.data() + 2 + length, kNonceBytes);
  return h;
}

// The challenge, the response and the success message: a version byte and 32 bytes.
template <std::size_t N>
std::string encode_fixed(const std::array<std::uint8_t, N>& body) {
  return static_cast<char>(kVersion) + bytes(body.data(), body.size());
}

template <std::size_t N>
std::optional<std::array<std::uint8_t, N>> decode_fixed(std::string_view in) {
  if (in.size() != 1 + N || static_cast<std::uint8_t>(in[0]) != kVersion) return std::nullopt;
  std::array<std::uint8_t, N> out;
  std::memcpy(out.data(), in.data() + 1, N);
  return out;
}

bool random_bytes(std::uint8_t* out, std::size_t n) {
  return RAND_bytes(out, static_cast<int>(n)) == 1;
}

// --- proofs ------------------------------------------------------------------

// "authrpc psk v1\0" || len(identity) || identity || client nonce ||
// server nonce || len(channel binding), 2 bytes big-endian || channel binding.
// A client on TLS and a server that sees plaintext (or another TLS session)
// hold different transcripts, so their proofs never match.
std::string transcript(std::string_view identity, const Nonce& client_nonce,
                       const Nonce& server_nonce, std::string_view channel_binding) {
  std::string t("authrpc psk v1", 15);  // with its terminating NUL
  t += static_cast<char>(identity.size());
  t += identity;
  t += bytes(client_nonce.data(), client_nonce.size());
  t += bytes(server_nonce.data(), server_nonce.size());
  t += static_cast<char>((channel_binding.size() >> 8) & 0xFF);
  t += static_cast<char>(channel_binding.size() & 0xFF);
  t += channel_binding;
  return t;
}

// HMAC-SHA256(key, label || a || b); nullopt if OpenSSL fails. The labels
// keep a client proof from ever serving as a server proof.
std::optional<Proof> hmac(const Key& key, std::string_view label, std::string_view a,
                          std::string_view b = {}) {
  std::string message;
  message.reserve(label.size() + a.size() + b.size());
  message.append(label).append(a).append(b);
  Proof out{};
  unsigned int length = 0;
  if (HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
           reinterpret_cast<const unsigned char*>(message.data()), message.size(), out.data(),
           &length) == nullptr ||
      length != out.size()) {
    return std::nullopt;
  }
  return out;
}

struct Proofs {
  Proof client{};
  Proof server{};
};

std::optional<Proofs> proofs(const Key& key, std::string_view identity, const Nonce& client_nonce,
                             const Nonce& server_nonce, std::string_view channel_binding) {
  const std::string t = transcript(identity, client_nonce, server_nonce, channel_binding);
  const auto client = hmac(key, std::string_view("client\0", 7), t);
  if (!client) return std::nullopt;
  const auto server =
      hmac(key, std::string_view("server\0", 7), t,
           std::string_view(reinterpret_cast<const char*>(client->data()), client->size()));
  if (!server) return std::nullopt;
  return Proofs{*client, *server};
}

bool same(const Proof& a, const Proof& b) { return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0; }

Status failed(std::string what) { return {Errc::kAuthenticationFailed, "psk: " + std::move(what)}; }
Status protocol(std::string what) { return {Errc::kProtocolError, "psk: " + std::move(what)}; }
Status internal(std::string what) { return {Errc::kInternal, "psk: " + std::move(what)}; }

// --- server ------------------------------------------------------------------

// One connection's exchange, on its IO thread. Nothing here blocks: the keys
// were read when the mechanism was made.
class ServerSession final : public authrpc::ServerAuthSession {
 public:
  ServerSession(std::shared_ptr<const KeyTable> keys, std::shared_ptr<const Key> decoy,
                const ChannelInfo& channel)
      : keys_(std::move(keys)), decoy_(std::move(decoy)), channel_binding_(channel.channel_binding) {}

  asio::awaitable<ServerStep> step(std::string_view client_message) override {
    switch (state_) {
      case State::kHello: co_return hello(client_message);
      case State::kResponse: co_return response(client_message);
      case State::kDone: break;
    }
    co_return ServerStep::failure(protocol("message after the exchange ended"));
  }

 private:
  enum class State { kHello, kResponse, kDone };

  ServerStep hello(std::string_view message) {
    state_ = State::kDone;
    auto hello = decode_hello(message);
    if (!hello || !valid_identity(hello->identity)) {
      return ServerStep::failure(failed("MALFORMED: malformed HELLO"));
    }
    if (!random_bytes(server_nonce_.data(), server_nonce_.size())) {
      return ServerStep::failure(internal("the CSPRNG failed"));
    }
    // An unknown identity is challenged all the same, and its proof checked
    // against a random key, so that its failure looks like a wrong key's;
    // it is refused whatever the proof.
    const Key* key = keys_->find(hello->identity);
    known_ = key != nullptr;
    key_ = known_ ? key : decoy_.get();
    hello_ = std::move(*hello);
    state_ = State::kResponse;
    return ServerStep::challenge(encode_fixed(server_nonce_));
  }

  ServerStep response(std::string_view message) {
    state_ = State::kDone;
    auto proof = decode_fixed<kProofBytes>(message);
    if (!proof) return ServerStep::failure(failed("MALFORMED: malformed response"));
    const auto expected =
        proofs(*key_, hello_.identity, hello_.client_nonce, server_nonce_, channel_binding_);
    if (!expected) return ServerStep::failure(internal("HMAC-SHA256 failed"));
    if (!same(expected->client, *proof) || !known_) {
      return ServerStep::failure(failed(
          "unknown identity or wrong key" +
          std::string(channel_binding_.empty() ? "" : " (or a proof made for another channel)")));
    }
    authrpc::Identity id;
    id.user = hello_.identity;
    id.principal = hello_.identity;
    return ServerStep::success(std::move(id), encode_fixed(expected->server));
  }

  std::shared_ptr<const KeyTable> keys_;  // keeps key_ alive
  std::shared_ptr<const Key> decoy_;
  std::string channel_binding_;
  State state_ = State::kHello;
  Hello hello_;
  Nonce server_nonce_{};
  const Key* key_ = nullptr;
  bool known_ = false;
};

// --- client ------------------------------------------------------------------

class ClientSession final : public authrpc::ClientAuthSession {
 public:
  ClientSession(std::string identity, std::shared_ptr<const Key> key, const ChannelInfo& channel)
      : identity_(std::move(identity)), key_(std::move(key)),
        channel_binding_(channel.channel_binding) {}

  asio::awaitable<ClientStep> initial() override {
    if (!random_bytes(client_nonce_.data(), client_nonce_.size())) {
      co_return ClientStep::failure(internal("the CSPRNG failed"));
    }
    // Not final: the server answers with a challenge.
    co_return ClientStep::send(encode_hello({identity_, client_nonce_}), false);
  }

  asio::awaitable<ClientStep> challenge(std::string_view server_message) override {
    if (expected_server_) co_return ClientStep::failure(protocol("second server challenge"));
    auto server_nonce = decode_fixed<kNonceBytes>(server_message);
    if (!server_nonce) co_return ClientStep::failure(protocol("malformed server challenge"));
    const auto p = proofs(*key_, identity_, client_nonce_, *server_nonce, channel_binding_);
    if (!p) co_return ClientStep::failure(internal("HMAC-SHA256 failed"));
    expected_server_ = p->server;
    co_return ClientStep::send(encode_fixed(p->client), true);
  }

  asio::awaitable<Status> complete(std::string_view server_final_message) override {
    // A server that skipped the challenge, or answers with anything but our
    // expected proof, does not hold our key: it is not the server we meant.
    auto proof = decode_fixed<kProofBytes>(server_final_message);
    if (!expected_server_ || !proof || !same(*expected_server_, *proof)) {
      co_return failed("the server did not prove that it holds the key");
    }
    co_return Status();
  }

 private:
  std::string identity_;
  std::shared_ptr<const Key> key_;
  std::string channel_binding_;
  Nonce client_nonce_{};
  std::optional<Proof> expected_server_;
};

// --- key files ---------------------------------------------------------------

Status config_error(const std::string& path, const std::string& what) {
  return {Errc::kConfigError, "psk: key file " + path + ": " + what};
}

// The file's bytes, if it is safe to trust: a regular file (not reached
// through a symlink), owned by us, closed to group and others. Checked on the
// open descriptor, so the file cannot be swapped between check and read.
Result<std::string> read_private_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return config_error(path, std::strerror(errno));
  struct stat st {};
  std::string why;
  if (::fstat(fd, &st) != 0) {
    why = std::strerror(errno);
  } else if (!S_ISREG(st.st_mode)) {
    why = "not a regular file";
  } else if (st.st_uid != ::geteuid()) {
    why = "owned by uid " + std::to_string(st.st_uid) + ", not by this process's user";
  } else if ((st.st_mode & 077) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    why = std::string("mode ") + mode + " lets group or others read it: chmod 600 it";
  } else if (st.st_size > (1 << 20)) {
    why = "larger than 1 MiB";
  }
  std::string content;
  if (why.empty()) {
    content.resize(static_cast<std::size_t>(st.st_size));
    std::size_t done = 0;
    while (done < content.size()) {
      const ssize_t n = ::read(fd, content.data() + done, content.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        why = n < 0 ? std::strerror(errno) : "shorter than its size";
        break;
      }
      done += static_cast<std::size_t>(n);
    }
  }
  ::close(fd);
  if (!why.empty()) {
    OPENSSL_cleanse(content.data(), content.size());
    return config_error(path, why);
  }
  return content;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::optional<Key> parse_key(std::string_view hex) {
  if (hex.size() != 2 * kKeyBytes) return std::nullopt;
  std::array<std::uint8_t, kKeyBytes> raw{};
  for (std::size_t i = 0; i < kKeyBytes; ++i) {
    const int hi = hex_value(hex[2 * i]);
    const int lo = hex_value(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) {
      OPENSSL_cleanse(raw.data(), raw.size());
      return std::nullopt;
    }
    raw[i] = static_cast<std::uint8_t>(hi << 4 | lo);
  }
  Key key(raw);
  OPENSSL_cleanse(raw.data(), raw.size());
  return key;
}

// Reads a JSON options object: only the listed string keys.
Status read_options(const nlohmann::json& options, std::string_view side,
                    std::map<std::string, std::string>& values) {
  auto bad = [side](const std::string& what) {
    return Status(Errc::kConfigError, "psk (" + std::string(side) + "): " + what);
  };
  if (options.is_null()) return {};
  if (!options.is_object()) return bad("options must be an object");
  for (const auto& [key, value] : options.items()) {
    if (values.find(key) == values.end()) return bad("unknown option '" + key + "'");
    if (!value.is_string()) return bad("'" + key + "' must be a string");
    values[key] = value.get<std::string>();
  }
  for (const auto& [key, value] : values) {
    if (value.empty()) return bad("'" + key + "' is required");
  }
  return {};
}

}  // namespace

Key::~Key() { OPENSSL_cleanse(bytes_.data(), bytes_.size()); }

bool valid_identity(std::string_view identity) {
  if (identity.empty() || identity.size() > 255) return false;
  for (const char c : identity) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == '@' || c == '+' || c == '-';
    if (!ok) return false;
  }
  return true;
}

Result<KeyTable> KeyTable::load(const std::string& path) {
  auto content = read_private_file(path);
  if (!content.ok()) return content.status();
  KeyTable table;
  Status error;
  std::string_view rest = *content;
  for (int line_no = 1; !rest.empty() && error.ok(); ++line_no) {
    const std::size_t end = rest.find('\n');
    std::string_view line = rest.substr(0, end);
    rest = end == std::string_view::npos ? std::string_view() : rest.substr(end + 1);
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) {
      line.remove_suffix(1);
    }
    while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) line.remove_prefix(1);
    if (line.empty() || line.front() == '#') continue;
    const std::size_t gap = line.find_first_of(" \t");
    const std::string_view identity = line.substr(0, gap);
    std::string_view hex = gap == std::string_view::npos ? std::string_view() : line.substr(gap);
    while (!hex.empty() && (hex.front() == ' ' || hex.front() == '\t')) hex.remove_prefix(1);
    const std::string where = "line " + std::to_string(line_no) + ": ";
    if (!valid_identity(identity)) {
      error = config_error(path, where + "an identity is 1-255 characters of [A-Za-z0-9._@+-]");
    } else if (auto key = parse_key(hex); !key) {
      error = config_error(path, where + "expected '<identity> <64 hex digits>' (a 32-byte key: "
                                         "openssl rand -hex 32)");
    } else if (!table.keys_.emplace(std::string(identity), *key).second) {
      error = config_error(path, where + "a second key for the same identity");
    }
  }
  OPENSSL_cleanse(content->data(), content->size());
  if (error.ok() && table.keys_.empty()) error = config_error(path, "no keys in it");
  if (!error.ok()) return error;
  return table;
}

const Key* KeyTable::find(std::string_view identity) const {
  const auto it = keys_.find(identity);
  return it == keys_.end() ? nullptr : &it->second;
}

Result<std::shared_ptr<PskServerMechanism>> PskServerMechanism::create(const std::string& key_file) {
  auto table = KeyTable::load(key_file);
  if (!table.ok()) return table.status();
  return std::make_shared<PskServerMechanism>(
      std::make_shared<const KeyTable>(std::move(*table)));
}

PskServerMechanism::PskServerMechanism(std::shared_ptr<const KeyTable> keys)
    : keys_(std::move(keys)) {
  // Only timing depends on the decoy (unknown identities are refused
  // whatever their proof), so a failing CSPRNG here is harmless.
  std::array<std::uint8_t, kKeyBytes> raw{};
  random_bytes(raw.data(), raw.size());
  decoy_ = std::make_shared<const Key>(raw);
  OPENSSL_cleanse(raw.data(), raw.size());
}

std::unique_ptr<authrpc::ServerAuthSession> PskServerMechanism::start(const ChannelInfo& channel) {
  return std::make_unique<ServerSession>(keys_, decoy_, channel);
}

Result<std::shared_ptr<PskClientMechanism>> PskClientMechanism::create(std::string identity,
                                                                       const std::string& key_file) {
  if (!valid_identity(identity)) {
    return Status(Errc::kConfigError, "psk: an identity is 1-255 characters of [A-Za-z0-9._@+-]");
  }
  auto table = KeyTable::load(key_file);
  if (!table.ok()) return table.status();
  const Key* key = table->find(identity);
  if (key == nullptr) {
    return Status(Errc::kConfigError,
                  "psk: key file " + key_file + " has no key for identity " + identity);
  }
  return std::make_shared<PskClientMechanism>(std::move(identity), *key);
}

PskClientMechanism::PskClientMechanism(std::string identity, Key key)
    : identity_(std::move(identity)), key_(std::make_shared<const Key>(std::move(key))) {}

std::unique_ptr<authrpc::ClientAuthSession> PskClientMechanism::start(const ChannelInfo& channel) {
  return std::make_unique<ClientSession>(identity_, key_, channel);
}

void register_psk(authrpc::MechanismRegistry& registry) {
  registry.register_server(
      std::string(kMechanismName),
      [](const nlohmann::json& options) -> Result<std::shared_ptr<authrpc::ServerMechanism>> {
        std::map<std::string, std::string> values{{"key_file", ""}};
        if (Status s = read_options(options, "server", values); !s.ok()) return s;
        auto mechanism = PskServerMechanism::create(values["key_file"]);
        if (!mechanism.ok()) return mechanism.status();
        return std::shared_ptr<authrpc::ServerMechanism>(*mechanism);
      });
  registry.register_client(
      std::string(kMechanismName),
      [](const nlohmann::json& options) -> Result<std::shared_ptr<authrpc::ClientMechanism>> {
        std::map<std::string, std::string> values{{"identity", ""}, {"key_file", ""}};
        if (Status s = read_options(options, "client", values); !s.ok()) return s;
        auto mechanism = PskClientMechanism::create(values["identity"], values["key_file"]);
        if (!mechanism.ok()) return mechanism.status();
        return std::shared_ptr<authrpc::ClientMechanism>(*mechanism);
      });
}

}  // namespace psk
