// MechanismRegistry::with_builtins(): the mechanisms authrpc ships. Each
// registers itself from its own module (options, flags, traits); this file
// only lists them. Kept apart from the registry itself so that a program
// that builds its own registry does not link every mechanism.
#include "auth/kerberos.h"
#include "auth/kerberos_sasl.h"
#include "auth/mechanism_registry.h"
#include "auth/simple.h"
#include "auth/token_mechanism.h"
#include "auth/token_sasl.h"
#include "auth/x509.h"

namespace authrpc {

MechanismRegistry MechanismRegistry::with_builtins() {
  MechanismRegistry r;
  register_simple(r);
  register_kerberos(r);
  register_kerberos_sasl(r);
  register_token(r);
  register_token_sasl(r);
  register_x509(r);
  return r;
}

}  // namespace authrpc
