// The example's `psk` mechanism (examples/psk_mechanism.h), a mechanism from
// outside the tree: its key files, its sessions stepped by hand (tampered,
// relayed and impostor messages), and its two halves through a real server
// and client over tcp, unix and TLS.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <openssl/rand.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "authrpc/auth/mechanism_registry.h"
#include "psk_mechanism.h"
#include "tests/testing/session_driver.h"
#include "tests/testing/test_server.h"
#include "tests/testing/test_support.h"
#include "tests/testing/token_capture.h"

namespace authrpc {
namespace {

using namespace std::chrono_literals;
using psk::KeyTable;
using psk::PskClientMechanism;
using psk::PskServerMechanism;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::Await;
using testing::Describe;

// True if `s` is what a case expects (kOk: success).
bool Is(const Status& s, Errc expected) {
  return expected == Errc::kOk ? s.ok() : s.code == expected;
}

std::string HexKey() {
  unsigned char raw[psk::kKeyBytes];
  EXPECT_EQ(RAND_bytes(raw, sizeof raw), 1);
  std::string hex;
  for (unsigned char b : raw) {
    hex += "0123456789abcdef"[b >> 4];
    hex += "0123456789abcdef"[b & 0xF];
  }
  return hex;
}

// A temporary directory of key files, removed at the end of the test.
class KeyDir {
 public:
  KeyDir() : dir_(testing::TempDir("psk")) { EXPECT_FALSE(dir_.empty()); }
  ~KeyDir() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  std::string Write(const std::string& name, const std::string& content, mode_t mode = 0600) {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path) << content;
    EXPECT_EQ(::chmod(path.c_str(), mode), 0);
    return path;
  }
  const std::string& path() const { return dir_; }

 private:
  std::string dir_;
};

// Identities known to the server in every test below, and their keys.
struct Keys {
  KeyDir dir;
  std::string alice = HexKey();
  std::string bob = HexKey();
  std::string server_file = dir.Write("server.keys", "# who key\nalice " + alice + "\n\nbob\t" + bob + "  \n");

  std::shared_ptr<PskServerMechanism> Server() {
    auto m = PskServerMechanism::create(server_file);
    EXPECT_TRUE(m.ok()) << Describe(m);
    return m.ok() ? *m : nullptr;
  }
  // A client of `identity` holding `key` (hex).
  std::shared_ptr<PskClientMechanism> Client(const std::string& identity, const std::string& key) {
    const std::string file = dir.Write("client-" + std::to_string(files_++) + ".keys",
                                       identity + " " + key + "\n");
    auto m = PskClientMechanism::create(identity, file);
    EXPECT_TRUE(m.ok()) << Describe(m);
    return m.ok() ? *m : nullptr;
  }

 private:
  int files_ = 0;
};

// --- key files ---------------------------------------------------------------

TEST(PskKeyFile, LoadsIdentitiesAndRefusesWhatIsUnsafeOrMalformed) {
  const std::string key = HexKey();
  struct Case {
    const char* name;
    std::string content;
    mode_t mode;
    Errc expected;
    const char* says;
  } cases[] = {
      {"good, comments, blank lines, CRLF", "# c\n\nalice " + key + "\r\nbob " + HexKey(), 0600,
       Errc::kOk, ""},
      {"owner read-only", "alice " + key + "\n", 0400, Errc::kOk, ""},
      {"group-readable", "alice " + key + "\n", 0640, Errc::kConfigError, "mode 0640"},
      {"world-readable", "alice " + key + "\n", 0644, Errc::kConfigError, "chmod 600"},
      {"short key", "alice " + key.substr(2) + "\n", 0600, Errc::kConfigError, "line 1"},
      {"long key", "alice " + key + "00\n", 0600, Errc::kConfigError, "64 hex digits"},
      {"not hex", "alice " + std::string(64, 'g') + "\n", 0600, Errc::kConfigError, "line 1"},
      {"no key", "# c\nalice\n", 0600, Errc::kConfigError, "line 2"},
      {"bad identity", "al ice " + key + "\n", 0600, Errc::kConfigError, "identity"},
      {"twice", "alice " + key + "\nalice " + key + "\n", 0600, Errc::kConfigError, "second key"},
      {"empty", "", 0600, Errc::kConfigError, "no keys"},
      {"comments only", "# alice " + key + "\n", 0600, Errc::kConfigError, "no keys"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    KeyDir dir;
    auto table = KeyTable::load(dir.Write("keys", c.content, c.mode));
    EXPECT_TRUE(Is(table.status(), c.expected)) << Describe(table);
    if (!table.ok()) {
      EXPECT_THAT(table.status().message, HasSubstr(c.says));
      // Whatever went wrong, the key itself is not in the message.
      EXPECT_THAT(table.status().message, Not(HasSubstr(key.substr(4, 16))));
    }
  }
}

TEST(PskKeyFile, RefusesAMissingFileADirectoryAndASymlink) {
  KeyDir dir;
  const std::string real = dir.Write("real.keys", "alice " + HexKey() + "\n");
  const std::string link = dir.path() + "/link.keys";
  ASSERT_EQ(::symlink(real.c_str(), link.c_str()), 0);
  for (const std::string& path : {dir.path() + "/missing", dir.path(), link}) {
    SCOPED_TRACE(path);
    auto table = KeyTable::load(path);
    EXPECT_EQ(table.code(), Errc::kConfigError) << Describe(table);
  }
  EXPECT_TRUE(KeyTable::load(real).ok());
}

TEST(PskKeyFile, AClientNeedsAValidIdentityWithAKeyInItsFile) {
  Keys keys;
  EXPECT_TRUE(PskClientMechanism::create("bob", keys.server_file).ok());
  for (const char* identity : {"", "carol", "a b", "caf\xc3\xa9"}) {
    SCOPED_TRACE(identity);
    auto m = PskClientMechanism::create(identity, keys.server_file);
    EXPECT_EQ(m.code(), Errc::kConfigError) << Describe(m);
  }
}

// --- sessions, stepped by hand -----------------------------------------------

ChannelInfo Channel(std::string binding = {}) {
  ChannelInfo c;
  c.scheme = binding.empty() ? Endpoint::Scheme::kUnix : Endpoint::Scheme::kTls;
  c.tls = !binding.empty();
  c.channel_binding = std::move(binding);
  return c;
}

// One exchange between `client` and `server`, each seeing its own channel;
// psk's server never challenges the client's last message.
testing::DrivenSession Exchange(ClientMechanism& client, ServerMechanism& server,
                                const ChannelInfo& client_channel,
                                const ChannelInfo& server_channel) {
  testing::DrivenSession out =
      testing::DriveSession(client, server, client_channel, server_channel);
  EXPECT_FALSE(out.challenged_last) << "challenged after the client's last message";
  return out;
}

TEST(PskSession, AuthenticatesBothWaysAndBindsTheProofsToTheChannel) {
  Keys keys;
  auto server = keys.Server();
  const std::string a(32, 'a'), b(32, 'b');
  struct Case {
    const char* name;
    std::string identity, key;
    ChannelInfo client_channel, server_channel;
    Errc expected;
  } cases[] = {
      {"unix, right key", "alice", keys.alice, Channel(), Channel(), Errc::kOk},
      {"tls, right key", "bob", keys.bob, Channel(a), Channel(a), Errc::kOk},
      {"wrong key", "alice", keys.bob, Channel(), Channel(), Errc::kAuthenticationFailed},
      {"unknown identity", "carol", keys.alice, Channel(), Channel(), Errc::kAuthenticationFailed},
      // A relay between two TLS connections: each end sees another binding.
      {"relayed between tls sessions", "alice", keys.alice, Channel(a), Channel(b),
       Errc::kAuthenticationFailed},
      // TLS ends at a relay that talks plaintext to the server.
      {"tls on one side only", "alice", keys.alice, Channel(a), Channel(),
       Errc::kAuthenticationFailed},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    auto client = keys.Client(c.identity, c.key);
    const auto out = Exchange(*client, *server, c.client_channel, c.server_channel);
    EXPECT_EQ(out.sent.size(), 2u) << "HELLO and AUTH_RESPONSE";
    if (c.expected == Errc::kOk) {
      EXPECT_EQ(out.server.kind, ServerStep::Kind::kSuccess) << out.server.error.to_string();
      EXPECT_EQ(out.server.identity.user, c.identity);
      EXPECT_TRUE(out.client.ok()) << out.client.to_string();
    } else {
      EXPECT_EQ(out.server.kind, ServerStep::Kind::kFailure);
      EXPECT_EQ(out.server.error.code, c.expected) << out.server.error.to_string();
      EXPECT_EQ(retry_advice(out.server.error.code), RetryAdvice::kGiveUp);
    }
  }
}

TEST(PskSession, AnUnknownIdentityFailsExactlyLikeAWrongKey) {
  Keys keys;
  auto server = keys.Server();
  const auto unknown = Exchange(*keys.Client("carol", keys.alice), *server, Channel(), Channel());
  const auto wrong = Exchange(*keys.Client("alice", keys.bob), *server, Channel(), Channel());
  EXPECT_EQ(unknown.server.error.to_string(), wrong.server.error.to_string());
  EXPECT_THAT(unknown.server.error.message, Not(HasSubstr("carol")));
}

TEST(PskSession, ARecordedResponseIsWorthlessOnTheNextSession) {
  Keys keys;
  auto server = keys.Server();
  auto client = keys.Client("alice", keys.alice);
  for (const auto& channel : {Channel(), Channel(std::string(32, 'x'))}) {
    const auto first = Exchange(*client, *server, channel, channel);
    ASSERT_EQ(first.server.kind, ServerStep::Kind::kSuccess);
    auto replay = server->start(channel);
    const ServerStep challenge = Await(replay->step(first.sent[0]));
    ASSERT_EQ(challenge.kind, ServerStep::Kind::kChallenge);
    const ServerStep step = Await(replay->step(first.sent[1]));
    EXPECT_EQ(step.kind, ServerStep::Kind::kFailure);
    EXPECT_EQ(step.error.code, Errc::kAuthenticationFailed) << step.error.to_string();
  }
}

TEST(PskSession, TheServerRefusesMalformedMessages) {
  Keys keys;
  auto server = keys.Server();
  const std::string nonce(32, 'n');
  auto hello = [&](std::string identity, std::size_t claimed) {
    return std::string(1, '\x01') + static_cast<char>(claimed) + identity + nonce;
  };
  struct Case {
    const char* name;
    std::string hello;
    std::string response;  // sent if the HELLO was challenged
  } cases[] = {
      {"empty HELLO", "", ""},
      {"version 2", "\x02" + hello("alice", 5).substr(1), ""},
      {"identity length past the end", hello("alice", 200), ""},
      {"identity length short", hello("alice", 4), ""},
      {"trailing byte", hello("alice", 5) + "x", ""},
      {"empty identity", hello("", 0), ""},
      {"identity with a space", hello("al ce", 5), ""},
      {"identity with a control character", hello("al\nce", 5), ""},
      {"empty response", hello("alice", 5), ""},
      {"short response", hello("alice", 5), "\x01" + std::string(31, 'p')},
      {"response with another version", hello("alice", 5), "\x02" + std::string(32, 'p')},
      {"response with a trailing byte", hello("alice", 5), "\x01" + std::string(33, 'p')},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    auto session = server->start(Channel());
    ServerStep step = Await(session->step(c.hello));
    if (step.kind == ServerStep::Kind::kChallenge) step = Await(session->step(c.response));
    EXPECT_EQ(step.kind, ServerStep::Kind::kFailure);
    EXPECT_EQ(step.error.code, Errc::kAuthenticationFailed) << step.error.to_string();
    // The exchange is over: nothing more is accepted.
    EXPECT_EQ(Await(session->step(c.response)).error.code, Errc::kProtocolError);
  }
}

TEST(PskSession, TheClientRefusesAServerThatDoesNotHoldTheKey) {
  Keys keys;
  auto client = keys.Client("alice", keys.alice);
  auto real = keys.Server();
  // What the real server would answer, to tamper with.
  auto cs = client->start(Channel());
  auto ss = real->start(Channel());
  const ServerStep challenge = Await(ss->step(Await(cs->initial()).message));
  const ClientStep response = Await(cs->challenge(challenge.message));
  const std::string success = Await(ss->step(response.message)).message;
  ASSERT_EQ(success.size(), 33u);
  std::string flipped = success;
  flipped[5] ^= 1;

  struct Case {
    const char* name;
    bool challenged;
    std::string final_message;
    Errc expected;
  } cases[] = {
      {"no challenge, empty final message", false, "", Errc::kAuthenticationFailed},
      {"no challenge, a plausible message", false, success, Errc::kAuthenticationFailed},
      {"empty final message", true, "", Errc::kAuthenticationFailed},
      {"one bit off", true, flipped, Errc::kAuthenticationFailed},
      {"a message from another session", true, success, Errc::kAuthenticationFailed},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    auto session = client->start(Channel());
    ASSERT_EQ(Await(session->initial()).kind, ClientStep::Kind::kSend);
    if (c.challenged) {
      const ClientStep step = Await(session->challenge("\x01" + std::string(32, 's')));
      ASSERT_EQ(step.kind, ClientStep::Kind::kSend);
      EXPECT_TRUE(step.final);
    }
    const Status s = Await(session->complete(c.final_message));
    EXPECT_EQ(s.code, c.expected) << s.to_string();
  }
  // The genuine exchange completes; a second challenge or a malformed one is
  // a protocol error.
  EXPECT_TRUE(Await(cs->complete(success)).ok());
  auto session = client->start(Channel());
  Await(session->initial());
  EXPECT_EQ(Await(session->challenge("\x01" + std::string(31, 's'))).error.code, Errc::kProtocolError);
  auto twice = client->start(Channel());
  Await(twice->initial());
  Await(twice->challenge("\x01" + std::string(32, 's')));
  EXPECT_EQ(Await(twice->challenge("\x01" + std::string(32, 's'))).error.code, Errc::kProtocolError);
}

// --- registration ------------------------------------------------------------

TEST(PskRegistry, BuildsBothHalvesFromJsonOptionsAndRefusesBadOnes) {
  Keys keys;
  MechanismRegistry registry;
  psk::register_psk(registry);
  EXPECT_THAT(registry.server_names(), ::testing::ElementsAre("psk"));
  EXPECT_THAT(registry.client_names(), ::testing::ElementsAre("psk"));

  auto server = registry.make_server("psk", {{"key_file", keys.server_file}});
  ASSERT_TRUE(server.ok()) << Describe(server);
  EXPECT_EQ((*server)->name(), "psk");
  auto client = registry.make_client("psk", {{"identity", "bob"}, {"key_file", keys.server_file}});
  ASSERT_TRUE(client.ok()) << Describe(client);
  EXPECT_TRUE(Exchange(**client, **server, Channel(), Channel()).client.ok());

  struct Case {
    const char* name;
    bool server_side;
    nlohmann::json options;
    const char* says;
  } cases[] = {
      {"server, no key_file", true, nlohmann::json::object(), "'key_file' is required"},
      {"server, unknown option", true, {{"key_file", keys.server_file}, {"keyfile", "x"}},
       "unknown option 'keyfile'"},
      {"server, key_file not a string", true, {{"key_file", 1}}, "must be a string"},
      {"server, options not an object", true, "x", "must be an object"},
      {"client, no identity", false, {{"key_file", keys.server_file}}, "'identity' is required"},
      {"client, identity without a key", false, {{"identity", "carol"}, {"key_file", keys.server_file}},
       "no key for identity carol"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const Status s = c.server_side ? registry.make_server("psk", c.options).status()
                                   : registry.make_client("psk", c.options).status();
    EXPECT_EQ(s.code, Errc::kConfigError) << s.to_string();
    EXPECT_THAT(s.message, HasSubstr(c.says));
  }
}

// --- through a real server and client ----------------------------------------

enum class Transport { kTcp, kUnix, kTls };

// A started server offering only `mechanism`, with authentication required
// (tls: the process-wide TestTls certificate).
std::unique_ptr<testing::TestServer> StartServer(Transport transport,
                                                 std::shared_ptr<ServerMechanism> mechanism) {
  auto server = std::make_unique<testing::TestServer>();
  switch (transport) {
    case Transport::kTcp: server->endpoint("tcp:"); break;
    case Transport::kUnix: server->endpoint("unix:"); break;
    case Transport::kTls: server->tls(); break;
  }
  server->mechanism(std::move(mechanism))
      .authentication(SecurityRequirement::kRequired)
      .blocking_threads(1);
  const Status s = server->start();
  EXPECT_TRUE(s.ok()) << s.to_string();
  return s.ok() ? std::move(server) : nullptr;
}

// A client of `server` with `mechanism` only, authentication required.
Result<std::unique_ptr<Client>> Connect(const testing::TestServer& server,
                                        std::shared_ptr<ClientMechanism> mechanism) {
  return server.client()
      .mechanism(std::move(mechanism))
      .authentication(SecurityRequirement::kRequired)
      .connect();
}

enum class Who { kRightKey, kWrongKey, kUnknownIdentity, kReplay };

struct EndToEnd {
  Transport transport;
  Who who;
  Errc expected;
};

std::string Name(const EndToEnd& c) {
  static const char* transports[] = {"Tcp", "Unix", "Tls"};
  static const char* whos[] = {"RightKey", "WrongKey", "UnknownIdentity", "Replay"};
  return std::string(transports[static_cast<int>(c.transport)]) + whos[static_cast<int>(c.who)];
}
std::string TestName(const ::testing::TestParamInfo<EndToEnd>& info) { return Name(info.param); }
void PrintTo(const EndToEnd& c, std::ostream* os) { *os << Name(c); }

class PskEndToEnd : public ::testing::TestWithParam<EndToEnd> {};

TEST_P(PskEndToEnd, OnlyTheKeyHolderGetsInAndTheServerKeepsServing) {
  const EndToEnd& c = GetParam();
  Keys keys;
  auto server = StartServer(c.transport, keys.Server());
  ASSERT_TRUE(server);

  std::shared_ptr<ClientMechanism> mechanism;
  switch (c.who) {
    case Who::kRightKey: mechanism = keys.Client("alice", keys.alice); break;
    case Who::kWrongKey: mechanism = keys.Client("alice", keys.bob); break;
    case Who::kUnknownIdentity: mechanism = keys.Client("carol", keys.alice); break;
    case Who::kReplay: {
      // A session of alice's, recorded on its way, then played again.
      auto recorder = std::make_shared<testing::CapturingClient>(keys.Client("alice", keys.alice));
      auto recorded = Connect(*server, recorder);
      ASSERT_TRUE(recorded.ok()) << Describe(recorded);
      ASSERT_EQ(recorder->sent().size(), 2u);
      mechanism = std::make_shared<testing::ReplayingClient>(recorder->sent(),
                                                              std::string(psk::kMechanismName));
      break;
    }
  }
  auto client = Connect(*server, mechanism);
  EXPECT_TRUE(Is(client.status(), c.expected)) << Describe(client);
  if (client.ok()) {
    EXPECT_EQ((*client)->mechanism(), "psk");
    EXPECT_EQ((*client)->authenticated_user(), "alice");
    EXPECT_EQ((*client)->tls_info().has_value(), c.transport == Transport::kTls);
    auto whoami = (*client)->call_json("sys", "whoami", nlohmann::json::object());
    ASSERT_TRUE(whoami.ok()) << Describe(whoami);
    EXPECT_EQ((*whoami)["user"], "alice");
    EXPECT_EQ((*whoami)["mechanism"], "psk");
  } else {
    EXPECT_THAT(client.status().message, HasSubstr("psk: "));
    EXPECT_THAT(client.status().message, Not(HasSubstr(keys.alice.substr(0, 16))));
  }
  // Whatever came before, bob is still served.
  auto bob = Connect(*server, keys.Client("bob", keys.bob));
  ASSERT_TRUE(bob.ok()) << Describe(bob);
  EXPECT_TRUE((*bob)->call("sys", "echo", "hi").ok());
  bob->reset();
  if (client.ok()) client->reset();
  EXPECT_TRUE(server->stop());
}

std::vector<EndToEnd> AllCases() {
  std::vector<EndToEnd> out;
  for (Transport t : {Transport::kTcp, Transport::kUnix, Transport::kTls}) {
    out.push_back({t, Who::kRightKey, Errc::kOk});
    out.push_back({t, Who::kWrongKey, Errc::kAuthenticationFailed});
    out.push_back({t, Who::kUnknownIdentity, Errc::kAuthenticationFailed});
    out.push_back({t, Who::kReplay, Errc::kAuthenticationFailed});
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Transports, PskEndToEnd, ::testing::ValuesIn(AllCases()), TestName);

// A server that answers `psk` without the key: accepts any client and sends
// a made-up proof. The client must notice and refuse it.
class ImpostorServer final : public ServerMechanism {
 public:
  std::string_view name() const noexcept override { return psk::kMechanismName; }
  std::unique_ptr<ServerAuthSession> start(const ChannelInfo&) override {
    return std::make_unique<Session>();
  }

 private:
  struct Session final : ServerAuthSession {
    asio::awaitable<ServerStep> step(std::string_view) override {
      if (steps++ == 0) co_return ServerStep::challenge("\x01" + std::string(32, 'n'));
      Identity id;
      id.user = "alice";
      co_return ServerStep::success(std::move(id), "\x01" + std::string(32, 'p'));
    }
    int steps = 0;
  };
};

TEST(PskEndToEnd, TheClientRefusesAnImpostorServer) {
  Keys keys;
  for (Transport t : {Transport::kTcp, Transport::kTls}) {
    auto server = StartServer(t, std::make_shared<ImpostorServer>());
    ASSERT_TRUE(server);
    auto client = Connect(*server, keys.Client("alice", keys.alice));
    EXPECT_EQ(client.code(), Errc::kAuthenticationFailed) << Describe(client);
    EXPECT_THAT(client.status().message, HasSubstr("did not prove"));
    EXPECT_TRUE(server->stop());
  }
}

}  // namespace
}  // namespace authrpc
