// The mechanism interface: every authentication method (simple, kerberos,
// token, or one an application plugs in) is a ServerMechanism and a
// ClientMechanism. Each starts one AuthSession per connection; the
// negotiation code (auth/server_negotiation, auth/client_negotiation) carries
// the sessions' negotiation messages in frames and never looks inside them.
// (A negotiation message is what GSS-API calls a context token and SASL a
// challenge or response; "token" in authrpc means a delegation token only.)
//
// Sessions run on the connection's IO thread: a step that would block (a KDC
// request, a store lookup) must suspend rather than block the thread; the
// host lends an executor for such work (ChannelInfo::host).
//
// A mechanism describes itself (traits(), auth/mechanism_traits.h): the
// policy checks, authorization, the token service, the CLI and minibench
// read those properties and never compare a mechanism's name. It registers
// itself from its own module (register_<x>(MechanismRegistry&),
// auth/mechanism_registry.h), with its options reader and command-line
// flags. docs/DESIGN.md "Mechanisms describe themselves".
#pragma once

#include <asio/awaitable.hpp>
#include <memory>
#include <string>
#include <string_view>

#include "authrpc/auth/identity.h"
#include "authrpc/auth/mechanism_host.h"
#include "authrpc/auth/mechanism_traits.h"
#include "authrpc/base/result.h"
#include "authrpc/rpc/endpoint.h"

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
  // What the program lends the session (not owned; outlives the session).
  // Null (the usual case): the host of the io_context the session runs on,
  // mechanism_host_of() (auth/mechanism_host.h).
  MechanismHost* host = nullptr;
};

// What the negotiation checks before it starts a session: OK, or why
// `channel` cannot carry one of a mechanism with `traits`. The server checks
// everything the traits ask of a channel (a client certificate, TLS, no
// bearer secret over plaintext tcp://); the client (`client_side`) only that
// it never sends a bearer secret over plaintext tcp://, before the first
// message leaves.
Status check_channel(std::string_view mechanism, const MechanismTraits& traits,
                     const ChannelInfo& channel, bool client_side);

class ServerMechanism;
// What a server checks before it starts a session of `mechanism` on
// `channel`: check_channel(), then the mechanism's own accepts().
Status server_accepts(const ServerMechanism& mechanism, const ChannelInfo& channel);

// One server-side step: send a challenge, succeed, or fail.
struct ServerStep {
  enum class Kind { kChallenge, kSuccess, kFailure };
  Kind kind = Kind::kFailure;
  std::string message;  // challenge, or final message on success (may be empty)
  // On success. The negotiation fills in its mechanism, mechanism_traits
  // and peer_address (negotiate_server): a session sets the rest.
  Identity identity;
  Status error;       // on failure; its message reaches the client: no secrets

  static ServerStep challenge(std::string message) {
    return {Kind::kChallenge, std::move(message), {}, {}};
  }
  static ServerStep success(Identity id, std::string final_message = {}) {
    return {Kind::kSuccess, std::move(final_message), std::move(id), {}};
  }
  static ServerStep failure(Status error) { return {Kind::kFailure, {}, {}, std::move(error)}; }
};

class ServerAuthSession {
 public:
  virtual ~ServerAuthSession() = default;
  // Consumes the client's next message (the first comes with HELLO).
  virtual asio::awaitable<ServerStep> step(std::string_view client_message) = 0;
};

// The server half of a mechanism: shared by every connection of a server
// (start() may run on any IO thread at once), created by its registry
// factory or by the application.
class ServerMechanism {
 public:
  virtual ~ServerMechanism() = default;
  // The name on the wire (HELLO, MECHANISMS) and in configuration files.
  virtual std::string_view name() const noexcept = 0;
  // What the framework must know about it; the default is a mechanism that
  // proves an identity and needs nothing special (mechanism_traits.h).
  // Constant for the mechanism's life, and equal to what it registered.
  virtual MechanismTraits traits() const noexcept { return {}; }
  // Whether this server runs it on `channel`, beyond what check_channel()
  // reads from the traits: OK, or the refusal a HELLO naming it gets (e.g.
  // `token` over plaintext tcp:// unless the server opted in). MECHANISMS
  // lists only mechanisms that pass both (server_accepts()). Called on the IO
  // thread before start() and for every MECHANISMS answer: quick, no I/O.
  virtual Status accepts(const ChannelInfo& channel) const {
    (void)channel;
    return {};
  }
  virtual std::unique_ptr<ServerAuthSession> start(const ChannelInfo& channel) = 0;
  // Whether it can authenticate anyone now, for a readiness probe (the admin
  // listener's /readyz): e.g. not before keys it fetches have loaded. Called
  // from any thread; quick; the message names no secret.
  virtual Status ready() const { return {}; }
};

// One client-side step: send a message (and say whether it is the client's
// last one, after which calls may be pipelined), or fail.
struct ClientStep {
  enum class Kind { kSend, kFailure };
  Kind kind = Kind::kFailure;
  std::string message;
  bool final = false;  // the server needs nothing more from the client
  Status error;

  static ClientStep send(std::string message, bool final) {
    return {Kind::kSend, std::move(message), final, {}};
  }
  static ClientStep failure(Status error) { return {Kind::kFailure, {}, false, std::move(error)}; }
};

class ClientAuthSession {
 public:
  virtual ~ClientAuthSession() = default;
  // The message that travels in HELLO.
  virtual asio::awaitable<ClientStep> initial() = 0;
  // Answers a server challenge.
  virtual asio::awaitable<ClientStep> challenge(std::string_view server_message) = 0;
  // Checks the server's final message (mutual authentication); a failure here
  // means the server is not who it should be and the connection is dropped.
  virtual asio::awaitable<Status> complete(std::string_view server_final_message) = 0;
};

// The client half: shared by every connection of the Clients given it, so
// start() may run on several IO threads at once.
class ClientMechanism {
 public:
  virtual ~ClientMechanism() = default;
  virtual std::string_view name() const noexcept = 0;
  // The same traits as the server half of the same name.
  virtual MechanismTraits traits() const noexcept { return {}; }
  virtual std::unique_ptr<ClientAuthSession> start(const ChannelInfo& channel) = 0;
};

}  // namespace authrpc
