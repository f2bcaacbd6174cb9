// minibench end to end with a small N: runs the built binary as a subprocess
// (its server child, throwaway KDC, certificates and token included) and
// checks what it writes — every row in the JSON, one connection per session
// (the server's accepted-connection count per row), the summary table, a
// well-formed SVG plot, --concurrency, --tls and usage errors. Kept small so
// the whole file runs in well under 30 s on 2 cores.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#ifndef MINIBENCH_BIN
#error "MINIBENCH_BIN must name the minibench binary"
#endif

extern char** environ;

namespace {

using ::testing::HasSubstr;
using Json = nlohmann::json;

// A private temporary directory, removed with everything in it.
class TempDir {
 public:
  TempDir() {
    std::string pattern = ::testing::TempDir() + "minibench-test-XXXXXX";
    if (::mkdtemp(pattern.data()) != nullptr) path_ = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    if (!path_.empty()) std::filesystem::remove_all(path_, ignored);
  }
  std::string file(const std::string& name) const { return path_ + "/" + name; }
  bool ok() const { return !path_.empty(); }

 private:
  std::string path_;
};

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
RunResult run_minibench(const TempDir& dir, const std::vector<std::string>& args) {
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
  TempDir dir;
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
  EXPECT_EQ(row_names(doc), expected);
  for (const auto& row : doc.at("rows")) {
    const std::string name = row.at("name");
    EXPECT_EQ(row.at("n"), kN) << name;
    EXPECT_GT(row.at("p50_us").get<double>(), 0) << name;
    EXPECT_GE(row.at("p99_us").get<double>(), row.at("p50_us").get<double>()) << name;
    EXPECT_FALSE(row.at("ratio").is_null()) << name << " has no floor";
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

  // The summary table: its header and one line per transport x TLS.
  EXPECT_THAT(r.out, HasSubstr("summary (shape of HADOOP-6637)"));
  EXPECT_THAT(r.out, HasSubstr("No security"));
  EXPECT_THAT(r.out, HasSubstr("Delegation token"));
  EXPECT_THAT(r.out, HasSubstr("\n  tcp "));
  EXPECT_THAT(r.out, HasSubstr("\n  unix "));
  EXPECT_THAT(r.out, HasSubstr("\n  tcp + TLS "));
  EXPECT_THAT(r.out, HasSubstr("\n  tcp + TLS, resumed"));
  EXPECT_THAT(r.out, HasSubstr("the server accepted exactly warm-up + n connections"));

  const std::string plot = read_file(svg);
  XmlChecker checker(plot);
  EXPECT_EQ(checker.check(), "");
  EXPECT_EQ(checker.root(), "svg");
  for (const auto& name : expected) {
    EXPECT_THAT(plot, HasSubstr("<title>" + name + "</title>")) << "no line for " << name;
  }
  EXPECT_THAT(plot, HasSubstr("latency per iteration (log scale)"));
}

// --concurrency K: every row still has n sessions (spread over K threads),
// one connection each, and a rate.
TEST(MinibenchTest, ConcurrencyRunsEverySessionOnItsOwnConnection) {
  TempDir dir;
  ASSERT_TRUE(dir.ok());
  const std::string json = dir.file("out.json");
  const RunResult r = run_minibench(dir, {"sessions", "--method", "simple,kerberos", "--tls", "off",
                                    "--concurrency", "4", "-n", "20", "--warmup", "4", "--blocks",
                                    "2", "--json", json, "--quiet"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  const Json doc = Json::parse(read_file(json), nullptr, false);
  ASSERT_FALSE(doc.is_discarded());
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
}

// --tls on: only the TLS rows (and floor/tls).
TEST(MinibenchTest, TlsOnMeasuresOnlyTlsRows) {
  TempDir dir;
  ASSERT_TRUE(dir.ok());
  const std::string json = dir.file("out.json");
  const RunResult r = run_minibench(dir, {"sessions", "--method", "simple", "--tls", "on", "-n", "5",
                                    "--warmup", "1", "--blocks", "1", "--json", json, "--quiet"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  const Json doc = Json::parse(read_file(json), nullptr, false);
  ASSERT_FALSE(doc.is_discarded());
  EXPECT_EQ(row_names(doc),
            (std::set<std::string>{"floor/tls", "simple+tls/tcp", "simple+tls-resume/tcp"}));
}

// --in-process: the same rows, the server on threads of minibench itself.
TEST(MinibenchTest, InProcessServerCountsConnectionsToo) {
  TempDir dir;
  ASSERT_TRUE(dir.ok());
  const std::string json = dir.file("out.json");
  const RunResult r = run_minibench(dir, {"sessions", "--method", "simple", "--tls", "off",
                                          "--in-process", "-n", "6", "--warmup", "2", "--blocks",
                                          "1", "--json", json, "--quiet"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  const Json doc = Json::parse(read_file(json), nullptr, false);
  ASSERT_FALSE(doc.is_discarded());
  EXPECT_EQ(row_names(doc),
            (std::set<std::string>{"floor/tcp", "floor/unix", "simple/tcp", "simple/unix"}));
  for (const auto& row : doc.at("rows")) {
    if (row.at("method") != "none") {
      EXPECT_EQ(row.at("server_connections"), 8) << row.at("name");
    }
  }
  EXPECT_EQ(doc.at("run").at("server"), "in process");
}

TEST(MinibenchTest, RefusesBadOptions) {
  TempDir dir;
  ASSERT_TRUE(dir.ok());
  const std::vector<std::vector<std::string>> cases = {
      {"sessions", "--tls", "maybe"},
      {"sessions", "--concurrency", "0"},
      {"sessions", "--token-file", "x.tokens"},  // applies to --server only
      {"sessions", "--ca", "ca.pem"},
      {"sessions", "--method", "no-such-method"},
  };
  for (const auto& args : cases) {
    const RunResult r = run_minibench(dir, args);
    EXPECT_EQ(r.exit_code, 2) << args[1] << " " << args[2] << "\n" << describe(r);
  }
  const RunResult help = run_minibench(dir, {"--help"});
  EXPECT_EQ(help.exit_code, 0);
  for (const char* option : {"--tls", "--concurrency", "--plot", "--token-file", "--ca"}) {
    EXPECT_THAT(help.out, HasSubstr(option));
  }
}

}  // namespace
