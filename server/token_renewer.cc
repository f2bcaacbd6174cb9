#include "authrpc/server/token_renewer.h"

#include <nlohmann/json.hpp>

#include "authrpc/auth/authz/principal_mapper.h"

namespace authrpc {

namespace {
constexpr std::size_t kMaxRenewer = 1024;

Status invalid(std::string_view renewer, const std::string& why) {
  // The name is peer input: escaped before it goes into the message.
  std::string shown;
  for (const unsigned char c : renewer.substr(0, 64)) {
    if (c < 0x20 || c == 0x7f || c == '\\') {
      static constexpr char kHex[] = "0123456789abcdef";
      shown += "\\x";
      shown += kHex[c >> 4];
      shown += kHex[c & 15];
    } else {
      shown += static_cast<char>(c);
    }
  }
  if (renewer.size() > 64) shown += "...";
  return {Errc::kInvalidArgument, "token.get: renewer '" + shown + "' " + why};
}
}  // namespace

Status check_renewer(std::string_view renewer) {
  if (renewer.empty()) return {};
  if (renewer.size() > kMaxRenewer) return invalid(renewer, "is longer than 1024 bytes");
  for (const unsigned char c : renewer) {
    if (c <= 0x20 || c == 0x7f) return invalid(renewer, "contains whitespace or a control character");
  }
  auto name = PrincipalName::parse(renewer);
  if (!name.ok()) return invalid(renewer, "is not a principal: " + name.status().message);
  if (name->realm && name->realm->empty()) return invalid(renewer, "has an empty realm");
  if (!name->realm && name->components.size() > 1) {
    // No rule maps "yarn/host" without a realm (Hadoop neither): it could
    // never match an authenticated caller.
    return invalid(renewer, "names a service without a realm (write yarn/host@REALM or yarn)");
  }
  return {};
}

Result<std::unique_ptr<RenewerMatcher>> RenewerMatcher::create() {
  // AuthzPolicy reads krb5's default realm for DEFAULT exactly as the
  // authorization file's auth_to_local does.
  auto policy = AuthzPolicy::from_json(
      {{"auth_to_local", {{"rules", nlohmann::json::array({"DEFAULT"})}}}});
  if (!policy.ok()) return policy.status();
  return std::unique_ptr<RenewerMatcher>(new RenewerMatcher(std::move(*policy)));
}

void RenewerMatcher::use_authorizer(std::shared_ptr<const Authorizer> authorizer) {
  authorizer_.store(std::move(authorizer));
}

bool RenewerMatcher::is_renewer(std::string_view caller, std::string_view renewer) const {
  if (renewer.empty() || caller.empty()) return false;
  if (caller == renewer) return true;
  std::shared_ptr<const AuthzPolicy> policy;
  if (const auto authorizer = authorizer_.load()) policy = authorizer->current();
  if (!policy || policy->mapper().empty()) policy = fallback_;
  const auto caller_short = policy->mapper().map(caller);
  const auto renewer_short = policy->mapper().map(renewer);
  return caller_short.ok() && renewer_short.ok() && *caller_short == *renewer_short;
}

}  // namespace authrpc
