// Reading configuration documents (server configuration, ACL file): JSON
// with comments allowed, parsed from text or a file, with a syntax error
// reported as CONFIG_ERROR naming the origin, line and column. Called by
// server/server_config and auth/authz/authz_policy at startup and on reload.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "authrpc/base/result.h"

namespace authrpc {

// Parses `text` (JSON, `//` and `/* */` comments allowed). `origin` names it
// in errors: "ORIGIN: syntax error at line L, column C: what was expected",
// or "ORIGIN: number out of range at line L, column C: ..." for a number
// that does not fit a double, or "ORIGIN: line L, column C: duplicate key
// 'a.b' (first at line L')": a key given twice in one object would let one
// silently override the other. None quotes the document's values.
Result<nlohmann::json> parse_json_document(std::string_view text, const std::string& origin);

struct JsonKeyIndex;
// The same, for a checker that reports every problem: duplicate keys are
// not an error here but listed in `index` (the later value is kept), with
// the position of every key.
Result<nlohmann::json> parse_json_document(std::string_view text, const std::string& origin, JsonKeyIndex& index);

// Where a key sits in a document: line and column (from 1) of its opening
// quote.
struct JsonPosition {
  std::size_t line = 1;
  std::size_t column = 1;
};

// The position of every object key of a document that parses, by its dotted
// path ("tokens.store.type"; array elements by index: "listen.0",
// "rules.2.users"), and each key given a second time in its object. Built by
// one pass over the text; what configuration checks use to say
// "FILE:LINE:COLUMN: key: message".
struct JsonKeyIndex {
  // Each path's last occurrence: a key given twice keeps its last value.
  std::map<std::string, JsonPosition> keys;
  struct Duplicate {
    std::string path;
    JsonPosition at, first;
  };
  std::vector<Duplicate> duplicates;

  // The position of `path`, or of its nearest enclosing key that the
  // document has ("auth.options.jwt.jwks" → "auth.options" when the rest is
  // missing); line 1, column 1 when none is.
  JsonPosition find(std::string_view path) const;
};
JsonKeyIndex index_json_keys(std::string_view text);

// A reader for nlohmann::json::sax_parse() that accepts every event, builds
// nothing and stops at the first error: the base of one-pass checks on a
// document's shape (server/service.cc's depth limit) or position.
class JsonSaxAcceptor : public nlohmann::json::json_sax_t {
 public:
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override { return true; }
  bool key(string_t&) override { return true; }
  bool end_object() override { return true; }
  bool start_array(std::size_t) override { return true; }
  bool end_array() override { return true; }
  bool parse_error(std::size_t, const std::string&, const nlohmann::json::exception&) override {
    return false;
  }
};

// Runs `read`, a reader of a parsed configuration document that returns a
// Result: a value of a type it did not check for (an nlohmann::json
// exception escaping it) becomes a CONFIG_ERROR about `what`, never an
// exception across the API. Readers check types and name the key; this is
// the net under them (the fuzz target tests/fuzz/config_fuzz.cc walks it).
template <typename Read>
auto read_config_guarded(const std::string& what, Read&& read) -> decltype(read()) {
  try {
    return read();
  } catch (const nlohmann::json::exception& e) {
    // "[json.exception.type_error.302] type must be string, but is number":
    // nlohmann's text names types, not the document's bytes.
    std::string message = e.what();
    if (const auto at = message.find("] "); at != std::string::npos) message.erase(0, at + 2);
    return Status(Errc::kConfigError, what + ": a value of the wrong type (" + message + ")");
  }
}

// Reads the file at `path` and parses it as above; a file that cannot be
// read is CONFIG_ERROR "cannot read WHAT PATH: REASON" (the errno's text).
Result<nlohmann::json> read_json_document(const std::string& path, const std::string& what);
// The text of the file at `path`, for a reader that also wants its key
// positions; errors as read_json_document's.
Result<std::string> read_document_text(const std::string& path, const std::string& what);

}  // namespace authrpc
