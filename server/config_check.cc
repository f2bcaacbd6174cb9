#include "authrpc/server/config_check.h"

#include <algorithm>
#include <cstdlib>
#include <set>

namespace authrpc {
namespace {

constexpr std::size_t kMaxProblems = 50;
constexpr std::string_view kUnknownKey = "unknown key";

bool key_character(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
         c == '-';
}

// The quoted key at `at` in `message` ('...'), or empty.
std::string quoted_key(const std::string& message, std::size_t at) {
  if (at >= message.size() || message[at] != '\'') return {};
  const auto close = message.find('\'', at + 1);
  if (close == std::string::npos || close == at + 1) return {};
  const std::string key = message.substr(at + 1, close - at - 1);
  return std::all_of(key.begin(), key.end(), key_character) ? key : std::string();
}

std::string_view section_of(std::string_view key) { return key.substr(0, key.find('.')); }

// Removes `path` ("a.b.0.c") from `document`; false if it has no such value.
bool erase_path(nlohmann::json& document, const std::string& path) {
  nlohmann::json* parent = &document;
  std::string rest = path;
  for (;;) {
    const auto dot = rest.find('.');
    const std::string step = rest.substr(0, dot);
    const bool last = dot == std::string::npos;
    if (parent->is_object()) {
      const auto it = parent->find(step);
      if (it == parent->end()) return false;
      if (last) {
        parent->erase(it);
        return true;
      }
      parent = &*it;
    } else if (parent->is_array() && !step.empty() && std::all_of(step.begin(), step.end(), ::isdigit)) {
      const std::size_t index = std::strtoul(step.c_str(), nullptr, 10);
      if (index >= parent->size()) return false;
      if (last) {
        parent->erase(index);
        return true;
      }
      parent = &(*parent)[index];
    } else {
      return false;
    }
    rest.erase(0, dot + 1);
  }
}

}  // namespace

ConfigProblem config_problem(const std::string& message) {
  if (message.rfind(kUnknownKey, 0) == 0) {
    if (std::string key = quoted_key(message, kUnknownKey.size() + 1); !key.empty()) {
      return {std::move(key), std::string(kUnknownKey)};
    }
  }
  std::string key = quoted_key(message, 0);
  if (key.empty()) return {{}, message};
  std::string rest = message.substr(key.size() + 2);
  if (rest.rfind(": ", 0) == 0) rest.erase(0, 2);
  else if (rest.rfind(" ", 0) == 0) rest.erase(0, 1);
  return {std::move(key), std::move(rest)};
}

std::vector<ConfigProblem> collect_config_problems(nlohmann::json document, const ConfigCheckPass& pass) {
  std::vector<ConfigProblem> problems;
  std::set<std::string, std::less<>> sections_in_doubt;  // sections with a problem other than an unknown key
  while (problems.size() < kMaxProblems) {
    bool conflict = false;
    const Status status = pass(document, conflict);
    if (status.ok()) break;
    ConfigProblem problem = config_problem(status.message);
    if (conflict) {
      if (problems.empty()) problems.push_back(std::move(problem));
      break;
    }
    if (sections_in_doubt.contains(section_of(problem.key))) {
      if (!erase_path(document, std::string(section_of(problem.key)))) break;
      continue;
    }
    if (problem.message != kUnknownKey) sections_in_doubt.emplace(section_of(problem.key));
    const bool removed = !problem.key.empty() && erase_path(document, problem.key);
    problems.push_back(std::move(problem));
    if (!removed) break;
  }
  return problems;
}

std::string problem_text(const ConfigProblem& problem) {
  return problem.key.empty() ? problem.message : problem.key + ": " + problem.message;
}

std::string format_config_problem(const std::string& path, JsonPosition at, const ConfigProblem& problem) {
  return path + ":" + std::to_string(at.line) + ":" + std::to_string(at.column) + ": " + problem_text(problem);
}

}  // namespace authrpc
