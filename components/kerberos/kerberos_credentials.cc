#include "authrpc/components/kerberos/kerberos_credentials.h"

#include <fcntl.h>
#include <gssapi/gssapi_ext.h>
#include <gssapi/gssapi_krb5.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <random>
#include <vector>

#include "authrpc/components/kerberos/kerberos_errors.h"

namespace authrpc::security {
namespace {

// A credential store: the key/value pairs gss_acquire_cred_from reads.
class CredStore {
 public:
  void add(const char* key, const std::string& value) {
    if (value.empty()) return;
    values_.push_back(value);
    keys_.push_back(key);
  }
  gss_key_value_set_desc* get() {
    elements_.clear();
    for (std::size_t i = 0; i < keys_.size(); ++i) {
      elements_.push_back({keys_[i], values_[i].c_str()});
    }
    set_ = {static_cast<OM_uint32>(elements_.size()), elements_.data()};
    return &set_;
  }

 private:
  std::vector<const char*> keys_;
  std::vector<std::string> values_;
  std::vector<gss_key_value_element_desc> elements_;
  gss_key_value_set_desc set_{};
};

// UNAUTHENTICATED "cannot read keytab K: <errno text>" unless the client
// keytab `keytab` (a path, or FILE:path) can be opened: MIT reports a
// missing one only as an empty ticket cache. Other keytab types pass.
Status check_client_keytab(const std::string& keytab) {
  std::string path = keytab;
  if (path.starts_with("FILE:")) {
    path.erase(0, 5);
  } else if (const auto colon = path.find(':'); colon != std::string::npos && !path.starts_with("/")) {
    return {};  // another type (MEMORY:, ...)
  }
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {Errc::kUnauthenticated, "cannot read keytab " + keytab + ": " + std::strerror(errno)};
  ::close(fd);
  return {};
}

std::string unique_memory_cache() {
  static std::atomic<unsigned> counter{0};
  std::random_device rd;
  return "MEMORY:authrpc-" + std::to_string(rd()) + "-" + std::to_string(++counter);
}

}  // namespace

GssName::~GssName() {
  OM_uint32 minor = 0;
  if (name_ != GSS_C_NO_NAME) gss_release_name(&minor, &name_);
}

GssName& GssName::operator=(GssName&& other) noexcept {
  if (this != &other) {
    OM_uint32 minor = 0;
    if (name_ != GSS_C_NO_NAME) gss_release_name(&minor, &name_);
    name_ = other.name_;
    other.name_ = GSS_C_NO_NAME;
  }
  return *this;
}

Result<GssName> GssName::principal(const std::string& name) {
  gss_buffer_desc buffer{name.size(), const_cast<char*>(name.data())};
  gss_name_t out = GSS_C_NO_NAME;
  OM_uint32 minor = 0;
  const OM_uint32 major =
      gss_import_name(&minor, &buffer, const_cast<gss_OID>(GSS_KRB5_NT_PRINCIPAL_NAME), &out);
  GssName imported(out);
  if (Status s = gss_status(major, minor, "principal name '" + name + "'"); !s.ok()) return s;
  return imported;
}

Result<GssName> GssName::host_based(const std::string& service, const std::string& host) {
  const std::string name = service + "@" + host;
  gss_buffer_desc buffer{name.size(), const_cast<char*>(name.data())};
  gss_name_t out = GSS_C_NO_NAME;
  OM_uint32 minor = 0;
  const OM_uint32 major = gss_import_name(&minor, &buffer, GSS_C_NT_HOSTBASED_SERVICE, &out);
  GssName imported(out);
  if (Status s = gss_status(major, minor, "service name '" + name + "'"); !s.ok()) return s;
  return imported;
}

Result<GssName> GssName::canonical() const {
  gss_name_t out = GSS_C_NO_NAME;
  OM_uint32 minor = 0;
  const OM_uint32 major =
      gss_canonicalize_name(&minor, name_, const_cast<gss_OID>(gss_mech_krb5), &out);
  GssName canonical(out);
  if (Status s = gss_status(major, minor, "canonicalize name"); !s.ok()) return s;
  return canonical;
}

std::string GssName::display() const {
  if (name_ == GSS_C_NO_NAME) return {};
  OM_uint32 minor = 0;
  gss_buffer_desc text = GSS_C_EMPTY_BUFFER;
  if (gss_display_name(&minor, name_, &text, nullptr) != GSS_S_COMPLETE) return {};
  std::string out(static_cast<const char*>(text.value), text.length);
  gss_release_buffer(&minor, &text);
  return out;
}

GssBuffer::~GssBuffer() {
  OM_uint32 minor = 0;
  gss_release_buffer(&minor, &buffer_);
}

GssContext::~GssContext() {
  OM_uint32 minor = 0;
  if (ctx_ != GSS_C_NO_CONTEXT) gss_delete_sec_context(&minor, &ctx_, GSS_C_NO_BUFFER);
}

std::string realm_of(const std::string& principal) {
  const auto at = principal.rfind('@');
  return at == std::string::npos ? std::string() : principal.substr(at + 1);
}

std::string host_service_principal(const std::string& service, const std::string& host) {
  if (!host.empty()) return service + "/" + host;
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return service + "/localhost";
  return service + "/" + name;
}

namespace {

// `principal` imported, or no name (GSSAPI's default) if it is empty.
Result<GssName> principal_or_default(const std::string& principal) {
  if (principal.empty()) return GssName();
  return GssName::principal(principal);
}

}  // namespace

Result<std::unique_ptr<KerberosCredentials>> KerberosCredentials::acceptor(
    const AcceptorOptions& options) {
  auto name = principal_or_default(options.principal);
  if (!name.ok()) return name.status();
  CredStore store;
  store.add("keytab", options.keytab);
  if (!options.replay_cache) {
    store.add("rcache", "none:");
  } else if (!options.replay_cache_dir.empty()) {
    // "file2:" names the file; MIT's "dfl:" ignores the path it is given.
    store.add("rcache", "file2:" + options.replay_cache_dir + "/authrpc_rcache");
  }
  gss_OID_set_desc mechs{1, const_cast<gss_OID>(gss_mech_krb5)};
  gss_cred_id_t cred = GSS_C_NO_CREDENTIAL;
  OM_uint32 minor = 0;
  const OM_uint32 major = gss_acquire_cred_from(&minor, name->get(), GSS_C_INDEFINITE, &mechs,
                                                GSS_C_ACCEPT, store.get(), &cred, nullptr, nullptr);
  const std::string where = options.keytab.empty() ? "the default keytab" : options.keytab;
  if (Status s = gss_status(major, minor,
                            "acceptor credentials for " +
                                (options.principal.empty() ? std::string("any principal")
                                                           : options.principal) +
                                " from " + where);
      !s.ok()) {
    return s;
  }
  return std::unique_ptr<KerberosCredentials>(new KerberosCredentials(cred, options.principal));
}

Result<std::unique_ptr<KerberosCredentials>> KerberosCredentials::initiator(
    const InitiatorOptions& options) {
  if (!options.keytab.empty()) {
    if (options.principal.empty()) {
      return Status(Errc::kConfigError, "a client keytab needs a principal to log in as");
    }
    if (Status s = check_client_keytab(options.keytab); !s.ok()) return s;
  }
  auto name = principal_or_default(options.principal);
  if (!name.ok()) return name.status();
  CredStore store;
  if (!options.keytab.empty()) {
    store.add("client_keytab", options.keytab);
    store.add("ccache", options.ccache.empty() ? unique_memory_cache() : options.ccache);
  } else {
    store.add("ccache", options.ccache);
  }
  gss_OID_set_desc mechs{1, const_cast<gss_OID>(gss_mech_krb5)};
  gss_cred_id_t cred = GSS_C_NO_CREDENTIAL;
  OM_uint32 minor = 0;
  OM_uint32 lifetime = 0;
  const OM_uint32 major = gss_acquire_cred_from(&minor, name->get(), GSS_C_INDEFINITE, &mechs,
                                                GSS_C_INITIATE, store.get(), &cred, nullptr,
                                                &lifetime);
  const std::string source = !options.keytab.empty() ? "keytab " + options.keytab
                             : options.ccache.empty() ? std::string("the default ticket cache")
                                                      : "ticket cache " + options.ccache;
  if (Status s = gss_status(major, minor, "Kerberos credentials from " + source); !s.ok()) {
    // A cache MIT cannot use at all comes without a mechanism code: log in.
    if (major == GSS_S_FAILURE && minor == 0) s.code = KerberosErrc::kCredentialsExpired;
    // No ticket to use: said in words, with what MIT says of the cache
    // (its name) rather than GSSAPI's generic "No credentials were supplied".
    if (s.is(KerberosErrc::kCredentialsExpired) && options.keytab.empty()) {
      const std::string mit = gss_mechanism_text(minor);
      s.message = (GSS_ROUTINE_ERROR(major) == GSS_S_CREDENTIALS_EXPIRED
                       ? "the Kerberos ticket in " + source + " has expired"
                       : "no Kerberos ticket in " + source) +
                  ": run kinit" + (mit.empty() ? "" : " (" + mit + ")");
    }
    return s;
  }
  auto creds = std::unique_ptr<KerberosCredentials>(new KerberosCredentials(cred, {}));
  if (lifetime == 0 && options.keytab.empty()) {
    // (Checked before gss_inquire_cred, which leaks inside MIT 1.20 when
    // asked about expired credentials.)
    return Status(KerberosErrc::kCredentialsExpired,
                  "the Kerberos ticket in " + source + " has expired: run kinit");
  }
  OM_uint32 m = 0;
  gss_name_t own = GSS_C_NO_NAME;
  const OM_uint32 inquired = gss_inquire_cred(&m, cred, &own, nullptr, nullptr, nullptr);
  GssName own_name(own);  // released whatever gss_inquire_cred returned
  if (inquired == GSS_S_COMPLETE) creds->principal_ = own_name.display();
  return creds;
}

KerberosCredentials::~KerberosCredentials() {
  OM_uint32 minor = 0;
  if (cred_ != GSS_C_NO_CREDENTIAL) gss_release_cred(&minor, &cred_);
}

OM_uint32 KerberosCredentials::remaining_lifetime() const {
  OM_uint32 minor = 0, lifetime = 0;
  if (gss_inquire_cred(&minor, cred_, nullptr, &lifetime, nullptr, nullptr) != GSS_S_COMPLETE) {
    return 0;
  }
  return lifetime;
}

}  // namespace authrpc::security
