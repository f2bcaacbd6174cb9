#include "authrpc/rpc/json_document.h"

#include <algorithm>
#include <fstream>
#include <sstream>

namespace authrpc {
namespace {

// A SAX reader that accepts every event and keeps where the first error was:
// run only after a parse failed with something nlohmann reports without a
// position (a number too large for a double), to say where it is.
class ErrorLocator final : public JsonSaxAcceptor {
 public:
  std::size_t token_start = 0;

  bool parse_error(std::size_t position, const std::string& last_token,
                   const nlohmann::json::exception&) override {
    // `position` is just past the offending token.
    token_start = position >= last_token.size() ? position - last_token.size() : 0;
    return false;
  }
};

// "line L, column C" (both from 1) of byte `offset` in `text`.
std::string line_and_column(std::string_view text, std::size_t offset) {
  offset = std::min(offset, text.size());
  std::size_t line = 1, line_start = 0;
  for (std::size_t i = 0; i < offset; ++i) {
    if (text[i] == '\n') {
      ++line;
      line_start = i + 1;
    }
  }
  return "line " + std::to_string(line) + ", column " + std::to_string(offset - line_start + 1);
}

}  // namespace

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
  } catch (const nlohmann::json::exception&) {
    // The one other error the parser reports: a number that overflows a
    // double (out_of_range.406, whose message quotes the digits). Find it
    // with a second, position-keeping pass.
    ErrorLocator locator;
    nlohmann::json::sax_parse(text, &locator, nlohmann::json::input_format_t::json,
                              /*strict=*/true, /*ignore_comments=*/true);
    return Status(Errc::kConfigError, origin + ": number out of range at " +
                                          line_and_column(text, locator.token_start) +
                                          ": a JSON number here must fit a double");
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
