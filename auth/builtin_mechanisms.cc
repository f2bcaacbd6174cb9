// MechanismRegistry::with_builtins(): the mechanisms authrpc ships. Each
// registers itself from its own module (options, flags, traits); this file
// only lists them. Kept apart from the registry itself so that a program
// that builds its own registry does not link every mechanism.
#include "authrpc/auth/mechanism_registry.h"
#include "authrpc/auth/mechanisms/simple/simple.h"
#include "authrpc/auth/mechanisms/token/token_mechanism.h"
#include "authrpc/auth/mechanisms/x509/x509.h"
#include "authrpc/components/jwt/jwt.h"
#include "authrpc/components/kerberos/kerberos.h"
#include "authrpc/components/kerberos/kerberos_sasl.h"
#include "authrpc/components/kerberos/token_sasl.h"

namespace authrpc {

MechanismRegistry MechanismRegistry::with_builtins() {
  MechanismRegistry r;
  register_simple(r);
  register_kerberos(r);
  register_kerberos_sasl(r);
  register_token(r);
  register_token_sasl(r);
  register_x509(r);
  register_jwt(r);
  return r;
}

}  // namespace authrpc
