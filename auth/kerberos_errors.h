// Maps GSSAPI/Kerberos failures onto authrpc status codes, so that callers
// can tell "run kinit" (CREDENTIALS_EXPIRED) from "the KDC is down"
// (UNAVAILABLE) from "this will never work" (AUTHENTICATION_FAILED).
#pragma once

#include "rpc/status.h"
#include "security/kerberos_credentials.h"

namespace authrpc {

Status kerberos_status(const security::GssStatus& status);

}  // namespace authrpc
