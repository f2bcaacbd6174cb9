#include "authrpc/auth/authz/authz_policy.h"

#include "authrpc/auth/authz/default_realm.h"
#include "authrpc/rpc/json_document.h"

#include <grp.h>
#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>

namespace authrpc {
namespace {

Status policy_error(std::string m) { return {Errc::kConfigError, std::move(m)}; }
Status policy_denied(std::string m) { return {Errc::kPermissionDenied, std::move(m)}; }

Status check_keys(const nlohmann::json& j, const std::string& where,
                  const std::set<std::string>& allowed) {
  if (!j.is_object()) return policy_error("'" + where + "' must be an object");
  for (const auto& [key, _] : j.items()) {
    if (!allowed.contains(key)) return policy_error("unknown key '" + where + "." + key + "'");
  }
  return {};
}

// getgrouplist() for `user`: names of its primary and supplementary groups.
// Empty if the OS does not know the user.
std::vector<std::string> os_groups(const std::string& user) {
  std::vector<std::string> out;
  long size = sysconf(_SC_GETPW_R_SIZE_MAX);
  std::vector<char> buf(size > 0 ? static_cast<std::size_t>(size) : 16384);
  passwd pw{};
  passwd* found = nullptr;
  if (getpwnam_r(user.c_str(), &pw, buf.data(), buf.size(), &found) != 0 || found == nullptr) {
    return out;
  }
  int n = 32;
  std::vector<gid_t> gids(static_cast<std::size_t>(n));
  while (getgrouplist(user.c_str(), pw.pw_gid, gids.data(), &n) == -1) {
    gids.resize(static_cast<std::size_t>(n) + 32);
    n = static_cast<int>(gids.size());
  }
  gids.resize(static_cast<std::size_t>(n));
  long gsize = sysconf(_SC_GETGR_R_SIZE_MAX);
  std::vector<char> gbuf(gsize > 0 ? static_cast<std::size_t>(gsize) : 16384);
  for (const gid_t gid : gids) {
    group gr{};
    group* g = nullptr;
    int rc;
    while ((rc = getgrgid_r(gid, &gr, gbuf.data(), gbuf.size(), &g)) == ERANGE) {
      gbuf.resize(gbuf.size() * 2);
    }
    if (rc == 0 && g != nullptr) out.emplace_back(g->gr_name);
  }
  return out;
}

}  // namespace

Result<std::shared_ptr<const AuthzPolicy>> AuthzPolicy::from_json(const nlohmann::json& j) {
  return read_config_guarded("ACL", [&] { return read(j); });
}

Result<std::shared_ptr<const AuthzPolicy>> AuthzPolicy::read(const nlohmann::json& j) {
  if (Status s = check_keys(j, "(acl file)",
                            {"auth_to_local", "groups", "admins", "default", "services",
                             "proxy_users"});
      !s.ok()) {
    return s;
  }
  auto p = std::make_shared<AuthzPolicy>();
  std::chrono::milliseconds group_cache_ttl(300000);  // Hadoop's groups cache: 300 s
  std::size_t group_cache_size = 65536;
  // One step per top-level key, in the order the file format lists them.
  if (Status s = p->read_auth_to_local(j); !s.ok()) return s;
  if (Status s = p->read_groups(j, group_cache_ttl, group_cache_size); !s.ok()) return s;
  if (Status s = p->read_admins_and_default(j); !s.ok()) return s;
  if (Status s = p->read_services(j); !s.ok()) return s;
  if (Status s = p->read_proxy_users(j); !s.ok()) return s;
  if (p->os_groups_ && group_cache_ttl.count() > 0) {
    p->os_group_cache_ = std::make_shared<GroupCache>(&os_groups, group_cache_ttl, group_cache_size);
  }
  return std::shared_ptr<const AuthzPolicy>(std::move(p));
}

// "auth_to_local": the rules that map a principal to its short name.
Status AuthzPolicy::read_auth_to_local(const nlohmann::json& j) {
  if (!j.contains("auth_to_local")) return {};
  const auto& a = j["auth_to_local"];
  if (Status s = check_keys(a, "auth_to_local", {"rules", "default_realm", "mechanism"}); !s.ok()) {
    return s;
  }
  std::vector<std::string> rules;
  if (!a.contains("rules") || !a["rules"].is_array()) {
    return policy_error("'auth_to_local.rules' must be an array of rule strings");
  }
  for (const auto& r : a["rules"]) {
    if (!r.is_string()) return policy_error("'auth_to_local.rules' entries must be strings");
    rules.push_back(r.get<std::string>());
  }
  std::string realm;
  if (a.contains("default_realm")) {
    if (!a["default_realm"].is_string()) {
      return policy_error("'auth_to_local.default_realm' must be a string");
    }
    realm = a["default_realm"].get<std::string>();
  } else {
    realm = krb5_default_realm();
  }
  auto fallback = PrincipalMapper::Fallback::kRefuse;
  if (a.contains("mechanism")) {
    const auto& m = a["mechanism"];
    if (m == "mit") {
      fallback = PrincipalMapper::Fallback::kKeepFullName;
    } else if (m != "hadoop") {
      return policy_error("'auth_to_local.mechanism' must be \"hadoop\" or \"mit\"");
    }
  }
  auto mapper = PrincipalMapper::create(rules, realm, fallback);
  if (!mapper.ok()) return policy_error("'auth_to_local.rules': " + mapper.status().message);
  mapper_ = std::move(*mapper);
  map_principals_ = true;
  return {};
}

// "groups": where a user's groups come from (the OS or a static table), and
// how long and how many of the OS's answers are kept.
Status AuthzPolicy::read_groups(const nlohmann::json& j, std::chrono::milliseconds& cache_ttl,
                                std::size_t& cache_size) {
  if (!j.contains("groups")) return {};
  const auto& g = j["groups"];
  if (Status s = check_keys(g, "groups", {"source", "static", "cache_ttl_ms", "cache_size"}); !s.ok()) {
    return s;
  }
  if (g.contains("source") && g["source"] != "os" && g["source"] != "static") {
    return policy_error("'groups.source' must be \"os\" or \"static\"");
  }
  os_groups_ = !g.contains("source") || g["source"] == "os";
  for (const char* key : {"cache_ttl_ms", "cache_size"}) {
    if (g.contains(key) && (!g[key].is_number_unsigned() || g[key].get<std::uint64_t>() > (1ull << 32))) {
      return policy_error(std::string("'groups.") + key + "' must be an integer 0 … 2^32");
    }
  }
  cache_ttl = std::chrono::milliseconds(g.value("cache_ttl_ms", std::uint64_t{300000}));
  cache_size = g.value("cache_size", std::size_t{65536});
  if (g.contains("static")) {
    if (!g["static"].is_object()) return policy_error("'groups.static' must be an object");
    for (const auto& [user, list] : g["static"].items()) {
      if (!list.is_array()) return policy_error("'groups.static." + user + "' must be an array");
      auto& out = static_groups_[user];
      for (const auto& name : list) {
        if (!name.is_string()) {
          return policy_error("'groups.static." + user + "' entries must be strings");
        }
        out.push_back(name.get<std::string>());
      }
    }
  }
  return {};
}

// "admins" (who may call admin methods) and "default" (the decision for
// services the file does not list).
Status AuthzPolicy::read_admins_and_default(const nlohmann::json& j) {
  if (j.contains("admins")) {
    auto admins = Acl::from_json(j["admins"], "admins");
    if (!admins.ok()) return admins.status();
    admins_ = std::move(*admins);
  }
  if (j.contains("default")) {
    if (j["default"] != "allow" && j["default"] != "deny") {
      return policy_error("'default' must be \"allow\" or \"deny\"");
    }
    default_allow_ = j["default"] == "allow";
  }
  return {};
}

// "services": per service, its ACL and its methods' own ACLs.
Status AuthzPolicy::read_services(const nlohmann::json& j) {
  if (!j.contains("services")) return {};
  if (!j["services"].is_object()) return policy_error("'services' must be an object");
  for (const auto& [name, entry] : j["services"].items()) {
    const std::string where = "services." + name;
    if (!entry.is_object()) return policy_error("'" + where + "' must be an object");
    ServiceAcl service;
    nlohmann::json own = entry;
    if (entry.contains("methods")) {
      if (!entry["methods"].is_object()) {
        return policy_error("'" + where + ".methods' must be an object");
      }
      for (const auto& [method, acl] : entry["methods"].items()) {
        auto parsed = Acl::from_json(acl, where + ".methods." + method);
        if (!parsed.ok()) return parsed.status();
        service.methods.emplace(method, std::move(*parsed));
      }
      own.erase("methods");
    }
    if (!own.empty()) {
      auto parsed = Acl::from_json(own, where);
      if (!parsed.ok()) return parsed.status();
      service.acl = std::move(*parsed);
    }
    services_.emplace(name, std::move(service));
  }
  return {};
}

// "proxy_users": who may act as whom (doAs), and from which hosts.
Status AuthzPolicy::read_proxy_users(const nlohmann::json& j) {
  if (!j.contains("proxy_users")) return {};
  if (!j["proxy_users"].is_object()) return policy_error("'proxy_users' must be an object");
  for (const auto& [proxy, entry] : j["proxy_users"].items()) {
    const std::string where = "proxy_users." + proxy;
    if (Status s = check_keys(entry, where, {"users", "groups", "hosts"}); !s.ok()) return s;
    nlohmann::json targets = nlohmann::json::object();
    if (entry.contains("users")) targets["users"] = entry["users"];
    if (entry.contains("groups")) targets["groups"] = entry["groups"];
    auto acl = Acl::from_json(targets, where);
    if (!acl.ok()) return acl.status();
    if (!entry.contains("hosts") || !entry["hosts"].is_array()) {
      return policy_error("'" + where + ".hosts' must be an array (\"*\" for any host)");
    }
    std::vector<std::string> hosts;
    for (const auto& h : entry["hosts"]) {
      if (!h.is_string()) return policy_error("'" + where + ".hosts' entries must be strings");
      hosts.push_back(h.get<std::string>());
    }
    auto set = NetworkSet::parse(hosts);
    if (!set.ok()) return policy_error("'" + where + ".hosts': " + set.status().message);
    proxy_users_.emplace(proxy, ProxyRule{std::move(*acl), std::move(*set)});
  }
  return {};
}

Result<std::shared_ptr<const AuthzPolicy>> AuthzPolicy::load(const std::string& path) {
  auto j = read_json_document(path, "ACL file");
  if (!j.ok()) return j.status();
  auto policy = from_json(*j);
  if (!policy.ok()) return policy_error(path + ": " + policy.status().message);
  return policy;
}

std::vector<std::string> AuthzPolicy::groups_of(const std::string& user) const {
  if (!os_groups_) {
    const auto it = static_groups_.find(user);
    return it == static_groups_.end() ? std::vector<std::string>() : it->second;
  }
  return os_group_cache_ ? os_group_cache_->groups(user) : os_groups(user);
}

std::vector<std::string> AuthzPolicy::groups_of(const Identity& id) const {
  std::vector<std::string> groups = groups_of(id.user);
  for (const std::string& g : id.groups) {
    if (std::find(groups.begin(), groups.end(), g) == groups.end()) groups.push_back(g);
  }
  return groups;
}

Status AuthzPolicy::establish(Identity& id, std::string_view do_as,
                              std::vector<std::string>& groups) const {
  if (map_principals_) {
    auto name = mapper_.map(id.principal.empty() ? id.user : id.principal);
    if (!name.ok()) return name.status();
    id.user = std::move(*name);
  }
  groups = groups_of(id);
  if (do_as.empty() || do_as == id.user) return {};

  const std::string who = id.principal.empty() ? id.user : id.principal;
  if (id.mechanism_traits.delegation_token) {
    return policy_denied(who + " may not act as another user on a token-authenticated connection");
  }
  const auto rule = proxy_users_.find(id.user);
  if (rule == proxy_users_.end()) {
    return policy_denied(id.user + " is not allowed to impersonate anyone");
  }
  if (!rule->second.hosts.contains(id.peer_address)) {
    return policy_denied(id.user + " may not impersonate from " + id.peer_address);
  }
  const std::string target(do_as);
  std::vector<std::string> target_groups = groups_of(target);
  if (!rule->second.targets.check({target, &target_groups, id.peer_address}).ok()) {
    return policy_denied(id.user + " is not allowed to impersonate " + target);
  }
  id.real_user = who;
  id.user = target;
  id.principal = target;
  id.realm.clear();
  id.groups.clear();
  groups = std::move(target_groups);
  return {};
}

Status AuthzPolicy::check_call(const Subject& who, std::string_view service,
                               std::string_view method) const {
  const auto s = services_.find(service);
  if (s == services_.end()) {
    if (default_allow_) return {};
    return policy_denied("service '" + std::string(service) + "' is not listed and the default is deny");
  }
  if (s->second.acl) {
    if (Status refused = s->second.acl->check(who); !refused.ok()) return refused;
  } else if (!default_allow_ && s->second.methods.find(method) == s->second.methods.end()) {
    return policy_denied("method '" + std::string(service) + "." + std::string(method) +
                  "' has no ACL and the default is deny");
  }
  const auto m = s->second.methods.find(method);
  if (m != s->second.methods.end()) {
    if (Status refused = m->second.check(who); !refused.ok()) return refused;
  }
  return {};
}

bool AuthzPolicy::nobody_may_call(std::string_view service) const {
  const auto it = services_.find(service);
  if (it == services_.end()) return !default_allow_;
  if (it->second.acl) return it->second.acl->admits_nobody();
  // No ACL of its own: the default decides for its unlisted methods.
  if (default_allow_) return false;
  for (const auto& [method, acl] : it->second.methods) {
    if (!acl.admits_nobody()) return false;
  }
  return true;
}

}  // namespace authrpc
