#include "authrpc/client/connection_summary.h"

namespace authrpc {

void ConnectionSummary::authenticated(std::string&& mechanism, std::string&& user) {
  std::lock_guard lock(mu_);
  mechanism_ = std::move(mechanism);
  user_ = std::move(user);
}

std::string ConnectionSummary::mechanism() const {
  std::lock_guard lock(mu_);
  return mechanism_;
}

std::string ConnectionSummary::user() const {
  std::lock_guard lock(mu_);
  return user_;
}

void ConnectionSummary::close(Status&& why) {
  std::lock_guard lock(mu_);
  closed_ = std::move(why);
}

Status ConnectionSummary::status() const {
  std::lock_guard lock(mu_);
  return closed_;
}

}  // namespace authrpc
