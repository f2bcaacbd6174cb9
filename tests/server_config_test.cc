// Unit tests for server/server_config.h: the JSON configuration of
// authrpc-server. The shipped example parses to the documented values;
// every kind of mistake is refused with CONFIG_ERROR and a message that
// says which key is wrong.
#include "authrpc/server/server_config.h"

#include "authrpc/auth/mechanisms/simple/simple.h"
#include "authrpc/client/client.h"
#include "tests/testing/test_support.h"
#include "tests/testing/scoped_temp_dir.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

namespace authrpc {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

#ifndef AUTHRPC_SOURCE_DIR
#error "AUTHRPC_SOURCE_DIR must point at the source tree (set in tests/CMakeLists.txt)"
#endif

const MechanismRegistry& registry() {
  static const MechanismRegistry r = MechanismRegistry::with_builtins();
  return r;
}

std::vector<std::string> mechanism_names(const ServerOptions& o) {
  std::vector<std::string> out;
  for (const auto& m : o.mechanisms) out.emplace_back(m->name());
  return out;
}

// load_server_config()'s options, for the tests of options alone.
Result<ServerOptions> load_options(const std::string& path) {
  auto config = load_server_config(path, registry());
  if (!config.ok()) return config.status();
  return std::move(config->options);
}

// A file under the test's temporary directory, removed afterwards.
class TempFile {
 public:
  explicit TempFile(const std::string& content)
      : dir_("config-test"), path_(dir_.Write("config.json", content)) {}
  const std::string& path() const { return path_; }

 private:
  testing::ScopedTempDir dir_;
  std::string path_;
};

// The numbers a configuration sets, as ServerOptions holds them, in the
// order of kFullConfig's keys.
struct Numbers {
  std::size_t io_threads;
  std::size_t blocking_threads;
  std::chrono::milliseconds negotiation_timeout;
  std::chrono::milliseconds idle_timeout;
  std::size_t max_connections;
  std::size_t max_connections_per_address;
  std::size_t max_connections_per_user;
  std::size_t max_frame_size;
  std::size_t max_pending_output;
  std::chrono::milliseconds stop_grace;
  unsigned unix_socket_mode;
};

void expect_numbers(const ServerOptions& o, const Numbers& want) {
  EXPECT_EQ(o.io_threads, want.io_threads);
  EXPECT_EQ(o.blocking_threads, want.blocking_threads);
  EXPECT_EQ(o.negotiation_timeout, want.negotiation_timeout);
  EXPECT_EQ(o.idle_timeout, want.idle_timeout);
  EXPECT_EQ(o.max_connections, want.max_connections);
  EXPECT_EQ(o.max_connections_per_address, want.max_connections_per_address);
  EXPECT_EQ(o.max_connections_per_user, want.max_connections_per_user);
  EXPECT_EQ(o.max_frame_size, want.max_frame_size);
  EXPECT_EQ(o.max_pending_output, want.max_pending_output);
  EXPECT_EQ(o.stop_grace, want.stop_grace);
  EXPECT_EQ(o.listen.unix_socket_mode, want.unix_socket_mode);
}

TEST(ServerConfigTest, ExampleConfigParses) {
  const std::string path = std::string(AUTHRPC_SOURCE_DIR) + "/examples/server.json";
  auto o = load_options(path);
  ASSERT_TRUE(o.ok()) << o.status().to_string();
  ASSERT_EQ(o->endpoints.size(), 2u);
  EXPECT_EQ(o->endpoints[0].scheme, Endpoint::Scheme::kTcp);
  EXPECT_EQ(o->endpoints[0].host, "127.0.0.1");
  EXPECT_EQ(o->endpoints[0].port, 7000);
  EXPECT_EQ(o->endpoints[1].scheme, Endpoint::Scheme::kUnix);
  EXPECT_EQ(o->endpoints[1].path, "/tmp/authrpc-example.sock");
  EXPECT_EQ(mechanism_names(*o), std::vector<std::string>{"simple"});
  // Not in the file: the per-address and per-user limits, max_pending_output.
  const ServerOptions defaults;
  expect_numbers(*o, {2, 8, 10000ms, 300000ms, 10000, defaults.max_connections_per_address,
                      defaults.max_connections_per_user, 16777216, defaults.max_pending_output,
                      30000ms, 0});
  EXPECT_TRUE(static_cast<bool>(o->log));
}

// Every key, as it would come from a file.
const char* const kFullConfig = R"({
  "listen": ["tcp://[::1]:0", "unix:@authrpc-config-test"],
  "auth": {"mechanisms": ["simple"], "options": {"simple": {}}},
  "io_threads": 3,
  "blocking_threads": 5,
  "negotiation_timeout_ms": 1234,
  "idle_timeout_ms": 0,
  "max_connections": 7,
  "max_connections_per_address": 5,
  "max_connections_per_user": 3,
  "max_frame_size": 65536,
  "max_pending_output": 1048576,
  "stop_grace_ms": 10,
  "unix_socket_mode": "0660",
  "log_level": "warning"
})";

void expect_full_config(const Result<ServerOptions>& o) {
  ASSERT_TRUE(o.ok()) << o.status().to_string();
  ASSERT_EQ(o->endpoints.size(), 2u);
  EXPECT_EQ(o->endpoints[0].host, "::1");
  EXPECT_EQ(o->endpoints[1].path, "@authrpc-config-test");
  EXPECT_EQ(mechanism_names(*o), std::vector<std::string>{"simple"});
  expect_numbers(*o, {3, 5, 1234ms, 0ms, 7, 5, 3, 65536, 1048576, 10ms, 0660});
}

TEST(ServerConfigTest, FullConfigFromParsedText) {
  expect_full_config(server_options_from_json(json::parse(kFullConfig), registry()));
}

TEST(ServerConfigTest, FullConfigFromAFile) {
  TempFile f(kFullConfig);
  expect_full_config(load_options(f.path()));
}

// server_options_from_json() is public API taking an nlohmann::json, so a
// program may build the object in C++. There, `{"io_threads", 3}` stores a
// *signed* integer (nlohmann only produces unsigned numbers when parsing
// text). A non-negative signed integer must be accepted like the parsed one.
// (Bug: see report — read_number() tests is_number_unsigned().)
TEST(ServerConfigTest, FullConfigBuiltInCppWithSignedIntegers) {
  const json config = {
      {"listen", {"tcp://[::1]:0", "unix:@authrpc-config-test"}},
      {"auth", {{"mechanisms", {"simple"}}, {"options", {{"simple", json::object()}}}}},
      {"io_threads", 3},
      {"blocking_threads", 5},
      {"negotiation_timeout_ms", 1234},
      {"idle_timeout_ms", 0},
      {"max_connections", 7},
      {"max_connections_per_address", 5},
      {"max_connections_per_user", 3},
      {"max_frame_size", 65536},
      {"max_pending_output", 1048576},
      {"stop_grace_ms", 10},
      {"unix_socket_mode", "0660"},
      {"log_level", "warning"},
  };
  ASSERT_TRUE(config["io_threads"].is_number_integer());
  ASSERT_FALSE(config["io_threads"].is_number_unsigned());  // how nlohmann stores an int
  expect_full_config(server_options_from_json(config, registry()));
}

TEST(ServerConfigTest, NegativeSignedIntegerBuiltInCppIsRefused) {
  const json config = {{"listen", {"unix:@x"}}, {"io_threads", -2}};
  auto o = server_options_from_json(config, registry());
  ASSERT_FALSE(o.ok());
  EXPECT_EQ(o.code(), Errc::kConfigError);
  EXPECT_NE(o.status().message.find("io_threads"), std::string::npos) << o.status().message;
}

TEST(ServerConfigTest, MinimalConfigGetsDefaults) {
  auto o = server_options_from_json({{"listen", {"tcp://127.0.0.1:0"}}}, registry());
  ASSERT_TRUE(o.ok()) << o.status().to_string();
  const ServerOptions defaults;
  ASSERT_EQ(o->endpoints.size(), 1u);
  EXPECT_EQ(mechanism_names(*o), std::vector<std::string>{"simple"});  // default mechanism
  expect_numbers(*o, {defaults.io_threads, defaults.blocking_threads, defaults.negotiation_timeout,
                      defaults.idle_timeout, defaults.max_connections, 1000, 0,
                      defaults.max_frame_size, defaults.max_pending_output, defaults.stop_grace, 0});
  EXPECT_TRUE(static_cast<bool>(o->log));
}

TEST(ServerConfigTest, EveryLogLevelIsAccepted) {
  for (const char* level : {"debug", "info", "warning", "error"}) {
    auto o = server_options_from_json({{"listen", {"unix:@x"}}, {"log_level", level}}, registry());
    EXPECT_TRUE(o.ok()) << level << ": " << o.status().to_string();
  }
}

TEST(ServerConfigTest, LogFormatsAndTheLevelOfTheSink) {
  struct Case {
    json config;
    LogLevel level;
  };
  const Case cases[] = {
      {{{"listen", {"unix:@x"}}}, LogLevel::kInfo},
      {{{"listen", {"unix:@x"}}, {"log_format", "text"}, {"log_level", "debug"}}, LogLevel::kDebug},
      {{{"listen", {"unix:@x"}}, {"log_format", "json"}, {"log_level", "warning"}}, LogLevel::kWarning},
      {{{"listen", {"unix:@x"}}, {"log_format", "json"}}, LogLevel::kInfo},
  };
  for (const auto& c : cases) {
    auto o = server_options_from_json(c.config, registry());
    ASSERT_TRUE(o.ok()) << c.config.dump() << ": " << o.status().to_string();
    EXPECT_EQ(o->log.level(), c.level) << c.config.dump();
  }
}

// SIGHUP in authrpc-server: only log_level is read again, and applied to
// every copy of the sink; a bad file or value leaves the level alone.
TEST(ReloadLogLevelTest, Table) {
  struct Case {
    const char* name;
    std::string content;  // "" with missing: no file at all
    bool missing;
    std::optional<LogLevel> level;  // nullopt: CONFIG_ERROR, level unchanged
    const char* error;
  };
  const Case cases[] = {
      {"debug", R"({"listen": ["unix:@x"], "log_level": "debug"})", false, LogLevel::kDebug, ""},
      {"error", R"({"log_level": "error"})", false, LogLevel::kError, ""},
      {"absent means info", R"({"listen": ["unix:@x"]})", false, LogLevel::kInfo, ""},
      {"other keys are not read", R"({"log_level": "warning", "listen": 5, "typo": 1})", false,
       LogLevel::kWarning, ""},
      {"unknown level", R"({"log_level": "loud"})", false, std::nullopt, "'log_level' must be"},
      {"not a string", R"({"log_level": 0})", false, std::nullopt, "'log_level' must be a string"},
      {"not json", R"({"log_level": )", false, std::nullopt, "line 1"},
      {"not an object", R"(["debug"])", false, std::nullopt, "must be a JSON object"},
      {"missing file", "", true, std::nullopt, "configuration file"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    LogSink sink = [](LogLevel, std::string_view) {};  // the level is what is tested
    sink.set_level(LogLevel::kWarning);
    const LogSink copy = sink;
    TempFile f(c.content);
    const std::string path = c.missing ? f.path() + ".missing" : f.path();
    auto level = reload_log_level(path, sink);
    if (c.level) {
      ASSERT_TRUE(level.ok()) << level.status().to_string();
      EXPECT_EQ(*level, *c.level);
      EXPECT_EQ(copy.level(), *c.level);
    } else {
      ASSERT_FALSE(level.ok());
      EXPECT_EQ(level.code(), make_error_code(Errc::kConfigError));
      EXPECT_THAT(level.status().message, ::testing::HasSubstr(c.error));
      EXPECT_THAT(level.status().message, ::testing::HasSubstr(path));
      EXPECT_EQ(copy.level(), LogLevel::kWarning);
    }
  }
}

TEST(ServerConfigTest, MechanismsComeFromTheRegistryInOrder) {
  MechanismRegistry r = MechanismRegistry::with_builtins();
  struct Named final : ServerMechanism {
    explicit Named(std::string n) : n_(std::move(n)) {}
    std::string_view name() const noexcept override { return n_; }
    std::unique_ptr<ServerAuthSession> start(const ChannelInfo&) override { return nullptr; }
    std::string n_;
  };
  json seen_options;
  r.register_server("custom", [&](const json& options) -> Result<std::shared_ptr<ServerMechanism>> {
    seen_options = options;
    if (options.contains("fail")) return Status(Errc::kConfigError, "custom: told to fail");
    return std::shared_ptr<ServerMechanism>(std::make_shared<Named>("custom"));
  });
  auto o = server_options_from_json(
      {{"listen", {"unix:@x"}},
       {"auth", {{"mechanisms", {"custom", "simple"}}, {"options", {{"custom", {{"k", 1}}}}}}}},
      r);
  ASSERT_TRUE(o.ok()) << o.status().to_string();
  EXPECT_EQ(mechanism_names(*o), (std::vector<std::string>{"custom", "simple"}));
  EXPECT_EQ(seen_options, (json{{"k", 1}}));

  // A factory's refusal becomes a CONFIG_ERROR carrying its message.
  auto bad = server_options_from_json(
      {{"listen", {"unix:@x"}},
       {"auth", {{"mechanisms", {"custom"}}, {"options", {{"custom", {{"fail", true}}}}}}}},
      r);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.code(), Errc::kConfigError);
  EXPECT_NE(bad.status().message.find("told to fail"), std::string::npos)
      << bad.status().message;
}

// ---------------------------------------------------------------------------
// Bad configurations

struct BadConfig {
  const char* name;
  std::string json_text;
  const char* must_mention;  // the key (or value) the message must name
};

void PrintTo(const BadConfig& c, std::ostream* os) { *os << c.name; }

class BadConfigTest : public ::testing::TestWithParam<BadConfig> {};

TEST_P(BadConfigTest, IsConfigErrorNamingTheKey) {
  const auto& c = GetParam();
  const json config = json::parse(c.json_text);
  auto o = server_options_from_json(config, registry());
  ASSERT_FALSE(o.ok()) << c.json_text << " was accepted";
  EXPECT_EQ(o.code(), Errc::kConfigError) << o.status().to_string();
  EXPECT_NE(o.status().message.find(c.must_mention), std::string::npos)
      << "message '" << o.status().message << "' does not mention '" << c.must_mention << "'";
}

#define LISTEN R"("listen": ["tcp://127.0.0.1:0"])"

INSTANTIATE_TEST_SUITE_P(
    Table, BadConfigTest,
    ::testing::Values(
        BadConfig{"not_an_object", R"(["tcp://127.0.0.1:0"])", "object"},
        BadConfig{"null", "null", "object"},
        BadConfig{"unknown_top_level_key", R"({)" LISTEN R"(, "io_thread": 2})", "io_thread"},
        BadConfig{"unknown_top_level_key_typo_listen", R"({"listn": ["tcp://127.0.0.1:0"]})",
                  "listn"},
        BadConfig{"unknown_key_under_auth",
                  R"({)" LISTEN R"(, "auth": {"mechanism": ["simple"]}})", "auth.mechanism"},
        BadConfig{"listen_missing", R"({"io_threads": 1})", "listen"},
        BadConfig{"listen_empty", R"({"listen": []})", "listen"},
        BadConfig{"listen_not_array", R"({"listen": "tcp://127.0.0.1:0"})", "listen"},
        BadConfig{"listen_entry_not_string", R"({"listen": [7000]})", "listen"},
        BadConfig{"listen_entry_null", R"({"listen": [null]})", "listen"},
        // The message names the offending URI.
        BadConfig{"listen_bad_uri", R"({"listen": ["http://127.0.0.1:80"]})",
                  "http://127.0.0.1:80"},
        BadConfig{"listen_bad_port", R"({"listen": ["tcp://127.0.0.1:99999"]})",
                  "tcp://127.0.0.1:99999"},
        BadConfig{"listen_second_entry_bad",
                  R"({"listen": ["tcp://127.0.0.1:0", "tcp://nohost"]})", "tcp://nohost"},
        BadConfig{"auth_not_object", R"({)" LISTEN R"(, "auth": ["simple"]})", "auth"},
        BadConfig{"auth_mechanisms_empty", R"({)" LISTEN R"(, "auth": {"mechanisms": []}})",
                  "auth.mechanisms"},
        BadConfig{"auth_mechanisms_not_array",
                  R"({)" LISTEN R"(, "auth": {"mechanisms": "simple"}})", "auth.mechanisms"},
        BadConfig{"auth_mechanism_not_string", R"({)" LISTEN R"(, "auth": {"mechanisms": [1]}})",
                  "auth.mechanisms"},
        // The message names the unknown mechanism.
        BadConfig{"unknown_mechanism", R"({)" LISTEN R"(, "auth": {"mechanisms": ["no-such-mech"]}})",
                  "no-such-mech"},
        BadConfig{"options_for_mechanism_not_enabled",
                  R"({)" LISTEN
                  R"(, "auth": {"mechanisms": ["simple"], "options": {"token": {}}}})",
                  "auth.options.token"},
        BadConfig{"options_without_mechanisms_list",
                  R"({)" LISTEN R"(, "auth": {"options": {"token": {}}}})", "auth.options.token"},
        BadConfig{"options_not_object",
                  R"({)" LISTEN R"(, "auth": {"mechanisms": ["simple"], "options": []}})",
                  "auth.options"},
        BadConfig{"io_threads_negative", R"({)" LISTEN R"(, "io_threads": -1})", "io_threads"},
        BadConfig{"io_threads_string", R"({)" LISTEN R"(, "io_threads": "2"})", "io_threads"},
        BadConfig{"io_threads_float", R"({)" LISTEN R"(, "io_threads": 1.5})", "io_threads"},
        BadConfig{"io_threads_bool", R"({)" LISTEN R"(, "io_threads": true})", "io_threads"},
        BadConfig{"blocking_threads_negative", R"({)" LISTEN R"(, "blocking_threads": -8})",
                  "blocking_threads"},
        BadConfig{"max_connections_string", R"({)" LISTEN R"(, "max_connections": "10"})",
                  "max_connections"},
        BadConfig{"max_connections_per_address_negative",
                  R"({)" LISTEN R"(, "max_connections_per_address": -1})",
                  "max_connections_per_address"},
        BadConfig{"max_connections_per_user_string",
                  R"({)" LISTEN R"(, "max_connections_per_user": "2"})", "max_connections_per_user"},
        BadConfig{"max_frame_size_negative", R"({)" LISTEN R"(, "max_frame_size": -1})",
                  "max_frame_size"},
        BadConfig{"max_pending_output_string", R"({)" LISTEN R"(, "max_pending_output": "1M"})",
                  "max_pending_output"},
        BadConfig{"negotiation_timeout_negative",
                  R"({)" LISTEN R"(, "negotiation_timeout_ms": -1})", "negotiation_timeout_ms"},
        BadConfig{"idle_timeout_string", R"({)" LISTEN R"(, "idle_timeout_ms": "300000"})",
                  "idle_timeout_ms"},
        BadConfig{"stop_grace_negative", R"({)" LISTEN R"(, "stop_grace_ms": -30000})",
                  "stop_grace_ms"},
        BadConfig{"unix_socket_mode_number", R"({)" LISTEN R"(, "unix_socket_mode": 660})",
                  "unix_socket_mode"},
        BadConfig{"unix_socket_mode_not_octal", R"({)" LISTEN R"(, "unix_socket_mode": "0968"})",
                  "unix_socket_mode"},
        BadConfig{"unix_socket_mode_words", R"({)" LISTEN R"(, "unix_socket_mode": "rw-rw----"})",
                  "unix_socket_mode"},
        BadConfig{"unix_socket_mode_empty", R"({)" LISTEN R"(, "unix_socket_mode": ""})",
                  "unix_socket_mode"},
        BadConfig{"unix_socket_mode_too_big", R"({)" LISTEN R"(, "unix_socket_mode": "10000"})",
                  "unix_socket_mode"},
        BadConfig{"unix_socket_mode_trailing", R"({)" LISTEN R"(, "unix_socket_mode": "0660x"})",
                  "unix_socket_mode"},
        BadConfig{"log_level_unknown", R"({)" LISTEN R"(, "log_level": "verbose"})", "log_level"},
        BadConfig{"log_level_uppercase", R"({)" LISTEN R"(, "log_level": "INFO"})", "log_level"},
        BadConfig{"log_level_number", R"({)" LISTEN R"(, "log_level": 2})", "log_level"},
        BadConfig{"log_format_unknown", R"({)" LISTEN R"(, "log_format": "xml"})", "log_format"},
        BadConfig{"log_format_uppercase", R"({)" LISTEN R"(, "log_format": "JSON"})", "log_format"},
        BadConfig{"log_format_number", R"({)" LISTEN R"(, "log_format": 1})", "log_format"},
        BadConfig{"stream_window_too_small", R"({)" LISTEN R"(, "stream_window": 1024})",
                  "stream_window"},
        BadConfig{"stream_window_string", R"({)" LISTEN R"(, "stream_window": "8M"})",
                  "stream_window"},
        BadConfig{"shared_memory_not_object", R"({)" LISTEN R"(, "shared_memory": true})",
                  "shared_memory"},
        BadConfig{"shared_memory_unknown_key",
                  R"({)" LISTEN R"(, "shared_memory": {"enable": true}})", "shared_memory.enable"},
        BadConfig{"shared_memory_enabled_string",
                  R"({)" LISTEN R"(, "shared_memory": {"enabled": "yes"}})", "shared_memory.enabled"},
        BadConfig{"shared_memory_slot_not_pages",
                  R"({)" LISTEN R"(, "shared_memory": {"slot_size": 5000}})", "shared_memory.slot_size"},
        BadConfig{"shared_memory_one_slot",
                  R"({)" LISTEN R"(, "shared_memory": {"slots": 1}})", "shared_memory.slots"},
        BadConfig{"shared_memory_uid_negative",
                  R"({)" LISTEN R"(, "shared_memory": {"peer_uid": -1}})", "peer_uid"},
        BadConfig{"admin_not_object", R"({)" LISTEN R"(, "admin": "127.0.0.1:9464"})", "'admin'"},
        BadConfig{"admin_without_listen", R"({)" LISTEN R"(, "admin": {}})", "admin.listen"},
        BadConfig{"admin_listen_not_string", R"({)" LISTEN R"(, "admin": {"listen": 9464}})", "admin.listen"},
        BadConfig{"admin_unknown_key",
                  R"({)" LISTEN R"(, "admin": {"listen": "127.0.0.1:0", "enabled": true}})", "admin.enabled"},
        BadConfig{"admin_hosts_not_array",
                  R"({)" LISTEN R"(, "admin": {"listen": "127.0.0.1:0", "hosts": "a.example"}})", "admin.hosts"},
        BadConfig{"admin_hosts_not_strings",
                  R"({)" LISTEN R"(, "admin": {"listen": "127.0.0.1:0", "hosts": ["a.example", 1]}})",
                  "admin.hosts"}),
    [](const auto& tp) { return std::string(tp.param.name); });

// A value the JSON parser accepts as an unsigned integer but that does not
// fit the option must be refused, not wrapped around. (Bug: see report.)
INSTANTIATE_TEST_SUITE_P(
    OutOfRange, BadConfigTest,
    ::testing::Values(
        // Octal 40000000660 is 2^32 + 0660: narrowed to unsigned it becomes 0660.
        BadConfig{"unix_socket_mode_wraps_32_bits",
                  R"({)" LISTEN R"(, "unix_socket_mode": "40000000660"})", "unix_socket_mode"}),
    [](const auto& tp) { return std::string(tp.param.name); });

// Timeouts are std::chrono::milliseconds (signed 64-bit) and the server adds
// them to steady_clock::now() (nanoseconds). A huge value must either be
// refused (CONFIG_ERROR naming the key) or clamped to something positive
// that can be added to now() without overflowing — never wrap to a negative
// duration or overflow later (signed overflow is undefined behaviour).
// (Bug: see report — read_ms() converts a uint64 into the int64 rep unchecked.)
TEST(ServerConfigTest, StreamWindowAndSharedMemory) {
  const ServerOptions defaults;
  auto plain = server_options_from_json({{"listen", {"unix:@x"}}}, registry());
  ASSERT_TRUE(plain.ok()) << plain.status().to_string();
  EXPECT_EQ(plain->stream_window, defaults.stream_window);
  EXPECT_FALSE(plain->shm.enabled);  // off unless asked for
  auto o = server_options_from_json(
      {{"listen", {"unix:@x"}},
       {"stream_window", 1 << 20},
       {"shared_memory",
        {{"enabled", true}, {"slot_size", 256 * 1024}, {"slots", 8}, {"peer_uid", 1000}}}},
      registry());
  ASSERT_TRUE(o.ok()) << o.status().to_string();
  EXPECT_EQ(o->stream_window, 1u << 20);
  EXPECT_TRUE(o->shm.enabled);
  EXPECT_EQ(o->shm.ring.slot_size, 256u * 1024);
  EXPECT_EQ(o->shm.ring.slot_count, 8u);
  ASSERT_TRUE(o->shm.peer.uid.has_value());
  EXPECT_EQ(*o->shm.peer.uid, 1000u);
}

TEST(ServerConfigTest, HugeTimeoutsAreRefusedOrClampedNeverWrapped) {
  const char* keys[] = {"negotiation_timeout_ms", "idle_timeout_ms", "stop_grace_ms"};
  const std::uint64_t values[] = {
      10'000'000'000'000ull,            // ~317 years: overflows now() + d in nanoseconds
      9'223'372'036'854'775'807ull,     // INT64_MAX
      9'223'372'036'854'775'808ull,     // INT64_MAX + 1: wraps to INT64_MIN
      18'446'744'073'709'551'615ull,    // UINT64_MAX: wraps to -1
  };
  using Clock = std::chrono::steady_clock;
  const auto headroom_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                               Clock::time_point::max() - Clock::now())
                               .count();
  for (const char* key : keys) {
    for (const std::uint64_t value : values) {
      json config = {{"listen", {"unix:@x"}}};
      config[key] = value;
      ASSERT_TRUE(config[key].is_number_unsigned());
      auto o = server_options_from_json(config, registry());
      if (!o.ok()) {
        EXPECT_EQ(o.code(), Errc::kConfigError) << key << "=" << value;
        EXPECT_NE(o.status().message.find(key), std::string::npos) << o.status().message;
        continue;
      }
      const std::chrono::milliseconds got = std::string_view(key) == "negotiation_timeout_ms"
                                                ? o->negotiation_timeout
                                            : std::string_view(key) == "idle_timeout_ms"
                                                ? o->idle_timeout
                                                : o->stop_grace;
      EXPECT_GT(got.count(), 0) << key << "=" << value << " became " << got.count() << " ms";
      EXPECT_LT(got.count(), headroom_ms)
          << key << "=" << value << " became " << got.count()
          << " ms, which overflows steady_clock::now() + timeout";
    }
  }
}

#undef LISTEN

// ---------------------------------------------------------------------------
// load_server_config

// A configuration file load_server_config() refuses: a config error whose
// message has every fragment, "{file}" standing for the file's path.
struct BadConfigFile {
  const char* name;
  std::optional<std::string> text;  // none: the file does not exist
  std::vector<std::string> says;
};

void PrintTo(const BadConfigFile& c, std::ostream* os) { *os << c.name; }

class BadConfigFileTest : public ::testing::TestWithParam<BadConfigFile> {};

TEST_P(BadConfigFileTest, IsConfigErrorNamingTheFileAndWhere) {
  const auto& c = GetParam();
  std::optional<TempFile> file;
  if (c.text) file.emplace(*c.text);
  const std::string path = file ? file->path() : "/nonexistent-authrpc-dir/server.json";
  auto config = load_server_config(path, registry());
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.code(), Errc::kConfigError);
  for (std::string fragment : c.says) {
    if (const auto at = fragment.find("{file}"); at != std::string::npos) {
      fragment.replace(at, 6, path);
    }
    EXPECT_NE(config.status().message.find(fragment), std::string::npos)
        << config.status().message << " does not say " << fragment;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Table, BadConfigFileTest,
    ::testing::Values(
        BadConfigFile{"MissingFile", std::nullopt, {"{file}"}},
        BadConfigFile{"InvalidJson", R"({"listen": ["tcp://127.0.0.1:0"],)",
                      {"{file}", "syntax error at line"}},
        BadConfigFile{"EmptyFileIsInvalidJson", "", {}},
        BadConfigFile{"ErrorsInTheFileNameTheFileAndTheKey",
                      R"({"listen": ["tcp://127.0.0.1:0"], "max_conections": 5})",
                      {"{file}", "max_conections"}},
        BadConfigFile{"UnknownKeysInTheTokensSection",
                      R"({"listen": ["unix:@x"], "tokens": {"store": "memory", "bogus": 1}})",
                      {"tokens.bogus"}},
        BadConfigFile{"SyntaxErrorsNameLineAndColumn",
                      "{\n  \"listen\": [\"unix:@x\"],\n  \"io_threads\": 2,,\n}\n",
                      {"{file}: syntax error at line 3, column 19"}},
        BadConfigFile{"NumbersTooLargeNameLineAndColumn",
                      "{\n  \"listen\": [\"unix:@x\"],\n  \"io_threads\": 1e999\n}\n",
                      {"{file}: number out of range at line 3, column 17"}}),
    [](const ::testing::TestParamInfo<BadConfigFile>& p) { return p.param.name; });

TEST(LoadServerConfigTest, CommentsAreAllowed) {
  TempFile f(R"(// authrpc-server configuration
{
  /* where to listen */
  "listen": ["unix:@authrpc-config-comment"],
  "io_threads": 1  // one is enough
})");
  auto o = load_options(f.path());
  ASSERT_TRUE(o.ok()) << o.status().to_string();
  EXPECT_EQ(o->io_threads, 1u);
}

TEST(LoadServerConfigTest, ErrorsInTheFileNameTheFileAndTheKey) {
  TempFile f(R"({"listen": ["tcp://127.0.0.1:0"], "max_conections": 5})");
  auto o = load_options(f.path());
  ASSERT_FALSE(o.ok());
  EXPECT_EQ(o.code(), Errc::kConfigError);
  EXPECT_NE(o.status().message.find(f.path()), std::string::npos) << o.status().message;
  EXPECT_NE(o.status().message.find("max_conections"), std::string::npos) << o.status().message;
}

}  // namespace
}  // namespace authrpc

// The library reads the configuration as authrpc-server does:
// the "tokens" section is checked everywhere, opened by load_server_config(),
// and syntax errors say where they are.
namespace authrpc {
namespace {

TEST(ServerConfigTokensTest, AStoreTypeThatIsNotAStringIsAConfigError) {
  const auto stores = security::TokenStoreRegistry::with_builtins();
  for (const char* store : {R"({"type": 5})", R"({"type": {}})", R"({"type": null})"}) {
    SCOPED_TRACE(store);
    auto options = token_service_options_from_json(
        json::parse(std::string(R"({"store": )") + store + "}"), stores);
    ASSERT_FALSE(options.ok());
    EXPECT_EQ(options.code(), Errc::kConfigError);
    EXPECT_NE(options.status().message.find("store.type' must be a string"), std::string::npos)
        << options.status().message;
  }
}

// The same unknown key in a file: BadConfigFileTest's UnknownKeysInTheTokensSection.
TEST(ServerConfigTokensTest, UnknownKeysInTheTokensSectionAreRefused) {
  const std::string text =
      R"({"listen": ["unix:@x"], "tokens": {"store": "memory", "bogus": 1}})";
  auto options = server_options_from_json(json::parse(text), registry());
  ASSERT_FALSE(options.ok());
  EXPECT_EQ(options.code(), Errc::kConfigError);
  EXPECT_NE(options.status().message.find("bogus"), std::string::npos) << options.status().message;
}

// Starts a Server on `config`'s options with its services (the token
// service) and connects to it as alice (`simple`).
void ServeAndConnect(ServerConfig& config, std::unique_ptr<Server>& server,
                     std::unique_ptr<Client>& client) {
  server = std::make_unique<Server>(std::move(config.options));
  ASSERT_TRUE(config.add_services(*server).ok());
  ASSERT_TRUE(server->start().ok());
  auto connected = testing::ConnectWith(server->bound_endpoints().front(),
                                        std::make_shared<SimpleClientMechanism>("alice"));
  ASSERT_TRUE(connected.ok()) << connected.status().to_string();
  client = std::move(*connected);
}

// A configuration with a "tokens" section gives the application what
// authrpc-server runs: the token service open, `token` among the mechanisms,
// and the `token` service served once add_services() added it.
TEST(ServerConfigTokensTest, TheTokensSectionOpensTheTokenService) {
  const std::string name = "authrpc-config-tokens-" + std::to_string(::getpid());
  TempFile f(R"({"listen": ["unix:@)" + name + R"("],
                 "auth": {"mechanisms": ["simple", "token"]},
                 "tokens": {"store": "memory"}})");
  auto config = load_server_config(f.path(), registry());
  ASSERT_TRUE(config.ok()) << config.status().to_string();
  ASSERT_NE(config->tokens, nullptr);
  EXPECT_EQ(mechanism_names(config->options),
            (std::vector<std::string>{"simple", "token"}));
  EXPECT_EQ(config->options.mechanisms[1], config->tokens->mechanism());

  std::unique_ptr<Server> server;
  std::unique_ptr<Client> client;
  ASSERT_NO_FATAL_FAILURE(ServeAndConnect(*config, server, client));
  // token.cancel exists (a `simple` caller with a malformed token is refused
  // by the service, not NOT_FOUND by the dispatcher).
  auto reply = client->call("token", "cancel", R"({"token": "not-a-token"})");
  ASSERT_FALSE(reply.ok());
  EXPECT_NE(reply.code(), Errc::kNotFound) << reply.status().to_string();
  client.reset();
  server->stop();
}

// The server, its token service and its audit log share one sink (one level
// for SIGHUP to set), and token operations are audited in the server's log.
TEST(ServerConfigTokensTest, TheTokenServiceSharesTheServersSinkAndAuditLog) {
  const std::string dir = testing::TempDir("config-audit");
  ASSERT_FALSE(dir.empty());
  const std::string audit = dir + "/audit.jsonl";
  TempFile f(json{{"listen", {"tcp://127.0.0.1:0"}},
                  {"auth", {{"mechanisms", {"simple"}}}},
                  {"log_level", "info"},
                  {"audit_log", {{"path", audit}}},
                  // token.get over this tcp:// endpoint
                  {"tokens", {{"store", "memory"}, {"issue_mechanisms", {"simple"}}, {"allow_plaintext", true}}}}
                 .dump());
  auto config = load_server_config(f.path(), registry());
  ASSERT_TRUE(config.ok()) << config.status().to_string();
  ASSERT_NE(config->tokens, nullptr);
  ASSERT_NE(config->options.audit_log, nullptr);
  config->options.log.set_level(LogLevel::kError);
  EXPECT_EQ(config->tokens->options().log.level(), LogLevel::kError);
  config->options.log.set_level(LogLevel::kInfo);
  EXPECT_EQ(config->tokens->options().log.level(), LogLevel::kInfo);

  const auto audit_log = config->options.audit_log;
  std::unique_ptr<Server> server;
  std::unique_ptr<Client> client;
  ASSERT_NO_FATAL_FAILURE(ServeAndConnect(*config, server, client));
  auto got = client->call("token", "get", R"({"renewer": "yarn"})");
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  client.reset();
  server->stop();
  audit_log->flush();
  std::ifstream in(audit);
  std::string line;
  bool found = false;
  while (std::getline(in, line)) {
    const json j = json::parse(line);
    if (j["event"] != "token") continue;
    found = true;
    EXPECT_EQ(j["operation"], "get");
    EXPECT_EQ(j["outcome"], "success");
    EXPECT_EQ(j["user"], "alice");
    EXPECT_THAT(j.value("token_id", ""), ::testing::StartsWith("sequence_number="));
  }
  EXPECT_TRUE(found) << "no token line in the server's audit log";
  std::filesystem::remove_all(dir);
}

TEST(ServerConfigTokensTest, WithoutATokensSectionThereIsNoTokenService) {
  TempFile f(R"({"listen": ["unix:@x"]})");
  auto config = load_server_config(f.path(), registry());
  ASSERT_TRUE(config.ok()) << config.status().to_string();
  EXPECT_EQ(config->tokens, nullptr);
}

// "admin" only records where the admin listener goes and the host names it
// answers to; authrpc-server starts it (components/admin/admin_server.h), which
// checks the address and the names.
TEST(ServerConfigTest, TheAdminSectionGivesTheListenersAddressAndHostNames) {
  auto with = server_config_from_json(json::parse(R"({"listen": ["unix:@x"], "admin": {"listen": "127.0.0.1:9464"}})"),
                                      registry());
  ASSERT_TRUE(with.ok()) << with.status().to_string();
  EXPECT_EQ(with->admin_listen, "127.0.0.1:9464");
  EXPECT_TRUE(with->admin_hosts.empty());
  auto hosts = server_config_from_json(
      json::parse(R"({"listen": ["unix:@x"], "admin": {"listen": "[::1]:0", "hosts": ["a.example", "B.example"]}})"),
      registry());
  ASSERT_TRUE(hosts.ok()) << hosts.status().to_string();
  EXPECT_EQ(hosts->admin_listen, "[::1]:0");
  EXPECT_EQ(hosts->admin_hosts, (std::vector<std::string>{"a.example", "B.example"}));
  auto without = server_config_from_json(json::parse(R"({"listen": ["unix:@x"]})"), registry());
  ASSERT_TRUE(without.ok()) << without.status().to_string();
  EXPECT_FALSE(without->admin_listen.has_value());
}

// A shared token store is a type registered by an optional component
// (security/token_store_registry.h): the zookeeper component reads its own
// keys when the program registers it, and a program without it refuses the
// type with a clear error instead of failing when the store opens.
TEST(ServerConfigTokensTest, ASharedStoreIsReadByTheComponentThatRegisteredIt) {
  const json zk = {{"store", {{"type", "zookeeper"}, {"connect", "127.0.0.1:1"}, {"root", "/a"}}}};
  auto without = token_service_options_from_json(zk);
  ASSERT_FALSE(without.ok());
  EXPECT_EQ(without.code(), make_error_code(Errc::kConfigError));
  EXPECT_NE(without.status().message.find("built without ZooKeeper support"), std::string::npos)
      << without.status().message;

  const auto stores = security::TokenStoreRegistry::with_builtins();
  if (stores.find("zookeeper") == nullptr) GTEST_SKIP() << "authrpc was built without ZooKeeper";
  auto with = token_service_options_from_json(zk, stores);
  ASSERT_TRUE(with.ok()) << with.status().to_string();
  EXPECT_EQ(with->store, TokenServiceOptions::Store::kShared);
  EXPECT_EQ(with->shared_store.label, "ZooKeeper");
  EXPECT_TRUE(with->shared_store.open);

  struct Case {
    const char* name;
    json tokens;
    const char* message;  // exactly, as before the store became a registered type
  };
  const Case cases[] = {
      {"a plain string", {{"store", "zookeeper"}},
       "'tokens.store' zookeeper needs {\"type\": \"zookeeper\", \"connect\": ..., \"root\": ...}"},
      {"no connect", {{"store", {{"type", "zookeeper"}, {"root", "/a"}}}},
       "'tokens.store.connect' is required with the zookeeper store"},
      {"an unknown key", {{"store", {{"type", "zookeeper"}, {"connect", "h:1"}, {"root", "/a"}, {"x", 1}}}},
       "unknown key 'tokens.store.x'"},
      {"a batch of 0",
       {{"store", {{"type", "zookeeper"}, {"connect", "h:1"}, {"root", "/a"}, {"sequence_batch", 0}}}},
       "'tokens.store.sequence_batch' must be an integer from 1 to 100000"},
      // The key sits in tokens.store, and the message says so (it once read
      // 'tokens.session_timeout_ms', a key that does not exist).
      {"a session timeout too short",
       {{"store", {{"type", "zookeeper"}, {"connect", "h:1"}, {"root", "/a"}, {"session_timeout_ms", 5}}}},
       "'tokens.store.session_timeout_ms' must be an integer number of milliseconds from 1000 to "
       "315360000000"},
      {"a directory too", {{"store", {{"type", "zookeeper"}, {"connect", "h:1"}, {"root", "/a"}}}, {"dir", "/d"}},
       "'tokens.dir' is only for the file store"},
      {"another type", {{"store", {{"type", "etcd"}}}},
       "'tokens.store.type' must be \"zookeeper\" (\"file\" and \"memory\" are plain strings)"},
      {"a number", {{"store", 1}}, "'tokens.store' must be \"file\", \"memory\" or {\"type\": \"zookeeper\", ...}"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    auto r = token_service_options_from_json(c.tokens, stores);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.code(), make_error_code(Errc::kConfigError));
    EXPECT_EQ(r.status().message, c.message);
  }
}

}  // namespace
}  // namespace authrpc

// ---------------------------------------------------------------------------
// check_server_config_file(): every problem, where its key is, opening nothing

namespace authrpc {
namespace {

struct CheckCase {
  const char* name;
  std::string text;
  std::vector<std::string> lines;  // each after "PATH:"
};

TEST(ServerConfigCheckTest, EveryProblemWhereItsKeyIs) {
  const std::string dir = testing::TempDir("config-check");
  const std::string tokens_line = "  \"tokens\": {\"dir\": \"" + dir + "/tokens\", \"stroe\": \"file\"},\n";
  const CheckCase cases[] = {
      {"good", R"({"listen": ["tcp://127.0.0.1:0"]})", {}},
      {"independent mistakes, in the file's order",
       "{\n"
       "  \"listen\": [\"tcp://127.0.0.1:0\"],\n"
       "  \"max_frame_size\": -1,\n"
       "  \"auth\": {\"mechanisms\": [\"simple\"], \"mechansims\": 1},\n"
       + tokens_line +
       "  \"log_level\": \"info\",\n"
       "  \"log_level\": \"loud\"\n"
       "}",
       {"3:3: max_frame_size: must be a non-negative integer", "4:38: auth.mechansims: unknown key",
        "5:" + std::to_string(tokens_line.find("\"stroe\"") + 1) + ": tokens.stroe: unknown key",
        "7:3: log_level: duplicate key (first at line 6, column 3)",
        "7:3: log_level: must be debug, info, warning or error"}},
      {"a problem's echo in its section is not reported",
       "{\"listen\": [\"tcp://127.0.0.1:0\"],\n \"admin\": {\"listen\": 5}}",
       {"2:12: admin.listen: must be a \"HOST:PORT\" string, e.g. \"127.0.0.1:9464\""}},
      {"a key missing is reported where its section is",
       "{\"listen\": [\"tcp://127.0.0.1:0\"],\n \"authorization\": {}}",
       {"2:2: authorization.acl_file: must be a path string"}},
      {"a conflict between keys when no key has a problem",
       "{\"listen\": [\"tcp://127.0.0.1:0\"],\n \"auth\": {\"mechanisms\": [\"simple\"]},\n"
       " \"authentication\": \"required\"}",
       {"2:11: auth.mechanisms: authentication is required but mechanism 'simple' (no proof) is enabled"}},
      {"no conflict after a key's own problem",
       "{\"listen\": [\"tcp://127.0.0.1:0\"], \"authentication\": \"required\",\n \"io_threads\": \"two\"}",
       {"2:2: io_threads: must be a non-negative integer"}},
      {"a place that cannot be written",
       "{\"listen\": [\"tcp://127.0.0.1:0\"],\n \"audit_log\": {\"path\": \"/nonexistent-authrpc/audit.log\"}}",
       {"2:16: audit_log.path: /nonexistent-authrpc/audit.log: cannot create it in /nonexistent-authrpc: No such "
        "file or directory"}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    TempFile f(c.text);
    std::vector<std::string> want;
    for (const auto& line : c.lines) want.push_back(f.path() + ":" + line);
    EXPECT_EQ(check_server_config_file(f.path(), registry(), security::TokenStoreRegistry::with_builtins()), want);
  }
  const auto missing = check_server_config_file(dir + "/none.json", registry());
  EXPECT_EQ(missing, std::vector<std::string>{"cannot read configuration file " + dir +
                                              "/none.json: No such file or directory"});
}

// The check and a refused start leave no trace: no token store, no audit
// log, no socket; a port someone else holds does not fail the check.
TEST(ServerConfigCheckTest, OpensNothingAndTheServerChecksBeforeItOpens) {
  const std::filesystem::path dir = testing::TempDir("config-check-trace");
  const int held = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(held, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t size = sizeof address;
  ASSERT_EQ(::bind(held, reinterpret_cast<sockaddr*>(&address), size), 0);
  ASSERT_EQ(::listen(held, 1), 0);
  ASSERT_EQ(::getsockname(held, reinterpret_cast<sockaddr*>(&address), &size), 0);
  const auto config = [&](const std::string& more) {
    return R"({"listen": ["tcp://127.0.0.1:)" + std::to_string(ntohs(address.sin_port)) + R"(", "unix:)" +
           (dir / "s.sock").string() + R"("], )" + more + R"(
      "auth": {"mechanisms": ["simple"]},
      "tokens": {"dir": ")" + (dir / "tokens").string() + R"("},
      "audit_log": {"path": ")" + (dir / "audit.log").string() + R"("}})";
  };
  TempFile good(config(""));
  EXPECT_EQ(check_server_config_file(good.path(), registry()), std::vector<std::string>{});
  TempFile typo(config(R"("max_conections": 5,)"));
  const auto refused = load_server_config(typo.path(), registry());
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message, ::testing::HasSubstr("max_conections: unknown key"));
  EXPECT_FALSE(std::filesystem::exists(dir / "tokens"));
  EXPECT_FALSE(std::filesystem::exists(dir / "audit.log"));
  EXPECT_FALSE(std::filesystem::exists(dir / "s.sock"));
  ::close(held);
}

}  // namespace
}  // namespace authrpc
