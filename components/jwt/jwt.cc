#include "authrpc/components/jwt/jwt.h"

#include <openssl/evp.h>

#include <asio/co_spawn.hpp>
#include <asio/post.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "authrpc/auth/mechanism_options.h"
#include "authrpc/auth/mechanism_registry.h"
#include "authrpc/components/jwt/jwt_key_source.h"
#include "authrpc/components/jwt/jwt_credential_source.h"
#include "authrpc/components/jwt/jwt_verifier.h"
#include "authrpc/components/jwt/oauthbearer.h"
#include "authrpc/security/base64url.h"

namespace authrpc {
namespace {

using json = nlohmann::json;
using SysClock = std::chrono::system_clock;

// Room for the OAUTHBEARER framing around a token of max_token_bytes.
constexpr std::size_t kMessageOverhead = 1024;

// The client's refusal is its own configuration's (CONFIG_ERROR, as the
// client's policy check refuses a bearer secret over plaintext tcp://
// before connecting); the server's is FAILED_PRECONDITION on the wire.
Status plaintext_refused(bool client_side) {
  return Status(client_side ? Errc::kConfigError : Errc::kFailedPrecondition,
                std::string("jwt: ") +
                    (client_side ? "refusing to send a bearer token" : "bearer tokens are refused") +
                    " without TLS: use tls:// (plaintext unix:// needs allow_plaintext_unix on both sides)");
}

bool plaintext_allowed(const ChannelInfo& channel, bool allow_plaintext_unix) {
  return channel.tls || (allow_plaintext_unix && channel.scheme == Endpoint::Scheme::kUnix);
}

// base64url(SHA-256(der)): RFC 8705's x5t#S256 of a certificate.
std::string certificate_thumbprint(std::string_view der) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  if (EVP_Digest(der.data(), der.size(), digest, &n, EVP_sha256(), nullptr) != 1) return {};
  return security::base64url_encode(std::string_view(reinterpret_cast<char*>(digest), n));
}

struct ServerConfig {
  JwtPolicy policy;
  JwtKeySourceOptions keys;
  bool has_keys = false;  // a JWKS file or URL (else HMAC only)
  bool session_outlives_token = false;
  bool allow_plaintext_unix = false;
};

// Loads the key set on a blocking thread and releases the claim even if the
// work is dropped (the host stopping before it ran).
struct LoadJob {
  std::shared_ptr<JwtKeySource> source;
  bool ran = false;
  explicit LoadJob(std::shared_ptr<JwtKeySource> s) : source(std::move(s)) {}
  LoadJob(LoadJob&& o) noexcept : source(std::move(o.source)), ran(o.ran) { o.ran = true; }
  ~LoadJob() {
    if (!ran && source) source->release_claim();
  }
  void operator()() {
    ran = true;
    (void)source->load();
  }
};

class JwtServer;

class JwtServerSession final : public ServerAuthSession {
 public:
  JwtServerSession(std::shared_ptr<JwtServer> mechanism, const ChannelInfo& channel)
      : mechanism_(std::move(mechanism)), channel_(channel) {}
  asio::awaitable<ServerStep> step(std::string_view client_message) override;

 private:
  std::shared_ptr<JwtServer> mechanism_;
  ChannelInfo channel_;
};

class JwtServer final : public ServerMechanism, public std::enable_shared_from_this<JwtServer> {
 public:
  explicit JwtServer(ServerConfig config)
      : config_(std::move(config)),
        verifier_(config_.policy),
        source_(config_.has_keys ? std::make_shared<JwtKeySource>(config_.keys) : nullptr) {}

  std::string_view name() const noexcept override { return kJwtMechanism; }
  MechanismTraits traits() const noexcept override { return kJwtTraits; }
  // TLS, or plaintext unix:// with allow_plaintext_unix (plaintext tcp://
  // is refused by the traits already: bearer_secret).
  Status accepts(const ChannelInfo& channel) const override {
    if (plaintext_allowed(channel, config_.allow_plaintext_unix)) return {};
    return plaintext_refused(false);
  }
  std::unique_ptr<ServerAuthSession> start(const ChannelInfo& channel) override {
    return std::make_unique<JwtServerSession>(shared_from_this(), channel);
  }

  // Not ready until a key set has loaded: every token would be refused.
  Status ready() const override {
    if (!source_ || source_->current()) return {};
    return {Errc::kUnavailable, "no signing keys loaded from " + source_->describe() + " (" +
                                    source_->last_error() + ")"};
  }

  // A first load at start-up, so that the first client does not wait for it.
  Status load_now() {
    if (source_ && source_->claim_scheduled_load(JwtKeySource::Clock::now())) return source_->load();
    return Status();
  }

  asio::awaitable<ServerStep> authenticate(std::string_view message, const ChannelInfo& channel) {
    if (!plaintext_allowed(channel, config_.allow_plaintext_unix)) {
      co_return ServerStep::failure(plaintext_refused(false));
    }
    auto parsed =
        parse_oauthbearer(message, config_.policy.max_token_bytes + kMessageOverhead);
    if (!parsed.ok()) co_return ServerStep::failure(parsed.status());

    const auto now = SysClock::now();
    std::shared_ptr<const JwkSet> keys = no_keys_;
    if (source_) {
      const auto steady = JwtKeySource::Clock::now();
      keys = source_->current();
      if (source_->claim_scheduled_load(steady)) {
        if (keys) {
          // Due for a refresh: in the background, the current keys meanwhile.
          const asio::any_io_executor io = co_await asio::this_coro::executor;
          asio::post(blocking_executor(io, channel), LoadJob(source_));
        } else {
          co_await load_blocking(channel);
          keys = source_->current();
        }
      }
      // None loaded yet: the token is checked all the same up to the key it
      // needs, so that one that could never pass is refused for good
      // (AUTHENTICATION_FAILED), and one signed with the HMAC key passes.
      if (!keys) keys = no_keys_;
    }
    JwtRefusal refusal = JwtRefusal::kNone;
    auto verified = verifier_.verify(parsed->token, keys, now, &refusal);
    if (!verified.ok() && refusal == JwtRefusal::kUnknownKey && source_ &&
        source_->claim_refetch(JwtKeySource::Clock::now())) {
      // The issuer may have rotated its keys: fetch them once, try again.
      co_await load_blocking(channel);
      keys = source_->current();
      if (!keys) keys = no_keys_;
      verified = verifier_.verify(parsed->token, keys, SysClock::now(), &refusal);
    }
    if (!verified.ok() && refusal == JwtRefusal::kUnknownKey && source_ && !source_->current()) {
      // It needs a key from the JWKS, and none has loaded: retry later.
      co_return ServerStep::failure(
          {Errc::kUnavailable, "jwt: no signing keys loaded yet (" + source_->last_error() +
                                   "); try again later"});
    }
    if (!verified.ok()) co_return ServerStep::failure(verified.status());
    const VerifiedJwt& v = **verified;

    if (!v.certificate_thumbprint.empty()) {
      // RFC 8705: the token is only good with the client certificate it was
      // issued for, presented on this connection.
      if (channel.peer_certificate.empty() ||
          certificate_thumbprint(channel.peer_certificate) != v.certificate_thumbprint) {
        co_return ServerStep::failure(
            {Errc::kAuthenticationFailed,
             "jwt: the token is bound to a client certificate (cnf x5t#S256) this connection "
             "did not present"});
      }
    }
    if (!parsed->authzid.empty() && parsed->authzid != v.principal) {
      co_return ServerStep::failure(
          {Errc::kAuthenticationFailed,
           "jwt: an authzid other than the token's principal is not supported (use do_as)"});
    }
    Identity id;
    id.user = v.principal;
    id.principal = v.principal;
    id.groups = v.groups;
    // The session ends when the server stops accepting the token: at exp
    // plus the leeway, which allows for the issuer's clock being behind.
    if (!config_.session_outlives_token) id.expires = v.expires + config_.policy.leeway;
    id.attributes.emplace("jwt.issuer", v.issuer);
    id.attributes.emplace("jwt.expires", v.expires_utc);
    if (!v.subject.empty()) id.attributes.emplace("jwt.subject", v.subject);
    co_return ServerStep::success(std::move(id));
  }

 private:
  static asio::any_io_executor blocking_executor(const asio::any_io_executor& io,
                                                 const ChannelInfo& channel) {
    MechanismHost* host = channel.host;
    if (host == nullptr) host = &mechanism_host_of(io);
    return host->blocking_executor();
  }

  // Loads the keys on the blocking executor and resumes here. (Plain
  // statements around each co_await: GCC 12 mishandles co_await inside
  // argument lists and captured coroutine lambdas.)
  asio::awaitable<void> load_blocking(const ChannelInfo& channel) {
    const asio::any_io_executor io = co_await asio::this_coro::executor;
    const asio::any_io_executor blocking = blocking_executor(io, channel);
    co_await asio::co_spawn(blocking, load_keys(source_), asio::use_awaitable);
  }

  static asio::awaitable<void> load_keys(std::shared_ptr<JwtKeySource> source) {
    LoadJob job(std::move(source));
    job();
    co_return;
  }

  ServerConfig config_;
  JwtVerifier verifier_;
  std::shared_ptr<JwtKeySource> source_;
  const std::shared_ptr<const JwkSet> no_keys_ = std::make_shared<const JwkSet>();
};

asio::awaitable<ServerStep> JwtServerSession::step(std::string_view client_message) {
  co_return co_await mechanism_->authenticate(client_message, channel_);
}

class JwtClientSession final : public ClientAuthSession {
 public:
  JwtClientSession(std::shared_ptr<JwtCredentialSource> source, bool runs_command,
                   bool allow_plaintext_unix, const ChannelInfo& channel)
      : source_(std::move(source)),
        runs_command_(runs_command),
        allow_plaintext_unix_(allow_plaintext_unix),
        channel_(channel) {}

  asio::awaitable<ClientStep> initial() override {
    if (!plaintext_allowed(channel_, allow_plaintext_unix_)) {
      co_return ClientStep::failure(plaintext_refused(true));
    }
    Result<security::SecretBytes> token(Errc::kUnknown);
    if (runs_command_) {
      // A command may take a while: never on the IO thread.
      MechanismHost* host = channel_.host;
      const asio::any_io_executor io = co_await asio::this_coro::executor;
      if (host == nullptr) host = &mechanism_host_of(io);
      token = co_await asio::co_spawn(host->blocking_executor(), read_token(source_),
                                      asio::use_awaitable);
    } else {
      token = source_->token();
    }
    if (!token.ok()) co_return ClientStep::failure(token.status());
    co_return ClientStep::send(format_oauthbearer(token->view(), channel_.server_host, {}), true);
  }

  static asio::awaitable<Result<security::SecretBytes>> read_token(
      std::shared_ptr<JwtCredentialSource> source) {
    co_return source->token();
  }

  asio::awaitable<ClientStep> challenge(std::string_view) override {
    co_return ClientStep::failure(
        {Errc::kProtocolError, "jwt: unexpected challenge (one message each way)"});
  }
  asio::awaitable<Status> complete(std::string_view) override { co_return Status(); }

 private:
  std::shared_ptr<JwtCredentialSource> source_;
  bool runs_command_;
  bool allow_plaintext_unix_;
  ChannelInfo channel_;
};

class JwtClient final : public ClientMechanism {
 public:
  JwtClient(std::shared_ptr<JwtCredentialSource> source, bool runs_command,
            bool allow_plaintext_unix)
      : source_(std::move(source)),
        runs_command_(runs_command),
        allow_plaintext_unix_(allow_plaintext_unix) {}
  std::string_view name() const noexcept override { return kJwtMechanism; }
  MechanismTraits traits() const noexcept override { return kJwtTraits; }
  std::unique_ptr<ClientAuthSession> start(const ChannelInfo& channel) override {
    return std::make_unique<JwtClientSession>(source_, runs_command_, allow_plaintext_unix_,
                                              channel);
  }

 private:
  std::shared_ptr<JwtCredentialSource> source_;
  bool runs_command_;
  bool allow_plaintext_unix_;
};

// An array of strings (or, where `single` names a key, one string).
Status read_strings(const MechanismOptions& o, const json& j, const char* key,
                    std::vector<std::string>& out) {
  if (!j.is_object() || !j.contains(key)) return Status();
  const json& v = j.at(key);
  if (!v.is_array()) return o.error(std::string("'") + key + "' must be an array of strings");
  std::vector<std::string> values;
  for (const auto& e : v) {
    if (!e.is_string() || e.get_ref<const std::string&>().empty()) {
      return o.error(std::string("'") + key + "' must be an array of non-empty strings");
    }
    values.push_back(e.get<std::string>());
  }
  out = std::move(values);
  return Status();
}

Result<std::string> read_file(const MechanismOptions& o, const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return o.error(std::string("cannot read ") + what + " " + path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

Result<ServerConfig> server_config(const json& j) {
  MechanismOptions o(kJwtMechanism, j);
  ServerConfig c;
  std::string issuer, hmac_key_file;
  std::size_t leeway = 60, max_age = 0, refresh = 300, min_refetch = 10, timeout_ms = 5000;
  std::size_t cache_entries = c.policy.cache_entries, max_token_bytes = c.policy.max_token_bytes;
  for (Status s :
       {o.check({"issuer", "issuers", "audience", "jwks_file", "jwks_url", "jwks_ca_file",
                 "jwks_refresh_s", "jwks_min_refetch_s", "jwks_timeout_ms", "algorithms",
                 "hmac_key_file", "leeway_s", "max_token_age_s", "required_claims",
                 "principal_claim", "groups_claim", "session_outlives_token",
                 "allow_plaintext_unix", "cache_entries", "max_token_bytes"}),
        o.read("issuer", issuer), read_strings(o, j, "issuers", c.policy.issuers),
        o.read("audience", c.policy.audience), o.read("jwks_file", c.keys.file),
        o.read("jwks_url", c.keys.url), o.read("jwks_ca_file", c.keys.https.ca_file),
        o.read("jwks_refresh_s", refresh, 7 * 86400),
        o.read("jwks_min_refetch_s", min_refetch, 86400),
        o.read("jwks_timeout_ms", timeout_ms, 600000),
        read_strings(o, j, "algorithms", c.policy.algorithms),
        o.read("hmac_key_file", hmac_key_file), o.read("leeway_s", leeway, 3600),
        o.read("max_token_age_s", max_age, 30 * 86400),
        read_strings(o, j, "required_claims", c.policy.required_claims),
        o.read("principal_claim", c.policy.principal_claim),
        o.read("groups_claim", c.policy.groups_claim),
        o.read("session_outlives_token", c.session_outlives_token),
        o.read("allow_plaintext_unix", c.allow_plaintext_unix),
        o.read("cache_entries", cache_entries, 10000000),
        o.read("max_token_bytes", max_token_bytes, 1 << 20)}) {
    if (!s.ok()) return s;
  }
  if (!issuer.empty()) c.policy.issuers.push_back(issuer);
  if (c.policy.issuers.empty()) return o.error("'issuer' or 'issuers' is required");
  if (c.policy.audience.empty()) return o.error("'audience' is required");
  if (c.policy.principal_claim.empty()) return o.error("'principal_claim' must not be empty");
  if (!c.keys.file.empty() && !c.keys.url.empty()) {
    return o.error("'jwks_file' and 'jwks_url' are exclusive");
  }
  if (!c.keys.url.empty() && !c.keys.url.starts_with("https://")) {
    return o.error("'jwks_url' must be an https:// URL");
  }
  c.has_keys = !c.keys.file.empty() || !c.keys.url.empty();
  bool hmac = false;
  for (const std::string& alg : c.policy.algorithms) {
    static constexpr std::string_view kKnown[] = {"RS256", "RS384", "RS512", "PS256", "PS384",
                                                  "PS512", "ES256", "EdDSA", "HS256", "HS384",
                                                  "HS512"};
    if (std::find(std::begin(kKnown), std::end(kKnown), alg) == std::end(kKnown)) {
      return o.error("unknown algorithm '" + alg + "' in 'algorithms' (none is never accepted)");
    }
    hmac = hmac || alg.starts_with("HS");
  }
  if (hmac != !hmac_key_file.empty()) {
    return o.error(hmac ? "HS256/384/512 in 'algorithms' need 'hmac_key_file' (a shared key)"
                        : "'hmac_key_file' is set but no HS algorithm is in 'algorithms'");
  }
  if (!hmac_key_file.empty()) {
    auto key = read_file(o, hmac_key_file, "hmac_key_file");
    if (!key.ok()) return key.status();
    if (key->size() < 32) return o.error("the key in 'hmac_key_file' must be at least 32 bytes");
    c.policy.hmac_key = security::SecretBytes(*key);
    security::cleanse(key->data(), key->size());
  }
  if (!c.has_keys && !hmac) return o.error("'jwks_file' or 'jwks_url' is required");
  c.policy.leeway = std::chrono::seconds(leeway);
  if (max_age > 0) c.policy.max_age = std::chrono::seconds(max_age);
  c.policy.cache_entries = cache_entries;
  c.policy.max_token_bytes = max_token_bytes;
  c.keys.refresh = std::chrono::seconds(refresh == 0 ? 1 : refresh);
  c.keys.min_refetch = std::chrono::seconds(min_refetch);
  c.keys.https.timeout = std::chrono::milliseconds(timeout_ms);
  return c;
}

}  // namespace

Result<std::shared_ptr<ServerMechanism>> make_jwt_server(const json& options) {
  auto config = server_config(options);
  if (!config.ok()) return config.status();
  const bool file = !config->keys.file.empty();
  auto server = std::make_shared<JwtServer>(std::move(*config));
  // A JWKS file that cannot be used is a configuration error; a URL that does
  // not answer now may answer later (the IdP may start after the service):
  // until it does, authentication is UNAVAILABLE with the reason.
  if (Status s = server->load_now(); !s.ok() && file) {
    return Status(Errc::kConfigError, "jwt: " + s.message);
  }
  return std::shared_ptr<ServerMechanism>(std::move(server));
}

Result<std::shared_ptr<ClientMechanism>> make_jwt_client(const json& options) {
  MechanismOptions o(kJwtMechanism, options);
  JwtCredentialSourceOptions source;
  bool allow_plaintext_unix = false;
  std::size_t refresh_before = 30, command_timeout_ms = 10000;
  for (Status s : {o.check({"token_file", "token_env", "token_command", "refresh_before_s",
                            "command_timeout_ms", "allow_plaintext_unix"}),
                   o.read("token_file", source.file), o.read("token_env", source.env),
                   o.read("token_command", source.command),
                   o.read("refresh_before_s", refresh_before, 86400),
                   o.read("command_timeout_ms", command_timeout_ms, 600000),
                   o.read("allow_plaintext_unix", allow_plaintext_unix)}) {
    if (!s.ok()) return s;
  }
  if ((!source.file.empty()) + (!source.env.empty()) + (!source.command.empty()) != 1) {
    return o.error("exactly one of 'token_file', 'token_env', 'token_command' is required");
  }
  const bool runs_command = !source.command.empty();
  source.refresh_before = std::chrono::seconds(refresh_before);
  source.command_timeout = std::chrono::milliseconds(command_timeout_ms);
  auto made = JwtCredentialSource::make(std::move(source));
  if (!made.ok()) return o.error(made.status().message);
  return std::shared_ptr<ClientMechanism>(
      std::make_shared<JwtClient>(std::move(*made), runs_command, allow_plaintext_unix));
}

void register_jwt(MechanismRegistry& registry) {
  const std::string name(kJwtMechanism);
  registry.register_server(name, make_jwt_server, kJwtTraits);
  registry.register_client(
      name, make_jwt_client, kJwtTraits,
      {{"--jwt-file", "token_file", "F  the access token (a JWT) from file F, re-read when it changes"},
       {"--jwt-env", "token_env", "VAR  the access token from environment variable VAR"},
       {"--jwt-command", "token_command",
        "CMD  the access token printed by shell command CMD (cached until shortly before exp)"}});
}

}  // namespace authrpc
