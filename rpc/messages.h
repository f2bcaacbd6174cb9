// The bodies of v1 frames as structs, with encoders that append a whole frame
// (header included) to an output buffer and decoders that validate a body.
// Decoders return kProtocolError on truncated or trailing bytes.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "authrpc/base/result.h"
#include "authrpc/rpc/wire.h"

namespace authrpc::wire {

struct Hello {  // kHello
  std::uint32_t features = kNoFeatures;
  std::string mechanism;   // empty: "tell me what you support"
  std::string message;     // the mechanism's first negotiation message
  std::string do_as = {};  // carried only when features has kFeatureDoAs
};

struct Mechanisms {  // kMechanisms
  std::uint32_t features = kNoFeatures;
  std::vector<std::string> names;  // server preference order
};

struct AuthMessage {  // kAuthChallenge / kAuthResponse
  std::string message;  // the mechanism's next negotiation message
};

struct AuthSuccess {  // kAuthSuccess
  std::uint32_t features = kNoFeatures;
  std::string message;  // the final negotiation message (mutual authentication), may be empty
  std::string user;     // the identity the server authenticated
};

struct ErrorBody {  // kError
  std::uint16_t code = 0;
  std::string message;
};

struct GoAway {  // kGoAway
  std::uint32_t last_call_id = 0;  // highest call id the server will still answer
  std::string reason;
};

// A request's header; the payload is the rest of the frame body.
struct RequestHeader {
  std::string_view service;
  std::string_view method;
  std::uint32_t timeout_ms = 0;  // 0: no deadline
};

// A streaming call's opening frame (kStreamRequest): a request header plus
// the client's receive window; the opening message is the rest of the body.
struct StreamRequestHeader {
  std::string_view service;
  std::string_view method;
  std::uint32_t timeout_ms = 0;  // 0: no deadline
  std::uint32_t window = 0;      // bytes of DATA the client accepts before it returns credit
};

// A response's header; the payload is the rest of the frame body.
struct ResponseHeader {
  std::uint16_t status = 0;
  std::string_view error_message;
};

void append_hello(std::string& out, const Hello& m);
void append_mechanisms(std::string& out, const Mechanisms& m);
void append_auth_message(std::string& out, FrameType type, std::string_view message);
void append_auth_success(std::string& out, const AuthSuccess& m);
void append_error(std::string& out, std::uint16_t code, std::string_view message);
void append_goaway(std::string& out, const GoAway& m);
void append_ping(std::string& out, FrameType type, std::string_view body);
void append_request(std::string& out, std::uint32_t call_id, const RequestHeader& h,
                    std::string_view payload);
void append_response(std::string& out, std::uint32_t call_id, std::uint16_t status,
                     std::string_view error_message, std::string_view payload);
// A RESPONSE with status 0 (no message): the server's path for every call
// that succeeds.
void append_ok_response(std::string& out, std::uint32_t call_id, std::string_view payload);
// What precedes the payload of a RESPONSE with status 0: for a payload
// encoded in place after room for it (write_ok_response_head fills it).
inline constexpr std::size_t kOkResponseHeadSize = kFrameHeaderSize + 4;
void write_ok_response_head(char* at, std::uint32_t call_id, std::size_t payload_size) noexcept;
void append_cancel(std::string& out, std::uint32_t call_id);
void append_stream_request(std::string& out, std::uint32_t call_id, const StreamRequestHeader& h,
                           std::string_view payload);
// A DATA frame's 12-byte header only, for a payload of `payload_size` bytes
// that the caller sends right behind it (scatter/gather, no copy).
void append_data_header(std::string& out, std::uint32_t call_id, std::size_t payload_size);
void append_window_update(std::string& out, std::uint32_t call_id, std::uint32_t increment);
void append_end_stream(std::string& out, std::uint32_t call_id);

Result<Hello> parse_hello(std::string_view body);
Result<Mechanisms> parse_mechanisms(std::string_view body);
Result<AuthMessage> parse_auth_message(std::string_view body);
Result<AuthSuccess> parse_auth_success(std::string_view body);
Result<ErrorBody> parse_error(std::string_view body);
Result<GoAway> parse_goaway(std::string_view body);
// On success `payload` views the rest of `body`.
Result<RequestHeader> parse_request(std::string_view body, std::string_view& payload);
// The bytes a REQUEST body naming service.method starts with (its two
// length-prefixed names, before the timeout); empty if a name is too long
// for the wire. A body that starts with them names exactly that method.
std::string encode_request_names(std::string_view service, std::string_view method);
// The timeout and payload of a REQUEST body whose first `names_size` bytes
// are known names (encode_request_names()). False if the body is too short
// to hold the timeout. Inline: the server's per-call path.
inline bool parse_request_after_names(std::string_view body, std::size_t names_size,
                                      std::uint32_t& timeout_ms,
                                      std::string_view& payload) noexcept {
  if (body.size() < names_size || body.size() - names_size < 4) return false;
  const auto* p = reinterpret_cast<const unsigned char*>(body.data() + names_size);
  timeout_ms = (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) |
               (std::uint32_t{p[2]} << 8) | std::uint32_t{p[3]};
  payload = std::string_view(body.data() + names_size + 4, body.size() - names_size - 4);
  return true;
}
Result<ResponseHeader> parse_response(std::string_view body, std::string_view& payload);
Result<StreamRequestHeader> parse_stream_request(std::string_view body, std::string_view& payload);
// The increment of a WINDOW_UPDATE (0 is malformed).
Result<std::uint32_t> parse_window_update(std::string_view body);

}  // namespace authrpc::wire
