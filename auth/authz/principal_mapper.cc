#include "authrpc/auth/authz/principal_mapper.h"

#include <regex.h>

#include <algorithm>
#include <cctype>
#include <regex>
#include <tuple>

namespace authrpc {

// A rule's regular expression: POSIX extended (regcomp(3)), as MIT
// Kerberos's own auth_to_local, which glibc matches without the exponential
// backtracking of std::regex ("(.*)*x", ".**", ".*.*.*...x" took seconds to
// forever on a short principal, on the IO thread that maps it). The
// ECMAScript spellings rules use in practice are accepted and translated
// (\d, \. inside brackets); what POSIX cannot do the same way (lazy
// quantifiers, look-around, non-capturing groups, back-references) is
// refused when the rules load. Immutable once built; any thread may use it.
class AuthToLocalRegex {
 public:
  // `whole`: the expression must match the whole string (a rule's (match)).
  static Result<std::shared_ptr<const AuthToLocalRegex>> compile(const std::string& pattern, bool whole);
  ~AuthToLocalRegex() { ::regfree(&re_); }
  AuthToLocalRegex(const AuthToLocalRegex&) = delete;
  AuthToLocalRegex& operator=(const AuthToLocalRegex&) = delete;

  bool matches(const std::string& text) const {
    return text.find('\0') == std::string::npos && ::regexec(&re_, text.c_str(), 0, nullptr, 0) == 0;
  }

  // `text` with the first match (every match if `global`) replaced by `to`,
  // whose $n, $&, $$, $` and $' mean what they do in ECMAScript (and Java's
  // replaceFirst/replaceAll for $n).
  std::string replace(const std::string& text, const std::string& to, bool global) const;

 private:
  AuthToLocalRegex() = default;
  regex_t re_{};
};

namespace {

// ECMAScript pattern -> POSIX ERE, or why not.
Result<std::string> to_posix(const std::string& pattern) {
  auto refuse = [](std::string why) { return Status(Errc::kConfigError, std::move(why)); };
  std::string out;
  bool in_bracket = false;
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\0') return refuse("a NUL byte");
    if (in_bracket) {
      if (c == ']' && !(out.back() == '[' || (out.back() == '^' && out[out.size() - 2] == '['))) {
        in_bracket = false;
        out += c;
      } else if (c == '\\' && i + 1 < pattern.size()) {
        // POSIX brackets take a backslash literally: [\.] is [.], [\\] is [\].
        const char next = pattern[++i];
        if (next == ']' || next == '^' || next == '-') {
          return refuse("'\\" + std::string(1, next) + "' inside [...] (put ']' first, '^' not first, '-' last)");
        }
        if (std::isalnum(static_cast<unsigned char>(next))) {
          return refuse("the escape '\\" + std::string(1, next) + "' inside [...]");
        }
        out += next;
      } else {
        out += c;
      }
      continue;
    }
    if (c == '[') {
      in_bracket = true;
      out += c;
      if (i + 1 < pattern.size() && pattern[i + 1] == '^') out += pattern[++i];
      continue;
    }
    if (c == '\\') {
      if (i + 1 == pattern.size()) return refuse("a trailing '\\'");
      const char next = pattern[++i];
      if (next == 'd') out += "[0-9]";
      else if (next == 'D') out += "[^0-9]";
      else if (std::string_view("wWsSbB").find(next) != std::string_view::npos) (out += '\\') += next;
      else if (std::isalnum(static_cast<unsigned char>(next))) {
        return refuse("the escape '\\" + std::string(1, next) + "' (back-references and other letter escapes are not supported)");
      } else {
        (out += '\\') += next;
      }
      continue;
    }
    if (c == '(' && i + 1 < pattern.size() && pattern[i + 1] == '?') {
      return refuse("'(?' (non-capturing groups and look-around are not supported)");
    }
    if (c == '?' && i > 0 && std::string_view("*+?}").find(pattern[i - 1]) != std::string_view::npos &&
        !(i > 1 && pattern[i - 2] == '\\')) {
      return refuse("a lazy quantifier ('" + pattern.substr(i - 1, 2) + "')");
    }
    out += c;
  }
  if (in_bracket) return refuse("an unclosed '['");
  return out;
}

}  // namespace

Result<std::shared_ptr<const AuthToLocalRegex>> AuthToLocalRegex::compile(const std::string& pattern,
                                                                          bool whole) {
  auto posix = to_posix(pattern);
  if (!posix.ok()) return posix.status();
  const std::string text = whole ? "^(" + *posix + ")$" : *posix;
  std::shared_ptr<AuthToLocalRegex> re(new AuthToLocalRegex());
  if (const int rc = ::regcomp(&re->re_, text.c_str(), REG_EXTENDED | (whole ? REG_NOSUB : 0)); rc != 0) {
    char message[256];
    ::regerror(rc, &re->re_, message, sizeof message);
    re->re_ = regex_t{};  // regcomp() freed what it had on failure
    // regfree() of a zeroed regex_t is harmless in glibc.
    return Status(Errc::kConfigError, message);
  }
  return std::shared_ptr<const AuthToLocalRegex>(std::move(re));
}

std::string AuthToLocalRegex::replace(const std::string& text, const std::string& to, bool global) const {
  if (text.find('\0') != std::string::npos) return text;
  constexpr std::size_t kGroups = 10;
  regmatch_t m[kGroups];
  const std::size_t groups = std::min<std::size_t>(re_.re_nsub + 1, kGroups);
  std::string out;
  std::size_t at = 0;
  while (at <= text.size() &&
         ::regexec(&re_, text.c_str() + at, groups, m, at > 0 ? REG_NOTBOL : 0) == 0) {
    const std::size_t start = at + static_cast<std::size_t>(m[0].rm_so);
    const std::size_t end = at + static_cast<std::size_t>(m[0].rm_eo);
    out.append(text, at, start - at);
    auto group = [&](std::size_t n) -> std::string_view {
      if (n >= groups || m[n].rm_so < 0) return {};
      return std::string_view(text).substr(at + static_cast<std::size_t>(m[n].rm_so),
                                           static_cast<std::size_t>(m[n].rm_eo - m[n].rm_so));
    };
    for (std::size_t i = 0; i < to.size(); ++i) {
      if (to[i] != '$' || i + 1 == to.size()) {
        out += to[i];
        continue;
      }
      const char next = to[i + 1];
      if (next == '$') {
        out += '$';
        ++i;
      } else if (next == '&') {
        out += group(0);
        ++i;
      } else if (next == '`') {
        out.append(text, 0, start);
        ++i;
      } else if (next == '\'') {
        out.append(text, end);
        ++i;
      } else if (std::isdigit(static_cast<unsigned char>(next))) {
        std::size_t n = static_cast<std::size_t>(next - '0');
        ++i;
        if (i + 1 < to.size() && std::isdigit(static_cast<unsigned char>(to[i + 1])) &&
            n * 10 + static_cast<std::size_t>(to[i + 1] - '0') < groups) {
          n = n * 10 + static_cast<std::size_t>(to[++i] - '0');
        }
        out += group(n);
      } else {
        out += '$';
      }
    }
    if (!global) {
      at = end;
      break;
    }
    if (end == start) {  // an empty match: keep the next character, move on
      if (end < text.size()) out += text[end];
      at = end + 1;
    } else {
      at = end;
    }
  }
  if (at < text.size()) out.append(text, at);
  return out;
}

namespace {

Status mapping_error(std::string m) { return {Errc::kConfigError, std::move(m)}; }
Status mapping_denied(std::string m) { return {Errc::kPermissionDenied, std::move(m)}; }

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
    if (j == i + 1 || j - i > 4) return mapping_error("bad format '" + format + "' in mapping rule");
    const auto n = static_cast<std::size_t>(std::stoul(format.substr(i + 1, j - i - 1)));
    if (n >= params.size()) {
      return mapping_error("index " + std::to_string(n) + " in '" + format +
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
      return mapping_error("invalid auth_to_local rule '" + text + "'");
    }
    Rule rule;
    rule.text = text;
    rule.lowercase = m[8].matched;
    if (m[1].matched) {
      rule.is_default = true;
    } else {
      if (m[2].length() > 3) return mapping_error("too many components in rule '" + text + "'");
      rule.components = static_cast<std::size_t>(std::stoul(m[2].str()));
      if (rule.components == 0) return mapping_error("rule '" + text + "' names 0 components");
      rule.format = m[3].str();
      // Check the format once against a name of the right shape.
      if (auto f = expand_format(rule.format, std::vector<std::string>(rule.components + 1));
          !f.ok()) {
        return mapping_error(f.status().message + " (rule '" + text + "')");
      }
      for (auto [group, whole, slot] : {std::tuple{4, true, &rule.match}, std::tuple{5, false, &rule.from}}) {
        if (!m[group].matched) continue;
        auto re = AuthToLocalRegex::compile(m[group].str(), whole);
        if (!re.ok()) {
          return mapping_error("bad regular expression in rule '" + text + "': " + re.status().message);
        }
        *slot = std::move(*re);
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
    if (!rule.match || rule.match->matches(*base)) {
      result = rule.from ? rule.from->replace(*base, rule.to, rule.global) : std::move(*base);
    }
  }
  if (!result) return std::optional<std::string>();
  if (fallback_ == Fallback::kRefuse && result->find_first_of("/@") != std::string::npos) {
    return mapping_denied("auth_to_local rule '" + rule.text + "' gave the non-simple name '" + *result +
                  "'");
  }
  if (result->empty()) return mapping_denied("auth_to_local rule '" + rule.text + "' gave an empty name");
  if (rule.lowercase) {
    std::transform(result->begin(), result->end(), result->begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  }
  return result;
}

Result<std::string> PrincipalMapper::map(std::string_view principal) const {
  auto name = PrincipalName::parse(principal);
  if (!name.ok()) return mapping_denied("cannot map '" + std::string(principal) + "': " + name.status().message);
  if (!name->realm) return std::string(principal);
  for (const auto& rule : rules_) {
    auto result = apply(rule, *name);
    if (!result.ok()) return result.status();
    if (*result) return std::move(**result);
  }
  if (fallback_ == Fallback::kKeepFullName) return std::string(principal);
  return mapping_denied("no auth_to_local rule maps '" + std::string(principal) + "'");
}

}  // namespace authrpc
