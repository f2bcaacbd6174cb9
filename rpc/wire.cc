#include "authrpc/rpc/wire.h"

#include <cstring>

namespace authrpc::wire {
namespace {

std::uint16_t load16(const std::uint8_t* p) noexcept {
  return static_cast<std::uint16_t>((p[0] << 8) | p[1]);
}
std::uint32_t load32(const std::uint8_t* p) noexcept {
  return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) |
         std::uint32_t{p[3]};
}
void store32(std::uint8_t* p, std::uint32_t v) noexcept {
  p[0] = static_cast<std::uint8_t>(v >> 24);
  p[1] = static_cast<std::uint8_t>(v >> 16);
  p[2] = static_cast<std::uint8_t>(v >> 8);
  p[3] = static_cast<std::uint8_t>(v);
}

}  // namespace

std::string_view frame_type_name(FrameType type) noexcept {
  switch (type) {
    case FrameType::kHello: return "HELLO";
    case FrameType::kMechanisms: return "MECHANISMS";
    case FrameType::kAuthChallenge: return "AUTH_CHALLENGE";
    case FrameType::kAuthResponse: return "AUTH_RESPONSE";
    case FrameType::kAuthSuccess: return "AUTH_SUCCESS";
    case FrameType::kError: return "ERROR";
    case FrameType::kGoAway: return "GOAWAY";
    case FrameType::kPing: return "PING";
    case FrameType::kPong: return "PONG";
    case FrameType::kRequest: return "REQUEST";
    case FrameType::kResponse: return "RESPONSE";
    case FrameType::kCancel: return "CANCEL";
    case FrameType::kStreamRequest: return "STREAM_REQUEST";
    case FrameType::kData: return "DATA";
    case FrameType::kWindowUpdate: return "WINDOW_UPDATE";
    case FrameType::kEndStream: return "END_STREAM";
    case FrameType::kShmHello: return "SHM_HELLO";
    case FrameType::kShmAccept: return "SHM_ACCEPT";
    case FrameType::kShmRing: return "SHM_RING";
  }
  return "UNKNOWN";
}

std::array<std::uint8_t, kPreambleSize> make_preamble() noexcept {
  return {kMagic[0], kMagic[1], kMagic[2], kMagic[3], kVersion, 0, 0, 0};
}

Status check_preamble(const std::uint8_t* bytes) noexcept {
  if (std::memcmp(bytes, kMagic.data(), kMagic.size()) != 0) {
    return {Errc::kProtocolError, "bad preamble: not an authrpc client"};
  }
  if (bytes[4] != kVersion) {
    return {Errc::kUnsupportedVersion,
            "protocol version " + std::to_string(bytes[4]) + " not supported (want 1)"};
  }
  if (bytes[5] != 0 || bytes[6] != 0 || bytes[7] != 0) {
    return {Errc::kProtocolError, "bad preamble: reserved bytes must be zero"};
  }
  return {};
}

Result<FrameHeader> parse_frame_header(const std::uint8_t* bytes, std::size_t max_frame_size) {
  FrameHeader h;
  h.length = load32(bytes);
  if (h.length < kMinFrameLength) {
    return Status(Errc::kProtocolError, "frame length " + std::to_string(h.length) + " too small");
  }
  if (std::size_t{h.length} + kLengthFieldSize > max_frame_size) {
    return Status(Errc::kFrameTooLarge, "frame of " + std::to_string(h.length + kLengthFieldSize) +
                                            " bytes exceeds limit " + std::to_string(max_frame_size));
  }
  if (!is_known_frame_type(bytes[4])) {
    return Status(Errc::kProtocolError, "unknown frame type " + std::to_string(bytes[4]));
  }
  h.type = static_cast<FrameType>(bytes[4]);
  h.flags = bytes[5];
  if (load16(bytes + 6) != 0) {
    return Status(Errc::kProtocolError, "reserved header bits set");
  }
  h.call_id = load32(bytes + 8);
  return h;
}

void write_frame_header(std::uint8_t* out, FrameType type, std::uint32_t call_id,
                        std::size_t body_size) noexcept {
  store32(out, static_cast<std::uint32_t>(body_size + kMinFrameLength));
  out[4] = static_cast<std::uint8_t>(type);
  out[5] = 0;
  out[6] = 0;
  out[7] = 0;
  store32(out + 8, call_id);
}

void Writer::u8(std::uint8_t v) { out_.push_back(static_cast<char>(v)); }
void Writer::u16(std::uint16_t v) {
  out_.push_back(static_cast<char>(v >> 8));
  out_.push_back(static_cast<char>(v));
}
void Writer::u32(std::uint32_t v) {
  std::uint8_t b[4];
  store32(b, v);
  out_.append(reinterpret_cast<const char*>(b), 4);
}
void Writer::str(std::string_view s) {
  const auto n = s.size() > 0xFFFF ? std::size_t{0xFFFF} : s.size();
  u16(static_cast<std::uint16_t>(n));
  out_.append(s.data(), n);
}
void Writer::bytes(std::string_view b) {
  u32(static_cast<std::uint32_t>(b.size()));
  out_.append(b);
}
void Writer::raw(std::string_view b) { out_.append(b); }

bool Reader::take(std::size_t n) {
  if (!ok_ || in_.size() - pos_ < n) {
    ok_ = false;
    return false;
  }
  return true;
}
std::uint8_t Reader::u8() {
  if (!take(1)) return 0;
  return static_cast<std::uint8_t>(in_[pos_++]);
}
std::uint16_t Reader::u16() {
  if (!take(2)) return 0;
  const auto v = load16(reinterpret_cast<const std::uint8_t*>(in_.data() + pos_));
  pos_ += 2;
  return v;
}
std::uint32_t Reader::u32() {
  if (!take(4)) return 0;
  const auto v = load32(reinterpret_cast<const std::uint8_t*>(in_.data() + pos_));
  pos_ += 4;
  return v;
}
std::string_view Reader::str() {
  const std::size_t n = u16();
  if (!take(n)) return {};
  auto s = in_.substr(pos_, n);
  pos_ += n;
  return s;
}
std::string_view Reader::bytes() {
  const std::size_t n = u32();
  if (!take(n)) return {};
  auto s = in_.substr(pos_, n);
  pos_ += n;
  return s;
}
std::string_view Reader::rest() {
  if (!ok_) return {};
  auto s = in_.substr(pos_);
  pos_ = in_.size();
  return s;
}

}  // namespace authrpc::wire
