#include "authrpc/rpc/policy.h"

namespace authrpc {

std::string_view to_string(Policy p) noexcept {
  switch (p) {
    case Policy::kDisabled: return "disabled";
    case Policy::kOptional: return "optional";
    case Policy::kRequired: return "required";
  }
  return "disabled";
}

bool parse_policy(std::string_view text, Policy* out) noexcept {
  if (text == "disabled") *out = Policy::kDisabled;
  else if (text == "optional") *out = Policy::kOptional;
  else if (text == "required") *out = Policy::kRequired;
  else return false;
  return true;
}

}  // namespace authrpc
