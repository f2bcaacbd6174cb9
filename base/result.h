// Result<T>: a value or a Status. The return type of every fallible authrpc
// call; no exceptions cross the public API.
#pragma once

#include <utility>
#include <variant>

#include "authrpc/base/status.h"

namespace authrpc {

template <typename T>
class [[nodiscard]] Result {
 public:
  // An error (kUnknown) until assigned; needed by generic code such as futures.
  Result() : v_(Status(Errc::kUnknown, "no result")) {}
  Result(T value) : v_(std::move(value)) {}
  // The value made in place from `args` (no move of a T made first).
  template <typename... Args>
  explicit Result(std::in_place_t, Args&&... args)
      : v_(std::in_place_index<0>, std::forward<Args>(args)...) {}
  Result(Status status) : v_(std::move(status)) {}
  Result(Errc e, std::string message = {}) : v_(Status(e, std::move(message))) {}
  // A domain's code: Result<T>(TokenErrc::kMalformed, "...").
  Result(std::error_code code, std::string message) : v_(Status(code, std::move(message))) {}

  bool ok() const noexcept { return v_.index() == 0; }
  explicit operator bool() const noexcept { return ok(); }

  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }

  // The failure; an OK status when a value is held.
  Status status() const { return ok() ? Status() : std::get<1>(v_); }
  std::error_code code() const { return ok() ? std::error_code() : std::get<1>(v_).code; }
  // True when this is a failure of exactly that kind.
  bool is(std::error_code c) const noexcept { return !ok() && std::get<1>(v_).code == c; }

 private:
  std::variant<T, Status> v_;
  static_assert(!std::is_same_v<T, Status>);
};

}  // namespace authrpc
