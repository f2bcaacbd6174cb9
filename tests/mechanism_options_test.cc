// MechanismOptions (auth/mechanism_options.h): the strict reader of every
// mechanism's JSON options, as a table of inputs and what each read says.
#include "authrpc/auth/mechanism_options.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace authrpc {
namespace {

using json = nlohmann::json;

TEST(MechanismOptionsTest, IntegersFromTextAndFromCode) {
  const struct {
    const char* name;
    json options;
    bool ok;
    std::size_t value;
  } cases[] = {
      {"parsed_text", json::parse(R"({"n": 5})"), true, 5},
      {"built_in_code_signed", json{{"n", 5}}, true, 5},  // {"n", 5}: a signed integer
      {"zero", json{{"n", 0}}, true, 0},
      {"at_the_maximum", json{{"n", 100}}, true, 100},
      {"over_the_maximum", json{{"n", 101}}, false, 7},
      {"negative", json{{"n", -1}}, false, 7},
      {"negative_text", json::parse(R"({"n": -1})"), false, 7},
      {"float", json{{"n", 1.5}}, false, 7},
      {"string", json{{"n", "5"}}, false, 7},
      {"absent", json::object(), true, 7},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    std::size_t n = 7;
    const Status s = MechanismOptions("m", c.options).read("n", n, 100);
    EXPECT_EQ(s.ok(), c.ok) << s.to_string();
    EXPECT_EQ(n, c.value);
    if (!s.ok()) {
      EXPECT_EQ(s.code, Errc::kConfigError);
      EXPECT_EQ(s.message, "m: 'n' must be an integer from 0 to 100");
    }
  }
}

TEST(MechanismOptionsTest, OnlyTheListedKeys) {
  const json options{{"a", 1}, {"b", 2}};  // outlives the reader, as it must
  MechanismOptions o("m", options);
  EXPECT_TRUE(o.check({"a", "b", "c"}).ok());
  const Status s = o.check({"a"});
  EXPECT_EQ(s.code, Errc::kConfigError);
  EXPECT_NE(s.message.find("'b'"), std::string::npos) << s.message;
}

}  // namespace
}  // namespace authrpc
