#include "authrpc/components/kerberos/sasl_session.h"

#include <openssl/crypto.h>
#include <sasl/sasl.h>

#include <cstring>
#include <vector>

#include "authrpc/components/kerberos/sasl_library.h"

namespace authrpc::sasl {
namespace {

using Callback = int (*)();

// Cyrus stores every callback as int (*)(). Casting through void (*)() says
// the signature change is intended (-Wcast-function-type).
template <typename F>
Callback as_sasl_callback(F* f) {
  return reinterpret_cast<Callback>(reinterpret_cast<void (*)()>(f));
}

constexpr std::size_t kMaxDetail = 1024;

// State shared by both sides: the connection, and what its callbacks read
// and write. Lives at a fixed address (the callbacks point at it).
struct Connection {
  sasl_conn_t* conn = nullptr;
  OptionMap options;
  std::string authorization_id;   // client: SASL_CB_USER
  std::string authentication_id;  // client: SASL_CB_AUTHNAME
  std::vector<unsigned char> secret;  // client: SASL_CB_PASS (a sasl_secret_t), wiped
  std::string logged;             // failures a plugin logged during this call
  std::vector<sasl_callback_t> callbacks;
  bool done = false;

  Connection() = default;
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;
  ~Connection() {
    if (conn != nullptr) sasl_dispose(&conn);
    if (!secret.empty()) OPENSSL_cleanse(secret.data(), secret.size());
  }

  Status failure(int rc, std::string_view what) const {
    std::string message(what);
    message += ": ";
    const char* detail = conn != nullptr ? sasl_errdetail(conn) : nullptr;
    message += detail != nullptr && *detail != '\0' ? detail : sasl_errstring(rc, nullptr, nullptr);
    if (!logged.empty() && message.find(logged) == std::string::npos) {
      message += " (" + logged + ")";
    }
    if (message.size() > kMaxDetail) message.resize(kMaxDetail);
    return {sasl_errc(rc), std::move(message)};
  }

  Result<Output> outcome(int rc, const char* out, unsigned out_len, std::string_view what) {
    if (rc != SASL_OK && rc != SASL_CONTINUE) return failure(rc, what);
    done = rc == SASL_OK;
    Output o;
    o.done = done;
    if (out != nullptr && out_len > 0) o.message.assign(out, out_len);
    return o;
  }
};

// SASL_CB_GETOPT: this connection's options, else Cyrus's defaults.
int get_option(void* context, const char*, const char* option, const char** result,
               unsigned* len) {
  const auto* c = static_cast<const Connection*>(context);
  if (option == nullptr) return SASL_FAIL;
  const auto it = c->options.find(std::string_view(option));
  if (it == c->options.end()) return SASL_FAIL;
  *result = it->second.c_str();
  if (len != nullptr) *len = static_cast<unsigned>(it->second.size());
  return SASL_OK;
}

// SASL_CB_LOG: keeps what a plugin reports as an error or a failed
// authentication, for the step's error message. Nothing reaches syslog.
int log_message(void* context, int level, const char* message) {
  auto* c = static_cast<Connection*>(context);
  if (message == nullptr || level > SASL_LOG_FAIL || level == SASL_LOG_NONE) return SASL_OK;
  if (c->logged.size() < kMaxDetail) {
    if (!c->logged.empty()) c->logged += "; ";
    c->logged += message;
  }
  return SASL_OK;
}

// SASL_CB_PROXY_POLICY: a client may only act as itself (no impersonation
// until authrpc has a policy for it).
int same_identity_only(sasl_conn_t* conn, void*, const char* requested, unsigned requested_len,
                       const char* authenticated, unsigned authenticated_len, const char*,
                       unsigned, struct propctx*) {
  if (requested == nullptr || requested_len == 0) return SASL_OK;
  if (authenticated != nullptr && requested_len == authenticated_len &&
      std::memcmp(requested, authenticated, requested_len) == 0) {
    return SASL_OK;
  }
  sasl_seterror(conn, SASL_NOLOG,
                "the authorization identity differs from the authenticated identity");
  return SASL_NOAUTHZ;
}

// SASL_CB_USER (client): the identity to act as.
int get_user(void* context, int id, const char** result, unsigned* len) {
  const auto* c = static_cast<const Connection*>(context);
  if (id != SASL_CB_USER || result == nullptr) return SASL_BADPARAM;
  *result = c->authorization_id.c_str();
  if (len != nullptr) *len = static_cast<unsigned>(c->authorization_id.size());
  return SASL_OK;
}

// SASL_CB_AUTHNAME (client): who authenticates.
int get_authname(void* context, int id, const char** result, unsigned* len) {
  const auto* c = static_cast<const Connection*>(context);
  if (id != SASL_CB_AUTHNAME || result == nullptr) return SASL_BADPARAM;
  *result = c->authentication_id.c_str();
  if (len != nullptr) *len = static_cast<unsigned>(c->authentication_id.size());
  return SASL_OK;
}

// SASL_CB_PASS (client): the secret, as a sasl_secret_t kept by the session.
int get_secret(sasl_conn_t*, void* context, int id, sasl_secret_t** result) {
  auto* c = static_cast<Connection*>(context);
  if (id != SASL_CB_PASS || result == nullptr || c->secret.empty()) return SASL_BADPARAM;
  *result = reinterpret_cast<sasl_secret_t*>(c->secret.data());
  return SASL_OK;
}

sasl_security_properties_t to_cyrus(const SecurityProperties& p) {
  sasl_security_properties_t props{};
  props.min_ssf = p.min_ssf;
  props.max_ssf = p.max_ssf;
  props.maxbufsize = p.max_buffer;
  props.security_flags = p.flags;
  props.property_names = nullptr;
  props.property_values = nullptr;
  return props;
}

// Security properties and GSSAPI credentials, right after sasl_*_new.
Status configure(Connection& c, const SecurityProperties& security, void* gss_credentials) {
  const sasl_security_properties_t props = to_cyrus(security);
  if (int rc = sasl_setprop(c.conn, SASL_SEC_PROPS, &props); rc != SASL_OK) {
    return c.failure(rc, "sasl_setprop(SASL_SEC_PROPS)");
  }
  if (gss_credentials != nullptr) {
    if (int rc = sasl_setprop(c.conn, SASL_GSS_CREDS, gss_credentials); rc != SASL_OK) {
      return c.failure(rc, "sasl_setprop(SASL_GSS_CREDS)");
    }
  }
  return {};
}

std::string string_property(sasl_conn_t* conn, int property) {
  const void* value = nullptr;
  if (conn == nullptr || sasl_getprop(conn, property, &value) != SASL_OK || value == nullptr) {
    return {};
  }
  return static_cast<const char*>(value);
}

}  // namespace

// --- server ----------------------------------------------------------------------

struct ServerSession::Impl : Connection {};

ServerSession::ServerSession(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ServerSession::~ServerSession() = default;

Result<std::unique_ptr<ServerSession>> ServerSession::create(ServerConfig config) {
  if (Status s = init_sasl_library(); !s.ok()) return s;
  auto impl = std::make_unique<Impl>();
  impl->options = std::move(config.options);
  void* self = impl.get();
  impl->callbacks = {
      {SASL_CB_GETOPT, as_sasl_callback(&get_option), self},
      {SASL_CB_LOG, as_sasl_callback(&log_message), self},
      {SASL_CB_PROXY_POLICY, as_sasl_callback(&same_identity_only), self},
      {SASL_CB_LIST_END, nullptr, nullptr},
  };
  const int rc = sasl_server_new(
      config.service.c_str(), config.server_fqdn.empty() ? nullptr : config.server_fqdn.c_str(),
      config.user_realm.empty() ? nullptr : config.user_realm.c_str(), nullptr, nullptr,
      impl->callbacks.data(), config.flags, &impl->conn);
  if (rc != SASL_OK) return impl->failure(rc, "sasl_server_new");
  if (Status s = configure(*impl, config.security, config.gss_credentials); !s.ok()) return s;
  return std::unique_ptr<ServerSession>(new ServerSession(std::move(impl)));
}

Result<Output> ServerSession::start(std::string_view mechanism, std::string_view client_initial) {
  // Cyrus wants NUL-terminated input.
  const std::string mech(mechanism);
  const std::string in(client_initial);
  const char* out = nullptr;
  unsigned out_len = 0;
  impl_->logged.clear();
  const int rc = sasl_server_start(impl_->conn, mech.c_str(), in.empty() ? nullptr : in.c_str(),
                                   static_cast<unsigned>(in.size()), &out, &out_len);
  return impl_->outcome(rc, out, out_len, "sasl_server_start(" + mech + ")");
}

Result<Output> ServerSession::step(std::string_view client_message) {
  const std::string in(client_message);
  const char* out = nullptr;
  unsigned out_len = 0;
  impl_->logged.clear();
  const int rc = sasl_server_step(impl_->conn, in.c_str(), static_cast<unsigned>(in.size()), &out,
                                  &out_len);
  return impl_->outcome(rc, out, out_len, "sasl_server_step");
}

bool ServerSession::done() const noexcept { return impl_->done; }

std::string ServerSession::authentication_id() const {
  return impl_->done ? string_property(impl_->conn, SASL_AUTHUSER) : std::string();
}

std::string ServerSession::authorization_id() const {
  return impl_->done ? string_property(impl_->conn, SASL_USERNAME) : std::string();
}

// --- client ----------------------------------------------------------------------

struct ClientSession::Impl : Connection {};

ClientSession::ClientSession(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ClientSession::~ClientSession() = default;

Result<std::unique_ptr<ClientSession>> ClientSession::create(ClientConfig config) {
  if (Status s = init_sasl_library(); !s.ok()) return s;
  auto impl = std::make_unique<Impl>();
  impl->options = std::move(config.options);
  impl->authorization_id = std::move(config.authorization_id);
  void* self = impl.get();
  impl->callbacks = {
      {SASL_CB_GETOPT, as_sasl_callback(&get_option), self},
      {SASL_CB_LOG, as_sasl_callback(&log_message), self},
      {SASL_CB_USER, as_sasl_callback(&get_user), self},
  };
  if (!config.authentication_id.empty()) {
    impl->authentication_id = std::move(config.authentication_id);
    // sasl_secret_t: an unsigned long length, then the bytes (+ a NUL).
    impl->secret.assign(sizeof(unsigned long) + config.password.size() + 1, 0);
    auto* secret = reinterpret_cast<sasl_secret_t*>(impl->secret.data());
    secret->len = config.password.size();
    std::memcpy(secret->data, config.password.data(), config.password.size());
    OPENSSL_cleanse(config.password.data(), config.password.size());
    impl->callbacks.push_back({SASL_CB_AUTHNAME, as_sasl_callback(&get_authname), self});
    impl->callbacks.push_back({SASL_CB_PASS, as_sasl_callback(&get_secret), self});
  }
  impl->callbacks.push_back({SASL_CB_LIST_END, nullptr, nullptr});
  const int rc = sasl_client_new(config.service.c_str(), config.server_fqdn.c_str(), nullptr,
                                 nullptr, impl->callbacks.data(), config.flags, &impl->conn);
  if (rc != SASL_OK) return impl->failure(rc, "sasl_client_new");
  if (Status s = configure(*impl, config.security, config.gss_credentials); !s.ok()) return s;
  return std::unique_ptr<ClientSession>(new ClientSession(std::move(impl)));
}

Result<Output> ClientSession::start(std::string_view mechanism) {
  const std::string mech(mechanism);
  sasl_interact_t* interact = nullptr;
  const char* out = nullptr;
  unsigned out_len = 0;
  const char* chosen = nullptr;
  impl_->logged.clear();
  const int rc = sasl_client_start(impl_->conn, mech.c_str(), &interact, &out, &out_len, &chosen);
  const std::string what = "sasl_client_start(" + mech + ")";
  if (rc == SASL_INTERACT) {
    return Status(Errc::kConfigError,
                  what + ": the mechanism asks for input that was not configured");
  }
  if ((rc == SASL_OK || rc == SASL_CONTINUE) && (chosen == nullptr || mech != chosen)) {
    return Status(Errc::kMechanismUnavailable,
                  what + ": Cyrus chose " + (chosen != nullptr ? chosen : "nothing"));
  }
  return impl_->outcome(rc, out, out_len, what);
}

Result<Output> ClientSession::step(std::string_view server_message) {
  const std::string in(server_message);
  sasl_interact_t* interact = nullptr;
  const char* out = nullptr;
  unsigned out_len = 0;
  impl_->logged.clear();
  const int rc = sasl_client_step(impl_->conn, in.c_str(), static_cast<unsigned>(in.size()),
                                  &interact, &out, &out_len);
  if (rc == SASL_INTERACT) {
    return Status(Errc::kConfigError,
                  "sasl_client_step: the mechanism asks for input that was not configured");
  }
  return impl_->outcome(rc, out, out_len, "sasl_client_step");
}

bool ClientSession::done() const noexcept { return impl_->done; }

// --- result codes -------------------------------------------------------------------

Errc sasl_errc(int sasl_code) noexcept {
  switch (sasl_code) {
    case SASL_OK:
    case SASL_CONTINUE:
      return Errc::kOk;
    case SASL_NOMEM:
      return Errc::kResourceExhausted;
    case SASL_TRYAGAIN:
    case SASL_UNAVAIL:
      return Errc::kUnavailable;
    case SASL_EXPIRED:
      return Errc::kCredentialsExpired;
    case SASL_NOMECH:
    case SASL_TOOWEAK:
    case SASL_ENCRYPT:
      return Errc::kMechanismUnavailable;
    case SASL_NOAUTHZ:
      return Errc::kPermissionDenied;
    case SASL_BADPROT:
    case SASL_BUFOVER:
      return Errc::kProtocolError;
    case SASL_NOTINIT:
    case SASL_BADVERS:
    case SASL_CONFIGERR:
    case SASL_INTERACT:
      return Errc::kConfigError;
    case SASL_BADPARAM:
    case SASL_NOTDONE:
      return Errc::kInternal;
    // SASL_FAIL is a mechanism's generic failure (GSSAPI reports every
    // GSS-API error so); a mechanism that can tell more refines the code.
    case SASL_FAIL:
    case SASL_BADAUTH:
    case SASL_BADSERV:  // the server failed mutual authentication
    case SASL_WRONGMECH:
    case SASL_BADMAC:
    case SASL_BADBINDING:
    case SASL_NOUSER:
    case SASL_NOVERIFY:
    case SASL_DISABLED:
    case SASL_PWLOCK:
    case SASL_NOUSERPASS:
    default:
      return Errc::kAuthenticationFailed;
  }
}

}  // namespace authrpc::sasl
