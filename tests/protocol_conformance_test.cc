// Conformance of the reference server to docs/PROTOCOL.md, in raw bytes.
// Every block of the spec marked `<!-- conformance: NAME -->` and fenced as
// ```hex is read from the document itself (so spec and test cannot drift),
// its C→S bytes are sent to a real server over tcp:// and unix://, with and
// without an ACL file, and every byte the server answers is checked against
// the block's S→C bytes (`..` = a byte that varies, `...` = the rest of the
// frame). Cases the hex notation cannot express (timing within a header,
// principal mapping, the TLS exporter) are written out below and cite the
// section they check.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "authrpc/auth/authz/authorizer.h"
#include "authrpc/auth/authz/authz_policy.h"
#include "authrpc/auth/mechanisms/simple/simple.h"
#include "authrpc/auth/mechanisms/token/token_mechanism.h"
#include "authrpc/auth/mechanisms/x509/x509.h"
#include "authrpc/base/log.h"
#include "authrpc/security/clock.h"
#include "authrpc/security/memory_token_store.h"
#include "authrpc/security/secret_manager.h"
#include "authrpc/security/tls_context.h"
#include "authrpc/server/server.h"
#include "tests/testing/proto_items.h"
#include "tests/testing/test_server.h"
#include "tests/testing/test_support.h"
#include "tests/testing/test_tls.h"
#include "tests/testing/tls_test_certs.h"

namespace authrpc {
namespace {

using namespace std::chrono_literals;
using testing::Load32;
using testing::Put16;
using testing::Put32;
using testing::RawConnection;
using testing::RawFrameBytes;
using testing::RawPreamble;
using testing::SocketKind;
using testing::StopAndDestroy;

// ---------------------------------------------------------------- the spec's examples

constexpr int kAnyByte = -1;     // `..`
constexpr int kRestOfFrame = -2;  // `...`

struct Segment {
  bool from_client = true;
  std::vector<int> bytes;  // 0–255, kAnyByte, kRestOfFrame
};

struct Example {
  std::string name;
  int line = 0;  // of the marker in docs/PROTOCOL.md
  std::string only;  // "tcp" or "unix" when the marker names one transport
  std::vector<Segment> segments;
};

std::string ProtocolMdPath() { return std::string(AUTHRPC_SOURCE_DIR) + "/docs/PROTOCOL.md"; }

bool IsHexByte(const std::string& t) {
  return t.size() == 2 && std::isxdigit(static_cast<unsigned char>(t[0])) &&
         std::isxdigit(static_cast<unsigned char>(t[1]));
}

// Parses the examples; a malformed block is reported in `errors`.
std::vector<Example> ReadExamples(std::vector<std::string>* errors) {
  std::ifstream in(ProtocolMdPath());
  if (!in) {
    errors->push_back("cannot read " + ProtocolMdPath());
    return {};
  }
  const std::regex marker(R"(^<!-- conformance: ([a-z0-9-]+)(?: (tcp|unix))? -->\s*$)");
  std::vector<Example> out;
  std::string line;
  int number = 0;
  enum { kOutside, kExpectFence, kInside } state = kOutside;
  Example current;
  auto fail = [&](const std::string& why) {
    errors->push_back("docs/PROTOCOL.md:" + std::to_string(number) + ": " + why);
  };
  while (std::getline(in, line)) {
    ++number;
    std::smatch m;
    if (state == kOutside) {
      if (std::regex_match(line, m, marker)) {
        current = Example{m[1], number, m[2], {}};
        state = kExpectFence;
      }
      continue;
    }
    if (state == kExpectFence) {
      if (line != "```hex") {
        fail("a conformance marker must be followed by a ```hex block");
        state = kOutside;
      } else {
        state = kInside;
      }
      continue;
    }
    if (line == "```") {
      if (current.segments.empty()) fail("empty example " + current.name);
      out.push_back(std::move(current));
      state = kOutside;
      continue;
    }
    std::istringstream words(line);
    std::string token;
    bool first = true;
    while (words >> token) {
      if (first && (token == "C→S" || token == "S→C")) {
        const bool client = token == "C→S";
        if (current.segments.empty() || current.segments.back().from_client != client) {
          current.segments.push_back({client, {}});
        }
        first = false;
        continue;
      }
      first = false;
      int value;
      if (IsHexByte(token)) {
        value = std::stoi(token, nullptr, 16);
      } else if (token == "..") {
        value = kAnyByte;
      } else if (token == "...") {
        value = kRestOfFrame;
      } else {
        break;  // the comment
      }
      if (current.segments.empty()) {
        fail("bytes before the first C→S/S→C in " + current.name);
        break;
      }
      if (current.segments.back().from_client && value < 0) {
        fail("`..`/`...` in what the client sends (" + current.name + ")");
        break;
      }
      current.segments.back().bytes.push_back(value);
    }
  }
  if (state != kOutside) fail("unterminated example " + current.name);
  return out;
}

// Read once, when the test cases are registered; parse errors are reported
// by ConformanceExamples.TheSpecKeepsEveryExampleThisSuiteReliesOn.
struct Spec {
  std::vector<Example> examples;
  std::vector<std::string> errors;
};
const Spec& TheSpec() {
  static const Spec spec = [] {
    Spec s;
    s.examples = ReadExamples(&s.errors);
    return s;
  }();
  return spec;
}
const std::vector<Example>& Examples() { return TheSpec().examples; }

// A frame as it was on the wire (RawConnection hands it over parsed).
std::string Serialize(const testing::RawFrame& f) {
  std::string out;
  Put32(out, static_cast<std::uint32_t>(8 + f.body.size()));
  out.push_back(static_cast<char>(f.type));
  out.push_back(static_cast<char>(f.flags));
  Put16(out, f.reserved);
  Put32(out, f.call_id);
  return out + f.body;
}

std::string Hex(const std::string& bytes) {
  std::string out;
  char b[4];
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    std::snprintf(b, sizeof b, "%02x ", static_cast<std::uint8_t>(bytes[i]));
    out += b;
  }
  return out;
}

// What the server sent while one S→C segment was matched.
struct Received {
  std::string bytes;
  std::vector<std::size_t> frame_starts;
  std::uint8_t last_type() const {
    return frame_starts.empty() ? 0 : static_cast<std::uint8_t>(bytes[frame_starts.back() + 4]);
  }
};

// Reads frames from `raw` and matches them byte for byte against `expected`.
// On unix:// the server also sets SHM (0x4) in AUTH_SUCCESS features
// (PROTOCOL.md sections 1 and 3): that bit alone is masked.
void MatchServerBytes(RawConnection& raw, const std::vector<int>& expected, bool unix_socket,
                      Received& got) {
  std::size_t at = 0;
  auto have = [&](std::size_t n) {
    while (got.bytes.size() < n) {
      auto frame = raw.ReadFrame(10s);
      if (!frame) return false;
      got.frame_starts.push_back(got.bytes.size());
      got.bytes += Serialize(*frame);
    }
    return true;
  };
  for (std::size_t i = 0; i < expected.size(); ++i) {
    ASSERT_TRUE(have(at + 1)) << "the server sent " << got.bytes.size()
                              << " bytes and stopped; the spec shows more (pattern byte " << i
                              << "). Received: " << Hex(got.bytes);
    const auto frame = *std::prev(std::upper_bound(got.frame_starts.begin(),
                                                   got.frame_starts.end(), at));
    const std::size_t frame_end = frame + 4 + Load32(got.bytes, frame);
    if (expected[i] == kRestOfFrame) {
      at = frame_end;
      continue;
    }
    if (expected[i] != kAnyByte) {
      int want = expected[i];
      const bool auth_success = static_cast<std::uint8_t>(got.bytes[frame + 4]) == 0x05;
      if (unix_socket && auth_success && at == frame + 15) want |= 0x04;
      ASSERT_EQ(static_cast<std::uint8_t>(got.bytes[at]), want)
          << "byte " << at - frame << " of the frame at offset " << frame
          << " differs from the spec (pattern byte " << i << "). Received: " << Hex(got.bytes);
    }
    ++at;
  }
  EXPECT_EQ(at, got.bytes.size()) << "the server sent more than the spec shows: "
                                  << Hex(got.bytes.substr(at));
}

// ---------------------------------------------------------------- servers

enum class Authz { kNone, kAclFile };
void PrintTo(Authz authz, std::ostream* os) { *os << (authz == Authz::kNone ? "no ACL file" : "ACL file"); }

struct Setup {
  SocketKind kind;
  Authz authz;
};

std::shared_ptr<Authorizer> AllowAllPolicy(const nlohmann::json& extra = nlohmann::json::object()) {
  nlohmann::json j = {{"default", "allow"}, {"groups", {{"source", "static"}, {"static", nlohmann::json::object()}}}};
  j.update(extra);
  auto policy = AuthzPolicy::from_json(j);
  EXPECT_TRUE(policy.ok()) << policy.status().to_string();
  return policy.ok() ? Authorizer::from_policy(*policy) : nullptr;
}

// The server the examples are written for: `simple` only; negotiation and
// idle timeouts short enough for `negotiation-timeout` and `idle-timeout`;
// the typed test service authrpc.test.Items (tests/protos/items.proto) of
// the `protobuf-` examples.
// With slow_started, also test.slow: a blocking call that takes 500 ms and
// counts slow_started down when it begins.
std::unique_ptr<testing::TestServer> StartServer(SocketKind kind,
                                                 std::shared_ptr<Authorizer> authorizer,
                                                 std::size_t max_connections = 100,
                                                 testing::Latch* slow_started = nullptr) {
  auto server = std::make_unique<testing::TestServer>();
  server->endpoint(testing::FreshEndpoint(kind, "authrpc-conformance")).blocking_threads(1);
  server->options([authorizer = std::move(authorizer), max_connections](ServerOptions& o) {
    o.negotiation_timeout = 2s;
    o.idle_timeout = 2s;
    o.stop_grace = 2s;
    o.max_connections = max_connections;
    o.authorizer = authorizer;
  });
  server->service(test::ItemsService::make_service(testing::make_items_service()));
  if (slow_started != nullptr) {
    Service test("test");
    test.add_blocking("slow", [slow_started](CallContext&, std::string_view) -> Result<std::string> {
      slow_started->CountDown();
      std::this_thread::sleep_for(500ms);
      return std::string("done");
    });
    server->service(std::move(test));
  }
  const Status s = server->start();
  EXPECT_TRUE(s.ok()) << s.to_string();
  if (!s.ok()) return nullptr;
  return server;
}

// The server of the `token-` examples: `token` (plaintext tcp:// not
// allowed) and `simple`, in that order, holding one token for alice issued
// at 2030-01-01T00:00:00Z by a fresh secret manager, so that its
// identifier is the one the examples show (kExampleTokenIdentifier).
constexpr char kExampleTokenIdentifier[] =
    "01 00 12 61 75 74 68 72 70 63 2d 64 65 6c 65 67 61 74 69 6f 6e 00 05 61 6c 69 63 65 00 00 "
    "00 00 00 00 01 b8 da c5 b4 00 00 00 01 b8 fe d2 38 00 00 00 00 00 00 00 00 01 00 00 00 01 ";

std::unique_ptr<testing::TestServer> StartTokenServer(SocketKind kind,
                                                      std::shared_ptr<Authorizer> authorizer) {
  auto clock = std::make_shared<security::ManualClock>(
      security::TokenTime(std::chrono::milliseconds(1893456000000)));
  security::SecretManagerOptions options;
  options.clock = clock;
  auto secrets =
      security::SecretManager::open(std::make_shared<security::MemoryTokenStore>(), options);
  EXPECT_TRUE(secrets.ok()) << secrets.status().to_string();
  if (!secrets.ok()) return nullptr;
  std::shared_ptr<security::SecretManager> manager = std::move(*secrets);
  auto token = manager->issue({"alice", "", "", "svc"});
  EXPECT_TRUE(token.ok()) << token.status().to_string();
  if (!token.ok()) return nullptr;
  EXPECT_EQ(Hex(token->identifier), kExampleTokenIdentifier);
  auto server = std::make_unique<testing::TestServer>();
  server->endpoint(testing::FreshEndpoint(kind, "authrpc-conformance")).blocking_threads(1);
  server->mechanism(std::make_shared<TokenServerMechanism>(manager))
      .mechanism(std::make_shared<SimpleServerMechanism>());
  server->options([authorizer = std::move(authorizer)](ServerOptions& o) {
    o.negotiation_timeout = 2s;
    o.idle_timeout = 2s;
    o.stop_grace = 2s;
    o.authorizer = authorizer;
  });
  const Status s = server->start();
  EXPECT_TRUE(s.ok()) << s.to_string();
  if (!s.ok()) return nullptr;
  return server;
}

// Section 5: the fields of sys.whoami, in order.
void CheckWhoami(const std::string& response_body, SocketKind kind, const Endpoint& endpoint) {
  ASSERT_GE(response_body.size(), 4u);
  ASSERT_EQ(response_body.substr(0, 4), std::string(4, '\0')) << "status 0, empty message";
  const auto json = nlohmann::ordered_json::parse(response_body.substr(4), nullptr, false);
  ASSERT_TRUE(json.is_object()) << response_body.substr(4);
  std::vector<std::string> keys;
  for (const auto& [key, value] : json.items()) keys.push_back(key);
  EXPECT_EQ(keys, (std::vector<std::string>{"mechanism", "peer", "principal", "real_user",
                                            "realm", "user"}));
  EXPECT_EQ(json["mechanism"], "simple");
  EXPECT_EQ(json["principal"], "alice");
  EXPECT_TRUE(json["real_user"].is_null());
  EXPECT_EQ(json["realm"], "");
  EXPECT_EQ(json["user"], "alice");
  const std::string peer = json["peer"];
  if (kind == SocketKind::kTcp) {
    EXPECT_TRUE(std::regex_match(peer, std::regex(R"(127\.0\.0\.1:[0-9]{1,5})"))) << peer;
  } else {
    EXPECT_EQ(peer, endpoint.to_string());
  }
}

class ConformanceTest : public ::testing::TestWithParam<std::tuple<std::string, SocketKind, Authz>> {
};

TEST_P(ConformanceTest, TheServerAnswersAsTheSpecShows) {
  const auto& [name, kind, authz] = GetParam();
  const auto& examples = Examples();
  const auto example = std::find_if(examples.begin(), examples.end(),
                                    [&name = name](const Example& e) { return e.name == name; });
  ASSERT_NE(example, examples.end());
  SCOPED_TRACE("docs/PROTOCOL.md:" + std::to_string(example->line) + " (" + name + ")");

  // `server-busy`: a server whose connection limit is 1, with one open;
  // `token-...`: StartTokenServer's.
  const bool busy = name == "server-busy";
  auto authorizer = authz == Authz::kAclFile ? AllowAllPolicy() : nullptr;
  auto server = name.starts_with("token-") ? StartTokenServer(kind, std::move(authorizer))
                                           : StartServer(kind, std::move(authorizer), busy ? 1 : 100);
  ASSERT_TRUE(server);
  const Endpoint endpoint = server->endpoints().at(0);
  std::unique_ptr<RawConnection> occupant;
  if (busy) {
    occupant = std::make_unique<RawConnection>(endpoint);
    ASSERT_TRUE(occupant->SendHello("simple", "alice"));
    auto frame = occupant->ReadFrame();
    ASSERT_TRUE(frame && static_cast<int>(frame->type) == 0x05) << "the first connection is served";
  }

  RawConnection raw(endpoint);
  ASSERT_TRUE(raw.connected());
  Received got;
  for (const auto& segment : example->segments) {
    if (segment.from_client) {
      std::string bytes;
      for (int b : segment.bytes) bytes.push_back(static_cast<char>(b));
      ASSERT_TRUE(raw.Send(bytes));
    } else {
      got = Received{};
      ASSERT_NO_FATAL_FAILURE(
          MatchServerBytes(raw, segment.bytes, kind == SocketKind::kUnix, got));
    }
  }
  ASSERT_FALSE(example->segments.back().from_client) << "an example ends with the server's answer";
  if (got.last_type() == 0x06) {
    EXPECT_TRUE(raw.SeesEndOfStream()) << "the server kept the connection open after ERROR";
  }
  if (name == "worked-example") {
    CheckWhoami(got.bytes.substr(got.frame_starts.back() + 12), kind, endpoint);
  }
  // Closed first: the server would linger on them until its stop grace.
  raw.Close();
  occupant.reset();
  EXPECT_TRUE(server->stop());
}

std::vector<std::tuple<std::string, SocketKind, Authz>> AllCases() {
  std::vector<std::tuple<std::string, SocketKind, Authz>> out;
  for (const auto& e : Examples()) {
    for (SocketKind kind : {SocketKind::kTcp, SocketKind::kUnix}) {
      if (!e.only.empty() && e.only != (kind == SocketKind::kTcp ? "tcp" : "unix")) continue;
      for (Authz authz : {Authz::kNone, Authz::kAclFile}) out.emplace_back(e.name, kind, authz);
    }
  }
  return out;
}

std::string CaseName(const ::testing::TestParamInfo<std::tuple<std::string, SocketKind, Authz>>& info) {
  const auto& [name, kind, authz] = info.param;
  std::string id;
  for (char c : name) id += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return id + (kind == SocketKind::kTcp ? "_Tcp" : "_Unix") +
         (authz == Authz::kNone ? "_NoAcl" : "_AclFile");
}

INSTANTIATE_TEST_SUITE_P(Spec, ConformanceTest, ::testing::ValuesIn(AllCases()), CaseName);

// The examples this suite relies on: each of the five places where a
// second implementation could read the spec otherwise, the worked example
// and the refusal table. Losing one from the spec loses its check: refuse that.
TEST(ConformanceExamples, TheSpecKeepsEveryExampleThisSuiteReliesOn) {
  for (const auto& error : TheSpec().errors) ADD_FAILURE() << error;
  std::set<std::string> names;
  for (const auto& e : Examples()) {
    EXPECT_TRUE(names.insert(e.name).second) << "two examples named " << e.name;
  }
  for (const char* required :
       {"worked-example", "preamble-bad-magic", "preamble-wrong-version",
        "preamble-wrong-version-flags-and-reserved-set", "preamble-flags-set",
        "preamble-reserved-set", "frame-length-below-8", "frame-too-large", "frame-unknown-type",
        "frame-reserved-set", "frame-flags-ignored", "cancel-for-unknown-id-is-dropped",
        "cancel-with-body", "window-update-short-body", "call-frame-with-id-0",
        "request-before-hello", "unknown-mechanism-twice", "simple-name-with-a-space",
        "negotiation-timeout", "do-as-own-name", "do-as-another-user", "server-busy",
        "idle-timeout", "unknown-method", "mechanisms-drops-pipelined-request",
        "dropped-request-is-still-checked", "token-not-offered-on-plaintext-tcp",
        "token-request-behind-challenge-is-dropped", "token-ping-behind-challenge",
        "ping-with-call-id", "window-update-increment-0", "do-as-empty"}) {
    EXPECT_TRUE(names.contains(required)) << "docs/PROTOCOL.md lost the example " << required;
  }
}

// ---------------------------------------------------------------- written out

std::string Str(const std::string& s) {
  std::string out;
  Put16(out, static_cast<std::uint16_t>(s.size()));
  return out + s;
}

std::string Bytes(const std::string& s) {
  std::string out;
  Put32(out, static_cast<std::uint32_t>(s.size()));
  return out + s;
}

std::string Hello(const std::string& mechanism, const std::string& message,
                  const std::string& do_as = {}) {
  std::string body;
  Put32(body, do_as.empty() ? 0 : 1);
  body += Str(mechanism) + Bytes(message);
  if (!do_as.empty()) body += Str(do_as);
  return RawFrameBytes(0x01, 0, body);
}

// ERROR's code, or -1 if the frame is not a well-formed ERROR.
int ErrorCode(const std::optional<testing::RawFrame>& f) {
  if (!f || static_cast<int>(f->type) != 0x06 || f->body.size() < 4) return -1;
  return (static_cast<std::uint8_t>(f->body[0]) << 8) | static_cast<std::uint8_t>(f->body[1]);
}

class WrittenOutTest : public ::testing::TestWithParam<SocketKind> {};
INSTANTIATE_TEST_SUITE_P(Transports, WrittenOutTest,
                         ::testing::Values(SocketKind::kTcp, SocketKind::kUnix),
                         testing::SocketKindName);

// Section 2: the server acts on the preamble only once all 8 bytes are in;
// then the version decides before bytes 5–7.
TEST_P(WrittenOutTest, ThePreambleIsJudgedOnlyWhenAllEightBytesHaveArrived) {
  auto server = StartServer(GetParam(), nullptr);
  ASSERT_TRUE(server);
  RawConnection raw(server->endpoints().at(0));
  ASSERT_TRUE(raw.Send("ARPC"));
  std::string early;
  EXPECT_FALSE(raw.ReadExact(early, 1, 300ms)) << "the server answered half a preamble";
  ASSERT_TRUE(raw.Send(std::string("\x02\x01\x00\x07", 4)));
  EXPECT_EQ(ErrorCode(raw.ReadFrame()), 102);
  EXPECT_TRUE(raw.SeesEndOfStream());
  raw.Close();
  EXPECT_TRUE(server->stop());
}

// Section 3: a length below 8 is judged once the whole 12-byte header is in,
// not when the length field arrives.
TEST_P(WrittenOutTest, AShortLengthIsJudgedOnlyWhenTheWholeHeaderHasArrived) {
  auto server = StartServer(GetParam(), nullptr);
  ASSERT_TRUE(server);
  RawConnection raw(server->endpoints().at(0));
  ASSERT_TRUE(raw.Send(RawPreamble() + std::string("\0\0\0\0", 4)));
  std::string early;
  EXPECT_FALSE(raw.ReadExact(early, 1, 300ms)) << "the server acted on 4 bytes of a header";
  ASSERT_TRUE(raw.Send(std::string("\x01\0\0\0\0\0\0\0", 8)));
  EXPECT_EQ(ErrorCode(raw.ReadFrame()), 100);
  EXPECT_TRUE(raw.SeesEndOfStream());
  raw.Close();
  EXPECT_TRUE(server->stop());
}

// Section 3: every call frame's body is checked before its id is looked
// up, so a malformed one is an error even for a call that was never opened
// (the examples show CANCEL and WINDOW_UPDATE; these are the rest).
TEST_P(WrittenOutTest, AMalformedCallFrameIsAnErrorWhetherOrNotItsCallIsOpen) {
  const struct {
    const char* name;
    std::uint8_t type;
    std::string body;
  } rows[] = {
      {"CANCEL with a body", 0x12, "x"},
      {"WINDOW_UPDATE with five bytes", 0x22, std::string("\0\0\0\1\0", 5)},
      {"END_STREAM with a body", 0x23, "x"},
      {"REQUEST shorter than its fields", 0x10, std::string("\0\x09sys", 5)},
      {"STREAM_REQUEST shorter than its fields", 0x20, std::string("\0\x03sys", 5)},
  };
  auto server = StartServer(GetParam(), nullptr);
  ASSERT_TRUE(server);
  for (const auto& row : rows) {
    SCOPED_TRACE(row.name);
    RawConnection raw(server->endpoints().at(0));
    ASSERT_TRUE(raw.Send(RawPreamble() + Hello("simple", "alice")));
    auto success = raw.ReadFrame();
    ASSERT_TRUE(success && static_cast<int>(success->type) == 0x05);
    ASSERT_TRUE(raw.Send(RawFrameBytes(row.type, 4242, row.body)));
    EXPECT_EQ(ErrorCode(raw.ReadFrame()), 100);
    EXPECT_TRUE(raw.SeesEndOfStream());
  }
  EXPECT_TRUE(server->stop());
}

std::string RequestFrame(std::uint32_t call_id, const std::string& service,
                         const std::string& method) {
  std::string body = Str(service) + Str(method);
  Put32(body, 0);
  return RawFrameBytes(0x10, call_id, body);
}

// Section 6 and the refusal table: after GOAWAY(last_call_id) a new call is
// answered UNAVAILABLE (14) without running, the call in flight still
// finishes, and then the server ends its sending side.
TEST_P(WrittenOutTest, ACallAfterGoAwayIsUnavailableWhileTheCallInFlightFinishes) {
  testing::Latch slow_started;
  auto server = StartServer(GetParam(), nullptr, 100, &slow_started);
  ASSERT_TRUE(server);
  RawConnection raw(server->endpoints().at(0));
  ASSERT_TRUE(raw.Send(RawPreamble() + Hello("simple", "alice") + RequestFrame(1, "test", "slow")));
  auto success = raw.ReadFrame();
  ASSERT_TRUE(success && static_cast<int>(success->type) == 0x05);
  ASSERT_TRUE(slow_started.WaitFor(5s)) << "call 1 never started";
  std::thread stopper([&] { server->server().stop(); });
  // Also on a failed assertion: stop() returns once the connection closes.
  struct Joiner {
    RawConnection& raw;
    std::thread& thread;
    ~Joiner() {
      raw.Close();
      thread.join();
    }
  } joiner{raw, stopper};
  auto goaway = raw.ReadFrame();
  ASSERT_TRUE(goaway);
  EXPECT_EQ(static_cast<int>(goaway->type), 0x07);
  EXPECT_EQ(Hex(goaway->body.substr(0, 4)), "00 00 00 01 ") << "last_call_id";
  ASSERT_TRUE(raw.Send(RequestFrame(2, "sys", "whoami")));
  std::map<std::uint32_t, std::string> responses;
  for (int i = 0; i < 2; ++i) {
    auto r = raw.ReadFrame();
    ASSERT_TRUE(r);
    ASSERT_EQ(static_cast<int>(r->type), 0x11);
    responses[r->call_id] = r->body;
  }
  EXPECT_EQ(Hex(responses[1]), Hex(std::string(4, '\0') + "done")) << "call 1 finishes";
  ASSERT_GE(responses[2].size(), 2u);
  EXPECT_EQ(Hex(responses[2].substr(0, 2)), "00 0e ") << "UNAVAILABLE";
  EXPECT_TRUE(raw.SeesEndOfStream());
}

// Section 4, "own name": with principal mapping it is the short name; the
// full principal is then another user. Without an ACL file no mapping runs,
// and the own name is the mechanism's user.
struct OwnNameCase {
  const char* name;
  bool acl_with_mapping;
  const char* do_as;
  int error;  // 0: AUTH_SUCCESS with DO_AS and user = do_as
};

void PrintTo(const OwnNameCase& c, std::ostream* os) { *os << c.name; }

class OwnNameTest : public ::testing::TestWithParam<OwnNameCase> {};

TEST_P(OwnNameTest, DoAsOwnNameIsAllowedWithAndWithoutAnAclFile) {
  const auto& c = GetParam();
  auto authorizer =
      c.acl_with_mapping
          ? AllowAllPolicy({{"auth_to_local", {{"rules", {"DEFAULT"}}, {"default_realm", "EXAMPLE.COM"}}}})
          : nullptr;
  auto server = StartServer(SocketKind::kTcp, authorizer);
  ASSERT_TRUE(server);
  RawConnection raw(server->endpoints().at(0));
  ASSERT_TRUE(raw.Send(RawPreamble() + Hello("simple", "alice@EXAMPLE.COM", c.do_as)));
  auto frame = raw.ReadFrame();
  ASSERT_TRUE(frame);
  if (c.error != 0) {
    EXPECT_EQ(ErrorCode(frame), c.error);
  } else {
    ASSERT_EQ(static_cast<int>(frame->type), 0x05) << "AUTH_SUCCESS expected, ERROR "
                                                   << ErrorCode(frame);
    std::string want;
    Put32(want, 0x3);  // DO_AS | STREAMS
    want += Bytes("") + Str(c.do_as);
    EXPECT_EQ(Hex(frame->body), Hex(want));
  }
  raw.Close();
  EXPECT_TRUE(server->stop());
}

INSTANTIATE_TEST_SUITE_P(
    Section4, OwnNameTest,
    ::testing::Values(OwnNameCase{"NoAclFullName", false, "alice@EXAMPLE.COM", 0},
                      OwnNameCase{"NoAclShortNameIsAnotherUser", false, "alice", 7},
                      OwnNameCase{"MappedShortName", true, "alice", 0},
                      OwnNameCase{"MappedFullNameIsAnotherUser", true, "alice@EXAMPLE.COM", 7}),
    [](const auto& param_info) { return std::string(param_info.param.name); });

// ---------------------------------------------------------------- section 11: the exporter

// A TLS connection made with OpenSSL directly, so that the test, not the
// library under test, computes the exporter.
class RawTls {
 public:
  RawTls(std::uint16_t port, int tls_version) {
    ctx_ = SSL_CTX_new(TLS_client_method());
    SSL_CTX_set_min_proto_version(ctx_, tls_version);
    SSL_CTX_set_max_proto_version(ctx_, tls_version);
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    timeval tv{10, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) return;
    ssl_ = SSL_new(ctx_);
    SSL_set_fd(ssl_, fd_);
    ok_ = SSL_connect(ssl_) == 1;
  }
  ~RawTls() {
    if (ssl_) SSL_free(ssl_);
    if (fd_ >= 0) ::close(fd_);
    SSL_CTX_free(ctx_);
  }
  bool ok() const { return ok_; }
  std::string version() const { return SSL_get_version(ssl_); }

  // RFC 9266's label, 32 bytes; with_context: a zero-length context.
  std::string Exporter(bool with_context) {
    unsigned char out[32];
    static constexpr char kLabel[] = "EXPORTER-Channel-Binding";
    const unsigned char empty = 0;
    if (SSL_export_keying_material(ssl_, out, sizeof out, kLabel, sizeof kLabel - 1, &empty, 0,
                                   with_context ? 1 : 0) != 1) {
      return {};
    }
    return std::string(reinterpret_cast<char*>(out), sizeof out);
  }
  bool Send(const std::string& bytes) {
    return SSL_write(ssl_, bytes.data(), static_cast<int>(bytes.size())) ==
           static_cast<int>(bytes.size());
  }
  // One frame: header + body, as on the wire.
  std::optional<std::string> ReadFrame() {
    std::string header = Read(4);
    if (header.size() != 4) return std::nullopt;
    const std::uint32_t length = Load32(header, 0);
    if (length < 8 || length > 1 << 20) return std::nullopt;
    std::string rest = Read(length);
    if (rest.size() != length) return std::nullopt;
    return header + rest;
  }

 private:
  std::string Read(std::size_t n) {
    std::string out(n, '\0');
    std::size_t have = 0;
    while (have < n) {
      const int r = SSL_read(ssl_, out.data() + have, static_cast<int>(n - have));
      if (r <= 0) break;
      have += static_cast<std::size_t>(r);
    }
    out.resize(have);
    return out;
  }
  SSL_CTX* ctx_ = nullptr;
  SSL* ssl_ = nullptr;
  int fd_ = -1;
  bool ok_ = false;
};

std::string HmacSha256(const security::SecretBytes& key, const std::string& data) {
  unsigned char out[32];
  unsigned int n = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(data.data()), data.size(), out, &n);
  return std::string(reinterpret_cast<char*>(out), n);
}

struct ExporterCase {
  const char* name;
  int tls_version;
  bool empty_context;
  bool accepted;
};

class ExporterTest : public ::testing::TestWithParam<ExporterCase> {};

// A `token` HELLO built from section 4's formulas, bound to the exporter
// the test computed: the server accepts the no-context value on TLS 1.2 and
// 1.3; RFC 9266's zero-length context is the same value on 1.3 only.
TEST_P(ExporterTest, TheServerBindsToTheExporterWithNoContext) {
  const auto& c = GetParam();
  const std::string dir = testing::TempDir("conformance-tls");
  ASSERT_FALSE(dir.empty());
  testing::TestCa ca(dir, "ca");
  ca.issue({"server", "localhost", {"DNS:localhost", "IP:127.0.0.1"}});
  security::TlsServerOptions tls;
  tls.certificate_file = ca.cert_file("server");
  tls.private_key_file = ca.key_file("server");
  tls.min_version = security::TlsVersion::kTls12;
  auto made = security::TlsServerContext::create(tls);
  ASSERT_TRUE(made.ok()) << made.status().to_string();
  std::shared_ptr<security::TlsServerContext> tls_context = std::move(*made);

  auto secrets = security::SecretManager::open(std::make_shared<security::MemoryTokenStore>(), {});
  ASSERT_TRUE(secrets.ok());
  std::shared_ptr<security::SecretManager> manager = std::move(*secrets);
  auto token = manager->issue({"alice@EXAMPLE.COM", "", "", "tls://127.0.0.1"});
  ASSERT_TRUE(token.ok());

  auto server = std::make_unique<testing::TestServer>();
  server->tls(tls_context).mechanism(std::make_shared<TokenServerMechanism>(manager)).blocking_threads(1);
  server->options([](ServerOptions& o) { o.stop_grace = 2s; });
  ASSERT_OK(server->start());

  auto tls_connection = std::make_unique<RawTls>(server->endpoints().at(0).port, c.tls_version);
  RawTls& conn = *tls_connection;
  ASSERT_TRUE(conn.ok()) << "TLS handshake failed";
  const std::string no_context = conn.Exporter(false);
  const std::string empty_context = conn.Exporter(true);
  ASSERT_EQ(no_context.size(), 32u);
  ASSERT_EQ(empty_context.size(), 32u);
  EXPECT_EQ(no_context == empty_context, c.tls_version == TLS1_3_VERSION) << conn.version();
  const std::string cb = c.empty_context ? empty_context : no_context;

  // Section 4, "The token mechanism": T, client proof, HELLO.message.
  std::string nonce(16, '\0');
  RAND_bytes(reinterpret_cast<unsigned char*>(nonce.data()), 16);
  const auto now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  std::string time;
  Put32(time, static_cast<std::uint32_t>(static_cast<std::uint64_t>(now_ms) >> 32));
  Put32(time, static_cast<std::uint32_t>(now_ms));
  const std::string head = std::string(1, '\x01') + Str(token->identifier) +
                           Str(token->service) + nonce + time;
  const std::string t = head + Str(cb);
  const std::string client_proof =
      HmacSha256(token->password, std::string("authrpc token client\0", 21) + t);
  ASSERT_TRUE(conn.Send(RawPreamble() + Hello("token", head + client_proof)));
  auto answer = conn.ReadFrame();
  ASSERT_TRUE(answer.has_value());
  const std::string body = answer->substr(12);
  if (!c.accepted) {
    ASSERT_EQ(static_cast<int>((*answer)[4]), 0x06) << "ERROR expected: " << Hex(*answer);
    ASSERT_GE(body.size(), 2u);
    EXPECT_EQ(Hex(body.substr(0, 2)), "00 68 ") << "AUTHENTICATION_FAILED";
    EXPECT_NE(body.find("FORGED"), std::string::npos) << body.substr(4);
  } else {
    ASSERT_EQ(static_cast<int>((*answer)[4]), 0x05) << "AUTH_SUCCESS expected: " << Hex(*answer);
    const std::string server_proof =
        HmacSha256(token->password, std::string("authrpc token server\0", 21) + t + client_proof);
    std::string want;
    Put32(want, 0x2);  // STREAMS
    want += Bytes(std::string(1, '\x01') + server_proof) + Str("alice@EXAMPLE.COM");
    EXPECT_EQ(Hex(body), Hex(want));
  }
  tls_connection.reset();
  EXPECT_TRUE(server->stop());
  std::filesystem::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(
    Section9a, ExporterTest,
    ::testing::Values(ExporterCase{"Tls13NoContext", TLS1_3_VERSION, false, true},
                      ExporterCase{"Tls13EmptyContextIsTheSameValue", TLS1_3_VERSION, true, true},
                      ExporterCase{"Tls12NoContext", TLS1_2_VERSION, false, true},
                      ExporterCase{"Tls12EmptyContextIsRefused", TLS1_2_VERSION, true, false}),
    [](const auto& param_info) { return std::string(param_info.param.name); });

// ---------------------------------------------------------------- section 4: what MECHANISMS lists

// MECHANISMS names only the mechanisms the server runs on the connection:
// on a TLS connection without a client certificate, not `x509`; a HELLO
// naming it all the same gets x509's refusal, not MECHANISMS.
TEST(Section4, MechanismsListsWhatRunsOnTheConnection) {
  auto server = std::make_unique<testing::TestServer>();
  server->tls(testing::TestTls::shared().server(security::ClientCertificates::kOptional))
      .mechanism(std::make_shared<X509ServerMechanism>())
      .mechanism(std::make_shared<SimpleServerMechanism>())
      .blocking_threads(1);
  server->options([](ServerOptions& o) { o.stop_grace = 2s; });
  ASSERT_OK(server->start());
  const std::uint16_t port = server->endpoints().at(0).port;

  std::string only_simple;
  Put32(only_simple, 0);
  Put16(only_simple, 1);
  only_simple += Str("simple");
  {
    RawTls conn(port, TLS1_3_VERSION);
    ASSERT_TRUE(conn.ok()) << "TLS handshake failed";
    ASSERT_TRUE(conn.Send(RawPreamble() + Hello("nope", "")));
    auto answer = conn.ReadFrame();
    ASSERT_TRUE(answer.has_value());
    EXPECT_EQ(Hex(*answer), Hex(RawFrameBytes(0x02, 0, only_simple))) << "MECHANISMS [simple]";
  }
  {
    RawTls conn(port, TLS1_3_VERSION);
    ASSERT_TRUE(conn.ok()) << "TLS handshake failed";
    ASSERT_TRUE(conn.Send(RawPreamble() + Hello("x509", "")));
    auto answer = conn.ReadFrame();
    ASSERT_TRUE(answer.has_value());
    ASSERT_EQ(static_cast<int>((*answer)[4]), 0x06) << "ERROR expected: " << Hex(*answer);
    EXPECT_EQ(Hex(answer->substr(12, 2)), "00 68 ") << "AUTHENTICATION_FAILED";
  }
  EXPECT_TRUE(server->stop());
}

}  // namespace
}  // namespace authrpc
