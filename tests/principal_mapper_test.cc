// Table-driven tests of auth_to_local mapping (auth/authz/principal_mapper.h):
// Hadoop's KerberosName semantics, tricky principals and regex edge cases.
#include "authrpc/auth/authz/principal_mapper.h"

#include <gtest/gtest.h>

namespace authrpc {
namespace {

struct MapCase {
  const char* name;
  std::vector<std::string> rules;
  const char* principal;
  const char* expected;  // nullptr: refused with PERMISSION_DENIED
  PrincipalMapper::Fallback fallback = PrincipalMapper::Fallback::kRefuse;
};

const std::vector<std::string> kHadoopRules = {
    "RULE:[1:$1@$0](.*@FOREIGN\\.ORG)s/@.*//",
    "RULE:[2:$1@$0](nn@.*EXAMPLE\\.COM)s/.*/hdfs/",
    "RULE:[2:$1@$0](dn@.*EXAMPLE\\.COM)s/.*/hdfs/",
    "RULE:[2:$1/$2@$0]([ji]t/.*@EXAMPLE\\.COM)s/.*/mapred/",
    "DEFAULT",
};

class PrincipalMapperTest : public ::testing::TestWithParam<MapCase> {};

TEST_P(PrincipalMapperTest, Maps) {
  const auto& c = GetParam();
  auto mapper = PrincipalMapper::create(c.rules, "EXAMPLE.COM", c.fallback);
  ASSERT_TRUE(mapper.ok()) << mapper.status().to_string();
  auto name = mapper->map(c.principal);
  if (c.expected == nullptr) {
    ASSERT_FALSE(name.ok()) << "mapped to " << *name;
    EXPECT_EQ(name.code(), Errc::kPermissionDenied);
  } else {
    ASSERT_TRUE(name.ok()) << name.status().to_string();
    EXPECT_EQ(*name, c.expected);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Rules, PrincipalMapperTest,
    ::testing::Values(
        MapCase{"default_user", {"DEFAULT"}, "alice@EXAMPLE.COM", "alice"},
        // Hadoop's DEFAULT takes the first component of any default-realm name.
        MapCase{"default_service", {"DEFAULT"}, "nn/host1.example.com@EXAMPLE.COM", "nn"},
        MapCase{"default_other_realm_refused", {"DEFAULT"}, "alice@OTHER.ORG", nullptr},
        MapCase{"default_realm_is_case_sensitive", {"DEFAULT"}, "alice@example.com", nullptr},
        MapCase{"no_realm_unchanged", {"DEFAULT"}, "alice", "alice"},
        MapCase{"no_rules_refused", {}, "alice@EXAMPLE.COM", nullptr},
        MapCase{"foreign_realm", kHadoopRules, "bob@FOREIGN.ORG", "bob"},
        MapCase{"nn_to_hdfs", kHadoopRules, "nn/nn1.example.com@EXAMPLE.COM", "hdfs"},
        MapCase{"dn_to_hdfs", kHadoopRules, "dn/dn7.example.com@EXAMPLE.COM", "hdfs"},
        MapCase{"jt_to_mapred", kHadoopRules, "jt/jt1.example.com@EXAMPLE.COM", "mapred"},
        MapCase{"tt_falls_to_default", kHadoopRules, "tt/x@EXAMPLE.COM", "tt"},
        MapCase{"instance_other_realm_refused", kHadoopRules, "nn/host@OTHER.ORG", nullptr},
        // The match regex must match the whole formatted string, not a part.
        MapCase{"match_is_anchored", {"RULE:[1:$1@$0](FOREIGN)s/@.*//"}, "bob@FOREIGN", nullptr},
        MapCase{"match_full", {"RULE:[1:$1@$0](.*@FOREIGN)s/@.*//"}, "bob@FOREIGN", "bob"},
        // Component count must equal n exactly.
        MapCase{"component_count", {"RULE:[2:$1](.*)"}, "alice@EXAMPLE.COM", nullptr},
        MapCase{"three_components", {"RULE:[3:$1_$3](.*)"}, "a/b/c@R", "a_c"},
        // No sed part: the formatted string is the name.
        MapCase{"format_only", {"RULE:[2:$1_$2](.*)"}, "svc/db1@EXAMPLE.COM", "svc_db1"},
        // g replaces every match, no g only the first.
        MapCase{"sed_first", {"RULE:[1:$1](.*)s/a/x/"}, "banana@R", "bxnana"},
        MapCase{"sed_global", {"RULE:[1:$1](.*)s/a/x/g"}, "banana@R", "bxnxnx"},
        MapCase{"sed_group_ref", {"RULE:[1:$1](.*)s/(.*)-(.*)/$2$1/"}, "ab-cd@R", "cdab"},
        MapCase{"lowercase", {"RULE:[1:$1](.*)/L"}, "ALICE@R", "alice"},
        MapCase{"lowercase_after_sed", {"RULE:[1:$1@$0](.*@R)s/@.*///L"}, "Bob@R", "bob"},
        // A result with '/' or '@' is refused in hadoop mode...
        MapCase{"non_simple_refused", {"RULE:[2:$1/$2](.*)"}, "a/b@R", nullptr},
        // ...and kept in mit mode, where unmapped names keep their full name.
        MapCase{"mit_non_simple", {"RULE:[2:$1/$2](.*)"}, "a/b@R", "a/b",
                PrincipalMapper::Fallback::kKeepFullName},
        MapCase{"mit_unmapped_full", {"DEFAULT"}, "x@OTHER", "x@OTHER",
                PrincipalMapper::Fallback::kKeepFullName},
        // Escaped separators stay inside a component.
        MapCase{"escaped_slash", {"RULE:[1:$1](.*)s/[^a-z]/_/"}, "a\\/b@R", "a_b"},
        // A sed part cannot contain '/' (Hadoop's parser): refused at parse time below.
        // An escaped '@' survives into the name, which is then non-simple: refused.
        MapCase{"escaped_at_default", {"DEFAULT"}, "a\\@b@EXAMPLE.COM", nullptr},
        // Regex metacharacters in the realm: '.' unescaped matches anything.
        MapCase{"dot_matches_any", {"RULE:[1:$1@$0](.*@EXAMPLE.COM)s/@.*//"}, "u@EXAMPLExCOM", "u"},
        MapCase{"dot_escaped", {"RULE:[1:$1@$0](.*@EXAMPLE\\.COM)s/@.*//"}, "u@EXAMPLExCOM", nullptr},
        // Empty result is refused rather than becoming the empty user.
        MapCase{"empty_result", {"RULE:[1:$1](.*)s/.*//"}, "alice@R", nullptr},
        MapCase{"empty_component_refused", {"DEFAULT"}, "/x@EXAMPLE.COM", nullptr},
        MapCase{"first_rule_wins", {"RULE:[1:first](.*)", "RULE:[1:second](.*)"}, "u@R", "first"},
        // Expressions are POSIX extended (regcomp, as MIT Kerberos's): the
        // ECMAScript spellings rules use are translated...
        MapCase{"digit_class", {"RULE:[1:$1](u\\d+)s/\\d/N/g"}, "u42@R", "uNN"},
        MapCase{"escape_in_brackets", {"RULE:[1:$1](.*)s/[\\.]/_/g"}, "a.b.c@R", "a_b_c"},
        MapCase{"whole_match_ref", {"RULE:[1:$1](.*)s/b+/<$&>/"}, "abbc@R", "a<bb>c"},
        MapCase{"dollar_dollar", {"RULE:[1:$1](.*)s/b/$$/"}, "abc@R", "a$c"},
        MapCase{"prefix_suffix_refs", {"RULE:[1:$1](.*)s/b/[$`|$']/"}, "abc@R", "a[a|c]c"},
        MapCase{"global_empty_matches", {"RULE:[1:$1](.*)s/x*/-/g"}, "ab@R", "-a-b-"},
        MapCase{"alternation_anchored_whole", {"RULE:[1:$1](a|b)s/.*/ok/"}, "ab@R", nullptr},
        MapCase{"alternation", {"RULE:[1:$1](a|b)s/.*/ok/"}, "b@R", "ok"},
        // ...and matched without backtracking blow-ups: each of these took
        // seconds to forever with std::regex on this short principal.
        MapCase{"nested_star", {"RULE:[1:$1@$0](.**@PARTNER\\.ORG)s/@.*//"}, "alice@EXAMPLE.COM", nullptr},
        MapCase{"many_stars", {"RULE:[1:$1@$0](.*.*.*.*.*.*.*.*.*.*.*.*.*.*.*.*.*.*@X)s/@.*//"},
                "alice@EXAMPLE.COM", nullptr},
        MapCase{"nested_groups_sed", {"RULE:[1:$1](.*)s/((a|a)*)*b//"}, "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaac@R",
                "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaac"},
        MapCase{"nested_groups_sed_match", {"RULE:[1:$1](.*)s/((a|a)*)*c/x/"}, "aaaaaaaaaaaaaaaaaaaac@R", "x"}),
    [](const auto& param_info) { return std::string(param_info.param.name); });

TEST(PrincipalMapperConfig, RefusesBadRules) {
  for (const std::vector<std::string>& rules : std::vector<std::vector<std::string>>{
           {"RULE:[1:$1"},             // unterminated
           {"RULE:[x:$1](.*)"},        // n not a number
           {"RULE:[0:$0](.*)"},        // zero components
           {"RULE:[1:$2](.*)"},        // index out of range
           {"RULE:[1:$](.*)"},         // '$' without digits
           {"RULE:[1:$1]([)"},         // bad regex
           {"RULE:[1:$1](.*)s/(/x/"},  // bad sed regex
           {"DEFAULTX"},
           {"rule:[1:$1]"},
           {"RULE:[1:$1](.*)s/\\//_/"},   // '/' inside the sed part
           // What POSIX extended expressions cannot do as ECMAScript does:
           {"RULE:[1:$1](.*?)"},               // lazy quantifier
           {"RULE:[1:$1](.*)s/a+?/x/"},        // lazy quantifier
           {"RULE:[1:$1](?:a)"},               // non-capturing group
           {"RULE:[1:$1](.*)s/(?=a)//"},       // look-ahead
           {"RULE:[1:$1](.*)s/(a)\\1//"},    // back-reference
           {"RULE:[1:$1](\\n)"},             // letter escape
           {"RULE:[1:$1](.*)s/[\\]]//"},     // escaped ']' in brackets
           {"RULE:[1:$1](a[b)"}}) {            // unclosed bracket
    auto mapper = PrincipalMapper::create(rules, "R");
    EXPECT_FALSE(mapper.ok()) << rules[0];
    if (!mapper.ok()) {
      EXPECT_EQ(mapper.code(), Errc::kConfigError) << rules[0];
    }
  }
}

}  // namespace
}  // namespace authrpc
