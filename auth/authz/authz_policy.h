// AuthzPolicy: one parsed authorization file (docs/AUTHZ.md): auth_to_local
// rules, where groups come from, admins, per-service and per-method ACLs, the
// default for unlisted services, and proxy-user (doAs) rules. Immutable once
// built; the Authorizer swaps whole policies on reload, so a connection or
// call always sees one consistent policy.
#pragma once

#include <chrono>
#include <cstddef>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "authrpc/auth/authz/acl.h"
#include "authrpc/auth/authz/group_cache.h"
#include "authrpc/auth/authz/principal_mapper.h"
#include "authrpc/auth/identity.h"
#include "authrpc/base/result.h"

namespace authrpc {

class AuthzPolicy {
 public:
  // Strict: unknown keys, wrong types, bad rules, CIDRs or regexes are
  // CONFIG_ERROR naming the key.
  static Result<std::shared_ptr<const AuthzPolicy>> from_json(const nlohmann::json& j);
  static Result<std::shared_ptr<const AuthzPolicy>> load(const std::string& path);

  // Connection time, after the mechanism succeeded: maps the principal to
  // its short name (Identity::user), then, if `do_as` is non-empty, checks
  // the proxy-user rules and turns `id` into the impersonated user with
  // real_user set. An identity made by a delegation-token mechanism
  // (Identity::mechanism_traits) never acts as another user, as Hadoop
  // refuses doAs over token authentication. Fills `groups` with the
  // effective user's groups.
  // PERMISSION_DENIED with the reason on refusal.
  Status establish(Identity& id, std::string_view do_as, std::vector<std::string>& groups) const;

  // Call time: OK when `who` may call service.method, else
  // PERMISSION_DENIED with the reason.
  Status check_call(const Subject& who, std::string_view service, std::string_view method) const;
  bool is_admin(const Subject& who) const { return admins_.check(who).ok(); }
  // True if no caller can pass check_call() for any method of `service`:
  // it is not listed and the default is deny, or its ACL lists nobody.
  // The server warns of such services at start (a `default: deny` that
  // forgets the token service refuses every token.get).
  bool nobody_may_call(std::string_view service) const;

  std::vector<std::string> groups_of(const std::string& user) const;
  // The groups of an authenticated `id`: those of id.user from the server's
  // source, then those its mechanism vouches for (Identity::groups) that are
  // not among them.
  std::vector<std::string> groups_of(const Identity& id) const;
  const PrincipalMapper& mapper() const noexcept { return mapper_; }

 private:
  static Result<std::shared_ptr<const AuthzPolicy>> read(const nlohmann::json& j);
  // read()'s steps, one per top-level key of the file.
  Status read_auth_to_local(const nlohmann::json& j);
  Status read_groups(const nlohmann::json& j, std::chrono::milliseconds& cache_ttl,
                     std::size_t& cache_size);
  Status read_admins_and_default(const nlohmann::json& j);
  Status read_services(const nlohmann::json& j);
  Status read_proxy_users(const nlohmann::json& j);

  struct ServiceAcl {
    std::optional<Acl> acl;  // absent: the default decision
    std::map<std::string, Acl, std::less<>> methods;
  };
  struct ProxyRule {
    Acl targets;  // which users/groups may be impersonated
    NetworkSet hosts;  // from where the proxy may connect
  };

  PrincipalMapper mapper_;
  bool map_principals_ = false;
  bool os_groups_ = true;
  // OS groups (getgrouplist through NSS), kept `groups.cache_ttl_ms`; null
  // when the TTL is 0 (every connection looks them up).
  std::shared_ptr<GroupCache> os_group_cache_;
  std::map<std::string, std::vector<std::string>, std::less<>> static_groups_;
  Acl admins_ = Acl::deny_all();
  bool default_allow_ = true;
  std::map<std::string, ServiceAcl, std::less<>> services_;
  std::map<std::string, ProxyRule, std::less<>> proxy_users_;
};

}  // namespace authrpc
