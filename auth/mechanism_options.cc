#include "authrpc/auth/mechanism_options.h"

#include <algorithm>
#include <nlohmann/json.hpp>

namespace authrpc {

Status MechanismOptions::check(std::initializer_list<std::string_view> allowed) const {
  if (json_.is_null()) return {};
  if (!json_.is_object()) return error("options must be an object");
  for (const auto& [key, _] : json_.items()) {
    if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
      std::string known;
      for (const auto k : allowed) known += (known.empty() ? "" : ", ") + std::string(k);
      return error("unknown option '" + key + "' (known: " + (known.empty() ? "none" : known) + ")");
    }
  }
  return {};
}

Status MechanismOptions::read_only(const char* key, std::string& out) const {
  if (Status s = check({key}); !s.ok()) return s;
  return read(key, out);
}

Status MechanismOptions::read(const char* key, std::string& out) const {
  if (!json_.is_object() || !json_.contains(key)) return {};
  if (!json_[key].is_string()) return error(std::string("'") + key + "' must be a string");
  out = json_[key].get<std::string>();
  return {};
}

Status MechanismOptions::read(const char* key, bool& out) const {
  if (!json_.is_object() || !json_.contains(key)) return {};
  if (!json_[key].is_boolean()) return error(std::string("'") + key + "' must be true or false");
  out = json_[key].get<bool>();
  return {};
}

Status MechanismOptions::read(const char* key, std::size_t& out, std::size_t max) const {
  if (!json_.is_object() || !json_.contains(key)) return {};
  const auto& v = json_[key];
  // A non-negative integer: unsigned from parsed text, signed when a program
  // built the options ({"n", 5} in C++ is a signed integer).
  const bool non_negative =
      v.is_number_unsigned() || (v.is_number_integer() && v.get<std::int64_t>() >= 0);
  if (!non_negative || v.get<std::uint64_t>() > max) {
    return error(std::string("'") + key + "' must be an integer from 0 to " + std::to_string(max));
  }
  out = static_cast<std::size_t>(v.get<std::uint64_t>());
  return {};
}

Status MechanismOptions::error(std::string_view message) const {
  return {Errc::kConfigError, std::string(mechanism_) + ": " + std::string(message)};
}

}  // namespace authrpc
