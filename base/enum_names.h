// An enum's spellings (in config keys, flags, JSON) as one table of
// {value, name} rows, read both ways: enum_name() for to_string(),
// parse_enum_name() for parsing. A name is written once.
#pragma once

#include <span>
#include <string_view>

namespace authrpc {

template <typename E>
struct EnumName {
  E value;
  std::string_view name;
};

// The name of `value`; "unknown" for a value that no row has (a row
// forgotten for a new enumerator never passes for another value's name).
template <typename E>
constexpr std::string_view enum_name(std::span<const EnumName<E>> names, E value) noexcept {
  for (const EnumName<E>& n : names) {
    if (n.value == value) return n.name;
  }
  return "unknown";
}

// False (and *out untouched) if `text` is no row's name.
template <typename E>
constexpr bool parse_enum_name(std::span<const EnumName<E>> names, std::string_view text,
                               E* out) noexcept {
  for (const EnumName<E>& n : names) {
    if (n.name == text) {
      *out = n.value;
      return true;
    }
  }
  return false;
}

}  // namespace authrpc
