// docs/grafana-authrpc.json cannot drift from docs/OPERATIONS.md: every
// metric a panel's expression names (histograms through _bucket/_sum/_count)
// and every metric the page's own alerts name is in the page's metric
// tables, and the dashboard is one Grafana imports (schema version ≥ 36, a
// ${DS_PROMETHEUS} input every panel uses, unique panel ids, a query per
// panel). tests/prometheus_itest.cc runs the same expressions on a real
// Prometheus, and checks that the tables list every metric a server exposes.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <iterator>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#ifndef AUTHRPC_SOURCE_DIR
#error "AUTHRPC_SOURCE_DIR must name the source tree"
#endif

namespace {

std::string ReadSource(const std::string& relative) {
  std::ifstream in(std::string(AUTHRPC_SOURCE_DIR) + "/" + relative, std::ios::binary);
  EXPECT_TRUE(in) << "cannot read " << relative;
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// name → type ("counter", "gauge", "histogram") from the rows of
// OPERATIONS.md's metric tables: | `name` | type | labels | meaning |
std::map<std::string, std::string> DocumentedMetrics(const std::string& page) {
  static const std::regex kRow(R"(^\| `((?:authrpc|process)_[a-z0-9_]+)` \| (counter|gauge|histogram) \|)");
  std::map<std::string, std::string> out;
  std::istringstream lines(page);
  for (std::string line; std::getline(lines, line);) {
    std::smatch m;
    if (std::regex_search(line, m, kRow)) out[m[1]] = m[2];
  }
  return out;
}

// The metric names an expression (or any text) mentions.
std::set<std::string> MetricNamesIn(const std::string& text) {
  static const std::regex kName(R"(\b(?:authrpc|process)_[a-z0-9_]+\b)");
  std::set<std::string> out;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), kName); it != std::sregex_iterator(); ++it) {
    out.insert(it->str());
  }
  return out;
}

// Empty if `name` is documented, as itself or as a histogram's series;
// else why not.
std::string Undocumented(const std::string& name, const std::map<std::string, std::string>& documented) {
  if (documented.contains(name)) return {};
  for (const std::string suffix : {"_bucket", "_sum", "_count"}) {
    if (!name.ends_with(suffix)) continue;
    auto it = documented.find(name.substr(0, name.size() - suffix.size()));
    if (it != documented.end() && it->second == "histogram") return {};
  }
  return name + " is not in docs/OPERATIONS.md's metric tables";
}

class GrafanaDashboard : public ::testing::Test {
 protected:
  void SetUp() override {
    documented_ = DocumentedMetrics(ReadSource("docs/OPERATIONS.md"));
    dashboard_ = nlohmann::json::parse(ReadSource("docs/grafana-authrpc.json"), nullptr, false);
    ASSERT_TRUE(dashboard_.is_object()) << "docs/grafana-authrpc.json is not a JSON object";
    ASSERT_TRUE(dashboard_.contains("panels") && dashboard_["panels"].is_array());
  }
  std::map<std::string, std::string> documented_;
  nlohmann::json dashboard_;
};

TEST_F(GrafanaDashboard, OperationsPageListsTheMetrics) {
  // A floor, so that a table format change that the row pattern no longer
  // matches fails here instead of making every other check vacuous.
  EXPECT_GE(documented_.size(), 30u);
  for (const char* name : {"authrpc_server_negotiations_total", "authrpc_server_negotiation_duration_seconds",
                           "authrpc_server_calls_total", "authrpc_token_operations_total", "process_open_fds"}) {
    EXPECT_TRUE(documented_.contains(name)) << name;
  }
}

TEST_F(GrafanaDashboard, EveryExpressionNamesDocumentedMetrics) {
  int expressions = 0;
  for (const auto& panel : dashboard_["panels"]) {
    const std::string title = panel.value("title", "");
    SCOPED_TRACE(title);
    ASSERT_TRUE(panel.contains("targets") && panel["targets"].is_array() && !panel["targets"].empty());
    for (const auto& target : panel["targets"]) {
      const std::string expr = target.value("expr", "");
      ASSERT_FALSE(expr.empty());
      ++expressions;
      const auto names = MetricNamesIn(expr);
      EXPECT_FALSE(names.empty()) << expr;
      for (const auto& name : names) EXPECT_EQ(Undocumented(name, documented_), "") << expr;
    }
  }
  EXPECT_GE(expressions, 10);
}

TEST_F(GrafanaDashboard, TheOperationsPageNamesOnlyItsOwnMetrics) {
  // The alerts and examples on the page use the tables' names.
  for (const auto& name : MetricNamesIn(ReadSource("docs/OPERATIONS.md"))) {
    EXPECT_EQ(Undocumented(name, documented_), "");
  }
}

TEST_F(GrafanaDashboard, ImportsIntoGrafana) {
  EXPECT_GE(dashboard_.value("schemaVersion", 0), 36);
  EXPECT_FALSE(dashboard_.value("title", "").empty());
  EXPECT_FALSE(dashboard_.value("uid", "").empty());
  bool has_input = false;
  for (const auto& input : dashboard_.value("__inputs", nlohmann::json::array())) {
    has_input |= input.value("name", "") == "DS_PROMETHEUS" && input.value("pluginId", "") == "prometheus";
  }
  EXPECT_TRUE(has_input) << "no DS_PROMETHEUS data source input";
  std::set<int> ids;
  for (const auto& panel : dashboard_["panels"]) {
    const std::string title = panel.value("title", "");
    SCOPED_TRACE(title);
    EXPECT_FALSE(title.empty());
    EXPECT_TRUE(ids.insert(panel.value("id", 0)).second) << "duplicate panel id";
    EXPECT_EQ(panel["datasource"].value("uid", ""), "${DS_PROMETHEUS}");
    for (const auto& target : panel["targets"]) EXPECT_EQ(target["datasource"].value("uid", ""), "${DS_PROMETHEUS}");
    const auto& grid = panel["gridPos"];
    EXPECT_GT(grid.value("w", 0), 0);
    EXPECT_LE(grid.value("x", 0) + grid.value("w", 0), 24);
  }
}

}  // namespace
