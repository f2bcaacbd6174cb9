#include "authrpc/components/jwt/jwt_key_source.h"

#include <fstream>
#include <sstream>

namespace authrpc {

JwtKeySource::JwtKeySource(JwtKeySourceOptions options) : options_(std::move(options)) {}

std::shared_ptr<const JwkSet> JwtKeySource::current() const {
  std::lock_guard lock(mu_);
  return keys_;
}

std::string JwtKeySource::last_error() const {
  std::lock_guard lock(mu_);
  return last_error_;
}

std::string JwtKeySource::describe() const {
  return options_.url.empty() ? "JWKS file " + options_.file : "JWKS " + options_.url;
}

bool JwtKeySource::claim_scheduled_load(Clock::time_point now) {
  std::lock_guard lock(mu_);
  if (loading_) return false;
  // Without keys, retry no more often than min_refetch (an IdP that is down
  // is not asked on every connection).
  const bool due = keys_ ? now >= loaded_at_ + options_.refresh
                         : last_attempt_ == Clock::time_point{} ||
                               now >= last_attempt_ + options_.min_refetch;
  if (!due) return false;
  loading_ = true;
  last_attempt_ = now;
  return true;
}

bool JwtKeySource::claim_refetch(Clock::time_point now) {
  std::lock_guard lock(mu_);
  if (loading_ ||
      (last_attempt_ != Clock::time_point{} && now < last_attempt_ + options_.min_refetch)) {
    return false;
  }
  loading_ = true;
  last_attempt_ = now;
  return true;
}

void JwtKeySource::release_claim() {
  std::lock_guard lock(mu_);
  loading_ = false;
}

Status JwtKeySource::load() {
  Result<std::string> document(Errc::kUnknown);
  if (!options_.url.empty()) {
    document = https_get(options_.url, options_.https);
  } else {
    std::ifstream in(options_.file, std::ios::binary);
    if (!in) {
      document = Status(Errc::kUnavailable, "cannot read " + options_.file);
    } else {
      std::ostringstream text;
      text << in.rdbuf();
      document = text.str();
    }
  }
  Result<JwkSet> parsed = document.ok() ? JwkSet::parse(*document, options_.https.max_bytes)
                                        : Result<JwkSet>(document.status());
  std::lock_guard lock(mu_);
  loading_ = false;
  if (!parsed.ok()) {
    ++failures_;
    last_error_ = describe() + ": " + parsed.status().message;
    return Status(parsed.code(), last_error_);
  }
  ++loads_;
  // The same document again keeps the same set, and so the verifier's cache
  // (components/jwt/jwt_verifier.h), which starts over when the set changes.
  if (!keys_ || *document != document_) {
    keys_ = std::make_shared<const JwkSet>(std::move(*parsed));
    document_ = std::move(*document);
  }
  loaded_at_ = Clock::now();
  last_error_.clear();
  return Status();
}

}  // namespace authrpc
