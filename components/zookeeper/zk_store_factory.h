// The ZooKeeper token store (components/zookeeper/zk_token_store.h) as a store
// type of the configuration's "tokens" section: {"type": "zookeeper",
// "connect": ..., "root": ..., "auth": {"digest_file": PATH}, ...}
// (docs/ZOOKEEPER.md). Part of the zookeeper component (authrpc::zookeeper): a
// program that registers it links libzookeeper_mt, and only such a program
// does.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include "authrpc/base/result.h"
#include "authrpc/components/zookeeper/zk_token_store.h"
#include "authrpc/security/token_store_registry.h"

namespace authrpc::security {

inline constexpr std::string_view kZooKeeperStoreType = "zookeeper";

// Makes "zookeeper" a store type of `registry`.
void register_zookeeper_store(TokenStoreRegistry& registry);

// The "store" object's keys; kConfigError naming a wrong one. Reads the
// digest file (and wipes its copy of the line).
Result<ZkTokenStoreOptions> zookeeper_store_options_from_json(const nlohmann::json& store);

// The store `options` describe, for a token service configured in code
// (TokenServiceOptions::shared_store); the service's sweep interval replaces
// options.sweep_interval.
TokenStoreOpener zookeeper_store(ZkTokenStoreOptions options);

}  // namespace authrpc::security
