// minibench end to end with a small N: runs the built binary as a subprocess
// (its server child, throwaway KDC, certificates and token included) and
// checks what it writes — every row in the JSON, one connection per session
// (the server's accepted-connection count per row), the summary table, a
// well-formed SVG plot, --concurrency, --tls, --metrics and usage errors.
// Kept small so the whole file runs in well under 30 s on 2 cores.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cmath>
#include <filesystem>
#include <map>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "authrpc/auth/mechanisms/simple/simple.h"
#include "minibench/floor_check.h"
#include "minibench/plot.h"
#include "minibench/report.h"
#include "minibench/rotation.h"
#include "tests/testing/test_server.h"
#include "tests/testing/scoped_temp_dir.h"
#include "tests/testing/mini_kdc.h"
#include "authrpc/base/log.h"
#include "authrpc/server/server.h"

#ifndef MINIBENCH_BIN
#error "MINIBENCH_BIN must name the minibench binary"
#endif

extern char** environ;

namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using Json = nlohmann::json;

using authrpc::testing::ScopedTempDir;

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

struct RunResult {
  int exit_code = -1;  // -1: killed by a signal
  std::string out, err;
};

// Runs minibench with `args`, its stdout and stderr in files of `dir`.
RunResult run_minibench(const ScopedTempDir& dir, const std::vector<std::string>& args) {
  std::vector<std::string> argv_s = {MINIBENCH_BIN};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  const std::string out = dir.file("stdout"), err = dir.file("stderr");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_addopen(&actions, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  RunResult r;
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) return r;
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  r.out = read_file(out);
  r.err = read_file(err);
  return r;
}

std::string describe(const RunResult& r) {
  return "exit " + std::to_string(r.exit_code) + "\n--- stdout\n" + r.out + "\n--- stderr\n" +
         r.err;
}

// Runs minibench with `args`, its JSON report (--json) in a fresh directory
// and --quiet; `r` is the run and `doc` the report. Fails the test if the run
// failed or the report does not parse.
void run_with_json(RunResult& r, Json& doc, std::vector<std::string> args) {
  ScopedTempDir dir("minibench-test");
  ASSERT_TRUE(dir.ok());
  const std::string json = dir.file("out.json");
  args.insert(args.end(), {"--json", json, "--quiet"});
  r = run_minibench(dir, args);
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  doc = Json::parse(read_file(json), nullptr, false);
  ASSERT_FALSE(doc.is_discarded()) << describe(r);
}

// A small XML well-formedness check, enough for the SVG minibench writes:
// one root element, properly nested and closed tags, quoted attributes
// (unique per element), known or numeric entities, no stray '<' or '&'.
class XmlChecker {
 public:
  explicit XmlChecker(std::string text) : s_(std::move(text)) {}

  // Empty on success, else what is wrong and where.
  std::string check() {
    skip_space();
    if (s_.compare(i_, 5, "<?xml") == 0) {
      const auto end = s_.find("?>", i_);
      if (end == std::string::npos) {
        fail("unterminated XML declaration");
        return error_;
      }
      i_ = end + 2;
    }
    skip_misc();
    if (!element()) return error_;
    root_ = first_name_;
    skip_misc();
    if (i_ != s_.size()) {
      fail("content after the root element");
      return error_;
    }
    return {};
  }
  const std::string& root() const { return root_; }
  std::size_t elements() const { return elements_; }

 private:
  // Records the first error; returns false for `return fail(...)`.
  bool fail(const std::string& why) {
    if (error_.empty()) error_ = why + " at offset " + std::to_string(i_);
    return false;
  }
  void skip_space() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
  }
  void skip_misc() {
    for (;;) {
      skip_space();
      if (s_.compare(i_, 4, "<!--") != 0) return;
      const auto end = s_.find("-->", i_ + 4);
      if (end == std::string::npos) return;
      i_ = end + 3;
    }
  }
  static bool name_char(char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.' ||
           c == ':' || (static_cast<unsigned char>(c) & 0x80);
  }
  std::string name() {
    const std::size_t start = i_;
    while (i_ < s_.size() && name_char(s_[i_])) ++i_;
    return s_.substr(start, i_ - start);
  }
  bool entity() {  // at '&'
    const auto end = s_.find(';', i_);
    if (end == std::string::npos || end - i_ > 10) return fail("bad entity");
    const std::string e = s_.substr(i_ + 1, end - i_ - 1);
    static const std::set<std::string> known = {"lt", "gt", "amp", "quot", "apos"};
    const bool numeric = e.size() > 1 && e[0] == '#';
    if (!known.contains(e) && !numeric) return fail("unknown entity &" + e + ";");
    i_ = end + 1;
    return true;
  }
  bool element() {
    if (i_ >= s_.size() || s_[i_] != '<') return fail("expected an element");
    ++i_;
    const std::string tag = name();
    if (tag.empty()) return fail("empty tag name");
    if (first_name_.empty()) first_name_ = tag;
    ++elements_;
    std::set<std::string> attributes;
    for (;;) {
      skip_space();
      if (i_ >= s_.size()) return fail("unterminated tag <" + tag);
      if (s_.compare(i_, 2, "/>") == 0) {
        i_ += 2;
        return true;
      }
      if (s_[i_] == '>') {
        ++i_;
        break;
      }
      const std::string attr = name();
      if (attr.empty() || !attributes.insert(attr).second) {
        return fail("bad or repeated attribute in <" + tag);
      }
      skip_space();
      if (i_ >= s_.size() || s_[i_] != '=') return fail("attribute without =");
      ++i_;
      skip_space();
      if (i_ >= s_.size() || (s_[i_] != '"' && s_[i_] != '\'')) {
        return fail("unquoted attribute");
      }
      const char quote = s_[i_++];
      while (i_ < s_.size() && s_[i_] != quote) {
        if (s_[i_] == '<') return fail("'<' in an attribute");
        if (s_[i_] == '&') {
          if (!entity()) return false;
        } else {
          ++i_;
        }
      }
      if (i_ >= s_.size()) return fail("unterminated attribute");
      ++i_;
    }
    // Content until the matching end tag.
    for (;;) {
      if (i_ >= s_.size()) return fail("<" + tag + "> is never closed");
      if (s_.compare(i_, 4, "<!--") == 0) {
        const auto end = s_.find("-->", i_ + 4);
        if (end == std::string::npos) return fail("unterminated comment");
        i_ = end + 3;
      } else if (s_.compare(i_, 2, "</") == 0) {
        i_ += 2;
        const std::string end = name();
        skip_space();
        if (end != tag || i_ >= s_.size() || s_[i_] != '>') {
          return fail("</" + end + "> closes <" + tag + ">");
        }
        ++i_;
        return true;
      } else if (s_[i_] == '<') {
        if (!element()) return false;
      } else if (s_[i_] == '&') {
        if (!entity()) return false;
      } else {
        ++i_;
      }
    }
  }

  std::string s_;
  std::size_t i_ = 0;
  std::string error_, first_name_, root_;
  std::size_t elements_ = 0;
};

TEST(XmlCheckerTest, TellsWellFormedFromBroken) {
  struct Case {
    const char* xml;
    bool ok;
  };
  const Case cases[] = {
      {"<?xml version=\"1.0\"?>\n<svg a=\"1\"><g><text>a &amp; b &#181;s</text></g><path d='M0 0'/></svg>\n", true},
      {"<svg><g></svg>", false},
      {"<svg a=1></svg>", false},
      {"<svg a=\"1\" a=\"2\"></svg>", false},
      {"<svg><text>a & b</text></svg>", false},
      {"<svg></svg><svg></svg>", false},
      {"<svg><text>x</text>", false},
  };
  for (const auto& c : cases) {
    XmlChecker checker(c.xml);
    EXPECT_EQ(checker.check().empty(), c.ok) << c.xml;
  }
}

std::set<std::string> row_names(const Json& doc) {
  std::set<std::string> names;
  for (const auto& row : doc.at("rows")) names.insert(row.at("name").get<std::string>());
  return names;
}

// `minibench sessions` with its default method, transport and TLS selection:
// every row is in the JSON, each session opened a connection of its own, the
// summary table is printed and the plot is a well-formed SVG with a line and
// a legend entry per row.
TEST(MinibenchTest, DefaultSessionsRunHasEveryRowSummaryAndPlot) {
  ScopedTempDir dir("minibench-test");
  ASSERT_TRUE(dir.ok());
  const std::string json = dir.file("out.json"), svg = dir.file("out.svg");
  constexpr int kN = 12, kWarmup = 3;
  const RunResult r = run_minibench(dir, {"sessions", "-n", std::to_string(kN), "--warmup",
                                    std::to_string(kWarmup), "--blocks", "2", "--json", json,
                                    "--plot", svg});
  ASSERT_EQ(r.exit_code, 0) << describe(r);

  const Json doc = Json::parse(read_file(json), nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(doc.is_discarded()) << "the JSON does not parse:\n" << read_file(json);
  std::set<std::string> expected = {"floor/tcp", "floor/unix",     "floor/gss",
                                    "floor/gss-unix", "floor/tls", "simple+tls-resume/tcp"};
  for (const char* method :
       {"simple", "kerberos", "kerberos-sasl", "token", "token-digest", "token-scram"}) {
    expected.insert(std::string(method) + "/tcp");
    expected.insert(std::string(method) + "/unix");
    expected.insert(std::string(method) + "+tls/tcp");
  }
  // A bearer secret: TLS rows only, warm and cold, and the cold check per
  // algorithm in process.
  const std::set<std::string> in_process = {"jwt-verify/RS256", "jwt-verify/PS256",
                                            "jwt-verify/ES256", "jwt-verify/EdDSA"};
  expected.insert({"jwt+tls/tcp", "jwt-cold+tls/tcp"});
  expected.insert(in_process.begin(), in_process.end());
  EXPECT_EQ(row_names(doc), expected);
  for (const auto& row : doc.at("rows")) {
    const std::string name = row.at("name");
    EXPECT_EQ(row.at("n"), kN) << name;
    EXPECT_GT(row.at("p50_us").get<double>(), 0) << name;
    EXPECT_GE(row.at("p99_us").get<double>(), row.at("p50_us").get<double>()) << name;
    if (in_process.contains(name)) {
      EXPECT_EQ(row.at("transport"), "in-process") << name;
      EXPECT_TRUE(row.at("ratio").is_null()) << name;
      EXPECT_TRUE(row.at("server_connections").is_null()) << name;
      continue;
    }
    EXPECT_FALSE(row.at("ratio").is_null()) << name << " has no floor";
    // --metrics on (the default): every authrpc row counted, no floor can.
    EXPECT_EQ(row.at("metrics"), row.at("method") != "none") << name;
    if (row.at("method") == "none") continue;
    // Each session opened a connection of its own: the server accepted
    // exactly warm-up + n connections during the row.
    EXPECT_EQ(row.at("server_connections"), kWarmup + kN) << name;
    if (row.at("method").get<std::string>().starts_with("kerberos")) {
      EXPECT_EQ(row.at("kdc_requests_per_session"), 0.0) << name;
      EXPECT_FALSE(row.at("caching").is_null()) << name;
    }
  }
  EXPECT_EQ(doc.at("run").at("n"), kN);
  EXPECT_EQ(doc.at("run").at("concurrency"), 1);
  EXPECT_EQ(doc.at("run").at("metrics"), "on");
  EXPECT_GT(doc.at("run").at("metrics_counted").at("server").get<double>(), 0);
  EXPECT_TRUE(doc.at("metrics_cost").empty());
  // When, where and what was measured, so that runs can be compared later.
  const Json& run = doc.at("run");
  for (const char* key : {"time_utc", "host", "cpus", "cpus_usable", "kernel", "load_average",
                          "version", "build_type", "openssl", "krb5", "sasl"}) {
    ASSERT_TRUE(run.contains(key)) << key << " in " << run.dump();
    EXPECT_FALSE(run.at(key).is_null()) << key << " in " << run.dump();
  }
  for (const char* key : {"cpu_model", "commit"}) {  // null where unreadable (no git, not x86)
    EXPECT_TRUE(run.contains(key)) << key << " in " << run.dump();
  }
  EXPECT_THAT(run.at("time_utc").get<std::string>(), ::testing::MatchesRegex(
                                                         "20[0-9][0-9]-[01][0-9]-[0-3][0-9]T.*Z"));
  EXPECT_GE(run.at("cpus").get<int>(), 1);
  EXPECT_THAT(run.at("openssl").get<std::string>(), HasSubstr("OpenSSL"));
  EXPECT_THAT(run.at("krb5").get<std::string>(), HasSubstr("Kerberos 5 release"));

  // The summary table: its header and one line per transport x TLS.
  for (const char* part : {"summary (shape of HADOOP-6637)", "No security", "Delegation token", "\n  tcp ",
                           "\n  unix ", "\n  tcp + TLS ", "\n  tcp + TLS, resumed",
                           "the server accepted exactly warm-up + n connections",
                           "bearer access tokens (OAuth 2.0 JWT",
                           "jwt+tls/tcp  p50 <= 1.10 x simple+tls/tcp p50: ratio"}) {
    EXPECT_THAT(r.out, HasSubstr(part));
  }
  EXPECT_THAT(r.out, ::testing::ContainsRegex("cold JWT check .*RS256 [0-9.]+ µs, PS256 [0-9.]+ "
                                              "µs, ES256 [0-9.]+ µs, EdDSA [0-9.]+ µs"));

  const std::string plot = read_file(svg);
  XmlChecker checker(plot);
  EXPECT_EQ(checker.check(), "");
  EXPECT_EQ(checker.root(), "svg");
  for (const auto& name : expected) {
    EXPECT_THAT(plot, HasSubstr("<title>" + name + "</title>")) << "no bar for " << name;
  }
  EXPECT_THAT(plot, HasSubstr("latency per session or call (log scale)"));
  EXPECT_THAT(plot, HasSubstr("p50 over the floor's p50 (linear)"));
  for (const char* panel : {"sessions over tcp", "sessions over unix", "sessions over tcp + TLS",
                            "in process (no network)"}) {
    EXPECT_THAT(plot, HasSubstr(">" + std::string(panel) + "</text>"));
  }
  // Every target is drawn (a tick on its row's ratio bar) and judged.
  auto count = [&](const std::string& what) {
    std::size_t n = 0;
    for (auto at = plot.find(what); at != std::string::npos; at = plot.find(what, at + 1)) ++n;
    return n;
  };
  EXPECT_EQ(count("class=\"target\""), doc.at("targets").size());
  EXPECT_EQ(count("class=\"met\"") + count("class=\"not-met\""), doc.at("targets").size());
  // The footer: when, where and what ran.
  EXPECT_THAT(plot, HasSubstr("run " + run.at("time_utc").get<std::string>()));
  EXPECT_THAT(plot, HasSubstr("load average " + run.at("load_average").dump() + " at the start"));
  EXPECT_THAT(plot, HasSubstr("authrpc " + run.at("version").get<std::string>()));
}

// --concurrency K: every row still has n sessions (spread over K threads),
// one connection each, and a rate.
TEST(MinibenchTest, ConcurrencyRunsEverySessionOnItsOwnConnection) {
  RunResult r;
  Json doc;
  ASSERT_NO_FATAL_FAILURE(
      run_with_json(r, doc,
                    {"sessions", "--method", "simple,kerberos", "--tls", "off", "--concurrency", "4", "-n",
                     "20", "--warmup", "4", "--blocks", "2"}));
  EXPECT_EQ(row_names(doc),
            (std::set<std::string>{"floor/tcp", "floor/unix", "floor/gss", "floor/gss-unix",
                                   "simple/tcp", "simple/unix", "kerberos/tcp", "kerberos/unix"}));
  for (const auto& row : doc.at("rows")) {
    EXPECT_EQ(row.at("n"), 20) << row.at("name");
    EXPECT_GT(row.at("per_s").get<double>(), 0) << row.at("name");
    if (row.at("method") != "none") {
      EXPECT_EQ(row.at("server_connections"), 24) << row.at("name");
    }
  }
  EXPECT_EQ(doc.at("run").at("concurrency"), 4);
  EXPECT_THAT(r.out, HasSubstr("No security"));
  // Sessions/s held to the floor's: a line and a JSON entry per
  // row with a rate target, each with the ratio of the two rows' per_s.
  EXPECT_THAT(r.out, HasSubstr("sessions c4: sessions/s simple/tcp / floor/tcp = "));
  EXPECT_THAT(r.out, HasSubstr("sessions c4: sessions/s kerberos/unix / floor/gss-unix = "));
  std::map<std::string, double> per_s;
  for (const auto& row : doc.at("rows")) per_s[row.at("name")] = row.at("per_s").get<double>();
  std::set<std::string> held;
  for (const auto& t : doc.at("rate_targets")) {
    held.insert(t.at("row").get<std::string>());
    const double expected = per_s.at(t.at("row")) / per_s.at(t.at("floor"));
    EXPECT_NEAR(t.at("ratio").get<double>(), expected, 0.01 * expected + 0.001) << t.at("row");
    EXPECT_EQ(t.at("limit").get<double>(), t.at("row").get<std::string>().starts_with("simple")
                                               ? 0.9 : 0.95) << t.at("row");
    // CPU per session of both processes, row and floor: the floor's over
    // the row's, as the rates would be on an otherwise idle machine.
    std::map<std::string, double> cpu;
    for (const auto& row : doc.at("rows")) {
      ASSERT_TRUE(row.contains("cpu_us")) << row.at("name");
      cpu[row.at("name")] = row.at("cpu_us").get<double>();
      EXPECT_GT(cpu[row.at("name")], 0) << row.at("name");
    }
    const double cpu_expected = cpu.at(t.at("floor")) / cpu.at(t.at("row"));
    EXPECT_NEAR(t.at("cpu_ratio").get<double>(), cpu_expected, 0.02 * cpu_expected + 0.002)
        << t.at("row");
  }
  EXPECT_THAT(r.out, HasSubstr("(CPU per session "));
  EXPECT_EQ(held, (std::set<std::string>{"simple/tcp", "simple/unix", "kerberos/tcp",
                                         "kerberos/unix"}));
}

// --tls on: only the TLS rows (and floor/tls).
TEST(MinibenchTest, TlsOnMeasuresOnlyTlsRows) {
  RunResult r;
  Json doc;
  ASSERT_NO_FATAL_FAILURE(run_with_json(
      r, doc,
      {"sessions", "--method", "simple", "--tls", "on", "-n", "5", "--warmup", "1", "--blocks", "1"}));
  EXPECT_EQ(row_names(doc),
            (std::set<std::string>{"floor/tls", "simple+tls/tcp", "simple+tls-resume/tcp"}));
}

// jwt (a bearer secret) with plaintext rows asked for: its rows are the TLS
// ones only — the warm row held to simple+tls/tcp, the cold one against a
// second server with its cache off, one connection per session each — and
// the cold check per algorithm; calls still run (over simple). With the
// servers in child processes and, both at once, in minibench's own.
TEST(MinibenchTest, JwtHasTlsRowsOnlyAndItsTarget) {
  for (const bool in_process : {false, true}) {
    SCOPED_TRACE(in_process ? "--in-process" : "server child");
    constexpr int kN = 6, kWarmup = 2;
    std::vector<std::string> args = {"--method", "simple,jwt", "--transport", "tcp", "-n",
                                     std::to_string(kN), "--warmup", std::to_string(kWarmup),
                                     "--blocks", "2"};
    if (in_process) args.push_back("--in-process");
    RunResult r;
    Json doc;
    ASSERT_NO_FATAL_FAILURE(run_with_json(r, doc, args));
    EXPECT_EQ(row_names(doc),
              (std::set<std::string>{"floor/tcp", "simple/tcp", "floor/tls", "simple+tls/tcp",
                                     "simple+tls-resume/tcp", "jwt+tls/tcp", "jwt-cold+tls/tcp",
                                     "jwt-verify/RS256", "jwt-verify/PS256", "jwt-verify/ES256",
                                     "jwt-verify/EdDSA", "calls/tcp", "floor/tcp-pingpong"}));
    for (const auto& row : doc.at("rows")) {
      const std::string name = row.at("name");
      if (name.starts_with("jwt+") || name.starts_with("jwt-cold+")) {
        EXPECT_EQ(row.at("method"), "jwt") << name;
        EXPECT_EQ(row.at("floor"), "floor/tls") << name;
        EXPECT_EQ(row.at("server_connections"), kWarmup + kN) << name;
        EXPECT_FALSE(row.at("caching").is_null()) << name;
      }
    }
    bool target = false;
    for (const auto& t : doc.at("targets")) {
      if (t.at("row") != "jwt+tls/tcp") continue;
      target = true;
      EXPECT_EQ(t.at("floor"), "simple+tls/tcp");
      EXPECT_DOUBLE_EQ(t.at("limit").get<double>(), 1.1);
      EXPECT_FALSE(t.at("ratio").is_null());
    }
    EXPECT_TRUE(target) << doc.at("targets").dump();
  }
}

// --in-process: the same rows, the server on threads of minibench itself.
TEST(MinibenchTest, InProcessServerCountsConnectionsToo) {
  RunResult r;
  Json doc;
  ASSERT_NO_FATAL_FAILURE(run_with_json(r, doc,
                                        {"sessions", "--method", "simple", "--tls", "off", "--in-process",
                                         "-n", "6", "--warmup", "2", "--blocks", "1"}));
  EXPECT_EQ(row_names(doc),
            (std::set<std::string>{"floor/tcp", "floor/unix", "simple/tcp", "simple/unix"}));
  for (const auto& row : doc.at("rows")) {
    if (row.at("method") != "none") {
      EXPECT_EQ(row.at("server_connections"), 8) << row.at("name");
    }
  }
  EXPECT_EQ(doc.at("run").at("server"), "in process");
}

// --metrics compare: each plaintext session row and the calls row again,
// in the same blocks, against the child's metrics-off server by a client
// that counts nothing ("<row> [metrics off]", one connection per session
// there too), the metrics-cost table and target lines, and the JSON fields;
// the server that counts has counted, its twin has no registry.
TEST(MinibenchTest, MetricsCompareMeasuresEachRowAgainstAServerThatCountsNothing) {
  constexpr int kN = 6, kWarmup = 2;
  RunResult r;
  Json doc;
  ASSERT_NO_FATAL_FAILURE(run_with_json(r, doc,
                                        {"--method", "simple", "--tls", "off", "--transport", "tcp",
                                         "--metrics", "compare", "-n", std::to_string(kN), "--warmup",
                                         std::to_string(kWarmup), "--blocks", "2"}));
  EXPECT_EQ(row_names(doc),
            (std::set<std::string>{"floor/tcp", "simple/tcp", "simple/tcp [metrics off]",
                                   "floor/tcp-pingpong", "calls/tcp", "calls/tcp [metrics off]"}));
  for (const auto& row : doc.at("rows")) {
    const std::string name = row.at("name");
    EXPECT_EQ(row.at("n"), kN) << name;
    // Floors have no authrpc client or server to count.
    EXPECT_EQ(row.at("metrics"), row.at("method") != "none" && !name.ends_with(" [metrics off]"))
        << name;
    if (name.starts_with("simple/")) {
      EXPECT_EQ(row.at("server_connections"), kWarmup + kN) << name;
      EXPECT_EQ(row.at("floor"), "floor/tcp") << name;
    }
  }
  std::map<std::string, Json> costs;
  for (const auto& c : doc.at("metrics_cost")) costs[c.at("row").get<std::string>()] = c;
  ASSERT_EQ(costs.size(), 2u) << doc.at("metrics_cost").dump();
  for (const std::string row : {"simple/tcp", "calls/tcp"}) {
    ASSERT_TRUE(costs.contains(row)) << row;
    const Json& c = costs.at(row);
    EXPECT_EQ(c.at("off_row"), row + " [metrics off]");
    EXPECT_GT(c.at("p50_on_us").get<double>(), 0) << row;
    EXPECT_GT(c.at("p50_off_us").get<double>(), 0) << row;
    EXPECT_NEAR(c.at("ratio").get<double>(),
                c.at("p50_on_us").get<double>() / c.at("p50_off_us").get<double>(), 0.01)
        << row;
    EXPECT_EQ(c.at("block_ratios").size(), 2u) << row;  // one per block: paired
    EXPECT_GT(c.at("block_ratio_median").get<double>(), 0) << row;
    EXPECT_DOUBLE_EQ(c.at("limit").get<double>(), 1.03) << row;
    EXPECT_EQ(c.at("met").get<bool>(), c.at("ratio").get<double>() <= 1.03) << row;
    EXPECT_THAT(r.out, ::testing::ContainsRegex("metrics cost: " + row +
                                                " p50 on/off = [0-9.]+ (<=|>) 1.03 -> (met|NOT met)"));
  }
  EXPECT_THAT(r.out, HasSubstr("metrics cost (--metrics compare)"));
  EXPECT_THAT(r.out, Not(HasSubstr("metrics cost: kerberos/tcp")));  // no kerberos row ran
  // The compared rows keep their own targets; their twins have none.
  for (const auto& t : doc.at("targets")) {
    EXPECT_FALSE(t.at("row").get<std::string>().ends_with("[metrics off]")) << t.dump();
  }
  const Json& run = doc.at("run");
  EXPECT_EQ(run.at("metrics"), "compare");
  EXPECT_GT(run.at("metrics_counted").at("server").get<double>(), 0) << run.dump();
  EXPECT_GT(run.at("metrics_counted").at("clients").get<double>(), 0) << run.dump();
  EXPECT_TRUE(run.at("metrics_counted").at("nometrics_server").is_null()) << run.dump();
  EXPECT_THAT(r.out, HasSubstr("--metrics compare: the server counted, the metrics-off server had "
                               "no metrics registry, the rows' clients counted"));
}

// --metrics off: the same rows as on, no twins; neither the server nor the
// rows' clients count anything. --metrics compare needs the spawned server.
TEST(MinibenchTest, MetricsOffCountsNothing) {
  RunResult r;
  Json doc;
  ASSERT_NO_FATAL_FAILURE(run_with_json(r, doc,
                                        {"--method", "simple", "--tls", "off", "--transport", "tcp",
                                         "--metrics", "off", "-n", "4", "--warmup", "1", "--blocks", "1"}));
  EXPECT_EQ(row_names(doc), (std::set<std::string>{"floor/tcp", "simple/tcp",
                                                   "floor/tcp-pingpong", "calls/tcp"}));
  for (const auto& row : doc.at("rows")) EXPECT_EQ(row.at("metrics"), false) << row.dump();
  EXPECT_TRUE(doc.at("metrics_cost").empty());
  EXPECT_THAT(r.out, Not(HasSubstr("metrics cost")));
  const Json& counted = doc.at("run").at("metrics_counted");
  EXPECT_TRUE(counted.at("server").is_null()) << counted.dump();
  EXPECT_EQ(counted.at("clients").get<double>(), 0) << counted.dump();
  EXPECT_FALSE(counted.contains("nometrics_server")) << counted.dump();
  EXPECT_THAT(r.out, HasSubstr("--metrics off: the server had no metrics registry, the rows' "
                               "clients counted nothing (their authrpc_* counters"));

  ScopedTempDir dir("minibench-test");
  ASSERT_TRUE(dir.ok());
  const RunResult external =
      run_minibench(dir, {"--metrics", "compare", "--server", "tcp://127.0.0.1:1"});
  EXPECT_EQ(external.exit_code, 2) << describe(external);
  EXPECT_THAT(external.err, HasSubstr("--metrics compare needs the spawned server"));
}

// calls --concurrency K --depth D: calls under load. Each transport's row
// beside its echo floor (the same K connections and D in flight on raw
// sockets), over TLS too unless --tls off; calls/s, p50/p99/p99.9 and the
// calls/s ratio per row, the calls/s target lines for tcp and unix, and the
// JSON. With one server thread the echo floors run on the server's IO
// thread, with more on threads of their own: both ways.
TEST(MinibenchTest, CallsUnderLoadHaveEchoFloorsAndRateTargets) {
  struct Case {
    std::vector<std::string> args;
    std::set<std::string> transports;  // "tls": the +tls row
  };
  const std::vector<Case> cases = {
      {{"--server-threads", "1"}, {"tcp", "unix", "tls"}},
      {{"--server-threads", "2", "--tls", "off", "--transport", "unix"}, {"unix"}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.args[1] + " server thread(s)");
    std::vector<std::string> args = {"calls", "--concurrency", "2", "--depth", "3", "--duration",
                                     "0.4", "--blocks", "2"};
    args.insert(args.end(), c.args.begin(), c.args.end());
    RunResult r;
    Json doc;
    ASSERT_NO_FATAL_FAILURE(run_with_json(r, doc, args));
    std::set<std::string> expected;
    for (const auto& t : c.transports) {
      expected.insert("floor/" + t + "-echo c2d3");
      expected.insert(t == "tls" ? "calls+tls/tcp c2d3" : "calls/" + t + " c2d3");
    }
    EXPECT_EQ(row_names(doc), expected);
    std::map<std::string, Json> rows;
    for (const auto& row : doc.at("rows")) rows[row.at("name").get<std::string>()] = row;
    for (const auto& [name, row] : rows) {
      EXPECT_GT(row.at("n").get<double>(), 0) << name;
      EXPECT_GT(row.at("per_s").get<double>(), 0) << name;
      EXPECT_GT(row.at("p50_us").get<double>(), 0) << name;
      EXPECT_GE(row.at("p99_us").get<double>(), row.at("p50_us").get<double>()) << name;
      EXPECT_GE(row.at("p999_us").get<double>(), row.at("p99_us").get<double>()) << name;
      EXPECT_EQ(row.at("connections"), 2) << name;
      EXPECT_EQ(row.at("depth"), 3) << name;
      EXPECT_DOUBLE_EQ(row.at("duration_s").get<double>(), 0.4) << name;
      EXPECT_EQ(row.at("block_per_s").size(), 2u) << name;  // one per block: paired
      EXPECT_EQ(row.at("tls"), name.starts_with("calls+tls/") || name.starts_with("floor/tls-"))
          << name;
      if (row.at("method") == "none") {
        EXPECT_EQ(row.at("per_s_ratio"), 1.0) << name;  // a floor is its own
        continue;
      }
      EXPECT_EQ(row.at("method"), "simple") << name;
      const std::string floor = row.at("floor");
      ASSERT_TRUE(rows.contains(floor)) << name << " is compared with " << floor;
      EXPECT_NEAR(row.at("per_s_ratio").get<double>(),
                  row.at("per_s").get<double>() / rows.at(floor).at("per_s").get<double>(), 0.01)
          << name;
    }
    // The calls/s targets: tcp and unix, each against its own floor.
    std::set<std::string> targeted;
    for (const auto& t : doc.at("rate_targets")) {
      const std::string row = t.at("row");
      targeted.insert(row);
      EXPECT_DOUBLE_EQ(t.at("limit").get<double>(), 0.8) << row;
      EXPECT_EQ(t.at("floor"), rows.at(row).at("floor")) << row;
      // The JSON's ratio is rounded to two decimals, "met" is decided on the
      // exact one: within a rounding step of the limit either is right.
      const double ratio = t.at("ratio").get<double>();
      if (std::abs(ratio - 0.8) > 0.006) EXPECT_EQ(t.at("met").get<bool>(), ratio >= 0.8) << row;
    }
    std::set<std::string> plaintext;
    for (const auto& t : c.transports) {
      if (t == "tls") continue;
      plaintext.insert("calls/" + t + " c2d3");
      EXPECT_THAT(r.out, ::testing::ContainsRegex("calls c2 d3: calls/s " + t +
                                                  "/floor = [0-9.]+ (>=|<) 0.8 -> (met|NOT met)"));
    }
    EXPECT_EQ(targeted, plaintext);
    EXPECT_THAT(r.out, HasSubstr("calls under load: 2 connections (a client thread each) x 3 "
                                 "calls in flight"));
    EXPECT_EQ(doc.at("run").at("concurrency"), 2);
    EXPECT_EQ(doc.at("run").at("depth"), 3);
  }
}

// --floors off (scripts/call_cost.sh profiles a calls row alone): no echo
// floor is measured, so the row has no ratio and its target says so.
TEST(MinibenchTest, CallsWithFloorsOffMeasureTheRowAlone) {
  RunResult r;
  Json doc;
  ASSERT_NO_FATAL_FAILURE(
      run_with_json(r, doc,
                    {"calls", "--concurrency", "2", "--depth", "3", "--duration", "0.2", "--blocks", "1",
                     "--tls", "off", "--transport", "tcp", "--floors", "off"}));
  EXPECT_EQ(row_names(doc), std::set<std::string>{"calls/tcp c2d3"});
  EXPECT_THAT(r.out, HasSubstr("calls c2 d3: calls/s tcp/floor >= 0.8: not measured"));
}

// calls --api proto: on each transport, the typed rows (authrpc.bench.Echo
// through its generated stub) beside bytes rows sending the same encoded
// messages, with the ping-pong floor and without the 1-byte row; the target
// holds proto small to bytes small, and its line is printed.
TEST(MinibenchTest, CallsApiProtoMeasuresTypedRowsBesideTheirBytesRows) {
  constexpr int kN = 6;
  RunResult r;
  Json doc;
  ASSERT_NO_FATAL_FAILURE(run_with_json(
      r, doc, {"calls", "--api", "proto", "-n", std::to_string(kN), "--warmup", "2", "--blocks", "2"}));
  std::set<std::string> expected;
  for (const std::string t : {"tcp", "unix"}) {
    expected.insert("floor/" + t + "-pingpong");
    for (const char* row : {" proto small", " bytes small", " proto 1KiB", " bytes 1KiB"}) {
      expected.insert("calls/" + t + row);
    }
  }
  EXPECT_EQ(row_names(doc), expected);
  for (const auto& row : doc.at("rows")) {
    const std::string name = row.at("name");
    EXPECT_EQ(row.at("n"), kN) << name;
    if (name.starts_with("calls/")) {
      EXPECT_EQ(row.at("method"), "simple") << name;
      EXPECT_EQ(row.at("floor"), "floor/" + row.at("transport").get<std::string>() + "-pingpong") << name;
    }
  }
  std::set<std::string> targets;
  for (const auto& t : doc.at("targets")) {
    const std::string row = t.at("row");
    targets.insert(row);
    EXPECT_EQ(t.at("floor"), row.substr(0, row.find(' ')) + " bytes small") << row;
    EXPECT_DOUBLE_EQ(t.at("limit").get<double>(), 1.05) << row;
    EXPECT_FALSE(t.at("ratio").is_null()) << row;
  }
  EXPECT_EQ(targets, (std::set<std::string>{"calls/tcp proto small", "calls/unix proto small"}));
  for (const std::string t : {"tcp", "unix"}) {
    EXPECT_THAT(r.out, ::testing::ContainsRegex("calls/" + t + " proto small p50 <= 1.05 x calls/" + t +
                                                " bytes small p50: ratio [0-9.]+ -> (met|NOT met)"));
  }
  EXPECT_EQ(doc.at("run").at("api"), "proto");
}

// minibench idle in a quick form: 200 connections (simple and token, from 4
// source addresses) held past a 1 s idle timeout on 200 ms keepalives,
// with every row, memory line and target line in the output and the JSON.
TEST(MinibenchTest, IdleHoldsConnectionsPastTheIdleTimeoutAndReportsMemory) {
  std::string missing;
  const bool token = authrpc::testing::MiniKdc::tools_installed(&missing);
  ScopedTempDir dir("minibench-test");
  ASSERT_TRUE(dir.ok());
  const std::string json = dir.file("idle.json");
  std::vector<std::string> args = {"idle", "--connections", "200", "--idle-timeout-ms", "1000",
                                   "--keepalive-ms", "200", "-n", "20", "--warmup", "2",
                                   "--blocks", "2", "--json", json, "--quiet"};
  if (!token) args.insert(args.end(), {"--method", "simple"});
  const RunResult r = run_minibench(dir, args);
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  for (const char* line : {"RLIMIT_NOFILE: soft ", "held: 200 of 200 still open", "sys.echo answered on 200 of 200",
                           "idle N=200: server memory per connection = ",
                           "idle N=200: fresh simple/tcp session p99 with idle / quiet = ",
                           "idle N=200: calls/tcp p99 with idle / quiet = ", "idle N=100000: not measured",
                           "server RSS", "server Pss", "server Private", "server malloc heap",
                           "client (this process) RSS"}) {
    EXPECT_THAT(r.out, HasSubstr(line));
  }
  if (token) {
    EXPECT_THAT(r.out, HasSubstr("idle N=200: fresh token/tcp session p99 with idle / quiet = "));
  }

  const Json doc = Json::parse(read_file(json), nullptr, false);
  ASSERT_FALSE(doc.is_discarded()) << describe(r);
  EXPECT_EQ(doc.at("run").at("mode"), "idle");
  EXPECT_EQ(doc.at("run").at("n"), 200);
  EXPECT_EQ(doc.at("run").at("n_asked"), 200);
  EXPECT_GT(doc.at("run").at("rlimit_nofile_hard").get<double>(), 200);
  std::set<std::string> rows;
  for (const auto& row : doc.at("rows")) {
    rows.insert(row.at("name").get<std::string>());
    EXPECT_EQ(row.at("quiet").at("n"), 40) << row.dump();
    EXPECT_EQ(row.at("idle").at("n"), 20) << row.dump();
    EXPECT_GT(row.at("idle").at("p99_us").get<double>(), 0) << row.dump();
  }
  std::set<std::string> expected = {"fresh simple/tcp session", "calls/tcp"};
  if (token) expected.insert("fresh token/tcp session");
  EXPECT_EQ(rows, expected);
  EXPECT_EQ(doc.at("held").at("still_open"), 200);
  EXPECT_EQ(doc.at("held").at("echo_answered"), 200);
  EXPECT_GE(doc.at("held").at("server_connections_active").get<long>(), 200);
  const Json& per = doc.at("memory").at("per_connection_kib");
  for (const char* key : {"server_rss", "server_pss", "server_private", "server_heap_in_use",
                          "client_rss"}) {
    EXPECT_TRUE(per.at(key).is_number()) << key << " " << per.dump();
  }
  // The heap grows by at least what a connection's objects take.
  EXPECT_GT(per.at("server_heap_in_use").get<double>(), 0.5) << per.dump();
  ASSERT_EQ(doc.at("targets").size(), token ? 3u : 2u) << doc.at("targets").dump();
  EXPECT_EQ(doc.at("targets").at(0).at("limit"), 4.0);
  for (const auto& t : doc.at("targets")) EXPECT_TRUE(t.at("met").is_boolean()) << t.dump();
  EXPECT_TRUE(doc.at("not_measured").is_string());

  // More than the descriptor limit allows, with --exact: a clear failure.
  const RunResult exact = run_minibench(dir, {"idle", "--connections", "100000000", "--exact"});
  EXPECT_EQ(exact.exit_code, 1) << describe(exact);
  EXPECT_THAT(exact.err, HasSubstr("100000000 connections cannot be held here: RLIMIT_NOFILE"));
  // A keepalive that would let the idle timeout win.
  const RunResult bad =
      run_minibench(dir, {"idle", "--idle-timeout-ms", "1000", "--keepalive-ms", "500"});
  EXPECT_EQ(bad.exit_code, 2) << describe(bad);
}

TEST(MinibenchTest, RefusesBadOptions) {
  ScopedTempDir dir("minibench-test");
  ASSERT_TRUE(dir.ok());
  const std::vector<std::vector<std::string>> cases = {
      {"sessions", "--tls", "maybe"},
      {"sessions", "--metrics", "both"},
      {"sessions", "--concurrency", "0"},
      {"sessions", "--token-file", "x.tokens"},  // applies to --server only
      {"sessions", "--ca", "ca.pem"},
      {"sessions", "--method", "no-such-method"},
      // A bearer secret travels over TLS only; calls run over plaintext.
      {"sessions", "--method", "jwt", "--tls", "off"},
      {"calls", "--method", "jwt"},
      {"calls", "--depth", "0"},
      {"calls", "--duration", "0"},
      {"calls", "--duration", "soon"},
      {"calls", "--api", "grpc"},
      // The typed rows are sequential calls, served by the spawned server.
      {"calls", "--api", "proto", "--depth", "2"},
      {"calls", "--api", "all", "--server", "tcp://127.0.0.1:1"},
      {"sessions", "--api", "proto"},
      // Only the server minibench spawns trusts the tokens it issues.
      {"sessions", "--method", "jwt", "--server", "tls://127.0.0.1:1", "--ca", "ca.pem"},
  };
  for (const auto& args : cases) {
    const RunResult r = run_minibench(dir, args);
    EXPECT_EQ(r.exit_code, 2) << args[1] << " " << args[2] << "\n" << describe(r);
  }
  const RunResult help = run_minibench(dir, {"--help"});
  EXPECT_EQ(help.exit_code, 0);
  for (const char* option :
       {"--tls", "--concurrency", "--depth", "--duration", "--plot", "--token-file", "--ca",
        "--metrics on|off|compare", "--api bytes|proto|all"}) {
    EXPECT_THAT(help.out, HasSubstr(option));
  }
  const RunResult version = run_minibench(dir, {"--version"});
  EXPECT_EQ(version.exit_code, 0) << describe(version);
  EXPECT_THAT(version.out, ::testing::MatchesRegex("minibench [0-9]+\\.[0-9]+\\.[0-9]+ \\(commit [0-9a-z]+\\)\n"));
}


// A running server (--server) that does not offer one of the methods asked
// for: that method's rows are skipped with a note, the others measured (the
// run does not end at the first refused session).
TEST(MinibenchTest, ServerWithoutAMethodSkipsItsRowsWithANote) {
  std::string missing;
  if (!authrpc::testing::MiniKdc::tools_installed(&missing)) GTEST_SKIP() << missing;
  ScopedTempDir dir("minibench-test");
  ASSERT_TRUE(dir.ok());
  authrpc::testing::MiniKdc kdc;
  ASSERT_TRUE(kdc.start().ok());
  ASSERT_TRUE(authrpc::testing::AddClientsAndService(kdc, {"alice"}).ok());

  authrpc::testing::TestServer server;
  server.mechanism(std::make_shared<authrpc::SimpleServerMechanism>());  // no kerberos
  ASSERT_OK(server.start());
  const std::string uri = server.endpoint().to_string();

  const std::string json = dir.file("out.json");
  const RunResult r = run_minibench(
      dir, {"sessions", "--server", uri, "--method", "simple,kerberos", "--krb5-conf",
            kdc.krb5_conf(), "--service-principal", "rpc/localhost@" + kdc.realm(), "--principal",
            "alice", "--client-keytab", kdc.client_keytab(), "-n", "5", "--warmup", "1",
            "--blocks", "1", "--json", json, "--quiet"});
  server.stop();
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_THAT(r.err, HasSubstr("the kerberos rows are skipped: " + uri + " does not offer it"));
  const Json doc = Json::parse(read_file(json), nullptr, false);
  ASSERT_FALSE(doc.is_discarded()) << describe(r);
  EXPECT_EQ(row_names(doc), (std::set<std::string>{"simple/tcp"}));
}

// The floor check (minibench/floor_check.h): a row that is faster than its
// floor by more than noise, in every block, says the floor is not a floor.
TEST(FloorCheckTest, FlagsARowThatBeatsItsFloorBeyondNoise) {
  struct Case {
    const char* what;
    double advantage;  // floor cost / row cost
    std::vector<double> per_block;
    bool beaten;
  };
  const Case cases[] = {
      {"slower than its floor, as it should be", 0.8, {0.7, 0.9}, false},
      {"as fast as its floor", 1.0, {0.98, 1.02}, false},
      {"faster by less than noise", 1.0 + minibench::kFloorNoise * 0.8, {1.01, 1.06}, false},
      {"faster overall, slower in one block", 1.3, {1.5, 0.97, 1.4}, false},
      {"docker's floor/tcp: 45 µs against simple/tcp 29 µs", 45.0 / 29.0, {1.5, 1.6, 1.5}, true},
      {"throughput: get/unix 9.0 GB/s, floor-stream/unix 2.6", 9.0 / 2.6, {3.3, 3.6, 3.4}, true},
      {"one block only", 1.2, {1.2}, true},
      {"no blocks recorded", 1.2, {}, true},
      {"not a number", std::nan(""), {}, false},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(minibench::beats_floor(c.advantage, c.per_block), c.beaten) << c.what;
  }
  EXPECT_THAT(minibench::beats_floor_warning("get/unix", "floor-stream/unix", 3.46),
              HasSubstr("WARNING: get/unix beats its floor floor-stream/unix (3.46 x"));
}

// A report row as sessions.cc makes it, from p50 and p99 alone.
minibench::Row synthetic_row(const std::string& name, const std::string& method,
                             const std::string& transport, double p50, double p99,
                             const minibench::Row* floor) {
  minibench::Row r;
  r.name = name;
  r.method = method;
  r.transport = transport;
  r.tls = name.find("+tls") != std::string::npos;
  r.summary.n = 100;
  r.summary.p50_us = p50;
  r.summary.p99_us = p99;
  r.sorted_us = {p50, p99};
  r.block_p50_us = {p50, p50};
  if (floor == nullptr) {
    r.floor = name;
    r.ratio = 1.0;
    r.block_ratios = {1.0, 1.0};
  } else {
    r.floor = floor->name;
    r.ratio = p50 / floor->summary.p50_us;
    r.block_ratios = {*r.ratio, *r.ratio};
  }
  return r;
}

// The number in attribute `attr` of the first element at or after `from`
// that carries `marker` (NaN: none).
double attr_of(const std::string& svg, const std::string& marker, const std::string& attr,
               std::size_t from = 0) {
  const auto m = svg.find(marker, from);
  if (m == std::string::npos) return std::nan("");
  const auto start = svg.rfind('<', m), end = svg.find('>', m);
  const auto a = svg.find(" " + attr + "=\"", start);
  if (a == std::string::npos || a > end) return std::nan("");
  return std::stod(svg.substr(a + attr.size() + 3));
}

// The <g> of the row named `name`: its bars, ticks and text.
std::string row_group(const std::string& svg, const std::string& name) {
  const auto at = svg.find("<g><title>" + name + "</title>");
  return at == std::string::npos ? std::string() : svg.substr(at, svg.find("</g>", at) - at);
}

// The x and text of each element with class `cls` (tick labels), in order.
std::vector<std::pair<double, std::string>> labels(const std::string& svg, const std::string& cls) {
  std::vector<std::pair<double, std::string>> out;
  const std::string marker = "class=\"" + cls + "\"";
  for (auto at = svg.find(marker); at != std::string::npos; at = svg.find(marker, at + 1)) {
    const auto start = svg.find('>', at) + 1;
    out.emplace_back(attr_of(svg, marker, "x", at), svg.substr(start, svg.find('<', start) - start));
  }
  return out;
}

// Labels that do not run into each other (they once read "50 µs100 µs200 µs").
void expect_room_between(const std::vector<std::pair<double, std::string>>& ticks) {
  auto chars = [](const std::string& t) {
    return static_cast<double>(std::count_if(t.begin(), t.end(), [](char c) {
      return (static_cast<unsigned char>(c) & 0xC0) != 0x80;  // code points, not bytes
    }));
  };
  for (std::size_t i = 1; i < ticks.size(); ++i) {
    const double room = ticks[i].first - ticks[i - 1].first;
    const double needed = 0.6 * 12 * (chars(ticks[i].second) + chars(ticks[i - 1].second)) / 2.0;
    EXPECT_GT(room, needed) << "'" << ticks[i - 1].second << "' runs into '" << ticks[i].second
                            << "'";
  }
}

// The default plot is readable: a bar per row, one colour per method (the
// same in every panel, distinct between methods), floors grey, a panel per
// transport, tick labels with room, and a mark on a row that beats its
// floor. Ratios are on a linear axis from 0, so 1.1× and 1.43× differ by
// their ratio; a target is a tick at its limit on that axis (a target held
// to another row at that row's p50 × limit over the floor's), judged met or
// NOT met beside the row (to three decimals where two would hide why);
// rows past the axis end at it. The footer says when, where and what ran.
TEST(PlotTest, TimeAndLinearRatioPanelsTargetsVerdictsAndFooter) {
  using minibench::Row;
  minibench::Report report;
  const Row floor_tcp = synthetic_row("floor/tcp", "none", "tcp", 100, 200, nullptr);
  const Row floor_unix = synthetic_row("floor/unix", "none", "unix", 40, 90, nullptr);
  const Row floor_tls = synthetic_row("floor/tls", "none", "tcp", 900, 2500, nullptr);
  report.add(floor_tcp);
  const char* methods[] = {"simple", "kerberos", "kerberos-sasl", "token", "token-digest",
                           "token-scram", "jwt"};
  const double p50s[] = {143, 260, 500, 110, 400, 9800, 120};
  for (std::size_t i = 0; i < std::size(methods); ++i) {
    report.add(synthetic_row(std::string(methods[i]) + "/tcp", methods[i], "tcp", p50s[i],
                             p50s[i] * 2, &floor_tcp));
  }
  report.add(floor_unix);
  report.add(synthetic_row("simple/unix", "simple", "unix", 20, 40, &floor_unix));  // beats it
  report.add(floor_tls);
  report.add(synthetic_row("simple+tls/tcp", "simple", "tcp", 1000, 3000, &floor_tls));
  report.add_target("simple/tcp", 1.25);                         // 1.43: NOT met
  report.add_target("token/tcp", 1.25);                          // 1.10: met
  report.add_target("kerberos/tcp", 0.6, "kerberos-sasl/tcp");  // 0.52: met; at 3× the floor
  report.add_target("simple+tls/tcp", 1.11);                     // 1.111: NOT met
  report.set_run_info({{"time_utc", "2026-12-06T04:00:00Z"}, {"host", "bench-host"},
                       {"cpus", 2}, {"load_average", 2.5}, {"version", "9.9.9"},
                       {"commit", "0123456789ab"}, {"build_type", "Release"}});
  const std::string svg = minibench::plot_svg(report, "test");

  XmlChecker checker(svg);
  ASSERT_EQ(checker.check(), "");
  for (const auto& r : report.rows()) {
    EXPECT_THAT(svg, HasSubstr("<title>" + r.name + "</title>")) << r.name;
  }
  for (const char* panel : {"sessions over tcp", "sessions over unix", "sessions over tcp + TLS"}) {
    EXPECT_THAT(svg, HasSubstr(">" + std::string(panel) + "</text>")) << panel;
  }
  std::set<std::string> colours;
  for (const char* m : methods) colours.insert(minibench::method_colour(m));
  colours.insert(minibench::method_colour("none"));
  EXPECT_EQ(colours.size(), std::size(methods) + 1) << "a colour used for two methods";
  EXPECT_EQ(minibench::method_colour("some-new-method"), minibench::method_colour("some-new-method"));
  EXPECT_EQ(colours.count(minibench::method_colour("some-new-method")), 0u);

  // Ratio bars: one origin, lengths in proportion to the ratios.
  const std::string simple = row_group(svg, "simple/tcp"), token = row_group(svg, "token/tcp");
  const std::string kerberos = row_group(svg, "kerberos/tcp");
  const double x0 = attr_of(simple, "class=\"ratio\"", "x");
  const double w_simple = attr_of(simple, "class=\"ratio\"", "width");
  EXPECT_EQ(attr_of(token, "class=\"ratio\"", "x"), x0);
  EXPECT_NEAR(w_simple / attr_of(token, "class=\"ratio\"", "width"), 1.43 / 1.10, 0.01);
  const double w_kerberos = attr_of(kerberos, "class=\"ratio\"", "width");
  EXPECT_NEAR(w_simple / w_kerberos, 1.43 / 2.60, 0.01);
  // 5× and 98× run to the axis' end (3×: the kerberos target's tick).
  const double w_end = attr_of(row_group(svg, "kerberos-sasl/tcp"), "class=\"ratio\"", "width");
  EXPECT_EQ(attr_of(row_group(svg, "token-scram/tcp"), "class=\"ratio\"", "width"), w_end);
  EXPECT_NEAR(w_end / w_kerberos, 3.0 / 2.6, 0.01);
  // Targets: a tick at the limit, and the verdict beside the row.
  EXPECT_NEAR(attr_of(simple, "class=\"target\"", "x1"), x0 + w_simple * 1.25 / 1.43, 0.2);
  EXPECT_NEAR(attr_of(kerberos, "class=\"target\"", "x1"), x0 + w_end, 0.2);
  EXPECT_THAT(simple, HasSubstr(">1.43× · ≤ 1.25×: "));
  EXPECT_THAT(simple, HasSubstr(">NOT met<"));
  EXPECT_THAT(token, HasSubstr(">met<"));
  EXPECT_THAT(kerberos, HasSubstr("≤ 0.6× kerberos-sasl/tcp: "));
  EXPECT_THAT(kerberos, HasSubstr(">met<"));
  EXPECT_THAT(row_group(svg, "token-digest/tcp"), Not(HasSubstr("met<")));  // no target
  // A ratio that two decimals would show equal to the limit it misses.
  EXPECT_THAT(row_group(svg, "simple+tls/tcp"), HasSubstr(">1.111× · ≤ 1.11×: "));
  EXPECT_THAT(row_group(svg, "simple+tls/tcp"), HasSubstr(">NOT met<"));
  EXPECT_THAT(row_group(svg, "floor/tcp"), HasSubstr("(the floor)"));

  // Time ticks: the decades 10 µs … 100 ms, labelled alone (a "2 ms" beside
  // "1 ms" crowded it); ratio ticks every 0.5× up to 3×.
  const auto ticks = labels(svg, "tick");
  std::vector<std::string> texts;
  for (const auto& t : ticks) texts.push_back(t.second);
  EXPECT_EQ(texts, (std::vector<std::string>{"10 µs", "100 µs", "1 ms", "10 ms", "100 ms"}));
  expect_room_between(ticks);
  const auto ratio_ticks = labels(svg, "ratio-tick");
  texts.clear();
  for (const auto& t : ratio_ticks) texts.push_back(t.second);
  EXPECT_EQ(texts, (std::vector<std::string>{"0", "0.5×", "1×", "1.5×", "2×", "2.5×", "3×"}));
  expect_room_between(ratio_ticks);

  // simple/unix (20 µs against a 40 µs floor, in every block) is marked.
  EXPECT_EQ(std::count(svg.begin(), svg.end(), '!'), 1);
  EXPECT_THAT(row_group(svg, "simple/unix"), HasSubstr("beats its floor!"));

  EXPECT_THAT(svg, HasSubstr(">run 2026-12-06T04:00:00Z · host bench-host · 2 CPUs · load "
                             "average 2.5 at the start<"));
  EXPECT_THAT(svg, HasSubstr(">authrpc 9.9.9 · commit 0123456789ab · Release build<"));
}

// Within one decade there is room to label 2 and 5 too; without run
// information there is no footer.
TEST(PlotTest, OneDecadeLabelsItsMinorTicks) {
  minibench::Report report;
  const auto floor = synthetic_row("floor/tcp", "none", "tcp", 120, 300, nullptr);
  report.add(floor);
  report.add(synthetic_row("simple/tcp", "simple", "tcp", 150, 900, &floor));
  const std::string svg = minibench::plot_svg(report, "test");
  std::vector<std::string> texts;
  for (const auto& t : labels(svg, "tick")) texts.push_back(t.second);
  EXPECT_EQ(texts, (std::vector<std::string>{"100 µs", "200 µs", "500 µs", "1 ms"}));
  expect_room_between(labels(svg, "tick"));
  EXPECT_THAT(svg, Not(HasSubstr("class=\"footer\"")));
}
// The order of turns every timed loop follows (minibench/rotation.h),
// written as side@block ("w" for a warm-up turn).
TEST(RotationTest, WarmsUpThenRotatesEachGroupsFirstSide) {
  const struct {
    std::vector<std::size_t> groups;
    std::size_t blocks;
    bool warmup;
    std::string turns;
  } cases[] = {
      {{1}, 2, true, "0@w 0@0 0@1"},
      {{2}, 3, true, "1@w 0@w 0@0 1@0 1@1 0@1 0@2 1@2"},
      {{3}, 3, false, "0@0 1@0 2@0 1@1 2@1 0@1 2@2 0@2 1@2"},
      // throughput: floor and row per transport, shm alone.
      {{2, 2, 1}, 2, false, "0@0 1@0 2@0 3@0 4@0 1@1 0@1 3@1 2@1 4@1"},
      {{2, 1}, 1, true, "1@w 0@w 2@w 0@0 1@0 2@0"},
      {{}, 3, true, ""},
  };
  for (const auto& c : cases) {
    std::string turns;
    for (const auto& t : minibench::rotation(c.groups, c.blocks, c.warmup)) {
      EXPECT_EQ(t.timed, t.block != minibench::kWarmup);
      turns += (turns.empty() ? "" : " ") + std::to_string(t.side) + "@" +
               (t.timed ? std::to_string(t.block) : std::string("w"));
    }
    EXPECT_EQ(turns, c.turns) << testing::PrintToString(c.groups) << " x " << c.blocks;
  }
  std::size_t total = 0;
  for (std::size_t b = 0; b < 4; ++b) total += minibench::block_share(10, 4, b);
  EXPECT_EQ(total, 10u);
  EXPECT_EQ(minibench::block_share(10, 4, 0), 3u);
  EXPECT_EQ(minibench::block_share(10, 4, 3), 2u);
}

}  // namespace
