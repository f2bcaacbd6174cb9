// Access control lists: who (users, groups) from where (client networks) may
// call a service or method. An Acl is built from the ACL file by AuthzPolicy
// and immutable afterwards, so any IO thread may evaluate it. File format and
// semantics: docs/AUTHZ.md, "ACLs".
#pragma once

#include <array>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "authrpc/base/result.h"

namespace authrpc {

// A set of client addresses: IPv4/IPv6 CIDR blocks ("10.0.0.0/8",
// "::1/128", a bare address = a single host), "unix" (peers on a Unix-domain
// socket, which have no address) and "*" (everyone, Unix peers included).
class NetworkSet {
 public:
  static Result<NetworkSet> parse(const std::vector<std::string>& entries);

  // `peer` as ServerConnection reports it: "1.2.3.4:port", "[::1]:port",
  // or "unix:..." for a Unix-socket peer. An unparsable peer matches only "*".
  bool contains(std::string_view peer) const;
  bool empty() const noexcept { return blocks_.empty() && !unix_ && !any_; }

 private:
  struct Block {
    bool v6 = false;
    std::array<std::uint8_t, 16> bytes{};
    unsigned prefix = 0;
  };
  std::vector<Block> blocks_;
  bool unix_ = false;
  bool any_ = false;
};

// The caller as an ACL sees it.
struct Subject {
  std::string_view user;
  const std::vector<std::string>* groups = nullptr;  // may be null: none
  std::string_view peer;
};

// One ACL: allowed users/groups ("*" = everyone), blocked users/groups
// (blocked wins), allowed networks (absent = any) and blocked networks.
class Acl {
 public:
  // Keys: users, groups, blocked_users, blocked_groups, networks,
  // blocked_networks (all arrays of strings; unknown keys refused).
  static Result<Acl> from_json(const nlohmann::json& j, const std::string& where);
  static Acl allow_all();
  static Acl deny_all();

  // OK when allowed; otherwise PERMISSION_DENIED with the reason (no secret,
  // names the rule).
  Status check(const Subject& who) const;
  // True if no subject can pass: no user, group or `*` is listed.
  bool admits_nobody() const noexcept { return !all_users_ && users_.empty() && groups_.empty(); }

 private:
  bool all_users_ = false;
  std::set<std::string, std::less<>> users_, groups_, blocked_users_, blocked_groups_;
  std::optional<NetworkSet> networks_;
  NetworkSet blocked_networks_;
};

}  // namespace authrpc
