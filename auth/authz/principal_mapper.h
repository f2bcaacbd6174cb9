// PrincipalMapper: turns an authenticated principal ("nn/host@EXAMPLE.COM")
// into a short local user name ("hdfs") with auth_to_local rules, as MIT
// Kerberos (krb5.conf auth_to_local) and Hadoop (hadoop.security.
// auth_to_local) do. Built once from configuration by AuthzPolicy and then
// immutable, so any thread may call map(). Rule syntax and semantics:
// docs/AUTHZ.md, "Principal mapping".
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "authrpc/base/result.h"

namespace authrpc {

class AuthToLocalRegex;  // principal_mapper.cc

// A principal split into its components and realm: "a/b@R" → {a, b}, "R".
// Backslash escapes a separator ("a\/b@R" is one component "a/b").
struct PrincipalName {
  std::vector<std::string> components;
  std::optional<std::string> realm;  // absent when the name has no '@'

  static Result<PrincipalName> parse(std::string_view text);
};

class PrincipalMapper {
 public:
  // "hadoop": a principal no rule maps is refused (Hadoop's NoMatchingRule).
  // "mit": such a principal keeps its full name (Hadoop's "mit" mechanism).
  enum class Fallback { kRefuse, kKeepFullName };

  // Parses rules such as `RULE:[2:$1@$0](.*@EXAMPLE\.COM)s/@.*//L` and
  // `DEFAULT`. `default_realm` is the realm DEFAULT strips.
  static Result<PrincipalMapper> create(const std::vector<std::string>& rules,
                                        std::string default_realm,
                                        Fallback fallback = Fallback::kRefuse);

  // The short name for `principal`. A name without a realm (e.g. from the
  // `simple` mechanism) is returned unchanged. PERMISSION_DENIED when no rule
  // applies (and the fallback refuses) or a rule yields a name containing
  // '/' or '@'.
  Result<std::string> map(std::string_view principal) const;

  bool empty() const noexcept { return rules_.empty(); }
  const std::string& default_realm() const noexcept { return default_realm_; }

 private:
  struct Rule {
    std::string text;  // as written, for messages
    bool is_default = false;
    std::size_t components = 0;
    std::string format;
    std::shared_ptr<const AuthToLocalRegex> match;  // null: none
    std::shared_ptr<const AuthToLocalRegex> from;
    std::string to;
    bool global = false;
    bool lowercase = false;
  };
  // nullopt: the rule does not apply. An error: it applied but was unusable.
  Result<std::optional<std::string>> apply(const Rule& rule, const PrincipalName& name) const;

  std::vector<Rule> rules_;
  std::string default_realm_;
  Fallback fallback_ = Fallback::kRefuse;
};

}  // namespace authrpc
