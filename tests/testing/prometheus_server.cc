#include "tests/testing/prometheus_server.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>
#include <sstream>
#include <thread>

#include "authrpc/base/log.h"
#include "tests/testing/child_process.h"
#include "tests/testing/http_client.h"
#include "tests/testing/test_support.h"

namespace authrpc::testing {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

constexpr auto kStartTimeout = 20s;
constexpr auto kQuitWait = 3s;
constexpr auto kTermWait = 5s;

// Prometheus's HTTP API on 127.0.0.1:port.
std::string api_url(std::uint16_t port, std::string_view target) {
  return "http://127.0.0.1:" + std::to_string(port) + std::string(target);
}

// A sample's value as the API gives it: [time, "value"], the value a string
// that may be "NaN", "+Inf" or "-Inf".
std::optional<double> sample_value(const nlohmann::json& pair) {
  if (!pair.is_array() || pair.size() != 2 || !pair[1].is_string()) return std::nullopt;
  const std::string text = pair[1].get<std::string>();
  if (text == "NaN") return std::nan("");
  if (text == "+Inf") return INFINITY;
  if (text == "-Inf") return -INFINITY;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || *end != '\0') return std::nullopt;
  return v;
}

std::string format_value(double v) {
  std::ostringstream out;
  out << v;
  return out.str();
}

}  // namespace

bool PrometheusServer::installed() { return ::access(kBinary, X_OK) == 0 && ::access(kPromtool, X_OK) == 0; }

Result<std::unique_ptr<PrometheusServer>> PrometheusServer::start(const PrometheusOptions& options) {
  if (!installed()) {
    return Result<std::unique_ptr<PrometheusServer>>(
        Errc::kFailedPrecondition, "prometheus is not installed: run scripts/setup.sh as root (package prometheus)");
  }
  std::unique_ptr<PrometheusServer> p(new PrometheusServer());
  p->dir_ = TempDir("prometheus");
  if (p->dir_.empty()) return Status(Errc::kInternal, "mkdtemp failed");
  const std::string interval = std::to_string(options.scrape_interval.count()) + "s";
  const std::string config = p->dir_ + "/prometheus.yml";
  // The scrape timeout may not exceed the interval; 1 s for a loopback
  // target is plenty.
  const std::string text = "global:\n  scrape_interval: " + interval + "\n  scrape_timeout: " + interval +
                           "\nscrape_configs:\n  - job_name: \"" + options.job +
                           "\"\n    static_configs:\n      - targets: [\"" + options.target + "\"]\n";
  if (!WriteFile(config, text)) return Status(Errc::kInternal, "cannot write " + config);

  p->pid_ = SpawnLogged({kBinary, "--config.file=" + config, "--storage.tsdb.path=" + p->dir_ + "/data",
                   "--web.listen-address=127.0.0.1:0", "--web.enable-lifecycle", "--log.level=info"},
                  p->log_file());
  if (p->pid_ < 0) return Status(Errc::kInternal, "fork failed");

  // ts=... component=web msg="Listening on" address=127.0.0.1:46069
  static const std::regex kListening(R"(msg="Listening on" address=127\.0\.0\.1:([0-9]+))");
  const auto deadline = Clock::now() + kStartTimeout;
  while (Clock::now() < deadline) {
    int status = 0;
    if (::waitpid(p->pid_, &status, WNOHANG) == p->pid_) {
      p->pid_ = -1;
      return Status(Errc::kUnavailable, "prometheus exited during start (status " + std::to_string(status) +
                                            "); see " + p->log_file() + ": " + FileTail(p->log_file()));
    }
    std::smatch m;
    const std::string log = ReadFile(p->log_file());
    if (std::regex_search(log, m, kListening)) {
      p->port_ = static_cast<std::uint16_t>(std::stoi(m[1].str()));
      return p;
    }
    std::this_thread::sleep_for(20ms);
  }
  (void)p->stop();
  return Status(Errc::kUnavailable, "prometheus did not log its listening address within 20 s; see " +
                                        p->log_file() + ": " + FileTail(p->log_file()));
}

PrometheusServer::~PrometheusServer() {
  (void)stop();
  if (!dir_.empty() && !std::getenv("AUTHRPC_KEEP_PROMETHEUS")) {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
}

Status PrometheusServer::stop() {
  if (pid_ <= 0) return {};
  const pid_t pid = pid_;
  pid_ = -1;
  if (port_ != 0) {
    HttpRequest quit;
    quit.method = "POST";
    quit.url = api_url(port_, "/-/quit");
    quit.timeout = 2000ms;
    (void)http_request(quit);
  }
  if (ReapedWithin(pid, kQuitWait)) return {};
  ::kill(pid, SIGTERM);
  if (ReapedWithin(pid, kTermWait)) return {};
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return Status(Errc::kDeadlineExceeded, "prometheus ignored /-/quit and SIGTERM and was killed; see " + log_file());
}

Result<PromVector> PrometheusServer::query(std::string_view promql) const {
  auto answer = http_get(api_url(port_, "/api/v1/query?query=" + form_urlencode(promql)));
  if (!answer.ok()) return answer.status();
  const nlohmann::json body = nlohmann::json::parse(answer->body, nullptr, /*allow_exceptions=*/false);
  if (!body.is_object() || !body.contains("status") || !body["status"].is_string()) {
    return Status(Errc::kProtocolError, "HTTP " + std::to_string(answer->status) + ", not the query API's JSON: " +
                                            escape_for_log(answer->body.substr(0, 300)));
  }
  if (body["status"] != "success") {
    const std::string error = body.contains("error") && body["error"].is_string() ? body["error"].get<std::string>()
                                                                                   : std::string("(no error text)");
    return Status(Errc::kInvalidArgument, "prometheus refused " + escape_for_log(promql) + ": " + escape_for_log(error));
  }
  const nlohmann::json data = body.value("data", nlohmann::json());
  const std::string type = data.value("resultType", "");
  const nlohmann::json result = data.value("result", nlohmann::json());
  PromVector out;
  if (type == "scalar") {
    auto v = sample_value(result);
    if (!v) return Status(Errc::kProtocolError, "malformed scalar");
    out.push_back({{}, *v});
    return out;
  }
  if (type != "vector" || !result.is_array()) {
    return Status(Errc::kProtocolError, "unexpected result type '" + escape_for_log(type) + "'");
  }
  for (const auto& element : result) {
    PromSample sample;
    auto v = element.is_object() ? sample_value(element.value("value", nlohmann::json())) : std::nullopt;
    if (!v) return Status(Errc::kProtocolError, "malformed sample: " + escape_for_log(element.dump()));
    sample.value = *v;
    const nlohmann::json labels = element.value("metric", nlohmann::json::object());
    for (const auto& [name, value] : labels.items()) {
      if (value.is_string()) sample.labels[name] = value.get<std::string>();
    }
    out.push_back(std::move(sample));
  }
  return out;
}

Status PrometheusServer::wait_for(std::string_view promql, double expected, std::chrono::milliseconds timeout) const {
  const auto deadline = Clock::now() + timeout;
  std::string last;
  for (;;) {
    auto answer = query(promql);
    if (!answer.ok() && answer.status().code == make_error_code(Errc::kInvalidArgument)) return answer.status();
    if (answer.ok() && answer->size() == 1 && (*answer)[0].value == expected) return {};
    last = answer.ok() ? "[" + DescribeSamples(*answer) + "]" : answer.status().to_string();
    if (Clock::now() >= deadline) break;
    std::this_thread::sleep_for(200ms);
  }
  return Status(Errc::kDeadlineExceeded, std::string(promql) + ": expected " + format_value(expected) + " within " +
                                             std::to_string(timeout.count()) + " ms; last answer " + last);
}

Status PrometheusServer::wait_for(std::string_view promql, std::string_view by,
                                  const std::map<std::string, double>& expected,
                                  std::chrono::milliseconds timeout) const {
  const auto deadline = Clock::now() + timeout;
  std::string last;
  for (;;) {
    auto answer = query(promql);
    if (!answer.ok() && answer.status().code == make_error_code(Errc::kInvalidArgument)) return answer.status();
    if (answer.ok()) {
      std::map<std::string, double> got;
      for (const auto& s : *answer) {
        auto it = s.labels.find(std::string(by));
        got[it == s.labels.end() ? std::string() : it->second] = s.value;
      }
      if (got == expected) return {};
      last = "[" + DescribeSamples(*answer) + "]";
    } else {
      last = answer.status().to_string();
    }
    if (Clock::now() >= deadline) break;
    std::this_thread::sleep_for(200ms);
  }
  std::string want;
  for (const auto& [k, v] : expected) want += (want.empty() ? "" : ", ") + std::string(by) + "=" + k + ": " + format_value(v);
  return Status(Errc::kDeadlineExceeded, std::string(promql) + ": expected {" + want + "} within " +
                                             std::to_string(timeout.count()) + " ms; last answer " + last);
}

namespace {

// Runs promtool with `args`, the file `name` holding `input` in a temp dir
// (on stdin when `on_stdin`, else as the last argument).
Status run_promtool(std::vector<std::string> args, const std::string& name, const std::string& input,
                    bool on_stdin) {
  const std::string dir = TempDir("promtool");
  if (dir.empty()) return Status(Errc::kInternal, "mkdtemp failed");
  const std::string file = dir + "/" + name;
  const std::string output = dir + "/promtool.out";
  args.insert(args.begin(), PrometheusServer::kPromtool);
  if (!on_stdin) args.push_back(file);
  Status result;
  if (!WriteFile(file, input)) {
    result = Status(Errc::kInternal, "cannot write " + file);
  } else if (const pid_t pid = SpawnLogged(args, output, on_stdin ? file : ""); pid < 0) {
    result = Status(Errc::kInternal, "fork failed");
  } else {
    int status = 0;
    ::waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      const std::string how = WIFEXITED(status) ? "exit " + std::to_string(WEXITSTATUS(status))
                                                : "wait status " + std::to_string(status);
      result = Status(Errc::kInvalidArgument,
                      "promtool " + args[1] + " " + args[2] + ": " + how + ": " + FileTail(output, 4000));
    }
  }
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
  return result;
}

}  // namespace

Status PromtoolCheckMetrics(const std::string& exposition) {
  return run_promtool({"check", "metrics"}, "metrics.prom", exposition, /*on_stdin=*/true);
}

Status PromtoolCheckRules(const std::string& rules_yaml) {
  return run_promtool({"check", "rules"}, "rules.yml", rules_yaml, /*on_stdin=*/false);
}

std::string DescribeSamples(const PromVector& samples) {
  std::string out;
  for (const auto& s : samples) {
    if (!out.empty()) out += "; ";
    out += "{";
    bool first = true;
    for (const auto& [k, v] : s.labels) {
      out += (first ? "" : ",") + k + "=\"" + escape_for_log(v) + "\"";
      first = false;
    }
    out += "} " + format_value(s.value);
  }
  return out;
}

}  // namespace authrpc::testing
