// Authorizer: holds the AuthzPolicy in force and replaces it on reload
// (SIGHUP in authrpc-server, or the admin RPC sys.reload_authz). A reload
// parses the whole new file first; a broken file is refused and the old
// policy stays. The swap is atomic: every connection step and call takes
// one snapshot (a shared_ptr) and uses it throughout. Thread-safe.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>

#include "authrpc/auth/authz/authz_policy.h"

namespace authrpc {

class Authorizer {
 public:
  // Loads `path`; fails if the file is missing or invalid.
  static Result<std::shared_ptr<Authorizer>> from_file(std::string path);
  // A fixed policy (tests, applications configuring in code); reload() then
  // fails with FAILED_PRECONDITION.
  static std::shared_ptr<Authorizer> from_policy(std::shared_ptr<const AuthzPolicy> policy);

  std::shared_ptr<const AuthzPolicy> current() const { return policy_.load(); }
  // Re-reads the file. OK: the new policy is in force. Error: the old one is.
  Status reload();
  // How many policies have been installed (1 after construction).
  std::uint64_t generation() const { return generation_.load(); }
  const std::string& path() const noexcept { return path_; }

 private:
  std::string path_;
  std::mutex reload_mu_;  // one reload at a time
  std::atomic<std::shared_ptr<const AuthzPolicy>> policy_;
  std::atomic<std::uint64_t> generation_{0};
};

}  // namespace authrpc
