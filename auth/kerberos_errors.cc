#include "authrpc/auth/kerberos_errors.h"

#include <krb5/krb5.h>

namespace authrpc {

Status kerberos_status(const security::GssStatus& status) {
  if (status.ok()) return {};
  Errc code = Errc::kAuthenticationFailed;
  switch (static_cast<krb5_error_code>(static_cast<std::int32_t>(status.minor))) {
    case KRB5KRB_AP_ERR_TKT_EXPIRED:
    case KRB5KDC_ERR_TGT_REVOKED:
    case KRB5_FCC_NOFILE:
    case KRB5_CC_NOTFOUND:
    case KRB5_CC_END:
      code = Errc::kCredentialsExpired;
      break;
    case KRB5_KDC_UNREACH:
    case KRB5_REALM_CANT_RESOLVE:
      code = Errc::kUnavailable;
      break;
    default:
      if (GSS_ROUTINE_ERROR(status.major) == GSS_S_NO_CRED ||
          GSS_ROUTINE_ERROR(status.major) == GSS_S_CREDENTIALS_EXPIRED) {
        code = Errc::kCredentialsExpired;
      }
      break;
  }
  if (static_cast<krb5_error_code>(status.minor) == KRB5KRB_AP_ERR_SKEW) {
    return {code, "kerberos: " + status.message +
                      "; clocks differ by more than the allowed skew (krb5.conf clockskew, "
                      "300 s by default): check NTP on client, server and KDC"};
  }
  return {code, "kerberos: " + status.message};
}

Status kerberos_accept_status(const security::GssStatus& status) {
  const auto minor = static_cast<krb5_error_code>(static_cast<std::int32_t>(status.minor));
  if (minor == KRB5KRB_AP_ERR_TKT_EXPIRED || minor == KRB5KRB_AP_ERR_SKEW) {
    return kerberos_status(status);
  }
  const OM_uint32 routine = GSS_ROUTINE_ERROR(status.major);
  const bool not_an_ap_req = routine == GSS_S_NO_CRED || routine == GSS_S_BAD_MECH ||
                             routine == GSS_S_DEFECTIVE_TOKEN ||
                             routine == GSS_S_DEFECTIVE_CREDENTIAL;
  if (!not_an_ap_req) return kerberos_status(status);
  return {Errc::kAuthenticationFailed,
          "kerberos: the client's token is not a Kerberos AP-REQ this server accepts (" +
              status.message + ")"};
}

}  // namespace authrpc
