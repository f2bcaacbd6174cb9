// Kerberos credentials for authrpc's Kerberos mechanisms, through MIT GSSAPI:
// acceptor credentials from a keytab (servers) and initiator credentials from
// a ticket cache or a client keytab (clients). Owns the gss_cred_id_t and
// gss_name_t handles it creates. MIT credentials may be used from several
// threads at once. Also the owning holders of the other GSSAPI handles both
// Kerberos mechanisms use (names, output buffers, security contexts) and
// the principal-name helpers they share.
//
// Nothing here touches the process environment: keytab, cache and replay
// cache locations travel in a GSSAPI credential store (gss_acquire_cred_from).
// Failures are KerberosErrc statuses (components/kerberos/kerberos_errors.h).
#pragma once

#include <gssapi/gssapi.h>

#include <cstdint>
#include <memory>
#include <string>

#include "authrpc/base/result.h"

namespace authrpc::security {

// An owned gss_name_t.
class GssName {
 public:
  GssName() = default;
  explicit GssName(gss_name_t name) : name_(name) {}
  ~GssName();
  GssName(GssName&& other) noexcept : name_(other.name_) { other.name_ = GSS_C_NO_NAME; }
  GssName& operator=(GssName&& other) noexcept;

  // "rpc/host@REALM" or "alice" (default realm).
  static Result<GssName> principal(const std::string& name);
  // "service@host": the host-based service name GSSAPI maps to service/host@REALM.
  static Result<GssName> host_based(const std::string& service, const std::string& host);

  // The Kerberos mechanism name (MN) this name stands for. Expensive (the
  // krb5 library resolves and parses it; docs/PERFORMANCE.md, "Measured costs
  // behind the code"): do it once and share the result; GSSAPI calls only read a mechanism name.
  Result<GssName> canonical() const;

  gss_name_t get() const noexcept { return name_; }
  std::string display() const;

 private:
  gss_name_t name_ = GSS_C_NO_NAME;
};

// A buffer GSSAPI fills (an output token), released with it.
class GssBuffer {
 public:
  GssBuffer() = default;
  GssBuffer(const GssBuffer&) = delete;
  GssBuffer& operator=(const GssBuffer&) = delete;
  ~GssBuffer();
  gss_buffer_t get() noexcept { return &buffer_; }
  std::string str() const { return {static_cast<const char*>(buffer_.value), buffer_.length}; }

 private:
  gss_buffer_desc buffer_ = GSS_C_EMPTY_BUFFER;
};

// An owned GSS-API security context (gss_ctx_id_t), deleted with it.
class GssContext {
 public:
  GssContext() = default;
  GssContext(const GssContext&) = delete;
  GssContext& operator=(const GssContext&) = delete;
  ~GssContext();
  gss_ctx_id_t* get() noexcept { return &ctx_; }

 private:
  gss_ctx_id_t ctx_ = GSS_C_NO_CONTEXT;
};

// The realm of "name@REALM"; empty for a name without one.
std::string realm_of(const std::string& principal);

// "service/host", the principal of a service on a host; an empty `host` is
// this machine's host name.
std::string host_service_principal(const std::string& service, const std::string& host);

class KerberosCredentials {
 public:
  struct AcceptorOptions {
    std::string keytab;     // empty: KRB5_KTNAME or the default keytab
    std::string principal;  // empty: accept for any principal in the keytab
    bool replay_cache = true;
    std::string replay_cache_dir;  // empty: KRB5RCACHEDIR or the system default
  };
  struct InitiatorOptions {
    std::string ccache;     // empty: KRB5CCNAME or the default cache
    std::string principal;  // with keytab: log in as this principal
    std::string keytab;     // set: keytab login (tickets renewed automatically)
  };

  // Fails if the keytab is missing or unreadable or has no key for the
  // principal — so that a server finds out at startup.
  static Result<std::unique_ptr<KerberosCredentials>> acceptor(const AcceptorOptions& options);
  // With a keytab, logs in now (a KDC request) into a private memory cache;
  // a keytab file that cannot be read is UNAUTHENTICATED ("cannot read
  // keytab K: No such file or directory"), as other unreadable credentials
  // files are. Without one, checks that the cache holds a usable TGT: no
  // cache, an empty or an expired one is KerberosErrc::kCredentialsExpired
  // ("no Kerberos ticket in ...: run kinit"). A keytab without a principal
  // is CONFIG_ERROR.
  static Result<std::unique_ptr<KerberosCredentials>> initiator(const InitiatorOptions& options);
  ~KerberosCredentials();
  KerberosCredentials(const KerberosCredentials&) = delete;
  KerberosCredentials& operator=(const KerberosCredentials&) = delete;

  gss_cred_id_t handle() const noexcept { return cred_; }
  // The credentials' principal ("" for an acceptor without one).
  const std::string& principal() const noexcept { return principal_; }
  // Seconds of validity left (GSS_C_INDEFINITE for acceptors).
  OM_uint32 remaining_lifetime() const;

 private:
  KerberosCredentials(gss_cred_id_t cred, std::string principal)
      : cred_(cred), principal_(std::move(principal)) {}
  gss_cred_id_t cred_ = GSS_C_NO_CREDENTIAL;
  std::string principal_;
};

}  // namespace authrpc::security
