// TokenStoreRegistry: the token stores a program links besides the built-in
// file and memory stores, by the "type" of the "store" object in the
// configuration's "tokens" section (docs/CONFIG.md). An optional component
// registers its store (ZooKeeper: components/zookeeper/zk_store_factory.h); the
// token service (server/token_service.h) reads the section through the registry
// and opens what it returns, so the server library names no optional store and
// links none of their libraries. Filled once at startup, then read-only.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "authrpc/base/result.h"
#include "authrpc/security/token_errors.h"
#include "authrpc/security/token_store.h"

namespace authrpc::security {

// A store read from configuration, not yet opened.
struct TokenStoreOpener {
  std::string label;  // names the store in errors: "token store (<label>)"
  // Connects; `sweep_interval` is the token service's (a store shared by a
  // fleet lets one server per interval sweep).
  std::function<Result<std::shared_ptr<TokenStore>>(std::chrono::milliseconds sweep_interval)>
      open;
};

class TokenStoreRegistry {
 public:
  // Reads the "store" value: its object, "type" included (an unknown key or
  // a wrong value is kConfigError naming it: 'tokens.store.<key>'), or the
  // plain string naming the type, which it refuses saying what the object
  // needs.
  using Factory = std::function<Result<TokenStoreOpener>(const nlohmann::json& store)>;

  // An empty registry: the file and memory stores only.
  TokenStoreRegistry() = default;
  // Every store type this build of authrpc has (zookeeper when built with
  // libzookeeper-mt-dev); defined by the all-built-ins library
  // (authrpc::builtins), which links them.
  static TokenStoreRegistry with_builtins();

  void register_store(std::string type, Factory factory);
  // Null for a type nobody registered.
  const Factory* find(std::string_view type) const;
  std::vector<std::string> types() const;

 private:
  std::map<std::string, Factory, std::less<>> factories_;
};

}  // namespace authrpc::security
