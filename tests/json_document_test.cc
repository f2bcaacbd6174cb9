// Reading configuration documents (rpc/json_document.h): every way a
// document can be wrong is a CONFIG_ERROR that says where and never quotes
// the document's bytes; nothing nlohmann throws escapes a reader.
#include "authrpc/rpc/json_document.h"

#include <gtest/gtest.h>

#include <string>

namespace authrpc {
namespace {

TEST(JsonDocumentTest, ParsesWithComments) {
  auto j = parse_json_document("// c\n{\"a\": /* one */ 1}\n", "doc");
  ASSERT_TRUE(j.ok()) << j.status().to_string();
  EXPECT_EQ((*j)["a"], 1);
}

TEST(JsonDocumentTest, ErrorsSayWhereWithoutQuotingTheDocument) {
  struct Case {
    const char* name;
    std::string text;
    std::string message;  // after "doc: "
    std::string secret;   // bytes of the document the message must not quote
  };
  const std::string digits = "98765432109876543210e987654321";
  const Case cases[] = {
      {"syntax", "{\n  \"a\": 1,,\n}", "syntax error at line 2, column 10", "\"a\": 1,,"},
      {"empty", "", "syntax error at line 1, column 1", ""},
      {"number too large, alone", digits, "number out of range at line 1, column 1", digits},
      {"number too large, nested", "{\n  \"x\": [1,\n        " + digits + "]}",
       "number out of range at line 3, column 9", digits},
      {"negative number too large", "[-" + digits + "]", "number out of range at line 1, column 2", digits},
      {"number too large after a comment", "/* 1e999 */ [2, 1e999]", "number out of range at line 1, column 17",
       "1e999"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    auto j = parse_json_document(c.text, "doc");
    ASSERT_FALSE(j.ok());
    EXPECT_EQ(j.code(), Errc::kConfigError);
    EXPECT_EQ(j.status().message.rfind("doc: " + c.message, 0), 0u) << j.status().message;
    if (!c.secret.empty()) {
      EXPECT_EQ(j.status().message.find(c.secret), std::string::npos) << j.status().message;
    }
  }
}

TEST(JsonDocumentTest, AReaderThatMissesATypeCheckGivesAConfigError) {
  const nlohmann::json j = nlohmann::json::parse(R"({"name": 5})");
  auto got = read_config_guarded("settings", [&]() -> Result<std::string> {
    return j["name"].get<std::string>();  // no is_string() check
  });
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.code(), Errc::kConfigError);
  EXPECT_EQ(got.status().message, "settings: a value of the wrong type (type must be string, but is number)");

  auto fine = read_config_guarded("settings", [&]() -> Result<int> { return j["name"].get<int>(); });
  ASSERT_TRUE(fine.ok());
  EXPECT_EQ(*fine, 5);
}

// Where each key is, by its dotted path, through comments, strings that
// look like keys, escapes and arrays; a key given twice is listed with both
// places, and parse_json_document() refuses it.
TEST(JsonDocumentTest, KeyPositionsAndDuplicates) {
  const std::string text =
      "// {\"not\": 1}\n"
      "{\"a\": {\"b\": \"x\\\"y\", /* \"c\": */ \"c\": 1},\n"
      " \"list\": [{\"k\": 1}, {\"k\": 2, \"k\": 3}],\n"
      " \"e\\u0073c\": true, \"a\": {}}";
  const JsonKeyIndex index = index_json_keys(text);
  const auto at = [&](const std::string& path) {
    const JsonPosition p = index.find(path);
    return std::to_string(p.line) + ":" + std::to_string(p.column);
  };
  EXPECT_EQ(at("a"), "4:20");  // the later one, whose value is parsed
  EXPECT_EQ(at("a.b"), "2:8");
  EXPECT_EQ(at("a.c"), "2:32");
  EXPECT_EQ(at("list"), "3:2");
  EXPECT_EQ(at("list.0.k"), "3:12");
  EXPECT_EQ(at("list.1.k"), "3:30");
  EXPECT_EQ(at("esc"), "4:2");
  EXPECT_EQ(at("list.1.k.missing"), "3:30");  // the nearest enclosing key
  EXPECT_EQ(at("nothing"), "1:1");
  ASSERT_EQ(index.duplicates.size(), 2u);
  EXPECT_EQ(index.duplicates[0].path, "list.1.k");
  EXPECT_EQ(index.duplicates[0].first.column, 22u);
  EXPECT_EQ(index.duplicates[1].path, "a");

  auto refused = parse_json_document(text, "doc");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.code(), Errc::kConfigError);
  EXPECT_EQ(refused.status().message, "doc: duplicate key 'list.1.k' at line 3, column 30 (first at line 3, column 22)");
}

}  // namespace
}  // namespace authrpc
