// Maps GSSAPI/Kerberos failures onto authrpc status codes, so that callers
// can tell "run kinit" (CREDENTIALS_EXPIRED) from "the KDC is down"
// (UNAVAILABLE) from "this will never work" (AUTHENTICATION_FAILED).
#pragma once

#include "authrpc/security/base/status.h"
#include "authrpc/security/kerberos_credentials.h"

namespace authrpc {

Status kerberos_status(const security::GssStatus& status);

// For the acceptor's gss_accept_sec_context on a client's token. A token
// that is not a Kerberos AP-REQ at all (garbage: DEFECTIVE_TOKEN; another
// mechanism's, or an empty one, which MIT hands to SPNEGO, which then has no
// credential: NO_CRED) is AUTHENTICATION_FAILED: re-authenticating would
// send the same kind of token. The server's own credentials were checked
// when the mechanism was created, so NO_CRED here is the token's fault. An
// expired ticket (KRB5KRB_AP_ERR_TKT_EXPIRED) stays CREDENTIALS_EXPIRED.
Status kerberos_accept_status(const security::GssStatus& status);

}  // namespace authrpc
