// The negotiation table: its mechanisms, its rows and its one test
// (tests/testing/negotiation_table.h). Compiled into negotiation_test and
// negotiation_itest, each instantiating its half of the rows.
//
// To add a mechanism: give ServerMechanismFor / ClientMechanismFor a branch
// for its name (NeedsKdc too if it needs the realm), then rows — with itself
// on every channel it may run on, where it must be refused, with wrong
// credentials, and in the choice rows at the end. docs/TESTING.md has more.
#include "tests/testing/negotiation_table.h"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <utility>

#include "authrpc/auth/mechanism_registry.h"
#include "authrpc/auth/mechanisms/simple/simple.h"
#include "authrpc/auth/mechanisms/token/token_mechanism.h"
#include "authrpc/auth/mechanisms/x509/x509.h"
#include "authrpc/components/jwt/jwt.h"
#include "authrpc/components/kerberos/kerberos.h"
#include "authrpc/components/kerberos/kerberos_sasl.h"
#include "authrpc/components/kerberos/token_sasl.h"
#include "authrpc/security/memory_token_store.h"
#include "authrpc/security/secret_manager.h"
#include "tests/testing/test_server.h"
#include "tests/testing/test_support.h"
#include "tests/testing/test_tls.h"
#include "tests/testing/jwt_issuer.h"

namespace authrpc::testing {
namespace {

using nlohmann::json;

constexpr std::string_view kPlain = "plain-test";
constexpr std::string_view kReject = "reject-test";
constexpr std::string_view kPasswordPrompt = "password?";
const std::string kPassword = "open sesame";

// ---------------------------------------------------------------------------
// Test-only mechanisms

class PlainServerSession final : public ServerAuthSession {
 public:
  asio::awaitable<ServerStep> step(std::string_view token) override {
    switch (round_++) {
      case 0:
        if (token.empty()) {
          co_return ServerStep::failure({Errc::kAuthenticationFailed, "plain-test: empty user"});
        }
        // An optimistic client's "user\npassword" is challenged all the
        // same (as a `token` ticket this server did not issue is).
        user_ = std::string(token.substr(0, token.find('\n')));
        co_return ServerStep::challenge(std::string(kPasswordPrompt));
      case 1: {
        if (token != kPassword) {
          co_return ServerStep::failure(
              {Errc::kAuthenticationFailed, "plain-test: wrong password for " + user_});
        }
        Identity id;
        id.user = user_;
        id.principal = user_ + "@TEST";
        id.realm = "TEST";
        co_return ServerStep::success(std::move(id), "plain-test-ok:" + user_);
      }
      default:
        co_return ServerStep::failure({Errc::kProtocolError, "plain-test: too many steps"});
    }
  }

 private:
  int round_ = 0;
  std::string user_;
};

class PlainClientSession final : public ClientAuthSession {
 public:
  PlainClientSession(std::string user, std::string password, bool optimistic)
      : user_(std::move(user)), password_(std::move(password)), optimistic_(optimistic) {}
  // Optimistic: the password in HELLO too, as the client's last message
  // (calls are pipelined behind it), which the server challenges anyway.
  asio::awaitable<ClientStep> initial() override {
    if (optimistic_) co_return ClientStep::send(user_ + "\n" + password_, true);
    co_return ClientStep::send(user_, false);
  }
  asio::awaitable<ClientStep> challenge(std::string_view token) override {
    if (token != kPasswordPrompt) {
      co_return ClientStep::failure({Errc::kProtocolError, "plain-test: unexpected challenge"});
    }
    co_return ClientStep::send(password_, true);
  }
  asio::awaitable<Status> complete(std::string_view final_message) override {
    if (final_message != "plain-test-ok:" + user_) {
      co_return Status(Errc::kAuthenticationFailed, "plain-test: server did not prove itself");
    }
    co_return Status();
  }

 private:
  std::string user_, password_;
  bool optimistic_;
};

class PlainClientMechanism final : public ClientMechanism {
 public:
  PlainClientMechanism(std::string user, std::string password, bool optimistic)
      : user_(std::move(user)), password_(std::move(password)), optimistic_(optimistic) {}
  std::string_view name() const noexcept override { return kPlain; }
  std::unique_ptr<ClientAuthSession> start(const ChannelInfo&) override {
    return std::make_unique<PlainClientSession>(user_, password_, optimistic_);
  }

 private:
  std::string user_, password_;
  bool optimistic_;
};

class RejectServerSession final : public ServerAuthSession {
 public:
  asio::awaitable<ServerStep> step(std::string_view) override {
    co_return ServerStep::failure({Errc::kAuthenticationFailed, "reject-test: refused by design"});
  }
};

class RejectClientSession final : public ClientAuthSession {
 public:
  asio::awaitable<ClientStep> initial() override { co_return ClientStep::send("let me in", true); }
  asio::awaitable<ClientStep> challenge(std::string_view) override {
    co_return ClientStep::failure({Errc::kProtocolError, "reject-test: unexpected challenge"});
  }
  asio::awaitable<Status> complete(std::string_view) override { co_return Status(); }
};

// A mechanism named `name` whose every session is a new `Session`:
// Base is ServerMechanism or ClientMechanism.
template <class Base, class Session>
class SessionMechanism final : public Base {
 public:
  explicit SessionMechanism(std::string_view name) : name_(name) {}
  std::string_view name() const noexcept override { return name_; }
  decltype(std::declval<Base&>().start(std::declval<const ChannelInfo&>())) start(
      const ChannelInfo&) override {
    return std::make_unique<Session>();
  }

 private:
  std::string_view name_;
};

using PlainServerMechanism = SessionMechanism<ServerMechanism, PlainServerSession>;
using RejectServerMechanism = SessionMechanism<ServerMechanism, RejectServerSession>;
using RejectClientMechanism = SessionMechanism<ClientMechanism, RejectClientSession>;

// Wrappers that record each session start and otherwise forward.
template <class Base>
class LoggingMechanism : public Base {
 public:
  LoggingMechanism(std::shared_ptr<Base> inner, SessionLog* log)
      : inner_(std::move(inner)), log_(log) {}
  std::string_view name() const noexcept override { return inner_->name(); }
  MechanismTraits traits() const noexcept override { return inner_->traits(); }
  decltype(std::declval<Base&>().start(std::declval<const ChannelInfo&>())) start(
      const ChannelInfo& channel) override {
    log_->add(std::string(name()));
    return inner_->start(channel);
  }

 protected:
  std::shared_ptr<Base> inner_;
  SessionLog* log_;
};

class LoggingServerMechanism final : public LoggingMechanism<ServerMechanism> {
 public:
  using LoggingMechanism::LoggingMechanism;
  Status accepts(const ChannelInfo& channel) const override { return inner_->accepts(channel); }
};

using LoggingClientMechanism = LoggingMechanism<ClientMechanism>;

// The built-ins plus the test mechanisms, so that `simple` and the test
// mechanisms are made the way configuration makes them.
//   client options: simple {"user"}, plain-test {"user", "password", "optimistic"}
MechanismRegistry test_registry() {
  MechanismRegistry r = MechanismRegistry::with_builtins();
  r.register_server(std::string(kPlain), [](const json&) -> Result<std::shared_ptr<ServerMechanism>> {
    return std::shared_ptr<ServerMechanism>(std::make_shared<PlainServerMechanism>(kPlain));
  });
  r.register_client(std::string(kPlain),
                    [](const json& o) -> Result<std::shared_ptr<ClientMechanism>> {
                      return std::shared_ptr<ClientMechanism>(std::make_shared<PlainClientMechanism>(
                          o.value("user", "carol"), o.value("password", kPassword),
                          o.value("optimistic", false)));
                    });
  r.register_server(std::string(kReject), [](const json&) -> Result<std::shared_ptr<ServerMechanism>> {
    return std::shared_ptr<ServerMechanism>(std::make_shared<RejectServerMechanism>(kReject));
  });
  r.register_client(std::string(kReject), [](const json&) -> Result<std::shared_ptr<ClientMechanism>> {
    return std::shared_ptr<ClientMechanism>(std::make_shared<RejectClientMechanism>(kReject));
  });
  return r;
}

const MechanismRegistry& registry() {
  static const MechanismRegistry r = test_registry();
  return r;
}

// ---------------------------------------------------------------------------
// The realm the rows that need a KDC share: the KDC (KerberosSuite's) and
// delegation tokens for alice issued by a SecretManager on a memory store.

// The service the delegation tokens are issued for.
constexpr const char* kTokenService = "negotiation-itest";

struct TableRealm {
  MiniKdc* kdc = nullptr;
  std::shared_ptr<security::SecretManager> secrets;
  std::unique_ptr<security::Token> token;
  // Alice's identifier with another token's password: what a client that
  // guessed the password would hold.
  std::unique_ptr<security::Token> forged;
};
TableRealm& realm() {
  static TableRealm r;
  return r;
}

Status IssueTokens(MiniKdc& kdc) {
  auto secrets = security::SecretManager::open(std::make_shared<security::MemoryTokenStore>(), {});
  if (!secrets.ok()) return Status(Errc::kInternal, "SecretManager::open failed");
  auto token = (*secrets)->issue({"alice@" + kdc.realm(), "", "", kTokenService});
  auto other = (*secrets)->issue({"bob@" + kdc.realm(), "", "", kTokenService});
  if (!token.ok() || !other.ok()) return Status(Errc::kInternal, "issuing the suite's tokens failed");
  TableRealm& r = realm();
  r.secrets = std::move(*secrets);
  r.token = std::make_unique<security::Token>(*token);
  r.forged = std::make_unique<security::Token>(*other);
  r.forged->identifier = r.token->identifier;
  r.kdc = &kdc;
  return {};
}

bool HaveRealm(const std::string& spec) {
  if (realm().kdc != nullptr) return true;
  ADD_FAILURE() << spec << " needs the suite's KDC: NeedsKdc() must list it";
  return false;
}

std::string BaseName(const std::string& spec) { return spec.substr(0, spec.find(':')); }

// The jwt rows' issuer: an RS256 key, its JWKS, a token for alice and an
// expired one, in a directory removed at exit.
struct JwtIssuer {
  JwtTestKey key = JwtTestKey::rsa("negotiation-1");
  std::string dir = TempDir("negotiation-jwt");
  std::string jwks = write("jwks.json", jwks_document({&key}));
  std::string token = write("token", sign(600));
  std::string expired = write("expired", sign(-3600));
  ~JwtIssuer() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
  std::string sign(long ttl_s) const {
    const long now = static_cast<long>(std::chrono::duration_cast<std::chrono::seconds>(
        std::chrono::system_clock::now().time_since_epoch()).count());
    return key.sign({{"iss", "https://idp.test"}, {"aud", "negotiation"}, {"sub", "alice"},
                     {"exp", now + ttl_s}, {"iat", now}});
  }
  std::string write(const std::string& name, const std::string& text) const {
    std::ofstream(dir + "/" + name) << text;
    return dir + "/" + name;
  }
};
const JwtIssuer& jwt_issuer() {
  static const JwtIssuer issuer;
  return issuer;
}

std::shared_ptr<ServerMechanism> MakeServerMechanism(const std::string& name) {
  if (name == "simple" || name == kPlain || name == kReject) {
    auto m = registry().make_server(name, json::object());
    EXPECT_TRUE(m.ok()) << Describe(m);
    return m.ok() ? *m : nullptr;
  }
  if (name == "x509") return std::make_shared<X509ServerMechanism>();
  if (name == "jwt") {
    auto m = make_jwt_server({{"issuer", "https://idp.test"}, {"audience", "negotiation"},
                              {"jwks_file", jwt_issuer().jwks}});
    EXPECT_TRUE(m.ok()) << Describe(m);
    return m.ok() ? *m : nullptr;
  }
  if (!HaveRealm(name)) return nullptr;
  const TableRealm& r = realm();
  if (name == "kerberos") {
    auto m = KerberosServerMechanism::create(KerberosServerOptionsFor(*r.kdc));
    EXPECT_TRUE(m.ok()) << Describe(m);
    return m.ok() ? *m : nullptr;
  }
  if (name == "kerberos-sasl") {
    auto m = KerberosSaslServerMechanism::create(KerberosServerOptionsFor(*r.kdc));
    EXPECT_TRUE(m.ok()) << Describe(m);
    return m.ok() ? *m : nullptr;
  }
  if (name == "token") return std::make_shared<TokenServerMechanism>(r.secrets);
  if (name == "token-digest" || name == "token-scram") {
    return std::make_shared<TokenSaslServerMechanism>(name, r.secrets);
  }
  return nullptr;
}

// Variants: "simple:bad-user" is user "bad user" (refused by the server);
// "plain-test:wrong" has the wrong password; "kerberos:otherhost" expects a
// service principal the server has no key for; "<token mechanism>:forged"
// holds alice's token with a wrong password; "jwt:expired" an expired access token.
std::shared_ptr<ClientMechanism> MakeClientMechanism(const std::string& spec) {
  const std::string name = BaseName(spec);
  const std::string variant = name.size() < spec.size() ? spec.substr(name.size() + 1) : "";
  if (spec == "simple") {
    auto m = registry().make_client("simple", {{"user", "bob"}});
    EXPECT_TRUE(m.ok()) << Describe(m);
    return m.ok() ? *m : nullptr;
  }
  // Not through the registry: its factory refuses bad names up front.
  if (spec == "simple:bad-user") return std::make_shared<SimpleClientMechanism>("bad user");
  if (name == kPlain) {
    auto m = registry().make_client(kPlain, {{"user", "carol"},
                                             {"password", variant == "wrong" ? "guess" : kPassword},
                                             {"optimistic", variant == "optimistic"}});
    EXPECT_TRUE(m.ok()) << Describe(m);
    return m.ok() ? *m : nullptr;
  }
  if (spec == kReject) {
    auto m = registry().make_client(kReject, json::object());
    EXPECT_TRUE(m.ok()) << Describe(m);
    return m.ok() ? *m : nullptr;
  }
  if (spec == "x509") return std::make_shared<X509ClientMechanism>();
  if (name == "jwt") {
    auto m = make_jwt_client(
        {{"token_file", variant == "expired" ? jwt_issuer().expired : jwt_issuer().token}});
    EXPECT_TRUE(m.ok()) << Describe(m);
    return m.ok() ? *m : nullptr;
  }
  if (!HaveRealm(spec)) return nullptr;
  const TableRealm& r = realm();
  if (name == "kerberos" || name == "kerberos-sasl") {
    KerberosClientOptions o = CcacheClientOptions(*r.kdc);
    if (variant == "otherhost") o.service_principal = ServicePrincipal(*r.kdc, "otherhost");
    if (name == "kerberos") {
      auto m = KerberosClientMechanism::create(o);
      EXPECT_TRUE(m.ok()) << Describe(m);
      return m.ok() ? *m : nullptr;
    }
    auto m = KerberosSaslClientMechanism::create(o);
    EXPECT_TRUE(m.ok()) << Describe(m);
    return m.ok() ? *m : nullptr;
  }
  TokenClientOptions o;
  o.token = variant == "forged" ? *r.forged : *r.token;
  o.service = kTokenService;
  if (name == "token") return std::make_shared<TokenClientMechanism>(o);
  if (name == "token-digest" || name == "token-scram") {
    return std::make_shared<TokenSaslClientMechanism>(name, o);
  }
  return nullptr;
}

bool IsTls(Channel c) {
  return c == Channel::kTls || c == Channel::kMutualTls || c == Channel::kTlsNoClientCert;
}

// ---------------------------------------------------------------------------
// The rows

const std::string kS = "simple";
const std::string kP = "plain-test";
const std::string kR = "reject-test";
constexpr Errc kOk = Errc::kOk;
constexpr Errc kUnavailable = Errc::kMechanismUnavailable;
constexpr Errc kRefused = Errc::kAuthenticationFailed;
const std::vector<std::string> kEveryTlsMechanism = {"simple",  "x509",         "kerberos",
                                                    "kerberos-sasl", "token", "token-digest",
                                                    "token-scram"};

std::vector<NegotiationCase> MakeRows() {
  using C = NegotiationCase;
  return {
      // --- The negotiation logic, shown with simple and the test mechanisms.
      // Both sides agree on one mechanism.
      C{.name = "simple_simple", .client = {kS}, .server = {kS}, .mechanism = kS, .user = "bob",
        .sessions = Started({kS}, {kS})},
      C{.name = "plain_plain_multi_round", .client = {kP}, .server = {kP}, .mechanism = kP,
        .user = "carol", .sessions = Started({kP}, {kP})},
      C{.name = "plain_server_offers_many", .client = {kP}, .server = {kS, kR, kP}, .mechanism = kP,
        .user = "carol", .sessions = Started({kP}, {kP})},
      // Nothing in common: the client never falls back to a mechanism it
      // does not list, and the server never starts a session.
      C{.name = "client_simple_server_plain", .client = {kS}, .server = {kP},
        .expected = kUnavailable, .message = "server offers [plain-test]",
        .sessions = Started({kS}, {})},
      C{.name = "client_plain_server_simple", .client = {kP}, .server = {kS},
        .expected = kUnavailable, .message = "server offers [simple]", .sessions = Started({kP}, {})},
      C{.name = "client_two_server_other", .client = {kS, kR}, .server = {kP},
        .expected = kUnavailable, .message = "client allows [simple, reject-test]",
        .sessions = Started({kS}, {})},
      // The optimistic first choice is refused; the client switches.
      C{.name = "refused_then_simple", .client = {kP, kS}, .server = {kS}, .mechanism = kS,
        .user = "bob", .sessions = Started({kP, kS}, {kS})},
      C{.name = "refused_then_multi_round", .client = {kS, kP}, .server = {kP}, .mechanism = kP,
        .user = "carol", .sessions = Started({kS, kP}, {kP})},
      // After a refusal the client takes the server's most preferred
      // mechanism among those it allows.
      C{.name = "fallback_follows_server_order", .client = {kR, kS, kP}, .server = {kP, kS},
        .mechanism = kP, .user = "carol", .sessions = Started({kR, kP}, {kP})},
      // The client's first choice is accepted even if the server would
      // prefer another.
      C{.name = "optimistic_choice_accepted", .client = {kS, kP}, .server = {kP, kS},
        .mechanism = kS, .user = "bob", .sessions = Started({kS}, {kS})},
      C{.name = "client_preference_wins", .client = {kP, kS}, .server = {kS, kP}, .mechanism = kP,
        .user = "carol", .sessions = Started({kP}, {kP})},
      // Authentication failures are final: no fallback to another mechanism.
      C{.name = "reject", .client = {kR}, .server = {kR}, .expected = kRefused,
        .message = "refused by design", .sessions = Started({kR}, {kR})},
      C{.name = "reject_no_fallback", .client = {kR, kS}, .server = {kR, kS}, .expected = kRefused,
        .message = "refused by design", .sessions = Started({kR}, {kR})},
      C{.name = "refused_then_reject", .client = {kS, kR}, .server = {kR}, .expected = kRefused,
        .message = "refused by design", .sessions = Started({kS, kR}, {kR})},
      C{.name = "plain_wrong_password", .client = {"plain-test:wrong"}, .server = {kP},
        .expected = kRefused, .message = "wrong password for carol", .sessions = Started({kP}, {kP})},
      C{.name = "plain_wrong_password_no_fallback", .client = {"plain-test:wrong", kS},
        .server = {kP, kS}, .expected = kRefused, .message = "wrong password",
        .sessions = Started({kP}, {kP})},
      C{.name = "simple_bad_user_name", .client = {"simple:bad-user"}, .server = {kS},
        .expected = kRefused, .message = "whitespace", .sessions = Started({kS}, {kS})},
      // A client with no mechanism at all is a configuration error.
      C{.name = "client_no_mechanisms", .client = {}, .server = {kS}, .expected = Errc::kConfigError,
        .message = "no client mechanism", .sessions = Started({}, {})},

      // --- Every built-in mechanism with itself, on every channel it may run on.
      C{"simple_tcp", {"simple"}, {"simple"}, Channel::kTcp, kOk, "simple", "bob"},
      C{"simple_unix", {"simple"}, {"simple"}, Channel::kUnix, kOk, "simple", "bob"},
      C{"simple_tls", {"simple"}, {"simple"}, Channel::kTls, kOk, "simple", "bob"},
      C{"simple_plain_to_optional_tls", {"simple"}, {"simple"}, Channel::kPlainToOptional, kOk,
        "simple", "bob"},
      C{"x509_mtls", {"x509"}, {"x509"}, Channel::kMutualTls, kOk, "x509", "alice"},
      C{"kerberos_tcp", {"kerberos"}, {"kerberos"}, Channel::kTcp, kOk, "kerberos", "alice@"},
      C{"kerberos_unix", {"kerberos"}, {"kerberos"}, Channel::kUnix, kOk, "kerberos", "alice@"},
      C{"kerberos_tls", {"kerberos"}, {"kerberos"}, Channel::kTls, kOk, "kerberos", "alice@"},
      C{"kerberos_sasl_tcp", {"kerberos-sasl"}, {"kerberos-sasl"}, Channel::kTcp, kOk,
        "kerberos-sasl", "alice@"},
      C{"kerberos_sasl_unix", {"kerberos-sasl"}, {"kerberos-sasl"}, Channel::kUnix, kOk,
        "kerberos-sasl", "alice@"},
      C{"kerberos_sasl_tls", {"kerberos-sasl"}, {"kerberos-sasl"}, Channel::kTls, kOk,
        "kerberos-sasl", "alice@"},
      C{"jwt_tls", {"jwt"}, {"jwt"}, Channel::kTls, kOk, "jwt", "alice"},
      C{"token_unix", {"token"}, {"token"}, Channel::kUnix, kOk, "token", "alice@"},
      C{"token_tls", {"token"}, {"token"}, Channel::kTls, kOk, "token", "alice@"},
      C{"token_digest_tcp", {"token-digest"}, {"token-digest"}, Channel::kTcp, kOk, "token-digest",
        "alice@"},
      C{"token_digest_tls", {"token-digest"}, {"token-digest"}, Channel::kTls, kOk, "token-digest",
        "alice@"},
      C{"token_scram_tcp", {"token-scram"}, {"token-scram"}, Channel::kTcp, kOk, "token-scram",
        "alice@"},
      C{"token_scram_unix", {"token-scram"}, {"token-scram"}, Channel::kUnix, kOk, "token-scram",
        "alice@"},
      // Where a mechanism may not run: a bearer token never crosses
      // plaintext tcp:// (the server does not opt in here); x509 needs a
      // verified client certificate.
      C{"token_tcp", {"token"}, {"token"}, Channel::kTcp, Errc::kFailedPrecondition},
      C{"token_plain_to_optional_tls", {"token"}, {"token"}, Channel::kPlainToOptional,
        Errc::kFailedPrecondition},
      C{"x509_without_client_certificate", {"x509"}, {"x509"}, Channel::kTlsNoClientCert,
        Errc::kConfigError},
      // A bearer token: TLS only, unless both sides opt in to plaintext
      // unix:// (the client refuses on its own first, as over tcp://).
      C{"jwt_unix_without_opt_in", {"jwt"}, {"jwt"}, Channel::kUnix, Errc::kConfigError},
      C{"jwt_plain_to_optional_tls", {"jwt"}, {"jwt"}, Channel::kPlainToOptional,
        Errc::kConfigError},
      // MECHANISMS lists only what the server runs on this connection, so a
      // client that falls back takes one that works rather than one sure
      // to be refused there (PROTOCOL.md section 4, step 2; x509 and a
      // bearer secret on plaintext are refused in the client's options
      // already, and the conformance example shows the server's list).
      C{.name = "fallback_skips_jwt_on_unix_without_opt_in", .client = {kP, "jwt", kS},
        .server = {"jwt", kS}, .channel = Channel::kUnix, .mechanism = kS, .user = "bob",
        .sessions = Started({kP, kS}, {kS})},
      C{.name = "fallback_skips_token_on_plaintext_tcp", .client = {kP, "token", "kerberos"},
        .server = {"token", "kerberos"}, .channel = Channel::kTcp, .mechanism = "kerberos",
        .user = "alice@", .sessions = Started({kP, "kerberos"}, {"kerberos"})},
      // Wrong credentials are refused, and never fall back to another mechanism.
      C{"kerberos_unknown_service_key", {"kerberos:otherhost"}, {"kerberos"}, Channel::kTcp, kRefused},
      C{"token_forged", {"token:forged", "kerberos"}, {"token", "kerberos"}, Channel::kTls, kRefused},
      C{"token_digest_forged", {"token-digest:forged"}, {"token-digest"}, Channel::kTcp, kRefused},
      C{"token_scram_forged", {"token-scram:forged"}, {"token-scram"}, Channel::kTls, kRefused},
      C{"jwt_expired", {"jwt:expired"}, {"jwt"}, Channel::kTls, Errc::kCredentialsExpired},
      // Nothing in common.
      C{"kerberos_vs_simple", {"kerberos"}, {"simple"}, Channel::kTcp, kUnavailable},
      C{"simple_vs_kerberos_token", {"simple"}, {"kerberos", "token"}, Channel::kTls, kUnavailable},
      C{"kerberos_sasl_vs_kerberos", {"kerberos-sasl"}, {"kerberos"}, Channel::kTcp, kUnavailable},
      C{"token_digest_vs_token_scram", {"token-digest"}, {"token-scram"}, Channel::kTcp,
        kUnavailable},
      // Choice among built-ins: the client's first choice when the server has
      // it, else the server's most preferred among those the client allows.
      C{"kerberos_client_preference_wins", {"kerberos", "simple"}, {"simple", "kerberos"},
        Channel::kTcp, kOk, "kerberos", "alice@"},
      C{"token_refused_then_kerberos", {"token", "kerberos"}, {"kerberos-sasl", "kerberos"},
        Channel::kTls, kOk, "kerberos", "alice@"},
      C{"builtins_fallback_follows_server_order", {"x509", "token-scram", "kerberos-sasl", "simple"},
        {"simple", "kerberos-sasl", "token-scram"}, Channel::kMutualTls, kOk, "simple", "bob"},
      C{"every_mechanism_client_first_wins", kEveryTlsMechanism,
        {"token-scram", "token-digest", "token", "kerberos-sasl", "kerberos", "x509", "simple"},
        Channel::kMutualTls, kOk, "simple", "bob"},
      C{"every_mechanism_x509_first", {"x509", "kerberos", "token"}, kEveryTlsMechanism,
        Channel::kMutualTls, kOk, "x509", "alice"},
  };
}

}  // namespace

// ---------------------------------------------------------------------------

const char* ChannelName(Channel c) {
  switch (c) {
    case Channel::kTcp: return "tcp";
    case Channel::kUnix: return "unix";
    case Channel::kTls: return "tls";
    case Channel::kMutualTls: return "mtls";
    case Channel::kTlsNoClientCert: return "tls_no_client_cert";
    case Channel::kPlainToOptional: return "plain_to_optional_tls";
  }
  return "?";
}

SessionsStarted Started(std::vector<std::string> client, std::vector<std::string> server) {
  return SessionsStarted{true, std::move(client), std::move(server)};
}

void PrintTo(const NegotiationCase& c, std::ostream* os) {
  *os << c.name << " over " << ChannelName(c.channel);
}

bool NeedsKdc(const NegotiationCase& c) {
  const auto needs = [](const std::string& spec) {
    const std::string name = BaseName(spec);
    return name == "kerberos" || name == "kerberos-sasl" || name == "token" ||
           name == "token-digest" || name == "token-scram";
  };
  for (const auto& spec : c.client) {
    if (needs(spec)) return true;
  }
  for (const auto& spec : c.server) {
    if (needs(spec)) return true;
  }
  return false;
}

const std::vector<NegotiationCase>& AllNegotiationRows() {
  static const std::vector<NegotiationCase> rows = MakeRows();
  return rows;
}

std::vector<NegotiationCase> NegotiationRows(bool with_kdc) {
  std::vector<NegotiationCase> out;
  for (const auto& row : AllNegotiationRows()) {
    if (NeedsKdc(row) == with_kdc) out.push_back(row);
  }
  return out;
}

void SessionLog::add(std::string name) {
  std::lock_guard lock(mu_);
  names_.push_back(std::move(name));
}

std::vector<std::string> SessionLog::names() const {
  std::lock_guard lock(mu_);
  return names_;
}

namespace {

// `m` wrapped in `Logging` to record its sessions in `log`; null, and a test
// failure ("no <what>"), if there is no `m`.
template <class Logging, class Mechanism>
std::shared_ptr<Mechanism> Logged(std::shared_ptr<Mechanism> m, const std::string& what,
                                  SessionLog* log) {
  if (!m) {
    ADD_FAILURE() << "no " << what;
    return nullptr;
  }
  return std::make_shared<Logging>(std::move(m), log);
}

}  // namespace

std::shared_ptr<ServerMechanism> ServerMechanismFor(const std::string& spec, SessionLog* log) {
  return Logged<LoggingServerMechanism>(MakeServerMechanism(spec), "server mechanism " + spec, log);
}

std::shared_ptr<ClientMechanism> ClientMechanismFor(const std::string& spec, SessionLog* log) {
  return Logged<LoggingClientMechanism>(MakeClientMechanism(spec), "client mechanism " + spec, log);
}

void NegotiationTable::TearDownTestSuite() {
  realm() = TableRealm{};
  KerberosSuite::TearDownTestSuite();
}

void NegotiationTable::SetUp() {
  if (!NeedsKdc(GetParam())) return;
  if (!realm_) {
    StartRealm();
    if (setup_.ok()) setup_ = IssueTokens(*kdc_);
  }
  KerberosSuite::SetUp();
}

TEST_P(NegotiationTable, Negotiate) {
  const NegotiationCase& c = GetParam();
  SessionLog server_log, client_log;
  TestServer server;
  for (const auto& spec : c.server) server.mechanism(ServerMechanismFor(spec, &server_log));
  switch (c.channel) {
    case Channel::kTcp: break;
    case Channel::kUnix: server.endpoint("unix:"); break;
    case Channel::kTls: server.tls(); break;
    case Channel::kMutualTls:
      server.tls(TestTls::shared().server(security::ClientCertificates::kRequired))
          .client_tls(TestTls::shared().client(/*with_certificate=*/true));
      break;
    case Channel::kTlsNoClientCert:
      server.tls(TestTls::shared().server(security::ClientCertificates::kOptional))
          .client_tls(TestTls::shared().client());
      break;
    case Channel::kPlainToOptional: server.tls().encryption(SecurityRequirement::kOptional); break;
  }
  Service test("test");
  test.add("count", [](CallContext& ctx, std::string_view request) -> Result<std::string> {
    return std::string(request) + "/" + ctx.identity().mechanism;
  });
  server.service(std::move(test)).blocking_threads(1);
  ASSERT_OK(server.start());

  auto builder = server.client();
  for (const auto& spec : c.client) builder.mechanism(ClientMechanismFor(spec, &client_log));
  if (c.channel == Channel::kPlainToOptional) {
    builder.encryption(SecurityRequirement::kDisabled).options([](ClientOptions& o) {
      o.endpoint.scheme = Endpoint::Scheme::kTcp;
    });
  }
  auto client = builder.connect();

  if (c.expected == Errc::kOk) {
    ASSERT_TRUE(client.ok()) << Describe(client);
    std::string user = c.user;
    if (user.ends_with("@")) user += kdc_->realm();
    EXPECT_EQ((*client)->mechanism(), c.mechanism);
    EXPECT_EQ((*client)->authenticated_user(), user);
    EXPECT_TRUE((*client)->connection_status().ok());
    EXPECT_EQ((*client)->tls_info().has_value(), IsTls(c.channel));
    auto who = (*client)->call_json("sys", "whoami", json::object());
    ASSERT_TRUE(who.ok()) << Describe(who);
    EXPECT_EQ((*who)["mechanism"], c.mechanism) << who->dump();
    EXPECT_EQ((*who)["user"], user) << who->dump();
    if (c.channel != Channel::kUnix) {
      EXPECT_NE((*who)["peer"].get<std::string>().find("127.0.0.1:"), std::string::npos)
          << who->dump();
    }
    auto counted = (*client)->call("test", "count", "x");
    ASSERT_TRUE(counted.ok()) << Describe(counted);
    EXPECT_EQ(*counted, "x/" + c.mechanism);
  } else {
    ASSERT_FALSE(client.ok()) << "connected with " << (*client)->mechanism();
    EXPECT_EQ(client.code(), make_error_code(c.expected)) << Describe(client);
    // Wrong or missing credentials are final; expired ones are renewed.
    EXPECT_EQ(retry_advice(client.code()), c.expected == Errc::kCredentialsExpired
                                               ? RetryAdvice::kReauthenticate
                                               : RetryAdvice::kGiveUp)
        << Describe(client);
    EXPECT_NE(client.status().message.find(c.message), std::string::npos) << Describe(client);
  }
  if (!c.sessions.checked) return;
  EXPECT_EQ(client_log.names(), c.sessions.client);
  client = Status(Errc::kCancelled);  // disconnect before looking at the server
  EXPECT_EQ(server_log.names(), c.sessions.server);
}

}  // namespace authrpc::testing
