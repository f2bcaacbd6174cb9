#include "authrpc/tools/flag_parser.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <limits>

#include "authrpc/base/log.h"
#include "authrpc/base/metrics.h"
#include "authrpc/tools/cli_args.h"
#include "authrpc/tools/cli_exit.h"

namespace authrpc::cli {

namespace {

Status invalid(std::string message) { return Status(Errc::kInvalidArgument, std::move(message)); }

// Decimal digits only (no sign, no space), the whole of `text`.
bool digits(std::string_view text, std::uint64_t& out) {
  if (text.empty() || text.front() < '0' || text.front() > '9') return false;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && end == text.data() + text.size();
}

}  // namespace

FlagParser& FlagParser::flag(std::string name, bool* out) {
  return flag(std::move(name), [out] { *out = true; });
}

FlagParser& FlagParser::flag(std::string name, std::function<void()> on) {
  options_.push_back({std::move(name), false, [on = std::move(on)](std::string_view) {
                        on();
                        return Status();
                      }});
  return *this;
}

FlagParser& FlagParser::value(std::string name, OnValue on) {
  options_.push_back({std::move(name), true, std::move(on)});
  return *this;
}

FlagParser& FlagParser::value(std::string name, std::string* out) {
  return value(std::move(name), [out](std::string_view v) {
    *out = std::string(v);
    return Status();
  });
}

FlagParser& FlagParser::positional(std::vector<std::string>* out) {
  positional_ = out;
  return *this;
}

const FlagParser::Option* FlagParser::find(std::string_view name) const {
  const auto it = std::find_if(options_.begin(), options_.end(), [name](const Option& o) { return o.name == name; });
  return it == options_.end() ? nullptr : &*it;
}

Result<FlagParser::Parsed> FlagParser::parse(int argc, char** argv) const {
  for (int i = 0; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--help" || arg == "-h") return Parsed::kHelp;
    const Option* option = find(arg);
    if (option == nullptr) {
      if (arg.size() > 1 && arg.front() == '-') return invalid("unknown option " + escape_for_log(arg));
      if (positional_ == nullptr) return invalid("unexpected argument '" + escape_for_log(arg) + "'");
      positional_->emplace_back(arg);
      continue;
    }
    std::string_view value;
    if (option->takes_value) {
      if (i + 1 >= argc) return invalid(option->name + " needs a value");
      value = argv[++i];
    }
    if (Status s = option->on(value); !s.ok()) return invalid(option->name + ": " + s.message);
  }
  return Parsed::kOk;
}

std::optional<int> parse_or_exit(const FlagParser& parser, int argc, char** argv, std::string_view help,
                                 std::string_view program, std::string_view see, std::string_view prefix) {
  const auto parsed = parser.parse(argc, argv);
  if (!parsed.ok()) return report_usage(program, std::string(prefix) + parsed.status().message, see);
  if (*parsed == FlagParser::Parsed::kOk) return std::nullopt;
  std::fwrite(help.data(), 1, help.size(), stdout);
  return kExitOk;
}

std::optional<int> overview_or_exit(int argc, char** argv, std::string_view overview) {
  if (argc < 1) {
    std::fwrite(overview.data(), 1, overview.size(), stderr);
    return kExitUsage;
  }
  const std::string_view name = argv[0];
  if (name == "help" || name == "--help" || name == "-h") {
    std::fwrite(overview.data(), 1, overview.size(), stdout);
    return kExitOk;
  }
  return std::nullopt;
}

int print_version(std::string_view program) {
  const std::string line = std::string(program) + " " + std::string(authrpc_version()) +
                           " (commit " + std::string(authrpc_git_commit()) + ")\n";
  std::fwrite(line.data(), 1, line.size(), stdout);
  return kExitOk;
}

FlagParser::OnValue count(std::size_t* out, std::size_t min, std::size_t max) {
  return [out, min, max](std::string_view text) {
    std::uint64_t v = 0;
    if (!digits(text, v) || v < min || v > max) {
      return invalid(max == std::numeric_limits<std::size_t>::max()
                         ? (min == 0 ? "a count" : "a count from " + std::to_string(min))
                         : "a count from " + std::to_string(min) + " to " + std::to_string(max));
    }
    *out = static_cast<std::size_t>(v);
    return Status();
  };
}

FlagParser::OnValue size(std::uint64_t* out, std::uint64_t min, std::uint64_t max) {
  return [out, min, max](std::string_view text) {
    const auto bad = invalid("a size from " + std::to_string(min) + " to " + std::to_string(max) +
                             " bytes (K, M, G: KiB, MiB, GiB)");
    const std::size_t end = std::min(text.find_first_not_of("0123456789"), text.size());
    const std::string_view suffix = text.substr(end);
    std::uint64_t v = 0, scale = 1;
    if (!digits(text.substr(0, end), v)) return bad;
    if (suffix == "K" || suffix == "KiB") scale = 1024;
    else if (suffix == "M" || suffix == "MiB") scale = 1024 * 1024;
    else if (suffix == "G" || suffix == "GiB") scale = 1024ull * 1024 * 1024;
    else if (!suffix.empty()) return bad;
    if (v > max / scale || v * scale < min || v * scale > max) return bad;
    *out = v * scale;
    return Status();
  };
}

FlagParser::OnValue one_of(std::string* out, std::initializer_list<std::string_view> choices) {
  std::string what;
  std::vector<std::string> names;
  for (const auto c : choices) {
    if (!names.empty()) what += names.size() + 1 == choices.size() ? " or " : ", ";
    what += c;
    names.emplace_back(c);
  }
  return [out, what, names](std::string_view text) {
    if (std::find(names.begin(), names.end(), text) == names.end()) return invalid(what);
    *out = std::string(text);
    return Status();
  };
}

FlagParser::OnValue milliseconds(std::chrono::milliseconds* out) {
  return [out](std::string_view text) {
    const auto ms = parse_milliseconds(text);
    if (!ms) {
      return invalid("'" + escape_for_log(text) +
                     "' is not a number of milliseconds from 1 to 2147483647");
    }
    *out = *ms;
    return Status();
  };
}

FlagParser::OnValue list(std::vector<std::string>* out) {
  return [out](std::string_view text) {
    out->clear();
    for (std::size_t start = 0; start <= text.size();) {
      const std::size_t comma = std::min(text.find(',', start), text.size());
      const std::string_view name = text.substr(start, comma - start);
      if (name.empty()) return invalid("a comma-separated list of names");
      if (std::find(out->begin(), out->end(), name) == out->end()) out->emplace_back(name);
      start = comma + 1;
    }
    return Status();
  };
}

}  // namespace authrpc::cli
