#include "authrpc/components/kerberos/kerberos_errors.h"

#include <krb5/krb5.h>

#include <string>

#include "authrpc/base/error_table.h"

namespace authrpc::security {
namespace {

// The names are also the `reason` label of
// authrpc_server_mechanism_errors_total.
constexpr ErrorRow<KerberosErrc> kKerberosErrors[] = {
    {KerberosErrc::kCredentialsExpired, "CREDENTIALS_EXPIRED",
     "Kerberos credentials expired or missing", Errc::kCredentialsExpired},
    {KerberosErrc::kKdcUnavailable, "KDC_UNAVAILABLE", "Kerberos KDC unavailable",
     Errc::kUnavailable},
    {KerberosErrc::kNotAnApReq, "NOT_AN_AP_REQ", "not a Kerberos AP-REQ",
     Errc::kAuthenticationFailed},
    {KerberosErrc::kFailed, "FAILED", "Kerberos authentication failed",
     Errc::kAuthenticationFailed},
};
constexpr ErrorTable<KerberosErrc> kKerberosTable{
    kKerberosErrors,
    {KerberosErrc{}, "KERBEROS_ERROR", "Kerberos error ", Errc::kAuthenticationFailed},
    /*unknown_shows_value=*/true};
constinit const TableErrorCategory<KerberosErrc> kKerberosCategory("authrpc.kerberos",
                                                                   kKerberosTable);

std::string display_status(OM_uint32 code, int type) {
  std::string out;
  OM_uint32 context = 0;
  do {
    OM_uint32 minor = 0;
    gss_buffer_desc text = GSS_C_EMPTY_BUFFER;
    if (gss_display_status(&minor, code, type, GSS_C_NO_OID, &context, &text) != GSS_S_COMPLETE) {
      break;
    }
    if (!out.empty()) out += "; ";
    out.append(static_cast<const char*>(text.value), text.length);
    gss_release_buffer(&minor, &text);
  } while (context != 0);
  return out;
}

krb5_error_code krb5_code(OM_uint32 minor) {
  return static_cast<krb5_error_code>(static_cast<std::int32_t>(minor));
}

KerberosErrc classify(OM_uint32 major, OM_uint32 minor) {
  switch (krb5_code(minor)) {
    case KRB5KRB_AP_ERR_TKT_EXPIRED:
    case KRB5KDC_ERR_TGT_REVOKED:
    case KRB5_FCC_NOFILE:
    case KRB5_CC_NOTFOUND:
    case KRB5_CC_END:
      return KerberosErrc::kCredentialsExpired;
    case KRB5_KDC_UNREACH:
    case KRB5_REALM_CANT_RESOLVE:
      return KerberosErrc::kKdcUnavailable;
    default:
      break;
  }
  const OM_uint32 routine = GSS_ROUTINE_ERROR(major);
  if (routine == GSS_S_NO_CRED || routine == GSS_S_CREDENTIALS_EXPIRED) {
    return KerberosErrc::kCredentialsExpired;
  }
  return KerberosErrc::kFailed;
}

std::string describe(OM_uint32 major, OM_uint32 minor, std::string_view what) {
  std::string out = std::string(what) + ": " + display_status(major, GSS_C_GSS_CODE);
  if (minor != 0) out += " (" + display_status(minor, GSS_C_MECH_CODE) + ")";
  if (krb5_code(minor) == KRB5KRB_AP_ERR_SKEW) {
    out +=
        "; clocks differ by more than the allowed skew (krb5.conf clockskew, 300 s by default): "
        "check NTP on client, server and KDC";
  }
  return out;
}

}  // namespace

const std::error_category& kerberos_category() noexcept { return kKerberosCategory; }

std::error_code make_error_code(KerberosErrc e) noexcept {
  return {static_cast<int>(e), kKerberosCategory};
}

Status gss_status(OM_uint32 major, OM_uint32 minor, std::string_view what) {
  if (!GSS_ERROR(major)) return {};
  return {classify(major, minor), describe(major, minor, what)};
}

Status gss_accept_status(OM_uint32 major, OM_uint32 minor, std::string_view what) {
  if (!GSS_ERROR(major)) return {};
  const krb5_error_code code = krb5_code(minor);
  if (code != KRB5KRB_AP_ERR_TKT_EXPIRED && code != KRB5KRB_AP_ERR_SKEW) {
    const OM_uint32 routine = GSS_ROUTINE_ERROR(major);
    if (routine == GSS_S_NO_CRED || routine == GSS_S_BAD_MECH ||
        routine == GSS_S_DEFECTIVE_TOKEN || routine == GSS_S_DEFECTIVE_CREDENTIAL) {
      return {KerberosErrc::kNotAnApReq, describe(major, minor, what)};
    }
  }
  return gss_status(major, minor, what);
}

std::string gss_mechanism_text(OM_uint32 minor) {
  return minor == 0 ? std::string() : display_status(minor, GSS_C_MECH_CODE);
}

Status kerberos_status(const Status& failure) {
  if (failure.ok()) return {};
  if (failure.code.category() != kerberos_category()) {
    return {failure.code, "kerberos: " + failure.message};
  }
  const Errc errc = static_cast<Errc>(failure.code.default_error_condition().value());
  if (failure.is(KerberosErrc::kNotAnApReq)) {
    return {errc, "kerberos: the client's token is not a Kerberos AP-REQ this server accepts (" +
                      failure.message + ")"};
  }
  return {errc, "kerberos: " + failure.message};
}

}  // namespace authrpc::security
