// The mechanism interface: every authentication method (simple, kerberos,
// token, or one an application plugs in) is a ServerMechanism and a
// ClientMechanism. Each starts one AuthSession per connection; the
// negotiation code (auth/server_negotiation, auth/client_negotiation) carries
// the sessions' tokens in frames and never looks inside them.
//
// Sessions run on the connection's IO thread: a step that would block (a KDC
// request, a store lookup) must suspend rather than block the thread.
#pragma once

#include <asio/awaitable.hpp>
#include <memory>
#include <string>
#include <string_view>

#include "auth/identity.h"
#include "rpc/endpoint.h"
#include "security/base/result.h"

namespace authrpc {

// What a mechanism may know about the connection it authenticates.
struct ChannelInfo {
  std::string peer_address;
  Endpoint::Scheme scheme = Endpoint::Scheme::kTcp;
  std::string server_host;  // client side: the host the client connected to
  std::string server_uri;   // client side: the endpoint URI (Endpoint::to_string())
  // TLS channel binding (RFC 9266 tls-exporter, 32 bytes); empty without TLS.
  // Mechanisms bind their proofs to it so they are useless on another connection.
  std::string channel_binding;
  bool tls = false;
  // DER of the peer's verified certificate (server: the client's, with mutual TLS).
  std::string peer_certificate;
};

// One server-side step: send a challenge, succeed, or fail.
struct ServerStep {
  enum class Kind { kChallenge, kSuccess, kFailure };
  Kind kind = Kind::kFailure;
  std::string token;  // challenge, or final token on success (may be empty)
  Identity identity;  // on success
  Status error;       // on failure; its message reaches the client: no secrets

  static ServerStep challenge(std::string token) { return {Kind::kChallenge, std::move(token), {}, {}}; }
  static ServerStep success(Identity id, std::string final_token = {}) {
    return {Kind::kSuccess, std::move(final_token), std::move(id), {}};
  }
  static ServerStep failure(Status error) { return {Kind::kFailure, {}, {}, std::move(error)}; }
};

class ServerAuthSession {
 public:
  virtual ~ServerAuthSession() = default;
  // Consumes the client's next token (the first comes with HELLO).
  virtual asio::awaitable<ServerStep> step(std::string_view client_token) = 0;
};

class ServerMechanism {
 public:
  virtual ~ServerMechanism() = default;
  virtual std::string_view name() const noexcept = 0;
  virtual std::unique_ptr<ServerAuthSession> start(const ChannelInfo& channel) = 0;
};

// One client-side step: send a token (and say whether it is the client's last
// one, after which calls may be pipelined), or fail.
struct ClientStep {
  enum class Kind { kSend, kFailure };
  Kind kind = Kind::kFailure;
  std::string token;
  bool final = false;  // the server needs nothing more from the client
  Status error;

  static ClientStep send(std::string token, bool final) {
    return {Kind::kSend, std::move(token), final, {}};
  }
  static ClientStep failure(Status error) { return {Kind::kFailure, {}, false, std::move(error)}; }
};

class ClientAuthSession {
 public:
  virtual ~ClientAuthSession() = default;
  // The token that travels in HELLO.
  virtual asio::awaitable<ClientStep> initial() = 0;
  // Answers a server challenge.
  virtual asio::awaitable<ClientStep> challenge(std::string_view server_token) = 0;
  // Checks the server's final token (mutual authentication); a failure here
  // means the server is not who it should be and the connection is dropped.
  virtual asio::awaitable<Status> complete(std::string_view server_final_token) = 0;
};

class ClientMechanism {
 public:
  virtual ~ClientMechanism() = default;
  virtual std::string_view name() const noexcept = 0;
  virtual std::unique_ptr<ClientAuthSession> start(const ChannelInfo& channel) = 0;
};

}  // namespace authrpc
