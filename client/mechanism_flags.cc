#include "authrpc/client/mechanism_flags.h"

namespace authrpc::cli {

bool MechanismFlags::declares(std::string_view flag) const {
  for (const auto& name : registry_.client_names()) {
    for (const auto& f : registry_.client(name)->flags) {
      if (f.flag == flag) return true;
    }
  }
  return false;
}

const std::string* MechanismFlags::given(std::string_view flag) const {
  const auto it = given_.find(flag);
  return it == given_.end() ? nullptr : &it->second;
}

nlohmann::json MechanismFlags::options_for(std::string_view name) const {
  nlohmann::json options = nlohmann::json::object();
  const auto* entry = registry_.client(name);
  if (entry == nullptr) return options;
  for (const auto& f : entry->flags) {
    if (f.credentials_file) continue;
    if (const std::string* v = given(f.flag)) options[f.option] = *v;
  }
  return options;
}

std::vector<MechanismFlag> MechanismFlags::credentials_files(std::string_view name) const {
  std::vector<MechanismFlag> out;
  const auto* entry = registry_.client(name);
  if (entry == nullptr) return out;
  for (const auto& f : entry->flags) {
    if (f.credentials_file) out.push_back(f);
  }
  return out;
}

}  // namespace authrpc::cli
