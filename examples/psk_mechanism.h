// `psk`: a pre-shared-key mechanism that authrpc does not ship, written as
// an application writes one: outside the tree, against the installed
// headers, registered from application code (docs/MECHANISMS.md walks
// through it).
//
// Each identity shares a random 32-byte key with the server. The exchange is
// a challenge–response in two round trips, proving each side to the other:
//
//   HELLO           client → server   identity, client nonce
//   AUTH_CHALLENGE  server → client   server nonce
//   AUTH_RESPONSE   client → server   HMAC-SHA256(key, "client" || transcript)
//   AUTH_SUCCESS    server → client   HMAC-SHA256(key, "server" || transcript || client proof)
//
// The transcript holds the identity, both nonces and the TLS channel binding
// (RFC 9266, empty without TLS). The key never travels; the server's fresh
// nonce makes every recorded response worthless on the next connection (no
// replay cache needed), and the channel binding makes a proof worthless on
// any other TLS connection (a relaying man in the middle). Keys are 256-bit
// random values, so there is no password to guess and no key stretching.
#pragma once

#include <authrpc/auth/mechanism.h>
#include <authrpc/auth/mechanism_registry.h>

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>

namespace psk {

inline constexpr std::string_view kMechanismName = "psk";
inline constexpr std::size_t kKeyBytes = 32;

// A 32-byte key, wiped from memory when destroyed.
class Key {
 public:
  Key() = default;
  explicit Key(const std::array<std::uint8_t, kKeyBytes>& bytes) : bytes_(bytes) {}
  Key(const Key&) = default;
  Key& operator=(const Key&) = default;
  ~Key();

  const std::uint8_t* data() const noexcept { return bytes_.data(); }
  static constexpr std::size_t size() noexcept { return kKeyBytes; }

 private:
  std::array<std::uint8_t, kKeyBytes> bytes_{};
};

// Identities and their keys, read once from a key file:
//
//   # comment
//   <identity> <64 hex digits>
//
// An identity is 1–255 characters of [A-Za-z0-9._@+-]. The file must be a
// regular file owned by the effective user and closed to group and others
// (mode 0600 or stricter), as ssh requires of its keys; it is not followed
// through a symlink. Immutable once loaded, so sessions on every IO thread
// read it without a lock.
class KeyTable {
 public:
  // CONFIG_ERROR naming the file and line (or saying it holds no key);
  // never the key material.
  static authrpc::Result<KeyTable> load(const std::string& path);

  const Key* find(std::string_view identity) const;
  std::size_t size() const noexcept { return keys_.size(); }

 private:
  std::map<std::string, Key, std::less<>> keys_;
};

// True if `identity` may appear in a key file and a HELLO.
bool valid_identity(std::string_view identity);

// The server half. Sessions share the key table; an unknown identity is
// challenged like a known one and fails like a wrong key, so the server
// does not tell which identities exist.
class PskServerMechanism final : public authrpc::ServerMechanism {
 public:
  static authrpc::Result<std::shared_ptr<PskServerMechanism>> create(const std::string& key_file);
  explicit PskServerMechanism(std::shared_ptr<const KeyTable> keys);

  std::string_view name() const noexcept override { return kMechanismName; }
  std::unique_ptr<authrpc::ServerAuthSession> start(const authrpc::ChannelInfo& channel) override;

 private:
  std::shared_ptr<const KeyTable> keys_;
  // Stands in for an unknown identity's key: a random key nobody holds.
  std::shared_ptr<const Key> decoy_;
};

// The client half: one identity and its key, taken from a key file (the line
// naming the identity; other lines are ignored).
class PskClientMechanism final : public authrpc::ClientMechanism {
 public:
  static authrpc::Result<std::shared_ptr<PskClientMechanism>> create(std::string identity,
                                                                     const std::string& key_file);
  PskClientMechanism(std::string identity, Key key);

  std::string_view name() const noexcept override { return kMechanismName; }
  std::unique_ptr<authrpc::ClientAuthSession> start(const authrpc::ChannelInfo& channel) override;

 private:
  std::string identity_;
  std::shared_ptr<const Key> key_;
};

// Registers both halves under "psk", so that configuration files can name
// the mechanism: server options {"key_file": path}, client options
// {"identity": name, "key_file": path}. Unknown keys are CONFIG_ERROR.
void register_psk(authrpc::MechanismRegistry& registry);

}  // namespace psk
