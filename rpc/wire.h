// Wire protocol v1: constants, the frame header, and the field encoding used
// inside frame bodies. docs/PROTOCOL.md is the normative description; this
// header and wire.cc implement it. All integers are big-endian.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "authrpc/base/result.h"

namespace authrpc::wire {

// Connection preamble, sent once by the client before its first frame:
// "ARPC", version, flags (0), two reserved zero bytes.
inline constexpr std::array<std::uint8_t, 4> kMagic = {'A', 'R', 'P', 'C'};
inline constexpr std::uint8_t kVersion = 1;
inline constexpr std::size_t kPreambleSize = 8;

// Frame header: u32 length (bytes after this field), u8 type, u8 flags,
// u16 reserved (0), u32 call id.
inline constexpr std::size_t kFrameHeaderSize = 12;
inline constexpr std::size_t kLengthFieldSize = 4;
inline constexpr std::size_t kMinFrameLength = kFrameHeaderSize - kLengthFieldSize;
// Default limit on a whole frame (header included); configurable per side.
inline constexpr std::size_t kDefaultMaxFrameSize = 16 * 1024 * 1024;

enum class FrameType : std::uint8_t {
  // Negotiation (call id 0).
  kHello = 0x01,          // C→S: features, mechanism, first negotiation message
  kMechanisms = 0x02,     // S→C: features, enabled mechanisms in preference order
  kAuthChallenge = 0x03,  // S→C: negotiation message
  kAuthResponse = 0x04,   // C→S: negotiation message
  kAuthSuccess = 0x05,    // S→C: features, final message, authenticated user
  // Connection control (call id 0).
  kError = 0x06,   // either way: fatal connection error; the sender closes
  kGoAway = 0x07,  // S→C: no new calls; in-flight calls finish
  kPing = 0x08,    // either way: echoed as kPong with the same body
  kPong = 0x09,
  // Calls (call id ≠ 0).
  kRequest = 0x10,
  kResponse = 0x11,
  kCancel = 0x12,
  // Streaming calls (call id ≠ 0; docs/PROTOCOL.md section 6, docs/DATAPLANE.md).
  kStreamRequest = 0x20,  // C→S: opens a streaming call (a REQUEST plus the client's window)
  kData = 0x21,           // either way: one message of a streaming call
  kWindowUpdate = 0x22,   // either way: returns flow-control credit
  kEndStream = 0x23,      // C→S: the client has no more messages
  // Shared-memory data plane on unix:// connections (docs/SHM.md, PROTOCOL.md 7).
  kShmHello = 0x30,   // C→S: offers shared memory; the client reads with recvmsg from now on
  kShmAccept = 0x31,  // S→C: u32 status (0: accepted) u32 reserved
  kShmRing = 0x32,    // either way: a stream's ring (geometry; its fds ride on this frame)
  // 0x24–0x2F reserved for streaming calls, 0x33–0x3F for transport upgrades
  // (TLS, shared memory). Receiving a reserved or unknown type is a protocol error.
};

std::string_view frame_type_name(FrameType type) noexcept;
constexpr bool is_known_frame_type(std::uint8_t type) noexcept {
  return (type >= 0x01 && type <= 0x09) || (type >= 0x10 && type <= 0x12) ||
         (type >= 0x20 && type <= 0x23) || (type >= 0x30 && type <= 0x32);
}
// The connection-level frames (negotiation, ERROR, GOAWAY, PING/PONG,
// SHM_HELLO/SHM_ACCEPT): their call id is 0, and a receiver treats any other
// as a PROTOCOL_ERROR, as it does a call frame with call id 0.
constexpr bool is_connection_frame_type(FrameType type) noexcept {
  const auto t = static_cast<std::uint8_t>(type);
  return (t >= 0x01 && t <= 0x09) || t == 0x30 || t == 0x31;
}

// Feature flags exchanged in kHello / kMechanisms / kAuthSuccess. No flags are
// defined in v1; unknown bits are ignored by receivers.
inline constexpr std::uint32_t kNoFeatures = 0;
// HELLO: a `str do_as` follows the message (the client asks to act as that
// user); AUTH_SUCCESS: the server honored it (docs/PROTOCOL.md, "Proxy users").
inline constexpr std::uint32_t kFeatureDoAs = 0x1;
// AUTH_SUCCESS: the server understands streaming calls (frames 0x20–0x23).
// A client opens streams only on connections whose AUTH_SUCCESS set it.
inline constexpr std::uint32_t kFeatureStreams = 0x2;
// AUTH_SUCCESS, unix:// only: the server understands SHM_HELLO (0x30–0x32,
// docs/PROTOCOL.md section 7); a client may offer shared memory.
inline constexpr std::uint32_t kFeatureShm = 0x4;

// The smallest limit a server may set on frames before AUTH_SUCCESS
// (ServerOptions::max_negotiation_frame_size): requests no larger may be
// pipelined behind negotiation; larger ones wait for AUTH_SUCCESS, because a
// server that drops pipelined requests reads them under that limit.
inline constexpr std::size_t kMinNegotiationFrameSize = 4096;

struct FrameHeader {
  std::uint32_t length = 0;  // bytes after the length field
  FrameType type = FrameType::kError;
  std::uint8_t flags = 0;
  std::uint32_t call_id = 0;

  std::size_t body_size() const noexcept { return length - kMinFrameLength; }
};

// Preamble bytes for version kVersion.
std::array<std::uint8_t, kPreambleSize> make_preamble() noexcept;
// kUnsupportedVersion for a known magic with another version, kProtocolError
// for anything else.
Status check_preamble(const std::uint8_t* bytes) noexcept;

// Parses the fixed header. Errors: kFrameTooLarge (length above limit),
// kProtocolError (length too small, unknown type, reserved bits set).
Result<FrameHeader> parse_frame_header(const std::uint8_t* bytes, std::size_t max_frame_size);
// The same checks without building an error: true and `out` filled for a
// valid header, false for any header parse_frame_header() refuses (ask it
// why). Inline: every frame read takes this path, often twice (is a whole
// frame buffered, then take it), and a Result costs more than the checks.
inline bool decode_frame_header(const std::uint8_t* bytes, std::size_t max_frame_size,
                                FrameHeader& out) noexcept {
  const std::uint32_t length = (std::uint32_t{bytes[0]} << 24) | (std::uint32_t{bytes[1]} << 16) |
                               (std::uint32_t{bytes[2]} << 8) | std::uint32_t{bytes[3]};
  if (length < kMinFrameLength || std::size_t{length} + kLengthFieldSize > max_frame_size ||
      !is_known_frame_type(bytes[4]) || bytes[6] != 0 || bytes[7] != 0) {
    return false;
  }
  out.length = length;
  out.type = static_cast<FrameType>(bytes[4]);
  out.flags = bytes[5];
  out.call_id = (std::uint32_t{bytes[8]} << 24) | (std::uint32_t{bytes[9]} << 16) |
                (std::uint32_t{bytes[10]} << 8) | std::uint32_t{bytes[11]};
  return true;
}
// Writes a header for a body of body_size bytes into out[0..kFrameHeaderSize).
void write_frame_header(std::uint8_t* out, FrameType type, std::uint32_t call_id,
                        std::size_t body_size) noexcept;

// Appends fields to a growing byte string (a frame under construction).
class Writer {
 public:
  explicit Writer(std::string& out) : out_(out) {}
  void u8(std::uint8_t v);
  void u16(std::uint16_t v);
  void u32(std::uint32_t v);
  void str(std::string_view s);    // u16 length + bytes (≤ 65535)
  void bytes(std::string_view b);  // u32 length + bytes
  void raw(std::string_view b);    // bytes with no length prefix

 private:
  std::string& out_;
};

// Reads fields from a frame body; any read past the end sets a sticky error.
class Reader {
 public:
  explicit Reader(std::string_view in) : in_(in) {}
  std::uint8_t u8();
  std::uint16_t u16();
  std::uint32_t u32();
  std::string_view str();
  std::string_view bytes();
  std::string_view rest();  // everything not yet read
  bool ok() const noexcept { return ok_; }
  bool at_end() const noexcept { return pos_ == in_.size(); }

 private:
  bool take(std::size_t n);
  std::string_view in_;
  std::size_t pos_ = 0;
  bool ok_ = true;
};

}  // namespace authrpc::wire
