// krb5_default_realm(): the realm auth_to_local's DEFAULT rule strips when the
// authorization file names none (docs/AUTHZ.md). Called by AuthzPolicy when
// it parses a policy, and so by the token service's renewer check.
//
// Kerberos is an optional component (docs/DESIGN.md, "Libraries"): the
// authorization layer must not link libkrb5, or every program would, even one
// that authenticates with `simple` only. So libkrb5 is loaded on first use
// instead, and the realm is exactly the one krb5 itself reads (its profile
// parser, include files, KRB5_CONFIG lists), not a second parser's guess.
#pragma once

#include <string>

namespace authrpc {

// The default realm of krb5.conf (KRB5_CONFIG), or "" if there is none or
// libkrb5 is not installed. Thread-safe; reads the configuration on every call,
// as krb5_get_default_realm() does.
std::string krb5_default_realm();

}  // namespace authrpc
