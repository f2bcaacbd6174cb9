// Fuzz target: the wire layer a server runs on every byte a client sends
// before and after authentication (rpc/wire.h, rpc/messages.h,
// rpc/frame_channel.h). The first byte picks the mode:
//   0  the preamble check and the frame header parser, on raw bytes;
//   1  one frame body decoder (the next byte is the frame type), and for a
//      body that decodes, the encoder's bytes must decode to the same value;
//   2+ a connection's byte stream through FrameChannel (chunked reads, large
//      DATA bodies taken with read_body/skip_body), each frame's body handed
//      to its decoder, until the channel reports an error or end of stream.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include <asio/io_context.hpp>

#include "authrpc/rpc/frame_channel.h"
#include "authrpc/rpc/messages.h"
#include "authrpc/rpc/wire.h"
#include "tests/fuzz/fuzz_support.h"

namespace authrpc::fuzz {
namespace {

using wire::FrameType;

void require(bool ok, const char* what) {
  if (!ok) fail(what);
}

// Decodes `body` as a frame of `type`; with `round_trip`, re-encodes what
// decoded and checks the encoder and decoder agree.
void decode_body(std::uint8_t type, std::string_view body, bool round_trip) {
  std::string out;
  std::string_view payload;
  auto body_of = [&out]() -> std::string_view {
    return std::string_view(out).substr(wire::kFrameHeaderSize);
  };
  switch (static_cast<FrameType>(type)) {
    case FrameType::kHello: {
      auto m = wire::parse_hello(body);
      if (!m.ok() || !round_trip) return;
      wire::append_hello(out, *m);
      require(body_of() == body, "HELLO re-encodes differently");
      return;
    }
    case FrameType::kMechanisms: {
      auto m = wire::parse_mechanisms(body);
      if (!m.ok() || !round_trip) return;
      wire::append_mechanisms(out, *m);
      require(body_of() == body, "MECHANISMS re-encodes differently");
      return;
    }
    case FrameType::kAuthChallenge:
    case FrameType::kAuthResponse: {
      auto m = wire::parse_auth_message(body);
      if (!m.ok() || !round_trip) return;
      wire::append_auth_message(out, static_cast<FrameType>(type), m->message);
      require(body_of() == body, "AUTH message re-encodes differently");
      return;
    }
    case FrameType::kAuthSuccess: {
      auto m = wire::parse_auth_success(body);
      if (!m.ok() || !round_trip) return;
      wire::append_auth_success(out, *m);
      require(body_of() == body, "AUTH_SUCCESS re-encodes differently");
      return;
    }
    case FrameType::kError: {
      auto m = wire::parse_error(body);
      if (!m.ok() || !round_trip) return;
      wire::append_error(out, m->code, m->message);
      require(body_of() == body, "ERROR re-encodes differently");
      return;
    }
    case FrameType::kGoAway: {
      auto m = wire::parse_goaway(body);
      if (!m.ok() || !round_trip) return;
      wire::append_goaway(out, *m);
      require(body_of() == body, "GOAWAY re-encodes differently");
      return;
    }
    case FrameType::kRequest: {
      auto h = wire::parse_request(body, payload);
      if (!h.ok() || !round_trip) return;
      wire::append_request(out, 1, *h, payload);
      require(body_of() == body, "REQUEST re-encodes differently");
      return;
    }
    case FrameType::kResponse: {
      auto h = wire::parse_response(body, payload);
      if (!h.ok() || !round_trip) return;
      wire::append_response(out, 1, h->status, h->error_message, payload);
      require(body_of() == body, "RESPONSE re-encodes differently");
      return;
    }
    case FrameType::kStreamRequest: {
      auto h = wire::parse_stream_request(body, payload);
      if (!h.ok() || !round_trip) return;
      wire::append_stream_request(out, 1, *h, payload);
      require(body_of() == body, "STREAM_REQUEST re-encodes differently");
      return;
    }
    case FrameType::kWindowUpdate: {
      auto increment = wire::parse_window_update(body);
      if (!increment.ok() || !round_trip) return;
      wire::append_window_update(out, 1, *increment);
      require(body_of() == body, "WINDOW_UPDATE re-encodes differently");
      return;
    }
    default:
      // PING/PONG bodies are echoed, CANCEL/END_STREAM/SHM_HELLO must be
      // empty, DATA is payload, SHM_RING needs descriptors: nothing to decode.
      return;
  }
}

// A preamble (8 bytes), a frame size limit (3 bytes, plus one), a header.
void raw_header(std::string_view data) {
  if (data.size() < wire::kPreambleSize) return;
  const auto* bytes = reinterpret_cast<const std::uint8_t*>(data.data());
  (void)wire::check_preamble(bytes);
  bytes += wire::kPreambleSize;
  if (data.size() < wire::kPreambleSize + 3 + wire::kFrameHeaderSize) return;
  const std::size_t max = (std::size_t{bytes[0]} << 16 | std::size_t{bytes[1]} << 8 | bytes[2]) + 1;
  auto header = wire::parse_frame_header(bytes + 3, max);
  if (!header.ok()) return;
  require(header->length >= wire::kMinFrameLength, "header length below the minimum");
  require(header->length + wire::kLengthFieldSize <= max, "header length above the limit");
  require(wire::is_known_frame_type(static_cast<std::uint8_t>(header->type)), "unknown type accepted");
  (void)wire::frame_type_name(header->type);
}

void channel(std::string_view data) {
  if (data.size() < 2) return;
  // A limit from 12 bytes (header only) to 64 KiB, and a direct-read
  // threshold for DATA bodies (255: never).
  const std::size_t max_frame = wire::kFrameHeaderSize + static_cast<std::uint8_t>(data[0]) * 256u;
  const std::uint8_t threshold = static_cast<std::uint8_t>(data[1]);
  data.remove_prefix(2);
  auto chunks = take_chunks(data);

  asio::io_context io;
  auto stream = std::make_unique<InputStream>(io.get_executor(), data, std::move(chunks));
  auto ch = std::make_shared<FrameChannel>(std::move(stream), max_frame);
  if (threshold != 255) ch->set_direct_data_threshold(threshold);
  run(io, [](std::shared_ptr<FrameChannel> ch) -> asio::awaitable<int> {
    std::string scratch;
    for (int frames = 0;; ++frames) {
      auto frame = ch->buffered_frame();
      if (!frame) frame = co_await ch->read_frame();
      if (!frame->ok()) co_return frames;
      const auto& f = **frame;
      require(f.header.length + wire::kLengthFieldSize <= ch->max_frame_size(), "frame above the limit");
      if (f.body_pending) {
        require(f.header.type == FrameType::kData, "pending body on a non-DATA frame");
        Status s;
        if (frames % 2 == 0) {
          scratch.resize(f.header.body_size());
          s = co_await ch->read_body(scratch.data());
        } else {
          s = co_await ch->skip_body();
        }
        if (!s.ok()) co_return frames;
        continue;
      }
      require(f.body.size() == f.header.body_size(), "body size differs from the header's");
      decode_body(static_cast<std::uint8_t>(f.header.type), f.body, false);
      // What a server queues in answer (PONG) must not disturb reading.
      if (f.header.type == FrameType::kPing) {
        wire::append_ping(ch->out(), FrameType::kPong, f.body);
        ch->schedule_flush();
      }
    }
  }(ch));
  ch->close();
}

}  // namespace

int fuzz_input(std::uint8_t mode, std::string_view data) {
  if (mode == 0) {
    raw_header(data);
  } else if (mode == 1) {
    if (data.empty()) return 0;
    const auto type = static_cast<std::uint8_t>(data[0]);
    data.remove_prefix(1);
    decode_body(type, data, true);
  } else {
    channel(data);
  }
  return 0;
}

}  // namespace authrpc::fuzz
