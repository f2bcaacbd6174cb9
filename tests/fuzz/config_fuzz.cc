// Fuzz target: the files a server reads at startup and on reload — the
// authorization (ACL) file (auth/authz/authz_policy.h: auth_to_local rules,
// groups, admins, service and method ACLs, proxy users, network sets) and the
// server configuration (server/server_config.h: server_options_from_json on
// the file's JSON, parsed as the loader does; its "tokens" section through
// server/token_service.h). These come from administrators, not peers, but a
// typo must be a CONFIG_ERROR naming the key, never a crash or a hang.
//
// Input: a mode byte, then
//   0: an ACL file; what loads is then asked about a few callers (mapping a
//      principal, proxy-user checks, call checks);
//   1: a u16 length and an ACL file (written as acl.json), then a server
//      configuration that may refer to it.
// Both are written into a scratch directory that is the working directory
// of the process, and inputs with a string naming an absolute path or ".."
// are skipped, so that an audit_log named in a configuration lands there and
// nothing outside is read (a "/dev/zero" ACL file would never end).
#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <unistd.h>
#include <vector>

#include <nlohmann/json.hpp>

#include "authrpc/auth/authz/authz_policy.h"
#include "authrpc/auth/mechanism_registry.h"
#include "authrpc/server/server_config.h"
#include "authrpc/server/token_service.h"
#include "tests/fuzz/fuzz_support.h"

namespace authrpc::fuzz {
namespace {

const ScratchDir& scratch() {
  static const ScratchDir dir("config");
  static const bool entered = ::chdir(dir.path().c_str()) == 0;
  if (!entered) fail("chdir to the scratch directory");
  return dir;
}

// True if `s` could name a file outside the working directory: an absolute
// path, a way up, or a krb5-style "TYPE:/path". Endpoint URIs are not opened.
bool outside(const std::string& s) {
  if (s.starts_with("tcp://") || s.starts_with("tls://") || s.starts_with("unix:")) return false;
  return s.starts_with('/') || s.starts_with('~') || s.find("..") != std::string::npos ||
         s.find(":/") != std::string::npos;
}

bool names_outside(const nlohmann::json& j) {
  if (j.is_string()) return outside(j.get<std::string>());
  if (j.is_structured()) {
    for (const auto& item : j) {
      if (names_outside(item)) return true;
    }
  }
  return false;
}

// The JSON as the loaders parse it (comments allowed); null if it is not JSON.
nlohmann::json parse(std::string_view text) {
  auto j = nlohmann::json::parse(text, nullptr, false, true);
  return j.is_discarded() ? nlohmann::json() : j;
}

// false: the input names files outside the scratch directory (skipped).
bool acl_file(std::string_view text) {
  if (names_outside(parse(text))) return false;
  const std::string path = scratch().write("acl.json", text);
  auto policy = AuthzPolicy::load(path);
  if (!policy.ok()) return true;
  const std::vector<std::string> groups = {"staff", "admins"};
  for (const char* principal : {"alice@EXAMPLE.COM", "rpc/host.example.com@EXAMPLE.COM", "bob"}) {
    for (const char* do_as : {"", "carol"}) {
      Identity id;
      id.principal = principal;
      id.user = principal;
      id.mechanism = "kerberos";
      id.peer_address = "10.1.2.3:4000";
      std::vector<std::string> found;
      (void)(*policy)->establish(id, do_as, found);
    }
  }
  for (const char* peer : {"127.0.0.1:1", "[::1]:2", "unix:/run/x", "garbage"}) {
    const Subject who{"alice", &groups, peer};
    (void)(*policy)->check_call(who, "data", "read");
    (void)(*policy)->check_call(who, "authrpc.token", "get");
    (void)(*policy)->is_admin(who);
  }
  return true;
}

bool server_config(std::string_view data) {
  const std::size_t n = data.size() < 2 ? 0
                                        : (std::size_t{static_cast<std::uint8_t>(data[0])} << 8 |
                                           static_cast<std::uint8_t>(data[1]));
  data.remove_prefix(std::min<std::size_t>(2, data.size()));
  const std::string_view acl = data.substr(0, n);
  data.remove_prefix(acl.size());
  const auto config = parse(data);
  if (names_outside(config) || names_outside(parse(acl))) return false;
  scratch().write("acl.json", acl);
  // The options as authrpc-server reads them, opening nothing that lives on
  // (a token service would start a store, a sweeper thread, a ZooKeeper
  // session): the "tokens" section's options, then the rest with the
  // built-in mechanisms (the ACL file and an audit log are opened).
  static const auto stores = security::TokenStoreRegistry::with_builtins();
  if (config.is_object() && config.contains("tokens")) {
    (void)token_service_options_from_json(config["tokens"], stores);
  }
  static const MechanismRegistry registry = MechanismRegistry::with_builtins();
  (void)server_options_from_json(config, registry, stores);
  return true;
}

}  // namespace

int fuzz_input(std::uint8_t first, std::string_view data) {
  const auto mode = first % 2;
  scratch().clear();
  const bool tried = mode == 0 ? acl_file(data) : server_config(data);
  return tried ? 0 : -1;  // -1: libFuzzer does not keep the input
}

}  // namespace authrpc::fuzz
