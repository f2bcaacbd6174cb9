// A domain's error codes as one table: each code's upper-case name, its
// message and the Errc it means to a caller. TableErrorCategory is the
// std::error_category read from such a table; the *_errors.cc files (tokens,
// TLS, shared memory, Kerberos) each define their codes with one.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <system_error>

#include "authrpc/base/status.h"

namespace authrpc {

template <typename E>
struct ErrorRow {
  E code;
  std::string_view name;     // "EXPIRED": code_name(), a metrics `reason` label
  std::string_view message;  // message()
  Errc errc;                 // default_error_condition(): what a caller should do
};

// The rows of one enum, and what stands for a value that no row has.
template <typename E>
class ErrorTable {
 public:
  // `unknown`'s message is followed by the value when `unknown_shows_value`.
  constexpr ErrorTable(std::span<const ErrorRow<E>> rows, ErrorRow<E> unknown,
                       bool unknown_shows_value = false)
      : rows_(rows), unknown_(unknown), unknown_shows_value_(unknown_shows_value) {}

  constexpr const ErrorRow<E>& row(int value) const noexcept {
    for (const ErrorRow<E>& r : rows_) {
      if (static_cast<int>(r.code) == value) return r;
    }
    return unknown_;
  }
  constexpr const ErrorRow<E>& operator[](E code) const noexcept {
    return row(static_cast<int>(code));
  }

  std::string message(int value) const {
    const ErrorRow<E>& r = row(value);
    std::string out(r.message);
    if (&r == &unknown_ && unknown_shows_value_) out += std::to_string(value);
    return out;
  }

 private:
  std::span<const ErrorRow<E>> rows_;
  ErrorRow<E> unknown_;
  bool unknown_shows_value_;
};

// The category of a table. Base is NamedErrorCategory (Status::to_string()
// prints the code's name) or std::error_category (it prints the message).
template <typename E, typename Base = NamedErrorCategory>
class TableErrorCategory final : public Base {
 public:
  constexpr TableErrorCategory(const char* name, const ErrorTable<E>& table) noexcept
      : name_(name), table_(table) {}

  const char* name() const noexcept override { return name_; }
  // NamedErrorCategory's code_name() where Base is that.
  std::string_view code_name(int value) const noexcept { return table_.row(value).name; }
  std::string message(int value) const override { return table_.message(value); }
  std::error_condition default_error_condition(int value) const noexcept override {
    return {static_cast<int>(table_.row(value).errc), authrpc_category()};
  }

 private:
  const char* name_;
  const ErrorTable<E>& table_;
};

}  // namespace authrpc
