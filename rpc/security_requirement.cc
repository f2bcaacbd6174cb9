#include "authrpc/rpc/security_requirement.h"

namespace authrpc {

std::string_view to_string(SecurityRequirement r) noexcept {
  switch (r) {
    case SecurityRequirement::kDisabled: return "disabled";
    case SecurityRequirement::kOptional: return "optional";
    case SecurityRequirement::kRequired: return "required";
  }
  return "disabled";
}

bool parse_security_requirement(std::string_view text, SecurityRequirement* out) noexcept {
  if (text == "disabled") *out = SecurityRequirement::kDisabled;
  else if (text == "optional") *out = SecurityRequirement::kOptional;
  else if (text == "required") *out = SecurityRequirement::kRequired;
  else return false;
  return true;
}

}  // namespace authrpc
