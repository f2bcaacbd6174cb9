#include "authrpc/tools/mechanism_flags.h"

#include <algorithm>
#include <sstream>

namespace authrpc::cli {

void MechanismFlags::add_to(FlagParser& parser) {
  for (const auto& name : registry_.client_names()) {
    for (const auto& f : registry_.client(name)->flags) {
      parser.value(f.flag, [this, flag = f.flag](std::string_view v) {
        given_[flag] = std::string(v);
        return Status();
      });
    }
  }
}

const std::string* MechanismFlags::given(std::string_view flag) const {
  const auto it = given_.find(flag);
  return it == given_.end() ? nullptr : &it->second;
}

nlohmann::json MechanismFlags::options_for(std::string_view name) const {
  nlohmann::json options = nlohmann::json::object();
  const auto* entry = registry_.client(name);
  if (entry == nullptr) return options;
  for (const auto& f : entry->flags) {
    if (f.credentials_file) continue;
    if (const std::string* v = given(f.flag)) options[f.option] = *v;
  }
  return options;
}

std::vector<MechanismFlag> MechanismFlags::credentials_files(std::string_view name) const {
  std::vector<MechanismFlag> out;
  const auto* entry = registry_.client(name);
  if (entry == nullptr) return out;
  for (const auto& f : entry->flags) {
    if (f.credentials_file) out.push_back(f);
  }
  return out;
}

std::string MechanismFlags::help() const {
  constexpr std::size_t kColumn = 21, kWidth = 79;
  struct Line {
    std::string flag, value, text, mechanisms;
  };
  std::vector<Line> lines;
  for (const auto& name : registry_.client_names()) {
    for (const auto& f : registry_.client(name)->flags) {
      auto it = std::find_if(lines.begin(), lines.end(), [&f](const Line& l) { return l.flag == f.flag; });
      if (it == lines.end()) {
        // MechanismFlag::help is "VALUE  text".
        const auto gap = f.help.find("  ");
        Line l{f.flag, gap == std::string::npos ? "" : f.help.substr(0, gap),
               gap == std::string::npos ? f.help : f.help.substr(gap + 2), name};
        lines.push_back(std::move(l));
      } else {
        it->mechanisms += ", " + name;
      }
    }
  }
  std::string out;
  for (const Line& l : lines) {
    std::string left = "  " + l.flag + (l.value.empty() ? "" : " " + l.value);
    if (left.size() + 1 > kColumn) {
      out += left + "\n";
      left.clear();
    }
    left.resize(kColumn, ' ');
    std::string line = left;
    std::size_t width = kColumn;
    std::istringstream words(l.mechanisms + ": " + l.text);
    bool first = true;
    for (std::string w; words >> w;) {
      if (!first && width + 1 + w.size() > kWidth) {
        out += line + "\n";
        line.assign(kColumn, ' ');
        width = kColumn;
        first = true;
      }
      if (!first) {
        line += ' ';
        ++width;
      }
      line += w;
      width += w.size();
      first = false;
    }
    out += line + "\n";
  }
  return out;
}

}  // namespace authrpc::cli
