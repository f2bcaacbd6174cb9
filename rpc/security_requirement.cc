#include "authrpc/rpc/security_requirement.h"

#include "authrpc/base/enum_names.h"

namespace authrpc {
namespace {

constexpr EnumName<SecurityRequirement> kRequirementNames[] = {
    {SecurityRequirement::kDisabled, "disabled"},
    {SecurityRequirement::kOptional, "optional"},
    {SecurityRequirement::kRequired, "required"},
};

}  // namespace

std::string_view to_string(SecurityRequirement r) noexcept {
  return enum_name<SecurityRequirement>(kRequirementNames, r);
}

bool parse_security_requirement(std::string_view text, SecurityRequirement* out) noexcept {
  return parse_enum_name<SecurityRequirement>(kRequirementNames, text, out);
}

}  // namespace authrpc
