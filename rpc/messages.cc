#include "authrpc/rpc/messages.h"

#include <algorithm>
#include <cstring>

namespace authrpc::wire {
namespace {

// Reserves a header, lets `fill` append the body, then writes the header.
template <typename Fill>
void append_frame(std::string& out, FrameType type, std::uint32_t call_id, Fill&& fill) {
  const std::size_t start = out.size();
  out.resize(start + kFrameHeaderSize);
  Writer w(out);
  fill(w);
  write_frame_header(reinterpret_cast<std::uint8_t*>(out.data() + start), type, call_id,
                     out.size() - start - kFrameHeaderSize);
}

// The unary call's frames (REQUEST, RESPONSE) are encoded and decoded
// field by field here rather than through Writer/Reader: one resize and a
// few stores per frame, where Writer appends each field on its own (a
// capacity check and a size update per byte of a u16) — with many small
// calls in flight these four functions run on every call (docs/DESIGN.md,
// "Calls").
inline char* put16(char* p, std::uint16_t v) noexcept {
  p[0] = static_cast<char>(v >> 8);
  p[1] = static_cast<char>(v);
  return p + 2;
}
inline char* put32(char* p, std::uint32_t v) noexcept {
  p[0] = static_cast<char>(v >> 24);
  p[1] = static_cast<char>(v >> 16);
  p[2] = static_cast<char>(v >> 8);
  p[3] = static_cast<char>(v);
  return p + 4;
}
inline char* put_bytes(char* p, std::string_view b) noexcept {
  if (!b.empty()) std::memcpy(p, b.data(), b.size());
  return p + b.size();
}
// A `str` field: u16 length + bytes, cut at 65535 bytes as Writer::str.
inline std::string_view short_str(std::string_view s) noexcept {
  return s.substr(0, std::min<std::size_t>(s.size(), 0xFFFF));
}
inline std::uint16_t get16(const char* p) noexcept {
  return static_cast<std::uint16_t>((static_cast<unsigned char>(p[0]) << 8) |
                                    static_cast<unsigned char>(p[1]));
}
inline std::uint32_t get32(const char* p) noexcept {
  return (std::uint32_t{static_cast<unsigned char>(p[0])} << 24) |
         (std::uint32_t{static_cast<unsigned char>(p[1])} << 16) |
         (std::uint32_t{static_cast<unsigned char>(p[2])} << 8) |
         std::uint32_t{static_cast<unsigned char>(p[3])};
}
// Takes a `str` field at `*at` of `body`; false if it does not fit.
inline bool take_str(std::string_view body, std::size_t* at, std::string_view* out) noexcept {
  if (body.size() - *at < 2) return false;
  const std::size_t n = get16(body.data() + *at);
  if (body.size() - *at - 2 < n) return false;
  *out = body.substr(*at + 2, n);
  *at += 2 + n;
  return true;
}

Status malformed(std::string_view what) {
  return {Errc::kProtocolError, "malformed " + std::string(what) + " frame"};
}

}  // namespace

void append_hello(std::string& out, const Hello& m) {
  append_frame(out, FrameType::kHello, 0, [&](Writer& w) {
    w.u32(m.features);
    w.str(m.mechanism);
    w.bytes(m.message);
    if (m.features & kFeatureDoAs) w.str(m.do_as);
  });
}

void append_mechanisms(std::string& out, const Mechanisms& m) {
  append_frame(out, FrameType::kMechanisms, 0, [&](Writer& w) {
    w.u32(m.features);
    w.u16(static_cast<std::uint16_t>(m.names.size()));
    for (const auto& n : m.names) w.str(n);
  });
}

void append_auth_message(std::string& out, FrameType type, std::string_view message) {
  append_frame(out, type, 0, [&](Writer& w) { w.bytes(message); });
}

void append_auth_success(std::string& out, const AuthSuccess& m) {
  append_frame(out, FrameType::kAuthSuccess, 0, [&](Writer& w) {
    w.u32(m.features);
    w.bytes(m.message);
    w.str(m.user);
  });
}

void append_error(std::string& out, std::uint16_t code, std::string_view message) {
  append_frame(out, FrameType::kError, 0, [&](Writer& w) {
    w.u16(code);
    w.str(message);
  });
}

void append_goaway(std::string& out, const GoAway& m) {
  append_frame(out, FrameType::kGoAway, 0, [&](Writer& w) {
    w.u32(m.last_call_id);
    w.str(m.reason);
  });
}

void append_ping(std::string& out, FrameType type, std::string_view body) {
  append_frame(out, type, 0, [&](Writer& w) { w.raw(body); });
}

void append_request(std::string& out, std::uint32_t call_id, const RequestHeader& h,
                    std::string_view payload) {
  const auto service = short_str(h.service);
  const auto method = short_str(h.method);
  const std::size_t body = 2 + service.size() + 2 + method.size() + 4 + payload.size();
  const std::size_t start = out.size();
  out.resize(start + kFrameHeaderSize + body);
  char* p = out.data() + start;
  write_frame_header(reinterpret_cast<std::uint8_t*>(p), FrameType::kRequest, call_id, body);
  p += kFrameHeaderSize;
  p = put_bytes(put16(p, static_cast<std::uint16_t>(service.size())), service);
  p = put_bytes(put16(p, static_cast<std::uint16_t>(method.size())), method);
  put_bytes(put32(p, h.timeout_ms), payload);
}

void append_response(std::string& out, std::uint32_t call_id, std::uint16_t status,
                     std::string_view error_message, std::string_view payload) {
  const auto message = short_str(error_message);
  const std::size_t body = 2 + 2 + message.size() + payload.size();
  // The fixed part (frame header, status, the message's length) is built
  // here and appended at once: a resize would first fill it with zeros.
  char head[kFrameHeaderSize + 4];
  write_frame_header(reinterpret_cast<std::uint8_t*>(head), FrameType::kResponse, call_id, body);
  put16(put16(head + kFrameHeaderSize, status), static_cast<std::uint16_t>(message.size()));
  out.append(head, sizeof head);
  if (!message.empty()) out.append(message);
  if (!payload.empty()) out.append(payload);
}

void write_ok_response_head(char* at, std::uint32_t call_id, std::size_t payload_size) noexcept {
  write_frame_header(reinterpret_cast<std::uint8_t*>(at), FrameType::kResponse, call_id,
                     4 + payload_size);
  std::memset(at + kFrameHeaderSize, 0, 4);  // status 0 and an empty message
}

void append_ok_response(std::string& out, std::uint32_t call_id, std::string_view payload) {
  char head[kOkResponseHeadSize];
  write_ok_response_head(head, call_id, payload.size());
  out.append(head, sizeof head);
  out.append(payload);
}

void append_cancel(std::string& out, std::uint32_t call_id) {
  append_frame(out, FrameType::kCancel, call_id, [](Writer&) {});
}

void append_stream_request(std::string& out, std::uint32_t call_id, const StreamRequestHeader& h,
                           std::string_view payload) {
  append_frame(out, FrameType::kStreamRequest, call_id, [&](Writer& w) {
    w.str(h.service);
    w.str(h.method);
    w.u32(h.timeout_ms);
    w.u32(h.window);
    w.raw(payload);
  });
}

void append_data_header(std::string& out, std::uint32_t call_id, std::size_t payload_size) {
  const std::size_t start = out.size();
  out.resize(start + kFrameHeaderSize);
  write_frame_header(reinterpret_cast<std::uint8_t*>(out.data() + start), FrameType::kData, call_id,
                     payload_size);
}

void append_window_update(std::string& out, std::uint32_t call_id, std::uint32_t increment) {
  append_frame(out, FrameType::kWindowUpdate, call_id, [&](Writer& w) { w.u32(increment); });
}

void append_end_stream(std::string& out, std::uint32_t call_id) {
  append_frame(out, FrameType::kEndStream, call_id, [](Writer&) {});
}

Result<Hello> parse_hello(std::string_view body) {
  Reader r(body);
  Hello m;
  m.features = r.u32();
  m.mechanism = r.str();
  m.message = r.bytes();
  if (m.features & kFeatureDoAs) {
    m.do_as = r.str();
    if (m.do_as.empty()) return malformed("HELLO");
  }
  if (!r.ok() || !r.at_end()) return malformed("HELLO");
  return m;
}

Result<Mechanisms> parse_mechanisms(std::string_view body) {
  Reader r(body);
  Mechanisms m;
  m.features = r.u32();
  const auto n = r.u16();
  for (std::uint16_t i = 0; i < n && r.ok(); ++i) m.names.emplace_back(r.str());
  if (!r.ok() || !r.at_end()) return malformed("MECHANISMS");
  return m;
}

Result<AuthMessage> parse_auth_message(std::string_view body) {
  Reader r(body);
  AuthMessage m;
  m.message = r.bytes();
  if (!r.ok() || !r.at_end()) return malformed("AUTH message");
  return m;
}

Result<AuthSuccess> parse_auth_success(std::string_view body) {
  Reader r(body);
  AuthSuccess m;
  m.features = r.u32();
  m.message = r.bytes();
  m.user = r.str();
  if (!r.ok() || !r.at_end()) return malformed("AUTH_SUCCESS");
  return m;
}

Result<ErrorBody> parse_error(std::string_view body) {
  Reader r(body);
  ErrorBody m;
  m.code = r.u16();
  m.message = r.str();
  if (!r.ok() || !r.at_end()) return malformed("ERROR");
  return m;
}

Result<GoAway> parse_goaway(std::string_view body) {
  Reader r(body);
  GoAway m;
  m.last_call_id = r.u32();
  m.reason = r.str();
  if (!r.ok() || !r.at_end()) return malformed("GOAWAY");
  return m;
}

Result<RequestHeader> parse_request(std::string_view body, std::string_view& payload) {
  RequestHeader h;
  std::size_t at = 0;
  if (!take_str(body, &at, &h.service) || !take_str(body, &at, &h.method) ||
      body.size() - at < 4) {
    return malformed("REQUEST");
  }
  h.timeout_ms = get32(body.data() + at);
  payload = body.substr(at + 4);
  return h;
}

std::string encode_request_names(std::string_view service, std::string_view method) {
  if (service.size() > 0xFFFF || method.size() > 0xFFFF) return {};
  std::string out(2 + service.size() + 2 + method.size(), '\0');
  put_bytes(put16(put_bytes(put16(out.data(), static_cast<std::uint16_t>(service.size())), service),
                  static_cast<std::uint16_t>(method.size())),
            method);
  return out;
}

Result<ResponseHeader> parse_response(std::string_view body, std::string_view& payload) {
  ResponseHeader h;
  std::size_t at = 2;
  if (body.size() < 2 || !take_str(body, &at, &h.error_message)) return malformed("RESPONSE");
  h.status = get16(body.data());
  payload = body.substr(at);
  return h;
}

Result<StreamRequestHeader> parse_stream_request(std::string_view body, std::string_view& payload) {
  Reader r(body);
  StreamRequestHeader h;
  h.service = r.str();
  h.method = r.str();
  h.timeout_ms = r.u32();
  h.window = r.u32();
  payload = r.rest();
  if (!r.ok()) return malformed("STREAM_REQUEST");
  return h;
}

Result<std::uint32_t> parse_window_update(std::string_view body) {
  Reader r(body);
  const std::uint32_t increment = r.u32();
  if (!r.ok() || !r.at_end() || increment == 0) return malformed("WINDOW_UPDATE");
  return increment;
}

}  // namespace authrpc::wire
