// The renewer of a delegation token, handled as Hadoop handles it
// (docs/TOKENS.md §9): checked when token.get issues a token, and compared
// through the principal mapping when token.renew or token.cancel is called,
// so that a token fetched with `--renewer yarn` renews as yarn@REALM. The
// renewer is stored as given; only the comparison maps names. Owned by the
// TokenService; thread-safe.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <string_view>

#include "authrpc/auth/authz/authorizer.h"
#include "authrpc/base/result.h"

namespace authrpc {

// INVALID_ARGUMENT naming the problem when `renewer` can name no principal:
// control bytes or whitespace, an empty component ("yarn/", "a//b"), more
// than one '@', an empty realm ("yarn@"), a service name without a realm
// ("yarn/host"), or over 1024 bytes. "" (nobody may renew) is valid.
Status check_renewer(std::string_view renewer);

class RenewerMatcher {
 public:
  // Maps with Hadoop's default rule (DEFAULT: a principal of krb5's default
  // realm maps to its first component) until use_authorizer() is called.
  static Result<std::unique_ptr<RenewerMatcher>> create();

  // Maps with this authorizer's auth_to_local rules from now on (its
  // current policy at each call, so a reload applies); null or a policy
  // without rules: back to the default rule.
  void use_authorizer(std::shared_ptr<const Authorizer> authorizer);

  // True if `caller` (a principal as authenticated) is `renewer`: the same
  // string, or both map to the same short name.
  bool is_renewer(std::string_view caller, std::string_view renewer) const;

 private:
  explicit RenewerMatcher(std::shared_ptr<const AuthzPolicy> fallback) : fallback_(std::move(fallback)) {}

  std::shared_ptr<const AuthzPolicy> fallback_;  // auth_to_local: DEFAULT only
  std::atomic<std::shared_ptr<const Authorizer>> authorizer_;
};

}  // namespace authrpc
