// Typed failures of MIT GSSAPI with the Kerberos V5 mechanism, for
// kerberos_credentials.h, the kerberos mechanisms (components/kerberos/)
// and minibench's GSSAPI floor: a Status whose code is a KerberosErrc in the
// "authrpc.kerberos" category. A failed call is classified when it fails,
// from both the GSSAPI major status and the krb5 minor code (a Status keeps
// one code), and the category's default_error_condition() is the Errc that
// says what to do, so retry_advice() is right as it stands: an expired
// ticket or an empty ticket cache is CREDENTIALS_EXPIRED (log in again), an
// unreachable KDC UNAVAILABLE, anything else AUTHENTICATION_FAILED.
//
// The text is gss_display_status's; it never contains key material.
#pragma once

#include <gssapi/gssapi.h>

#include <string>
#include <string_view>
#include <system_error>

#include "authrpc/base/status.h"

namespace authrpc::security {

enum class KerberosErrc {
  // No usable ticket: expired, a revoked TGT, no or an empty ticket cache,
  // GSS_S_NO_CRED / GSS_S_CREDENTIALS_EXPIRED (kinit, then retry).
  kCredentialsExpired = 1,
  // The KDC cannot be reached or the realm not resolved now (retry).
  kKdcUnavailable = 2,
  // Acceptor: the client's context token is no Kerberos AP-REQ this server
  // accepts (garbage, empty, another mechanism's): re-authenticating would
  // send the same kind of token.
  kNotAnApReq = 3,
  // Anything else: a wrong or unknown principal, a stale keytab, a replay,
  // clock skew, bad channel bindings. The same request fails the same way.
  kFailed = 4,
};

const std::error_category& kerberos_category() noexcept;
std::error_code make_error_code(KerberosErrc e) noexcept;

// OK unless GSS_ERROR(major); else the failure of `what` ("accept", "ticket
// for rpc@host"): "what: <major text> (<minor text>)", with a hint when the
// clocks differ by more than the allowed skew.
Status gss_status(OM_uint32 major, OM_uint32 minor, std::string_view what);

// The same for the acceptor's gss_accept_sec_context on a client's context
// token. A token that is not a Kerberos AP-REQ at all (garbage:
// DEFECTIVE_TOKEN; another mechanism's, or an empty one, which MIT hands to
// SPNEGO, which then has no credential: NO_CRED) is kNotAnApReq. The
// server's own credentials were checked when its mechanism was created, so
// NO_CRED here is the token's fault. An expired ticket
// (KRB5KRB_AP_ERR_TKT_EXPIRED) stays kCredentialsExpired.
Status gss_accept_status(OM_uint32 major, OM_uint32 minor, std::string_view what);

// The Kerberos library's own text for a minor status ("No credentials
// cache found"), "" for none.
std::string gss_mechanism_text(OM_uint32 minor);

// A failure as the kerberos mechanisms report it: the Errc its KerberosErrc
// stands for (another category's code as it is), text "kerberos: ...".
Status kerberos_status(const Status& failure);

}  // namespace authrpc::security

template <>
struct std::is_error_code_enum<authrpc::security::KerberosErrc> : std::true_type {};
