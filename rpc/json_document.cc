#include "authrpc/rpc/json_document.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>

#include "authrpc/base/log.h"

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

std::string line_and_column(JsonPosition at) {
  return "line " + std::to_string(at.line) + ", column " + std::to_string(at.column);
}

// One pass over a document that parses: follows objects and arrays, skips
// comments, values and whitespace, and notes where each key starts.
class KeyScanner {
 public:
  explicit KeyScanner(std::string_view text) : text_(text) {}

  JsonKeyIndex run() {
    while (pos_ < text_.size()) {
      const char c = text_[pos_];
      if (c == '\n') {
        ++line_;
        line_start_ = ++pos_;
      } else if (c == '/' && pos_ + 1 < text_.size() && (text_[pos_ + 1] == '/' || text_[pos_ + 1] == '*')) {
        skip_comment();
      } else if (c == '{' || c == '[') {
        frames_.push_back({c == '{', value_path(), 0, c == '{', {}});
        ++pos_;
      } else if (c == '}' || c == ']') {
        if (!frames_.empty()) frames_.pop_back();
        ++pos_;
      } else if (c == ',') {
        if (!frames_.empty()) {
          Frame& top = frames_.back();
          if (top.object) top.expect_key = true;
          else ++top.index;
        }
        ++pos_;
      } else if (c == '"') {
        string();
      } else {
        ++pos_;  // ':', whitespace, numbers, literals
      }
    }
    return std::move(index_);
  }

 private:
  struct Frame {
    bool object;
    std::string path;
    std::size_t index;  // arrays: the element being read
    bool expect_key;    // objects: the next string is a key
    std::map<std::string, JsonPosition> keys;
  };

  JsonPosition here() const { return {line_, pos_ - line_start_ + 1}; }

  // The path of the value that starts here.
  std::string value_path() const {
    if (frames_.empty()) return {};
    const Frame& top = frames_.back();
    if (top.object) return key_path_;
    return join(top.path, std::to_string(top.index));
  }

  static std::string join(const std::string& parent, const std::string& child) {
    return parent.empty() ? child : parent + "." + child;
  }

  void skip_comment() {
    if (text_[pos_ + 1] == '/') {
      while (pos_ < text_.size() && text_[pos_] != '\n') ++pos_;
      return;
    }
    pos_ += 2;
    while (pos_ < text_.size() && !(text_[pos_] == '*' && pos_ + 1 < text_.size() && text_[pos_ + 1] == '/')) {
      if (text_[pos_] == '\n') {
        ++line_;
        line_start_ = pos_ + 1;
      }
      ++pos_;
    }
    pos_ += 2;
  }

  void string() {
    const JsonPosition at = here();
    const std::size_t begin = ++pos_;
    bool escaped = false;
    while (pos_ < text_.size() && text_[pos_] != '"') pos_ += text_[pos_] == '\\' ? (escaped = true, 2) : 1;
    const std::string_view raw = text_.substr(begin, std::min(pos_, text_.size()) - begin);
    ++pos_;
    if (frames_.empty() || !frames_.back().object || !frames_.back().expect_key) return;
    Frame& top = frames_.back();
    top.expect_key = false;
    std::string key(raw);
    if (escaped) {
      const auto decoded = nlohmann::json::parse("\"" + key + "\"", nullptr, /*allow_exceptions=*/false);
      if (decoded.is_string()) key = decoded.get<std::string>();
    }
    key_path_ = join(top.path, key);
    if (const auto first = top.keys.find(key); first != top.keys.end()) {
      index_.duplicates.push_back({key_path_, at, first->second});
    } else {
      top.keys.emplace(key, at);
    }
    index_.keys[key_path_] = at;  // the last one's value is the one parsed
  }

  std::string_view text_;
  std::size_t pos_ = 0, line_ = 1, line_start_ = 0;
  std::vector<Frame> frames_;
  std::string key_path_;  // the last key read: the path of the value after it
  JsonKeyIndex index_;
};

}  // namespace

JsonPosition JsonKeyIndex::find(std::string_view path) const {
  for (std::string p(path); !p.empty();) {
    if (const auto it = keys.find(p); it != keys.end()) return it->second;
    const auto dot = p.rfind('.');
    p.resize(dot == std::string::npos ? 0 : dot);
  }
  return {};
}

JsonKeyIndex index_json_keys(std::string_view text) { return KeyScanner(text).run(); }

Result<nlohmann::json> parse_json_document(std::string_view text, const std::string& origin, JsonKeyIndex& index) {
  try {
    auto document = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/true, /*ignore_comments=*/true);
    index = index_json_keys(text);
    return document;
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

Result<nlohmann::json> parse_json_document(std::string_view text, const std::string& origin) {
  JsonKeyIndex index;
  auto document = parse_json_document(text, origin, index);
  if (document.ok() && !index.duplicates.empty()) {
    const auto& d = index.duplicates.front();
    return Status(Errc::kConfigError, origin + ": duplicate key '" + escape_for_log(d.path) + "' at " +
                                          line_and_column(d.at) + " (first at " + line_and_column(d.first) + ")");
  }
  return document;
}

Result<std::string> read_document_text(const std::string& path, const std::string& what) {
  const auto failed = [&](int error) {
    return Status(Errc::kConfigError, "cannot read " + what + " " + escape_for_log(path) + ": " + std::strerror(error));
  };
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return failed(errno);
  std::string text;
  char buffer[16384];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int error = errno;  // EISDIR for a directory
      ::close(fd);
      return failed(error);
    }
    if (n == 0) break;
    text.append(buffer, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return text;
}

Result<nlohmann::json> read_json_document(const std::string& path, const std::string& what) {
  auto text = read_document_text(path, what);
  if (!text.ok()) return text.status();
  return parse_json_document(*text, path);
}

}  // namespace authrpc
