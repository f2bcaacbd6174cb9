// Unit tests for rpc/messages.h: every message encodes to a whole frame whose
// header is right and whose body decodes back to the same values; decoders
// refuse truncated bodies and (where the body has no trailing payload)
// trailing garbage.
#include "authrpc/rpc/messages.h"

#include <gtest/gtest.h>

#include <functional>
#include <ostream>
#include <string>
#include <vector>

namespace authrpc::wire {
namespace {

// A frame split into its parsed header and its body.
struct Split {
  FrameHeader header;
  std::string body;
};

// Checks that `frame` is exactly one well-formed frame and splits it.
Split split_frame(const std::string& frame) {
  Split s;
  EXPECT_GE(frame.size(), kFrameHeaderSize);
  if (frame.size() < kFrameHeaderSize) return s;
  auto h = parse_frame_header(reinterpret_cast<const std::uint8_t*>(frame.data()),
                              kDefaultMaxFrameSize);
  EXPECT_TRUE(h.ok()) << h.status().to_string();
  if (!h.ok()) return s;
  s.header = *h;
  EXPECT_EQ(std::size_t{h->length} + kLengthFieldSize, frame.size())
      << "length field does not cover exactly the frame";
  s.body = frame.substr(kFrameHeaderSize);
  return s;
}

// The body of `frame`, one well-formed frame, after checking its type and
// call id.
std::string body_of(const std::string& frame, FrameType type, std::uint32_t call_id = 0) {
  Split f = split_frame(frame);
  EXPECT_EQ(f.header.type, type);
  EXPECT_EQ(f.header.call_id, call_id);
  return std::move(f.body);
}

const std::string kBinary("\x00\x01\xFF\x00tok\x00", 8);

// ---------------------------------------------------------------------------
// Round trips

TEST(MessagesTest, HelloRoundTrip) {
  const Hello cases[] = {
      {kNoFeatures, "simple", "alice", {}},
      {0xFFFFFFFE, "kerberos", kBinary, {}},  // every bit but kFeatureDoAs
      {kNoFeatures, "", "", {}},  // "tell me what you support"
      {0x12345678, std::string(300, 'm'), std::string(70000, 't'), {}},
      {kFeatureDoAs, "simple", "svc", "alice"},  // proxy user: do_as follows the message
  };
  for (const auto& m : cases) {
    std::string out;
    append_hello(out, m);
    const std::string got = body_of(out, FrameType::kHello);
    auto parsed = parse_hello(got);
    ASSERT_TRUE(parsed.ok()) << parsed.status().to_string();
    EXPECT_EQ(parsed->features, m.features);
    EXPECT_EQ(parsed->mechanism, m.mechanism);
    EXPECT_EQ(parsed->message, m.message);
    EXPECT_EQ(parsed->do_as, m.do_as);
  }
}

TEST(MessagesTest, HelloDoAsMustBeNonEmptyAndPresent) {
  std::string out;
  append_hello(out, {kFeatureDoAs, "simple", "svc", ""});
  EXPECT_EQ(parse_hello(split_frame(out).body).code(), Errc::kProtocolError);
  out.clear();
  append_hello(out, {kNoFeatures, "simple", "svc", {}});
  std::string body(split_frame(out).body);
  body[3] = 1;  // claims do_as but carries none
  EXPECT_EQ(parse_hello(body).code(), Errc::kProtocolError);
}

TEST(MessagesTest, HelloBodyBytes) {
  std::string out;
  append_hello(out, {2, "ab", "xyz", {}});
  const std::string expected_body("\x00\x00\x00\x02"   // features
                                  "\x00\x02" "ab"       // mechanism
                                  "\x00\x00\x00\x03" "xyz", 15);  // message
  EXPECT_EQ(out.substr(kFrameHeaderSize), expected_body);
  EXPECT_EQ(out.substr(0, kFrameHeaderSize),
            std::string("\x00\x00\x00\x17\x01\x00\x00\x00\x00\x00\x00\x00", 12));
}

TEST(MessagesTest, MechanismsRoundTrip) {
  const Mechanisms cases[] = {
      {kNoFeatures, {}},
      {kNoFeatures, {"simple"}},
      {7, {"kerberos", "token", "simple"}},
      {kNoFeatures, {"", "x", std::string(1000, 'n')}},
  };
  for (const auto& m : cases) {
    std::string out;
    append_mechanisms(out, m);
    const std::string got = body_of(out, FrameType::kMechanisms);
    auto parsed = parse_mechanisms(got);
    ASSERT_TRUE(parsed.ok()) << parsed.status().to_string();
    EXPECT_EQ(parsed->features, m.features);
    EXPECT_EQ(parsed->names, m.names);
  }
}

TEST(MessagesTest, AuthMessageRoundTripBothDirections) {
  for (const auto type : {FrameType::kAuthChallenge, FrameType::kAuthResponse}) {
    for (const std::string& message : {std::string(), std::string("abc"), kBinary,
                                       std::string(100000, '\x7F')}) {
      std::string out;
      append_auth_message(out, type, message);
      const std::string got = body_of(out, type);
      auto parsed = parse_auth_message(got);
      ASSERT_TRUE(parsed.ok()) << parsed.status().to_string();
      EXPECT_EQ(parsed->message, message);
    }
  }
}

TEST(MessagesTest, AuthSuccessRoundTrip) {
  const AuthSuccess cases[] = {
      {kNoFeatures, "", "alice"},
      {3, kBinary, "bob@EXAMPLE.COM"},
      {kNoFeatures, "", ""},
  };
  for (const auto& m : cases) {
    std::string out;
    append_auth_success(out, m);
    const std::string got = body_of(out, FrameType::kAuthSuccess);
    auto parsed = parse_auth_success(got);
    ASSERT_TRUE(parsed.ok()) << parsed.status().to_string();
    EXPECT_EQ(parsed->features, m.features);
    EXPECT_EQ(parsed->message, m.message);
    EXPECT_EQ(parsed->user, m.user);
  }
}

TEST(MessagesTest, ErrorRoundTrip) {
  const std::pair<std::uint16_t, std::string> cases[] = {
      {static_cast<std::uint16_t>(Errc::kProtocolError), "bad frame"},
      {static_cast<std::uint16_t>(Errc::kAuthenticationFailed), ""},
      {0xFFFF, std::string("nul\0inside", 10)},
  };
  for (const auto& [code, message] : cases) {
    std::string out;
    append_error(out, code, message);
    const std::string got = body_of(out, FrameType::kError);
    auto parsed = parse_error(got);
    ASSERT_TRUE(parsed.ok()) << parsed.status().to_string();
    EXPECT_EQ(parsed->code, code);
    EXPECT_EQ(parsed->message, message);
  }
}

TEST(MessagesTest, GoAwayRoundTrip) {
  const GoAway cases[] = {{0, ""}, {42, "server is shutting down"}, {0xFFFFFFFF, "x"}};
  for (const auto& m : cases) {
    std::string out;
    append_goaway(out, m);
    const std::string got = body_of(out, FrameType::kGoAway);
    auto parsed = parse_goaway(got);
    ASSERT_TRUE(parsed.ok()) << parsed.status().to_string();
    EXPECT_EQ(parsed->last_call_id, m.last_call_id);
    EXPECT_EQ(parsed->reason, m.reason);
  }
}

TEST(MessagesTest, RequestRoundTripWithPayload) {
  struct Case {
    std::uint32_t call_id;
    std::string service, method;
    std::uint32_t timeout_ms;
    std::string payload;
  };
  const Case cases[] = {
      {1, "sys", "echo", 0, "hello"},
      {0xFFFFFFFF, "svc", "m", 30000, ""},
      {77, "kv", "put", 1, kBinary},
      {5, "", "", 0xFFFFFFFF, std::string(1 << 20, '\0')},
  };
  for (const auto& c : cases) {
    std::string out;
    append_request(out, c.call_id, {c.service, c.method, c.timeout_ms}, c.payload);
    const std::string got = body_of(out, FrameType::kRequest, c.call_id);
    std::string_view payload = "sentinel";
    auto parsed = parse_request(got, payload);
    ASSERT_TRUE(parsed.ok()) << parsed.status().to_string();
    EXPECT_EQ(parsed->service, c.service);
    EXPECT_EQ(parsed->method, c.method);
    EXPECT_EQ(parsed->timeout_ms, c.timeout_ms);
    EXPECT_EQ(payload, c.payload);
  }
}

TEST(MessagesTest, ResponseRoundTripWithPayload) {
  struct Case {
    std::uint32_t call_id;
    std::uint16_t status;
    std::string error_message;
    std::string payload;
  };
  const Case cases[] = {
      {1, 0, "", "{\"ok\":true}"},
      {2, 0, "", kBinary},  // binary payload with NUL bytes
      {3, 0, "", std::string("\0\0\0\0", 4)},
      {4, static_cast<std::uint16_t>(Errc::kNotFound), "no method x.y", ""},
      {0xFFFFFFFF, 0, "", ""},
      {6, 0, "", std::string(1 << 20, '\xAA')},
  };
  for (const auto& c : cases) {
    std::string out;
    append_response(out, c.call_id, c.status, c.error_message, c.payload);
    const std::string got = body_of(out, FrameType::kResponse, c.call_id);
    std::string_view payload = "sentinel";
    auto parsed = parse_response(got, payload);
    ASSERT_TRUE(parsed.ok()) << parsed.status().to_string();
    EXPECT_EQ(parsed->status, c.status);
    EXPECT_EQ(parsed->error_message, c.error_message);
    EXPECT_EQ(payload, c.payload);
    EXPECT_EQ(payload.size(), c.payload.size());
  }
}

// Every short length of name, payload and error message, each byte
// distinct, appended behind bytes already in the buffer.
TEST(MessagesTest, FieldsOfEveryShortLengthRoundTripByteForByte) {
  auto distinct = [](std::size_t n, char base) {
    std::string v(n, '\0');
    for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<char>(base + i);
    return v;
  };
  for (std::size_t n = 0; n <= 40; ++n) {
    SCOPED_TRACE(std::to_string(n) + " bytes");
    const std::string service = distinct(n, 'A'), method = distinct(40 - n, 'a'),
                      payload = distinct(n, '\x80'), message = distinct(n, '0');
    std::string out = "prefix";
    append_request(out, 7, {service, method, 9}, payload);
    const auto request = split_frame(out.substr(6));
    std::string_view got_payload;
    auto parsed = parse_request(request.body, got_payload);
    ASSERT_TRUE(parsed.ok()) << parsed.status().to_string();
    EXPECT_EQ(parsed->service, service);
    EXPECT_EQ(parsed->method, method);
    EXPECT_EQ(got_payload, payload);
    // The server's fast path: the body starts with the names as encoded
    // once per method, and the rest reads as the full parse did.
    const std::string names = encode_request_names(service, method);
    ASSERT_EQ(request.body.substr(0, names.size()), names);
    std::uint32_t timeout_ms = 0;
    std::string_view after_names;
    ASSERT_TRUE(parse_request_after_names(request.body, names.size(), timeout_ms, after_names));
    EXPECT_EQ(timeout_ms, 9u);
    EXPECT_EQ(after_names, payload);
    EXPECT_FALSE(parse_request_after_names(request.body.substr(0, names.size() + 3), names.size(),
                                           timeout_ms, after_names));
    out.clear();
    append_ok_response(out, 7, payload);
    const auto ok_frame = split_frame(out);
    auto ok = parse_response(ok_frame.body, got_payload);
    ASSERT_TRUE(ok.ok()) << ok.status().to_string();
    EXPECT_EQ(ok->status, 0);
    EXPECT_EQ(ok->error_message, "");
    EXPECT_EQ(got_payload, payload);
    out.clear();
    append_response(out, 7, 5, message, payload);
    const auto response = split_frame(out);
    auto answered = parse_response(response.body, got_payload);
    ASSERT_TRUE(answered.ok()) << answered.status().to_string();
    EXPECT_EQ(answered->error_message, message);
    EXPECT_EQ(got_payload, payload);
  }
}

TEST(MessagesTest, CancelIsAnEmptyFrameWithTheCallId) {
  std::string out;
  append_cancel(out, 0x01020304);
  EXPECT_EQ(out, std::string("\x00\x00\x00\x08\x12\x00\x00\x00\x01\x02\x03\x04", 12));
  const auto f = split_frame(out);
  EXPECT_EQ(f.header.type, FrameType::kCancel);
  EXPECT_EQ(f.header.call_id, 0x01020304u);
  EXPECT_EQ(f.header.body_size(), 0u);
}

TEST(MessagesTest, PingAndPongCarryTheirBodyVerbatim) {
  for (const auto type : {FrameType::kPing, FrameType::kPong}) {
    for (const std::string& body : {std::string(), std::string("12345678"), kBinary}) {
      std::string out;
      append_ping(out, type, body);
      const std::string got = body_of(out, type);
      EXPECT_EQ(got, body);
    }
  }
}

TEST(MessagesTest, AppendsFramesBackToBack) {
  std::string out = "PRE";
  append_cancel(out, 1);
  append_ping(out, FrameType::kPing, "p");
  append_response(out, 2, 0, "", "r");
  ASSERT_EQ(out.substr(0, 3), "PRE");
  std::size_t pos = 3;
  std::vector<FrameType> types;
  while (pos < out.size()) {
    auto h = parse_frame_header(reinterpret_cast<const std::uint8_t*>(out.data() + pos),
                                kDefaultMaxFrameSize);
    ASSERT_TRUE(h.ok()) << h.status().to_string();
    types.push_back(h->type);
    pos += kLengthFieldSize + h->length;
  }
  EXPECT_EQ(pos, out.size());
  EXPECT_EQ(types, (std::vector<FrameType>{FrameType::kCancel, FrameType::kPing,
                                           FrameType::kResponse}));
}

// ---------------------------------------------------------------------------
// Truncation and trailing bytes

struct DecoderCase {
  const char* name;
  // The body of a valid frame (header stripped).
  std::function<std::string()> body;
  // Decodes; returns the status.
  std::function<Status(std::string_view)> decode;
  // Whether the message ends in a payload that takes "the rest" (so trailing
  // bytes are payload, not garbage).
  bool trailing_payload;
};

void PrintTo(const DecoderCase& c, std::ostream* os) { *os << c.name; }

std::string body_of(const std::string& frame) { return frame.substr(kFrameHeaderSize); }

template <typename R>
Status status_of(const R& r) {
  return r.status();
}

std::vector<DecoderCase> decoder_cases() {
  return {
      {"hello",
       [] {
         std::string f;
         append_hello(f, {4, "simple", "alice", {}});
         return body_of(f);
       },
       [](std::string_view b) { return status_of(parse_hello(b)); }, false},
      {"hello_empty_fields",
       [] {
         std::string f;
         append_hello(f, {});
         return body_of(f);
       },
       [](std::string_view b) { return status_of(parse_hello(b)); }, false},
      {"mechanisms",
       [] {
         std::string f;
         append_mechanisms(f, {0, {"kerberos", "simple"}});
         return body_of(f);
       },
       [](std::string_view b) { return status_of(parse_mechanisms(b)); }, false},
      {"mechanisms_with_empty_name",
       [] {
         std::string f;
         append_mechanisms(f, {0, {"a", ""}});
         return body_of(f);
       },
       [](std::string_view b) { return status_of(parse_mechanisms(b)); }, false},
      {"auth_message",
       [] {
         std::string f;
         append_auth_message(f, FrameType::kAuthChallenge, kBinary);
         return body_of(f);
       },
       [](std::string_view b) { return status_of(parse_auth_message(b)); }, false},
      {"auth_success",
       [] {
         std::string f;
         append_auth_success(f, {1, "final", "alice"});
         return body_of(f);
       },
       [](std::string_view b) { return status_of(parse_auth_success(b)); }, false},
      {"error",
       [] {
         std::string f;
         append_error(f, 104, "bad password");
         return body_of(f);
       },
       [](std::string_view b) { return status_of(parse_error(b)); }, false},
      {"goaway",
       [] {
         std::string f;
         append_goaway(f, {9, "bye"});
         return body_of(f);
       },
       [](std::string_view b) { return status_of(parse_goaway(b)); }, false},
      // Request/response headers: with an empty payload every truncation cuts
      // into the fixed fields.
      {"request",
       [] {
         std::string f;
         append_request(f, 1, {"svc", "method", 250}, "");
         return body_of(f);
       },
       [](std::string_view b) {
         std::string_view payload;
         return status_of(parse_request(b, payload));
       },
       true},
      {"response",
       [] {
         std::string f;
         append_response(f, 1, 5, "not found", "");
         return body_of(f);
       },
       [](std::string_view b) {
         std::string_view payload;
         return status_of(parse_response(b, payload));
       },
       true},
  };
}

class DecoderTest : public ::testing::TestWithParam<DecoderCase> {};

TEST_P(DecoderTest, AcceptsTheFullBody) {
  const auto& c = GetParam();
  const Status s = c.decode(c.body());
  EXPECT_TRUE(s.ok()) << s.to_string();
}

TEST_P(DecoderTest, RefusesEveryTruncation) {
  const auto& c = GetParam();
  const std::string body = c.body();
  ASSERT_FALSE(body.empty());
  for (std::size_t len = 0; len < body.size(); ++len) {
    const Status s = c.decode(std::string_view(body).substr(0, len));
    EXPECT_EQ(s.code, Errc::kProtocolError)
        << c.name << " truncated to " << len << " of " << body.size() << " bytes: "
        << s.to_string();
  }
}

TEST_P(DecoderTest, TrailingBytes) {
  const auto& c = GetParam();
  for (const std::string& extra : {std::string(1, '\0'), std::string("garbage")}) {
    const Status s = c.decode(c.body() + extra);
    if (c.trailing_payload) {
      EXPECT_TRUE(s.ok()) << c.name << ": trailing bytes are the payload: " << s.to_string();
    } else {
      EXPECT_EQ(s.code, Errc::kProtocolError) << c.name << " with trailing bytes";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Table, DecoderTest, ::testing::ValuesIn(decoder_cases()),
                         [](const auto& tp) { return std::string(tp.param.name); });

TEST(MessagesTest, MechanismsCountLargerThanTheList) {
  // The count says 3 names, only 2 follow.
  std::string body;
  Writer w(body);
  w.u32(0);
  w.u16(3);
  w.str("a");
  w.str("b");
  EXPECT_EQ(parse_mechanisms(body).code(), Errc::kProtocolError);
}

TEST(MessagesTest, MechanismsCountSmallerThanTheList) {
  // The count says 1 name, 2 follow: the second is trailing garbage.
  std::string body;
  Writer w(body);
  w.u32(0);
  w.u16(1);
  w.str("a");
  w.str("b");
  EXPECT_EQ(parse_mechanisms(body).code(), Errc::kProtocolError);
}

TEST(MessagesTest, RequestPayloadIsTheRestAndMayLookLikeFields) {
  std::string body;
  Writer w(body);
  w.str("s");
  w.str("m");
  w.u32(0);
  w.str("payload looks like a str");
  std::string_view payload;
  auto parsed = parse_request(body, payload);
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(payload, std::string("\x00\x18payload looks like a str", 26));
}

// REQUEST and RESPONSE are encoded field by field, not through Writer (the
// call path's cost): byte for byte what Writer makes, also for names and
// messages past a str's 65,535-byte cap (cut there), empty fields and
// appending behind other frames.
struct CallFrameCase {
  std::string name;
  std::string first, second;  // service and method; or the error message
  std::string payload;
};

class CallFrameEncodingTest : public ::testing::TestWithParam<CallFrameCase> {};

TEST_P(CallFrameEncodingTest, RequestAndResponseMatchWritersBytes) {
  const auto& c = GetParam();
  const std::string before = "earlier frames";
  std::string request = before;
  append_request(request, 7, {c.first, c.second, 250}, c.payload);
  std::string want_body;
  Writer w(want_body);
  w.str(c.first);
  w.str(c.second);
  w.u32(250);
  w.raw(c.payload);
  std::string want(kFrameHeaderSize, '\0');
  write_frame_header(reinterpret_cast<std::uint8_t*>(want.data()), FrameType::kRequest, 7,
                     want_body.size());
  EXPECT_EQ(request, before + want + want_body);

  std::string response = before;
  append_response(response, 9, 5, c.first, c.payload);
  std::string want_response_body;
  Writer r(want_response_body);
  r.u16(5);
  r.str(c.first);
  r.raw(c.payload);
  std::string want_response(kFrameHeaderSize, '\0');
  write_frame_header(reinterpret_cast<std::uint8_t*>(want_response.data()), FrameType::kResponse,
                     9, want_response_body.size());
  EXPECT_EQ(response, before + want_response + want_response_body);
}

INSTANTIATE_TEST_SUITE_P(
    Table, CallFrameEncodingTest,
    ::testing::Values(CallFrameCase{"Small", "sys", "echo", "x"},
                      CallFrameCase{"EmptyFields", "", "", ""},
                      CallFrameCase{"NamesAtTheCap", std::string(65535, 's'), std::string(65535, 'm'),
                                    "p"},
                      CallFrameCase{"NamesPastTheCapAreCut", std::string(70000, 's'),
                                    std::string(65536, 'm'), std::string(1000, 'p')}),
    [](const auto& param_info) { return param_info.param.name; });

TEST(MessagesTest, DecodeErrorsNameTheMessage) {
  EXPECT_NE(parse_hello("x").status().message.find("HELLO"), std::string::npos);
  EXPECT_NE(parse_mechanisms("x").status().message.find("MECHANISMS"), std::string::npos);
  EXPECT_NE(parse_auth_success("x").status().message.find("AUTH_SUCCESS"), std::string::npos);
  EXPECT_NE(parse_error("x").status().message.find("ERROR"), std::string::npos);
  EXPECT_NE(parse_goaway("x").status().message.find("GOAWAY"), std::string::npos);
  std::string_view p;
  EXPECT_NE(parse_request("x", p).status().message.find("REQUEST"), std::string::npos);
  EXPECT_NE(parse_response("x", p).status().message.find("RESPONSE"), std::string::npos);
}

}  // namespace
}  // namespace authrpc::wire
