#include "authrpc/rpc/messages.h"

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
  append_frame(out, FrameType::kRequest, call_id, [&](Writer& w) {
    w.str(h.service);
    w.str(h.method);
    w.u32(h.timeout_ms);
    w.raw(payload);
  });
}

void append_response(std::string& out, std::uint32_t call_id, std::uint16_t status,
                     std::string_view error_message, std::string_view payload) {
  append_frame(out, FrameType::kResponse, call_id, [&](Writer& w) {
    w.u16(status);
    w.str(error_message);
    w.raw(payload);
  });
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
  Reader r(body);
  RequestHeader h;
  h.service = r.str();
  h.method = r.str();
  h.timeout_ms = r.u32();
  payload = r.rest();
  if (!r.ok()) return malformed("REQUEST");
  return h;
}

Result<ResponseHeader> parse_response(std::string_view body, std::string_view& payload) {
  Reader r(body);
  ResponseHeader h;
  h.status = r.u16();
  h.error_message = r.str();
  payload = r.rest();
  if (!r.ok()) return malformed("RESPONSE");
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
