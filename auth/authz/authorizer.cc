#include "authrpc/auth/authz/authorizer.h"

namespace authrpc {

Result<std::shared_ptr<Authorizer>> Authorizer::from_file(std::string path) {
  auto policy = AuthzPolicy::load(path);
  if (!policy.ok()) return policy.status();
  auto a = std::make_shared<Authorizer>();
  a->path_ = std::move(path);
  a->policy_.store(std::move(*policy));
  a->generation_ = 1;
  return a;
}

std::shared_ptr<Authorizer> Authorizer::from_policy(std::shared_ptr<const AuthzPolicy> policy) {
  auto a = std::make_shared<Authorizer>();
  a->policy_.store(std::move(policy));
  a->generation_ = 1;
  return a;
}

Status Authorizer::reload() {
  if (path_.empty()) return {Errc::kFailedPrecondition, "the policy was not loaded from a file"};
  std::lock_guard lock(reload_mu_);
  auto policy = AuthzPolicy::load(path_);
  if (!policy.ok()) return policy.status();  // the old policy stays in force
  policy_.store(std::move(*policy));
  ++generation_;
  return {};
}

}  // namespace authrpc
