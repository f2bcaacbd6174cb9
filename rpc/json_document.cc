#include "authrpc/rpc/json_document.h"

#include <fstream>
#include <sstream>

namespace authrpc {

Result<nlohmann::json> parse_json_document(std::string_view text, const std::string& origin) {
  try {
    return nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/true, /*ignore_comments=*/true);
  } catch (const nlohmann::json::parse_error& e) {
    // e.what() is "[json.exception.parse_error.101] parse error at line L,
    // column C: ..."; keep what follows "parse error " and drop nlohmann's
    // "last read: '...'" echo, which quotes the document's own bytes.
    std::string what = e.what();
    if (auto at = what.find("parse error "); at != std::string::npos) what.erase(0, at + 12);
    if (auto echo = what.find("; last read: "); echo != std::string::npos) {
      const auto expected = what.find("; expected ", echo);
      what.erase(echo, expected == std::string::npos ? std::string::npos : expected - echo);
    }
    return Status(Errc::kConfigError, origin + ": syntax error " + what);
  }
}

Result<nlohmann::json> read_json_document(const std::string& path, const std::string& what) {
  std::ifstream in(path);
  if (!in) return Status(Errc::kConfigError, "cannot read " + what + " " + path);
  std::stringstream text;
  text << in.rdbuf();
  return parse_json_document(text.str(), path);
}

}  // namespace authrpc
