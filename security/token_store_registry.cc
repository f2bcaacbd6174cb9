#include "authrpc/security/token_store_registry.h"

namespace authrpc::security {

void TokenStoreRegistry::register_store(std::string type, Factory factory) {
  factories_[std::move(type)] = std::move(factory);
}

const TokenStoreRegistry::Factory* TokenStoreRegistry::find(std::string_view type) const {
  const auto it = factories_.find(type);
  return it == factories_.end() ? nullptr : &it->second;
}

std::vector<std::string> TokenStoreRegistry::types() const {
  std::vector<std::string> out;
  for (const auto& [type, _] : factories_) out.push_back(type);
  return out;
}

}  // namespace authrpc::security
