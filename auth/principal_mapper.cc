#include "authrpc/auth/principal_mapper.h"

#include <algorithm>
#include <cctype>

namespace authrpc {
namespace {

Status config_error(std::string m) { return {Errc::kConfigError, std::move(m)}; }
Status denied(std::string m) { return {Errc::kPermissionDenied, std::move(m)}; }

// Hadoop's KerberosName.ruleParser, anchored: DEFAULT, or
// RULE:[n:format](match)s/from/to/g with the (match), s/// and g parts
// optional, then an optional /L (lower-case the result).
const std::regex& rule_parser() {
  static const std::regex re(
      R"(^\s*(?:(DEFAULT)|RULE:\[(\d+):([^\]]*)\](?:\(([^)]*)\))?(?:s/([^/]*)/([^/]*)/(g)?)?)/?(L)?\s*$)");
  return re;
}

// $0 is the realm, $1… the components (Hadoop's replaceParameters): a '$'
// not followed by digits, or an index out of range, is an error.
Result<std::string> expand_format(const std::string& format,
                                  const std::vector<std::string>& params) {
  std::string out;
  for (std::size_t i = 0; i < format.size(); ++i) {
    if (format[i] != '$') {
      out += format[i];
      continue;
    }
    std::size_t j = i + 1;
    while (j < format.size() && std::isdigit(static_cast<unsigned char>(format[j]))) ++j;
    if (j == i + 1 || j - i > 4) return config_error("bad format '" + format + "' in mapping rule");
    const auto n = static_cast<std::size_t>(std::stoul(format.substr(i + 1, j - i - 1)));
    if (n >= params.size()) {
      return config_error("index " + std::to_string(n) + " in '" + format +
                          "' is outside of the valid range 0 to " +
                          std::to_string(params.size() - 1));
    }
    out += params[n];
    i = j - 1;
  }
  return out;
}

}  // namespace

Result<PrincipalName> PrincipalName::parse(std::string_view text) {
  PrincipalName name;
  std::string current;
  bool in_realm = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\\') {
      if (i + 1 == text.size()) return Status(Errc::kInvalidArgument, "principal ends with '\\'");
      current += text[++i];
    } else if (c == '/' && !in_realm) {
      name.components.push_back(std::move(current));
      current.clear();
    } else if (c == '@' && !in_realm) {
      name.components.push_back(std::move(current));
      current.clear();
      in_realm = true;
    } else if (c == '@') {
      return Status(Errc::kInvalidArgument, "principal has more than one unescaped '@'");
    } else {
      current += c;
    }
  }
  if (in_realm) {
    name.realm = std::move(current);
  } else {
    name.components.push_back(std::move(current));
  }
  for (const auto& c : name.components) {
    if (c.empty()) return Status(Errc::kInvalidArgument, "principal has an empty component");
  }
  return name;
}

Result<PrincipalMapper> PrincipalMapper::create(const std::vector<std::string>& rules,
                                                std::string default_realm, Fallback fallback) {
  PrincipalMapper mapper;
  mapper.default_realm_ = std::move(default_realm);
  mapper.fallback_ = fallback;
  for (const auto& text : rules) {
    std::smatch m;
    if (!std::regex_match(text, m, rule_parser())) {
      return config_error("invalid auth_to_local rule '" + text + "'");
    }
    Rule rule;
    rule.text = text;
    rule.lowercase = m[8].matched;
    if (m[1].matched) {
      rule.is_default = true;
    } else {
      if (m[2].length() > 3) return config_error("too many components in rule '" + text + "'");
      rule.components = static_cast<std::size_t>(std::stoul(m[2].str()));
      if (rule.components == 0) return config_error("rule '" + text + "' names 0 components");
      rule.format = m[3].str();
      // Check the format once against a name of the right shape.
      if (auto f = expand_format(rule.format, std::vector<std::string>(rule.components + 1));
          !f.ok()) {
        return config_error(f.status().message + " (rule '" + text + "')");
      }
      try {
        if (m[4].matched) rule.match.emplace(m[4].str(), std::regex::ECMAScript);
        if (m[5].matched) rule.from.emplace(m[5].str(), std::regex::ECMAScript);
      } catch (const std::regex_error& e) {
        return config_error("bad regular expression in rule '" + text + "': " + e.what());
      }
      rule.to = m[6].str();
      rule.global = m[7].matched;
    }
    mapper.rules_.push_back(std::move(rule));
  }
  return mapper;
}

Result<std::optional<std::string>> PrincipalMapper::apply(const Rule& rule,
                                                          const PrincipalName& name) const {
  std::optional<std::string> result;
  if (rule.is_default) {
    // Hadoop's DEFAULT: any principal of the default realm maps to its first
    // component ("nn/host@R" → "nn"). (MIT's DEFAULT also requires a single
    // component; use RULE:[1:$1@$0](.*@R)s/@.*// for exactly that.)
    if (name.realm == default_realm_) result = name.components.front();
  } else if (name.components.size() == rule.components) {
    std::vector<std::string> params;
    params.push_back(name.realm.value_or(""));
    params.insert(params.end(), name.components.begin(), name.components.end());
    auto base = expand_format(rule.format, params);
    if (!base.ok()) return base.status();
    if (!rule.match || std::regex_match(*base, *rule.match)) {
      if (!rule.from) {
        result = std::move(*base);
      } else {
        result = std::regex_replace(*base, *rule.from, rule.to,
                                    rule.global ? std::regex_constants::format_default
                                                : std::regex_constants::format_first_only);
      }
    }
  }
  if (!result) return std::optional<std::string>();
  if (fallback_ == Fallback::kRefuse && result->find_first_of("/@") != std::string::npos) {
    return denied("auth_to_local rule '" + rule.text + "' gave the non-simple name '" + *result +
                  "'");
  }
  if (result->empty()) return denied("auth_to_local rule '" + rule.text + "' gave an empty name");
  if (rule.lowercase) {
    std::transform(result->begin(), result->end(), result->begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  }
  return result;
}

Result<std::string> PrincipalMapper::map(std::string_view principal) const {
  auto name = PrincipalName::parse(principal);
  if (!name.ok()) return denied("cannot map '" + std::string(principal) + "': " + name.status().message);
  if (!name->realm) return std::string(principal);
  for (const auto& rule : rules_) {
    auto result = apply(rule, *name);
    if (!result.ok()) return result.status();
    if (*result) return std::move(**result);
  }
  if (fallback_ == Fallback::kKeepFullName) return std::string(principal);
  return denied("no auth_to_local rule maps '" + std::string(principal) + "'");
}

}  // namespace authrpc
