// TokenStoreRegistry::with_builtins(): the shared token stores this build of
// authrpc has. Part of the all-built-ins library (authrpc::builtins) with
// MechanismRegistry::with_builtins(), so that only a program that asks for
// every store links their client libraries.
#include "authrpc/security/token_store_registry.h"

#if AUTHRPC_HAVE_ZOOKEEPER
#include "authrpc/components/zookeeper/zk_store_factory.h"
#endif

namespace authrpc::security {

TokenStoreRegistry TokenStoreRegistry::with_builtins() {
  TokenStoreRegistry r;
#if AUTHRPC_HAVE_ZOOKEEPER
  register_zookeeper_store(r);
#endif
  return r;
}

}  // namespace authrpc::security
