#include "authrpc/components/zookeeper/zk_store_factory.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "authrpc/security/tokens_config.h"

namespace authrpc::security {

// The digest file holds "user:password".
Result<ZkTokenStoreOptions> zookeeper_store_options_from_json(const nlohmann::json& o) {
  if (!o.is_object()) {
    return tokens_config_error(".store' zookeeper needs {\"type\": \"zookeeper\", \"connect\": ..., \"root\": ...}");
  }
  static const std::set<std::string> kKeys = {"type", "connect", "root", "auth", "session_timeout_ms",
                                              "connect_timeout_ms", "start_timeout_ms", "sequence_batch"};
  for (const auto& [key, _] : o.items()) {
    if (!kKeys.contains(key)) return Status(Errc::kConfigError, "unknown key 'tokens.store." + key + "'");
  }
  for (const char* key : {"connect", "root"}) {
    if (!o.contains(key) || !o[key].is_string() || o[key].get<std::string>().empty()) {
      return tokens_config_error(std::string(".store.") + key + "' is required with the zookeeper store");
    }
  }
  ZkTokenStoreOptions out;
  out.connect = o["connect"].get<std::string>();
  out.root = o["root"].get<std::string>();
  for (Status s : {read_tokens_ms(o, ".store", "session_timeout_ms", out.session_timeout, 1000),
                   read_tokens_ms(o, ".store", "connect_timeout_ms", out.connect_timeout, 100),
                   read_tokens_ms(o, ".store", "start_timeout_ms", out.start_timeout, 0)}) {
    if (!s.ok()) return s;
  }
  if (o.contains("sequence_batch")) {
    const auto& v = o["sequence_batch"];
    if (!v.is_number_unsigned() || v.get<std::uint64_t>() < 1 || v.get<std::uint64_t>() > 100000) {
      return tokens_config_error(".store.sequence_batch' must be an integer from 1 to 100000");
    }
    out.sequence_batch = v.get<std::uint32_t>();
  }
  if (o.contains("auth") && !o["auth"].is_null()) {
    const auto& a = o["auth"];
    if (!a.is_object() || a.size() != 1 || !a.contains("digest_file") || !a["digest_file"].is_string()) {
      return tokens_config_error(".store.auth' must be {\"digest_file\": PATH} (a file holding user:password) or null");
    }
    const std::string path = a["digest_file"].get<std::string>();
    std::ifstream in(path);
    std::string line;
    if (!in || !std::getline(in, line)) return tokens_config_error(".store.auth.digest_file' " + path + " cannot be read");
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    const auto colon = line.find(':');
    const bool well_formed = colon != std::string::npos && colon > 0 && colon + 1 < line.size();
    if (well_formed) out.digest = SecretBytes(line);
    cleanse(line.data(), line.size());
    if (!well_formed) return tokens_config_error(".store.auth.digest_file' " + path + " must hold user:password");
  }
  return out;
}

TokenStoreOpener zookeeper_store(ZkTokenStoreOptions options) {
  return {"ZooKeeper",
          [options = std::move(options)](std::chrono::milliseconds sweep_interval)
              -> Result<std::shared_ptr<TokenStore>> {
            auto zk_options = options;
            zk_options.sweep_interval = sweep_interval;
            auto zk = ZkTokenStore::open(std::move(zk_options));
            if (!zk.ok()) return zk.status();
            return std::shared_ptr<TokenStore>(std::move(*zk));
          }};
}

void register_zookeeper_store(TokenStoreRegistry& registry) {
  registry.register_store(std::string(kZooKeeperStoreType),
                          [](const nlohmann::json& store) -> Result<TokenStoreOpener> {
                            auto options = zookeeper_store_options_from_json(store);
                            if (!options.ok()) return options.status();
                            return zookeeper_store(std::move(*options));
                          });
}

}  // namespace authrpc::security
