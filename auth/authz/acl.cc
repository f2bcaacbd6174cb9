#include "authrpc/auth/authz/acl.h"

#include <arpa/inet.h>

#include <cstring>

namespace authrpc {
namespace {

Status config_error(std::string m) { return {Errc::kConfigError, std::move(m)}; }

// Parses an address without port into 4 or 16 bytes. IPv4-mapped IPv6
// addresses become IPv4 so that v4 blocks match dual-stack peers.
bool parse_address(const std::string& text, bool& v6, std::array<std::uint8_t, 16>& bytes) {
  bytes.fill(0);
  if (inet_pton(AF_INET, text.c_str(), bytes.data()) == 1) {
    v6 = false;
    return true;
  }
  if (inet_pton(AF_INET6, text.c_str(), bytes.data()) != 1) return false;
  static constexpr std::uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  if (std::memcmp(bytes.data(), kMapped, 12) == 0) {
    std::memmove(bytes.data(), bytes.data() + 12, 4);
    std::memset(bytes.data() + 4, 0, 12);
    v6 = false;
    return true;
  }
  v6 = true;
  return true;
}

bool in_block(const std::array<std::uint8_t, 16>& a, const std::array<std::uint8_t, 16>& block,
              unsigned prefix) {
  const unsigned full = prefix / 8, rest = prefix % 8;
  if (std::memcmp(a.data(), block.data(), full) != 0) return false;
  if (rest == 0) return true;
  const auto mask = static_cast<std::uint8_t>(0xff << (8 - rest));
  return (a[full] & mask) == (block[full] & mask);
}

Status read_strings(const nlohmann::json& j, const char* key, const std::string& where,
                    std::vector<std::string>& out) {
  if (!j.contains(key)) return {};
  const auto& v = j[key];
  if (!v.is_array()) return config_error("'" + where + key + "' must be an array of strings");
  for (const auto& e : v) {
    if (!e.is_string() || e.get<std::string>().empty()) {
      return config_error("'" + where + key + "' must be an array of non-empty strings");
    }
    out.push_back(e.get<std::string>());
  }
  return {};
}

}  // namespace

Result<NetworkSet> NetworkSet::parse(const std::vector<std::string>& entries) {
  NetworkSet set;
  for (const auto& e : entries) {
    if (e == "*") {
      set.any_ = true;
      continue;
    }
    if (e == "unix") {
      set.unix_ = true;
      continue;
    }
    Block b;
    const auto slash = e.find('/');
    const std::string addr = e.substr(0, slash);
    if (!parse_address(addr, b.v6, b.bytes)) {
      return config_error("'" + e + "' is not an IP address, CIDR block, \"unix\" or \"*\"");
    }
    const unsigned max = b.v6 ? 128 : 32;
    b.prefix = max;
    if (slash != std::string::npos) {
      const std::string len = e.substr(slash + 1);
      if (len.empty() || len.size() > 3 ||
          len.find_first_not_of("0123456789") != std::string::npos ||
          std::stoul(len) > max) {
        return config_error("bad prefix length in '" + e + "'");
      }
      // A v4-mapped v6 block such as ::ffff:10.0.0.0/104 becomes 10.0.0.0/8.
      b.prefix = static_cast<unsigned>(std::stoul(len));
      if (!b.v6 && addr.find(':') != std::string::npos) {
        if (b.prefix < 96) return config_error("bad prefix length in '" + e + "'");
        b.prefix -= 96;
      }
    }
    set.blocks_.push_back(b);
  }
  return set;
}

bool NetworkSet::contains(std::string_view peer) const {
  if (any_) return true;
  if (peer.starts_with("unix:")) return unix_;
  if (blocks_.empty()) return false;
  std::string host;
  if (peer.starts_with("[")) {
    const auto close = peer.find(']');
    if (close == std::string_view::npos) return false;
    host = peer.substr(1, close - 1);
  } else {
    const auto colon = peer.rfind(':');
    host = peer.substr(0, colon);
  }
  bool v6 = false;
  std::array<std::uint8_t, 16> bytes;
  if (!parse_address(host, v6, bytes)) return false;
  for (const auto& b : blocks_) {
    if (b.v6 == v6 && in_block(bytes, b.bytes, b.prefix)) return true;
  }
  return false;
}

Result<Acl> Acl::from_json(const nlohmann::json& j, const std::string& where) {
  if (!j.is_object()) return config_error("'" + where + "' must be an object");
  static const std::set<std::string> kKeys = {"users", "groups", "blocked_users",
                                              "blocked_groups", "networks", "blocked_networks"};
  for (const auto& [key, _] : j.items()) {
    if (!kKeys.contains(key)) return config_error("unknown key '" + where + "." + key + "'");
  }
  Acl acl;
  std::vector<std::string> users, groups, blocked_users, blocked_groups, networks, blocked;
  const std::string w = where + ".";
  for (auto [key, out] : {std::pair{"users", &users}, {"groups", &groups},
                          {"blocked_users", &blocked_users}, {"blocked_groups", &blocked_groups},
                          {"networks", &networks}, {"blocked_networks", &blocked}}) {
    if (Status s = read_strings(j, key, w, *out); !s.ok()) return s;
  }
  for (auto& u : users) {
    if (u == "*") acl.all_users_ = true;
    else acl.users_.insert(std::move(u));
  }
  for (auto& g : groups) {
    if (g == "*") acl.all_users_ = true;
    else acl.groups_.insert(std::move(g));
  }
  acl.blocked_users_.insert(blocked_users.begin(), blocked_users.end());
  acl.blocked_groups_.insert(blocked_groups.begin(), blocked_groups.end());
  if (j.contains("networks")) {
    auto set = NetworkSet::parse(networks);
    if (!set.ok()) return config_error("'" + w + "networks': " + set.status().message);
    acl.networks_ = std::move(*set);
  }
  auto set = NetworkSet::parse(blocked);
  if (!set.ok()) return config_error("'" + w + "blocked_networks': " + set.status().message);
  acl.blocked_networks_ = std::move(*set);
  return acl;
}

Acl Acl::allow_all() {
  Acl acl;
  acl.all_users_ = true;
  return acl;
}

Acl Acl::deny_all() { return Acl(); }

Status Acl::check(const Subject& who) const {
  const auto denied = [](std::string why) {
    return Status(Errc::kPermissionDenied, std::move(why));
  };
  if (blocked_users_.contains(who.user)) {
    return denied("user '" + std::string(who.user) + "' is blocked");
  }
  if (who.groups != nullptr && !blocked_groups_.empty()) {
    for (const auto& g : *who.groups) {
      if (blocked_groups_.contains(g)) return denied("group '" + g + "' is blocked");
    }
  }
  if (blocked_networks_.contains(who.peer)) {
    return denied("client address " + std::string(who.peer) + " is blocked");
  }
  if (networks_ && !networks_->contains(who.peer)) {
    return denied("client address " + std::string(who.peer) + " is not in an allowed network");
  }
  if (all_users_ || users_.contains(who.user)) return {};
  if (who.groups != nullptr) {
    for (const auto& g : *who.groups) {
      if (groups_.contains(g)) return {};
    }
  }
  return denied("user '" + std::string(who.user) + "' is not in the allowed users or groups");
}

}  // namespace authrpc
