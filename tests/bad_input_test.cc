// Integration tests: a running Server fed malformed, hostile or silent input
// over raw loopback sockets. Each test checks what the server answers (an
// ERROR frame with the right code, or a close) and that a well-behaved Client
// is served normally right afterwards.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "authrpc/auth/mechanisms/simple/simple.h"
#include "authrpc/base/log.h"
#include "authrpc/base/status.h"
#include "authrpc/client/client.h"
#include "authrpc/rpc/endpoint.h"
#include "authrpc/rpc/messages.h"
#include "authrpc/rpc/wire.h"
#include "authrpc/server/server.h"
#include "authrpc/server/service.h"
#include "tests/testing/test_server.h"
#include "tests/testing/test_support.h"

namespace authrpc {

namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using testing::Describe;
using testing::Eventually;
using testing::RawConnection;
using testing::StopAndDestroy;
using ::testing::Contains;

// Frame types as docs/PROTOCOL.md numbers them, written out rather than
// taken from wire::FrameType's names.
constexpr wire::FrameType kTypeMechanisms{0x02};
constexpr wire::FrameType kTypeAuthSuccess{0x05};
constexpr wire::FrameType kTypeError{0x06};
using testing::RawHello;
using testing::Load16;
using testing::Put32;
using testing::RawPreamble;

constexpr wire::FrameType kTypePong{0x09};
constexpr wire::FrameType kTypeResponse{0x11};


// A frame written by hand: header (length, type, flags, reserved, call id) + body.
std::string RawFrame(std::uint8_t type, std::uint32_t call_id, const std::string& body,
                     std::optional<std::uint32_t> length_override = std::nullopt) {
  std::string out;
  Put32(out, length_override.value_or(static_cast<std::uint32_t>(8 + body.size())));
  out.push_back(static_cast<char>(type));
  out.push_back('\0');
  out.append(2, '\0');
  Put32(out, call_id);
  return out + body;
}

std::string Request(std::uint32_t call_id, std::string_view service, std::string_view method,
                    std::string_view payload) {
  std::string out;
  wire::append_request(out, call_id, {service, method, 0}, payload);
  return out;
}


// An ERROR body: u16 code, u16 length, message.
struct ErrorReply {
  std::uint16_t code = 0;
  std::string message;
};
std::optional<ErrorReply> ParseErrorBody(const std::string& body) {
  if (body.size() < 4) return std::nullopt;
  const std::uint16_t n = Load16(body, 2);
  if (body.size() != 4u + n) return std::nullopt;
  return ErrorReply{Load16(body, 0), body.substr(4)};
}

// A MECHANISMS body: u32 features, u16 count, count × (u16 length, name).
std::optional<std::vector<std::string>> ParseMechanismsBody(const std::string& body) {
  if (body.size() < 6) return std::nullopt;
  const std::uint16_t count = Load16(body, 4);
  std::size_t at = 6;
  std::vector<std::string> names;
  for (std::uint16_t i = 0; i < count; ++i) {
    if (body.size() < at + 2) return std::nullopt;
    const std::uint16_t n = Load16(body, at);
    at += 2;
    if (body.size() < at + n) return std::nullopt;
    names.push_back(body.substr(at, n));
    at += n;
  }
  if (at != body.size()) return std::nullopt;
  return names;
}

using Kind = testing::SocketKind;
Endpoint BadInputEndpoint(Kind kind) { return testing::FreshEndpoint(kind, "authrpc-bad-input-test"); }

class BadInputTest : public ::testing::TestWithParam<Kind> {
 protected:
  void SetUp() override { ASSERT_NO_FATAL_FAILURE(StartServer()); }
  void TearDown() override { server_.reset(); }

  void StartServer(const std::function<void(ServerOptions&)>& tweak = {},
                   std::optional<Service> service = std::nullopt) {
    if (server_) {
      ASSERT_TRUE(server_->stop());
    }
    server_ = std::make_unique<testing::TestServer>();
    if (service) server_->service(std::move(*service));
    server_->endpoint(BadInputEndpoint(GetParam())).io_threads(2).options([tweak](ServerOptions& o) {
      o.negotiation_timeout = 3s;
      o.idle_timeout = 60s;
      o.stop_grace = 3s;
      if (tweak) tweak(o);
    });
    const Status started = server_->start();
    ASSERT_TRUE(started.ok()) << started.to_string();
    endpoint_ = server_->endpoint();
  }

  std::unique_ptr<RawConnection> Raw() {
    auto raw = std::make_unique<RawConnection>(endpoint_);
    EXPECT_TRUE(raw->connected()) << "cannot connect to " << endpoint_.to_string();
    return raw;
  }

  // Reads the next frame and checks it is ERROR with `code`; then checks the
  // server closes the connection.
  void ExpectErrorThenClose(RawConnection& raw, Errc code, std::string_view message = {}) {
    auto frame = raw.ReadFrame();
    ASSERT_TRUE(frame.has_value()) << "no ERROR frame before end of stream";
    ASSERT_EQ(frame->type, kTypeError) << "frame type " << int(frame->type);
    EXPECT_EQ(frame->call_id, 0u);
    EXPECT_EQ(frame->reserved, 0u);
    auto error = ParseErrorBody(frame->body);
    ASSERT_TRUE(error.has_value()) << "malformed ERROR body";
    EXPECT_EQ(error->code, static_cast<std::uint16_t>(code))
        << "got " << errc_name(errc_from_wire(error->code)) << ": " << error->message;
    EXPECT_FALSE(error->message.empty());
    if (!message.empty()) {
      EXPECT_EQ(error->message, message);
    }
    EXPECT_TRUE(raw.SeesEndOfStream()) << "the server kept the connection open after ERROR";
  }

  // Negotiates `simple` by hand and checks AUTH_SUCCESS.
  void Authenticate(RawConnection& raw, const std::string& user = "mallory") {
    ASSERT_TRUE(raw.Send(RawPreamble() + RawHello("simple", user)));
    auto frame = raw.ReadFrame();
    ASSERT_TRUE(frame.has_value()) << "no answer to HELLO";
    ASSERT_EQ(frame->type, kTypeAuthSuccess) << "frame type " << int(frame->type);
  }

  // A normal Client connects and is served.
  void ExpectServerStillServes() {
    ClientOptions o;
    o.endpoint = endpoint_;
    o.mechanisms = {std::make_shared<SimpleClientMechanism>("alice")};
    o.connect_timeout = 3s;
    auto client = Client::connect(o);
    ASSERT_TRUE(client.ok()) << "a good client could not connect: " << Describe(client);
    auto reply = (*client)->call("sys", "echo", "still serving");
    ASSERT_TRUE(reply.ok()) << Describe(reply);
    EXPECT_EQ(*reply, "still serving");
  }

  std::unique_ptr<testing::TestServer> server_;
  Endpoint endpoint_;
};

INSTANTIATE_TEST_SUITE_P(Transports, BadInputTest, ::testing::Values(Kind::kTcp, Kind::kUnix),
                         testing::SocketKindName);

// --- preamble -----------------------------------------------------------------

TEST_P(BadInputTest, GarbageInsteadOfAPreambleGetsProtocolError) {
  const auto before = server_->stats().negotiation_failures;
  auto raw = Raw();
  ASSERT_TRUE(raw->Send("GET / HTTP/1.1\r\n\r\n"));
  ExpectErrorThenClose(*raw, Errc::kProtocolError);
  EXPECT_TRUE(Eventually([&] { return server_->stats().negotiation_failures > before; }));
  ExpectServerStillServes();
}

TEST_P(BadInputTest, APreambleWithVersionTwoGetsUnsupportedVersion) {
  auto raw = Raw();
  ASSERT_TRUE(raw->Send(RawPreamble(2)));
  ExpectErrorThenClose(*raw, Errc::kUnsupportedVersion);
  ExpectServerStillServes();
}

TEST_P(BadInputTest, APreambleWithReservedBytesSetGetsProtocolError) {
  auto raw = Raw();
  ASSERT_TRUE(raw->Send(std::string("ARPC\x01\x00\x00\x07", 8)));
  ExpectErrorThenClose(*raw, Errc::kProtocolError);
  ExpectServerStillServes();
}

TEST_P(BadInputTest, AClientThatHangsUpInsideThePreambleIsClosedAtOnce) {
  // The server must not keep the socket (and the connection) until the
  // negotiation timeout.
  ASSERT_NO_FATAL_FAILURE(StartServer([](ServerOptions& o) { o.negotiation_timeout = 1500ms; }));
  auto raw = Raw();
  ASSERT_TRUE(raw->Send("ARP"));
  raw->ShutdownWrite();
  EXPECT_TRUE(raw->SeesEndOfStream(750ms))
      << "the server kept a connection whose client hung up inside the preamble";
  ExpectServerStillServes();
}

TEST_P(BadInputTest, AConnectThenCloseProbeDoesNotDelayStop) {
  ASSERT_NO_FATAL_FAILURE(StartServer([](ServerOptions& o) { o.negotiation_timeout = 1500ms; }));
  {  // What a port scanner or a TCP health check does.
    auto raw = Raw();
  }
  ExpectServerStillServes();
  // The server has seen the probe's end (and the check's client's): its
  // connections are gone, well before the 1500 ms negotiation timeout.
  ASSERT_TRUE(Eventually([&] { return server_->stats().connections_active == 0; }, 750ms))
      << "the probe's connection is still open";
  const auto start = Clock::now();
  server_->stop();
  EXPECT_LT(Clock::now() - start, 750ms)
      << "stop() waited for the negotiation timeout of a connection that was already gone";
}

// --- negotiation ----------------------------------------------------------------

TEST_P(BadInputTest, AFrameHeaderAnnouncingOneGibibyteGetsFrameTooLarge) {
  auto raw = Raw();
  ASSERT_TRUE(raw->Send(RawPreamble() + RawFrame(0x01, 0, "", 1u << 30)));
  ExpectErrorThenClose(*raw, Errc::kFrameTooLarge);
  ExpectServerStillServes();
}

TEST_P(BadInputTest, AnUnknownFrameTypeGetsProtocolError) {
  auto raw = Raw();
  ASSERT_TRUE(raw->Send(RawPreamble() + RawFrame(0x7F, 0, "whatever")));
  ExpectErrorThenClose(*raw, Errc::kProtocolError);
  ExpectServerStillServes();
}

TEST_P(BadInputTest, AFrameWithReservedHeaderBitsSetGetsProtocolError) {
  std::string frame = RawHello("simple", "alice");
  frame[7] = 1;  // reserved u16
  auto raw = Raw();
  ASSERT_TRUE(raw->Send(RawPreamble() + frame));
  ExpectErrorThenClose(*raw, Errc::kProtocolError);
  ExpectServerStillServes();
}

TEST_P(BadInputTest, ARequestBeforeHelloGetsProtocolError) {
  auto raw = Raw();
  ASSERT_TRUE(raw->Send(RawPreamble() + Request(1, "sys", "echo", "sneaky")));
  ExpectErrorThenClose(*raw, Errc::kProtocolError);
  ExpectServerStillServes();
}

TEST_P(BadInputTest, AMalformedHelloGetsProtocolError) {
  std::string body;
  Put32(body, 0);
  body += std::string("\x00\x06sim", 5);  // says 6 bytes of name, has 3
  auto raw = Raw();
  ASSERT_TRUE(raw->Send(RawPreamble() + RawFrame(0x01, 0, body)));
  ExpectErrorThenClose(*raw, Errc::kProtocolError);
  ExpectServerStillServes();
}

TEST_P(BadInputTest, AnUnacceptableSimpleUserNameGetsAuthenticationFailed) {
  auto raw = Raw();
  ASSERT_TRUE(raw->Send(RawPreamble() + RawHello("simple", "bad user")));
  ExpectErrorThenClose(*raw, Errc::kAuthenticationFailed);
  ExpectServerStillServes();
}

TEST_P(BadInputTest, AnUnknownMechanismGetsTheListThenASecondGetsMechanismUnavailable) {
  const auto before = server_->stats().negotiation_failures;
  auto raw = Raw();
  ASSERT_TRUE(raw->Send(RawPreamble() + RawHello("nope", "token")));
  auto list = raw->ReadFrame();
  ASSERT_TRUE(list.has_value()) << "no answer to a HELLO with an unknown mechanism";
  ASSERT_EQ(list->type, kTypeMechanisms) << "frame type " << int(list->type);
  EXPECT_EQ(list->call_id, 0u);
  auto names = ParseMechanismsBody(list->body);
  ASSERT_TRUE(names.has_value()) << "malformed MECHANISMS body";
  EXPECT_THAT(*names, Contains("simple"));

  ASSERT_TRUE(raw->Send(RawHello("nope-again", "token")));
  ExpectErrorThenClose(*raw, Errc::kMechanismUnavailable);
  EXPECT_TRUE(Eventually([&] { return server_->stats().negotiation_failures > before; }));
  ExpectServerStillServes();
}

TEST_P(BadInputTest, AnUnknownMechanismThenSimpleAuthenticates) {
  auto raw = Raw();
  // A request pipelined behind the refused HELLO is dropped, not run.
  ASSERT_TRUE(raw->Send(RawPreamble() + RawHello("nope", "token") + Request(1, "sys", "echo", "dropped")));
  auto list = raw->ReadFrame();
  ASSERT_TRUE(list.has_value());
  ASSERT_EQ(list->type, kTypeMechanisms);
  ASSERT_TRUE(raw->Send(RawHello("simple", "mallory") + Request(2, "sys", "echo", "kept")));
  auto success = raw->ReadFrame();
  ASSERT_TRUE(success.has_value());
  ASSERT_EQ(success->type, kTypeAuthSuccess) << "frame type " << int(success->type);
  auto response = raw->ReadFrame();
  ASSERT_TRUE(response.has_value());
  ASSERT_EQ(response->type, kTypeResponse);
  EXPECT_EQ(response->call_id, 2u) << "the request behind the refused HELLO was answered";
  // status 0, empty message, payload "kept"
  EXPECT_EQ(response->body, std::string("\x00\x00\x00\x00kept", 8));
}

TEST_P(BadInputTest, AHandWrittenClientCanPipelineARequestBehindHello) {
  auto raw = Raw();
  ASSERT_TRUE(raw->Send(RawPreamble() + RawHello("simple", "mallory") +
                        Request(7, "sys", "echo", "in the same flight")));
  auto success = raw->ReadFrame();
  ASSERT_TRUE(success.has_value());
  ASSERT_EQ(success->type, kTypeAuthSuccess);
  auto response = raw->ReadFrame();
  ASSERT_TRUE(response.has_value());
  ASSERT_EQ(response->type, kTypeResponse);
  EXPECT_EQ(response->call_id, 7u);
  EXPECT_EQ(response->body, std::string("\x00\x00\x00\x00", 4) + "in the same flight");
}

TEST_P(BadInputTest, ATruncatedFrameThenCloseDoesNotHurtTheServer) {
  const std::string hello = RawHello("simple", "alice");
  {  // Half a header, then a full close.
    auto raw = Raw();
    ASSERT_TRUE(raw->Send(RawPreamble() + hello.substr(0, 6)));
  }
  {  // A whole header and half the body, then end of stream: the server says why.
    auto raw = Raw();
    ASSERT_TRUE(raw->Send(RawPreamble() + hello.substr(0, hello.size() - 3)));
    raw->ShutdownWrite();
    ExpectErrorThenClose(*raw, Errc::kProtocolError);
  }
  {  // The same after negotiation.
    auto raw = Raw();
    ASSERT_NO_FATAL_FAILURE(Authenticate(*raw));
    const std::string request = Request(1, "sys", "echo", "cut short");
    ASSERT_TRUE(raw->Send(request.substr(0, request.size() - 4)));
    raw->ShutdownWrite();
    ExpectErrorThenClose(*raw, Errc::kProtocolError);
  }
  ExpectServerStillServes();
}

// --- timeouts -------------------------------------------------------------------

TEST_P(BadInputTest, ASilentClientGetsNegotiationTimeoutAndIsClosed) {
  ASSERT_NO_FATAL_FAILURE(
      StartServer([](ServerOptions& o) { o.negotiation_timeout = 200ms; }));
  const auto before = server_->stats().negotiation_failures;
  const auto start = Clock::now();
  auto raw = Raw();
  auto frame = raw->ReadFrame(5s);
  const auto took = Clock::now() - start;
  ASSERT_TRUE(frame.has_value()) << "no ERROR frame for a silent client";
  ASSERT_EQ(frame->type, kTypeError);
  auto error = ParseErrorBody(frame->body);
  ASSERT_TRUE(error.has_value());
  EXPECT_EQ(error->code, static_cast<std::uint16_t>(Errc::kNegotiationTimeout))
      << errc_name(errc_from_wire(error->code)) << ": " << error->message;
  EXPECT_GE(took, 150ms) << "the server did not wait for the negotiation timeout";
  EXPECT_TRUE(raw->SeesEndOfStream(2s));
  EXPECT_LT(Clock::now() - start, 2s) << "closing the silent connection took too long";
  EXPECT_TRUE(Eventually([&] { return server_->stats().negotiation_failures > before; }));
  ExpectServerStillServes();
}

TEST_P(BadInputTest, AClientThatStallsAfterThePreambleGetsNegotiationTimeout) {
  ASSERT_NO_FATAL_FAILURE(
      StartServer([](ServerOptions& o) { o.negotiation_timeout = 200ms; }));
  const auto start = Clock::now();
  auto raw = Raw();
  ASSERT_TRUE(raw->Send(RawPreamble()));
  ExpectErrorThenClose(*raw, Errc::kNegotiationTimeout);
  EXPECT_LT(Clock::now() - start, 2s);
  ExpectServerStillServes();
}

TEST_P(BadInputTest, IdleTimeoutClosesAnIdleAuthenticatedConnection) {
  ASSERT_NO_FATAL_FAILURE(StartServer([](ServerOptions& o) { o.idle_timeout = 200ms; }));
  ClientOptions o;
  o.endpoint = endpoint_;
  o.mechanisms = {std::make_shared<SimpleClientMechanism>("idler")};
  auto client = Client::connect(o);
  ASSERT_TRUE(client.ok()) << Describe(client);
  const auto start = Clock::now();
  ASSERT_TRUE((*client)->call("sys", "echo", "once").ok());
  ASSERT_TRUE(Eventually([&] { return !(*client)->connection_status().ok(); }, 3s))
      << "an idle connection was never closed";
  const auto took = Clock::now() - start;
  EXPECT_GE(took, 150ms);
  const Status why = (*client)->connection_status();
  EXPECT_EQ(why.code, make_error_code(Errc::kIdleTimeout)) << why.to_string();
  EXPECT_EQ(retry_advice(why.code), RetryAdvice::kRetry);
  auto after = (*client)->call("sys", "echo", "too late");
  EXPECT_FALSE(after.ok());
  ExpectServerStillServes();
}

TEST_P(BadInputTest, IdleTimeoutSendsIdleTimeoutOnTheWire) {
  ASSERT_NO_FATAL_FAILURE(StartServer([](ServerOptions& o) { o.idle_timeout = 200ms; }));
  auto raw = Raw();
  ASSERT_NO_FATAL_FAILURE(Authenticate(*raw));
  ExpectErrorThenClose(*raw, Errc::kIdleTimeout);
}

TEST_P(BadInputTest, PingsKeepAnAuthenticatedConnectionFromIdlingOut) {
  ASSERT_NO_FATAL_FAILURE(StartServer([](ServerOptions& o) { o.idle_timeout = 200ms; }));
  auto raw = Raw();
  ASSERT_NO_FATAL_FAILURE(Authenticate(*raw));
  for (int i = 0; i < 6; ++i) {  // ~480 ms, well past the idle timeout
    std::this_thread::sleep_for(80ms);
    const std::string body = "ping-" + std::to_string(i);
    ASSERT_TRUE(raw->Send(RawFrame(0x08, 0, body)));
    auto pong = raw->ReadFrame();
    ASSERT_TRUE(pong.has_value()) << "connection closed despite pings (ping " << i << ")";
    ASSERT_EQ(pong->type, kTypePong) << "frame type " << int(pong->type);
    EXPECT_EQ(pong->body, body);
  }
}

// --- after negotiation ----------------------------------------------------------

TEST_P(BadInputTest, ARequestWithCallIdZeroGetsProtocolError) {
  const auto before = server_->stats().protocol_errors;
  auto raw = Raw();
  ASSERT_NO_FATAL_FAILURE(Authenticate(*raw));
  ASSERT_TRUE(raw->Send(Request(0, "sys", "echo", "id zero")));
  ExpectErrorThenClose(*raw, Errc::kProtocolError, "REQUEST with call id 0");
  EXPECT_TRUE(Eventually([&] { return server_->stats().protocol_errors > before; }));
  ExpectServerStillServes();
}

// The call id is judged before the body: a REQUEST with call id 0 and a body
// that does not parse gets the same answer.
TEST_P(BadInputTest, ARequestWithCallIdZeroAndABadBodyGetsTheCallIdError) {
  auto raw = Raw();
  ASSERT_NO_FATAL_FAILURE(Authenticate(*raw));
  ASSERT_TRUE(raw->Send(RawFrame(static_cast<std::uint8_t>(wire::FrameType::kRequest), 0, "\x01")));
  ExpectErrorThenClose(*raw, Errc::kProtocolError, "REQUEST with call id 0");
  ExpectServerStillServes();
}

TEST_P(BadInputTest, ANegotiationFrameAfterNegotiationGetsProtocolError) {
  auto raw = Raw();
  ASSERT_NO_FATAL_FAILURE(Authenticate(*raw));
  ASSERT_TRUE(raw->Send(RawHello("simple", "someone-else")));
  ExpectErrorThenClose(*raw, Errc::kProtocolError);
  ExpectServerStillServes();
}

TEST_P(BadInputTest, AnOversizeRequestAfterNegotiationGetsFrameTooLarge) {
  ASSERT_NO_FATAL_FAILURE(StartServer([](ServerOptions& o) { o.max_frame_size = 64 * 1024; }));
  auto raw = Raw();
  ASSERT_NO_FATAL_FAILURE(Authenticate(*raw));
  ASSERT_TRUE(raw->Send(Request(1, "sys", "echo", std::string(100 * 1024, 'x'))));
  ExpectErrorThenClose(*raw, Errc::kFrameTooLarge);
  ExpectServerStillServes();
}

TEST_P(BadInputTest, AMalformedRequestBodyGetsProtocolError) {
  auto raw = Raw();
  ASSERT_NO_FATAL_FAILURE(Authenticate(*raw));
  ASSERT_TRUE(raw->Send(RawFrame(0x10, 3, std::string("\x00\x09sys", 5))));
  ExpectErrorThenClose(*raw, Errc::kProtocolError);
  ExpectServerStillServes();
}

// The server reads a REQUEST that names the method its connection's last
// call named by comparing the bytes of the two names (server/method_cache.h)
// and looks any other up. A batch in one write, so that the
// requests are taken from one buffer: the same method again, another of the
// same service, names sharing the last method's bytes but for their length
// or their last byte, long names (past the two-word compare), methods that
// do not exist, and last a body that starts with the last method's names
// but ends before its timeout.
TEST_P(BadInputTest, RequestsNamingTheLastMethodOrAnotherAreEachAnsweredAsTheirOwn) {
  const std::string long_service(40, 's');
  const std::string long_method(30, 'm');
  Service long_names(long_service);
  long_names.add(long_method, [](CallContext&, std::string_view request) -> Result<std::string> {
    return "long:" + std::string(request);
  });
  ASSERT_NO_FATAL_FAILURE(StartServer({}, std::move(long_names)));
  auto raw = Raw();
  ASSERT_NO_FATAL_FAILURE(Authenticate(*raw));
  struct Expected {
    std::uint32_t call_id;
    Errc code;
    std::string payload;  // for OK
  };
  std::string batch;
  std::vector<Expected> expected;
  auto add = [&](std::uint32_t id, std::string_view service, std::string_view method,
                 std::string_view payload, Errc code, std::string answer) {
    batch += Request(id, service, method, payload);
    expected.push_back({id, code, std::move(answer)});
  };
  add(1, "sys", "echo", "a", Errc::kOk, "a");
  add(2, "sys", "echo", "", Errc::kOk, "");
  add(3, "sys", "echo", std::string(300, 'p'), Errc::kOk, std::string(300, 'p'));
  add(4, "sys", "echoo", "x", Errc::kNotFound, "");
  add(5, "sys", "echo", "b", Errc::kOk, "b");
  add(6, "sys", "ech", "x", Errc::kNotFound, "");
  add(14, "sys", "echx", "x", Errc::kNotFound, "");  // the kept bytes but the last
  add(7, "sy", "secho", "x", Errc::kNotFound, "");
  add(8, long_service, long_method, "c", Errc::kOk, "long:c");
  add(9, long_service, long_method, "d", Errc::kOk, "long:d");
  add(10, "sys", "echo", "e", Errc::kOk, "e");
  add(11, "sys", "whoami", "", Errc::kOk, "");
  add(12, "sys", "echo", "f", Errc::kOk, "f");
  // The kept names ("sys", "echo") and two of the timeout's four bytes.
  batch += RawFrame(0x10, 13, std::string("\x00\x03" "sys" "\x00\x04" "echo" "\x00\x00", 13));
  ASSERT_TRUE(raw->Send(batch));
  for (const Expected& e : expected) {
    auto frame = raw->ReadFrame();
    ASSERT_TRUE(frame.has_value()) << "no RESPONSE for call " << e.call_id;
    ASSERT_EQ(frame->type, kTypeResponse) << "frame type " << int(frame->type);
    EXPECT_EQ(frame->call_id, e.call_id);
    ASSERT_GE(frame->body.size(), 4u);
    EXPECT_EQ(Load16(frame->body, 0), static_cast<std::uint16_t>(e.code))
        << "call " << e.call_id << ": " << frame->body.substr(4);
    if (e.code == Errc::kOk && e.call_id != 11) {
      EXPECT_EQ(frame->body, std::string("\x00\x00\x00\x00", 4) + e.payload)
          << "call " << e.call_id;
    }
  }
  ExpectErrorThenClose(*raw, Errc::kProtocolError);
  ExpectServerStillServes();
}

// --- volume -----------------------------------------------------------------------

TEST_P(BadInputTest, AHundredConnectionsOfRandomBytesDoNotStopAWellBehavedClient) {
  const auto before = server_->stats();
  std::mt19937 rng(20240601);
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_int_distribution<int> size(9, 3000);
  constexpr int kConnections = 100;
  int ended = 0;
  for (int i = 0; i < kConnections; ++i) {
    std::string junk;
    // Every other one gets past the preamble, so the frame parser sees junk too.
    if (i % 2 == 1) junk = RawPreamble();
    const int n = size(rng);
    for (int k = 0; k < n; ++k) junk.push_back(static_cast<char>(byte(rng)));
    RawConnection raw(endpoint_);
    ASSERT_TRUE(raw.connected()) << "connection " << i << " refused";
    raw.Send(junk);  // the server may hang up before reading everything
    raw.ShutdownWrite();
    if (raw.SeesEndOfStream(3s)) ++ended;
  }
  EXPECT_EQ(ended, kConnections) << "the server left junk connections open";
  EXPECT_TRUE(Eventually([&] {
    return server_->stats().negotiation_failures >= before.negotiation_failures + kConnections;
  })) << "negotiation_failures went from " << before.negotiation_failures << " to "
      << server_->stats().negotiation_failures;
  // A refused connection counts as active until its lingering close ends.
  EXPECT_TRUE(Eventually([&] { return server_->stats().connections_active == 0u; }))
      << server_->stats().connections_active << " connections still active";
  ExpectServerStillServes();
}

TEST_P(BadInputTest, JunkAfterNegotiationIsAProtocolErrorForThatConnectionOnly) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> byte(0, 255);
  const auto before = server_->stats().protocol_errors;
  for (int i = 0; i < 20; ++i) {
    RawConnection raw(endpoint_);
    ASSERT_NO_FATAL_FAILURE(Authenticate(raw));
    std::string junk;
    for (int k = 0; k < 64; ++k) junk.push_back(static_cast<char>(byte(rng)));
    junk[0] = 0x7F;  // a length far above the limit: never a valid frame
    raw.Send(junk);
    raw.ShutdownWrite();
    EXPECT_TRUE(raw.SeesEndOfStream(3s)) << "connection " << i;
  }
  EXPECT_TRUE(Eventually([&] { return server_->stats().protocol_errors >= before + 20; }))
      << "protocol_errors went from " << before << " to " << server_->stats().protocol_errors;
  ExpectServerStillServes();
}

}  // namespace
}  // namespace authrpc
