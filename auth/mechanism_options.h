// MechanismOptions: the one reader of a mechanism's JSON options object
// (the server's `auth.options.<name>`, a client's options), used by every
// mechanism's registration. Strict: only the listed keys, with the right
// types, so that a typo is a CONFIG_ERROR naming the mechanism and the key
// rather than a silent default. A null or absent object means no options.
#pragma once

#include <cstddef>
#include <initializer_list>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>

#include "authrpc/base/result.h"
#include "authrpc/base/status.h"

namespace authrpc {

class MechanismOptions {
 public:
  // `json` must outlive the reader.
  MechanismOptions(std::string_view mechanism, const nlohmann::json& json)
      : mechanism_(mechanism), json_(json) {}

  // CONFIG_ERROR unless the options are null or an object with only these keys.
  Status check(std::initializer_list<std::string_view> allowed) const;
  // Each leaves `out` as it is when the key is absent.
  Status read(const char* key, std::string& out) const;
  Status read(const char* key, bool& out) const;
  // An integer from 0 to `max`.
  Status read(const char* key, std::size_t& out, std::size_t max) const;

  // For options of one key: check({key}), then read(key, out).
  Status read_only(const char* key, std::string& out) const;
  // "<mechanism>: <message>", CONFIG_ERROR.
  Status error(std::string_view message) const;

 private:
  std::string_view mechanism_;
  const nlohmann::json& json_;
};

// The factory (for MechanismRegistry, auth/mechanism_registry.h) of a
// mechanism half M that takes no options; Half is its interface,
// ServerMechanism or ClientMechanism. Any option is a CONFIG_ERROR, as
// check({}) words it.
template <class Half, class M>
auto without_options(std::string_view mechanism) {
  // A copy: the factory outlives the caller's string (the registry keeps it).
  return [mechanism = std::string(mechanism)](
             const nlohmann::json& json) -> Result<std::shared_ptr<Half>> {
    if (Status s = MechanismOptions(mechanism, json).check({}); !s.ok()) return s;
    return std::shared_ptr<Half>(std::make_shared<M>());
  };
}

}  // namespace authrpc
