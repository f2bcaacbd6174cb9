// Where the secret manager gets the time from. SystemClock reads the real
// wall clock; ManualClock is set and advanced by its owner (tests,
// simulations). Both may be read from any thread.
#pragma once

#include <atomic>
#include <chrono>

#include "authrpc/security/token.h"

namespace authrpc::security {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual TokenTime now() const = 0;
};

class SystemClock final : public Clock {
 public:
  TokenTime now() const override {
    return std::chrono::time_point_cast<std::chrono::milliseconds>(std::chrono::system_clock::now());
  }
};

class ManualClock final : public Clock {
 public:
  explicit ManualClock(TokenTime start) : ms_(start.time_since_epoch().count()) {}
  TokenTime now() const override { return TokenTime(std::chrono::milliseconds(ms_.load())); }
  void set(TokenTime t) { ms_.store(t.time_since_epoch().count()); }
  void advance(std::chrono::milliseconds d) { ms_.fetch_add(d.count()); }

 private:
  std::atomic<std::int64_t> ms_;
};

}  // namespace authrpc::security
