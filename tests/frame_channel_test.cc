// Unit tests for rpc/frame_channel.h over a real connected Unix socket pair
// (abstract namespace, made with the library's own Unix transport). One end
// is wrapped in a FrameChannel; the test drives the other end as a raw
// ByteStream so that it controls every byte and every write boundary.
#include "authrpc/rpc/frame_channel.h"

#include <gtest/gtest.h>

#include <optional>
#include <unistd.h>

#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <asio/redirect_error.hpp>
#include <asio/steady_timer.hpp>
#include <asio/use_awaitable.hpp>
#include <atomic>
#include <chrono>
#include <exception>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "authrpc/rpc/messages.h"
#include "authrpc/rpc/transport.h"
#include "tests/testing/test_support.h"

namespace authrpc {
namespace {

using namespace std::chrono_literals;
using wire::FrameType;

// A ByteStream decorator that counts write_all() calls (to observe coalescing).
class CountingStream final : public ByteStream {
 public:
  explicit CountingStream(std::unique_ptr<ByteStream> inner, int* writes)
      : inner_(std::move(inner)), writes_(writes) {}
  asio::awaitable<std::size_t> read_some(asio::mutable_buffer buffer,
                                         std::error_code& ec) override {
    co_return co_await inner_->read_some(buffer, ec);
  }
  void write_all(std::span<const asio::const_buffer> buffers, WriteCompletion& done) override {
    ++*writes_;
    inner_->write_all(buffers, done);
  }
  void shutdown_send() noexcept override { inner_->shutdown_send(); }
  void close() noexcept override { inner_->close(); }
  const std::string& peer_address() const override { return inner_->peer_address(); }
  Endpoint::Scheme scheme() const noexcept override { return inner_->scheme(); }
  const asio::any_io_executor& executor() const noexcept override { return inner_->executor(); }

 private:
  std::unique_ptr<ByteStream> inner_;
  int* writes_;
};

class FrameChannelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto pair = testing::ConnectUnixPair(io_, "utest-fc");
    ASSERT_TRUE(pair.ok()) << pair.status().to_string();
    local_ = std::move(pair->accepted);
    peer_ = std::move(pair->connected);
  }

  void TearDown() override {
    channel_.reset();
    if (peer_) peer_->close();
    io_.restart();
    io_.run_for(1s);
  }

  // Wraps the local end in a FrameChannel (optionally counting writes).
  std::shared_ptr<FrameChannel> make_channel(std::size_t max_frame_size = 1 << 24,
                                             int* write_counter = nullptr) {
    std::unique_ptr<ByteStream> s = std::move(local_);
    if (write_counter) s = std::make_unique<CountingStream>(std::move(s), write_counter);
    channel_ = std::make_shared<FrameChannel>(std::move(s), max_frame_size);
    return channel_;
  }

  // Spawns coroutines and runs the loop until all of them finished (or a
  // generous bound passed). Returns false on timeout.
  bool run(std::vector<std::function<asio::awaitable<void>()>> tasks) {
    int remaining = static_cast<int>(tasks.size());
    for (auto& t : tasks) {
      asio::co_spawn(io_, std::move(t), [&remaining](std::exception_ptr e) {
        --remaining;
        if (e) std::rethrow_exception(e);
      });
    }
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    while (remaining > 0 && std::chrono::steady_clock::now() < deadline) {
      io_.run_for(50ms);
      if (io_.stopped()) io_.restart();
    }
    if (remaining == 0) return true;
    // Stuck: close both ends so the coroutines (which reference the caller's
    // locals) finish while those locals still exist.
    if (channel_) channel_->close();
    if (peer_) peer_->close();
    io_.run_for(2s);
    io_.restart();
    return false;
  }

  // Raw peer helpers.
  asio::awaitable<std::error_code> peer_write(std::string_view bytes) {
    struct Done final : WriteCompletion {
      explicit Done(asio::steady_timer& t) : timer(t) {}
      void write_done(std::error_code e) override {
        ec = e;
        timer.cancel();
      }
      asio::steady_timer& timer;
      std::optional<std::error_code> ec;
    };
    asio::steady_timer timer(peer_->executor(), asio::steady_timer::time_point::max());
    Done done(timer);
    const asio::const_buffer b(bytes.data(), bytes.size());
    peer_->write_all(std::span(&b, 1), done);
    while (!done.ec) {
      std::error_code ignored;
      co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ignored));
    }
    co_return *done.ec;
  }
  // Reads until end of stream (or error); returns everything read.
  asio::awaitable<std::string> peer_read_to_eof(std::error_code* last = nullptr) {
    std::string all;
    std::vector<char> buf(64 * 1024);
    for (;;) {
      std::error_code ec;
      const auto n = co_await peer_->read_some(asio::buffer(buf), ec);
      all.append(buf.data(), n);
      if (ec) {
        if (last) *last = ec;
        co_return all;
      }
    }
  }
  asio::awaitable<void> pause(std::chrono::milliseconds d) {
    asio::steady_timer t(io_, d);
    co_await t.async_wait(asio::use_awaitable);
  }

  asio::io_context io_{1};
  std::unique_ptr<ByteStream> local_;
  std::unique_ptr<ByteStream> peer_;
  std::shared_ptr<FrameChannel> channel_;
};

// What a test observed of one read_frame().
struct Got {
  Status status;
  FrameType type = FrameType::kError;
  std::uint32_t call_id = 0;
  std::string body;
};

asio::awaitable<Got> read_one(FrameChannel& ch) {
  auto f = co_await ch.read_frame();
  Got g;
  if (!f.ok()) {
    g.status = f.status();
    co_return g;
  }
  g.type = f->header.type;
  g.call_id = f->header.call_id;
  g.body = std::string(f->body);
  co_return g;
}

std::string ping_frame(std::string_view body) {
  std::string out;
  wire::append_ping(out, FrameType::kPing, body);
  return out;
}

std::string request_frame(std::uint32_t id, std::string_view payload) {
  std::string out;
  wire::append_request(out, id, {"svc", "m", 0}, payload);
  return out;
}

TEST_F(FrameChannelTest, FrameSplitAcrossOneByteWritesIsReassembled) {
  auto ch = make_channel();
  const std::string a = request_frame(1, "first payload");
  const std::string b = ping_frame("second");
  const std::string bytes = a + b;
  std::vector<Got> got;
  ASSERT_TRUE(run({
      [&]() -> asio::awaitable<void> {
        for (char c : bytes) {
          EXPECT_FALSE(co_await peer_write(std::string_view(&c, 1)));
          co_await pause(1ms);  // let the reader see each byte on its own
        }
      },
      [&]() -> asio::awaitable<void> {
        got.push_back(co_await read_one(*ch));
        got.push_back(co_await read_one(*ch));
      },
  }));
  ASSERT_EQ(got.size(), 2u);
  ASSERT_TRUE(got[0].status.ok()) << got[0].status.to_string();
  EXPECT_EQ(got[0].type, FrameType::kRequest);
  EXPECT_EQ(got[0].call_id, 1u);
  std::string_view payload;
  auto req = wire::parse_request(got[0].body, payload);
  ASSERT_TRUE(req.ok());
  EXPECT_EQ(req->service, "svc");
  EXPECT_EQ(payload, "first payload");
  ASSERT_TRUE(got[1].status.ok()) << got[1].status.to_string();
  EXPECT_EQ(got[1].type, FrameType::kPing);
  EXPECT_EQ(got[1].body, "second");
}

TEST_F(FrameChannelTest, ManyFramesInOneWriteComeOutInOrder) {
  auto ch = make_channel();
  constexpr int kFrames = 200;
  std::string bytes;
  for (int i = 1; i <= kFrames; ++i) {
    wire::append_request(bytes, static_cast<std::uint32_t>(i), {"s", "m", 0},
                         "payload-" + std::to_string(i));
  }
  ASSERT_LT(bytes.size(), 16u * 1024);  // fits the read buffer once it has grown
  std::vector<Got> got;
  std::vector<bool> buffered;
  ASSERT_TRUE(run({[&]() -> asio::awaitable<void> {
    EXPECT_FALSE(co_await peer_write(bytes));
    peer_->shutdown_send();
    EXPECT_FALSE(ch->frame_buffered());  // nothing read yet
    for (int i = 0; i <= kFrames; ++i) {
      got.push_back(co_await read_one(*ch));
      buffered.push_back(ch->frame_buffered());
    }
  }}));
  ASSERT_EQ(got.size(), static_cast<std::size_t>(kFrames + 1));
  int reads_between_frames = 0;
  for (int i = 0; i < kFrames; ++i) {
    ASSERT_TRUE(got[i].status.ok()) << i << ": " << got[i].status.to_string();
    EXPECT_EQ(got[i].call_id, static_cast<std::uint32_t>(i + 1));
    std::string_view payload;
    ASSERT_TRUE(wire::parse_request(got[i].body, payload).ok());
    EXPECT_EQ(payload, "payload-" + std::to_string(i + 1));
    if (i + 1 < kFrames && !buffered[i]) ++reads_between_frames;
  }
  // The first read fills the inline buffer, the next the small first heap
  // buffer; the next, into the grown buffer, brings the rest: at most two
  // more reads between frames, and after the last frame nothing is buffered.
  EXPECT_LE(reads_between_frames, 2);
  EXPECT_FALSE(buffered[kFrames - 1]);
  EXPECT_EQ(got[kFrames].status.code, Errc::kConnectionClosed);
}

TEST_F(FrameChannelTest, FrameMuchLargerThanTheInitialBufferArrivesIntact) {
  auto ch = make_channel();
  std::string payload(1 << 20, '\0');
  for (std::size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<char>(i * 131 + 7);
  // A small frame before and after: the buffer must grow and compact correctly.
  const std::string bytes = ping_frame("before") + request_frame(9, payload) + ping_frame("after");
  std::vector<Got> got;
  ASSERT_TRUE(run({
      [&]() -> asio::awaitable<void> { EXPECT_FALSE(co_await peer_write(bytes)); },
      [&]() -> asio::awaitable<void> {
        for (int i = 0; i < 3; ++i) got.push_back(co_await read_one(*ch));
      },
  }));
  ASSERT_EQ(got.size(), 3u);
  for (const auto& g : got) ASSERT_TRUE(g.status.ok()) << g.status.to_string();
  EXPECT_EQ(got[0].body, "before");
  EXPECT_EQ(got[1].call_id, 9u);
  std::string_view received;
  ASSERT_TRUE(wire::parse_request(got[1].body, received).ok());
  EXPECT_EQ(received.size(), payload.size());
  EXPECT_TRUE(received == payload) << "1 MiB payload corrupted";
  EXPECT_EQ(got[2].body, "after");
}

TEST_F(FrameChannelTest, SeveralLargeFramesBackToBack) {
  auto ch = make_channel();
  std::vector<std::string> payloads;
  std::string bytes;
  for (int i = 0; i < 5; ++i) {
    payloads.emplace_back(20000 + i * 7777, static_cast<char>('a' + i));
    bytes += request_frame(static_cast<std::uint32_t>(i + 1), payloads.back());
  }
  std::vector<Got> got;
  ASSERT_TRUE(run({
      [&]() -> asio::awaitable<void> {
        // Odd-sized chunks so frame boundaries fall anywhere in a read.
        for (std::size_t pos = 0; pos < bytes.size(); pos += 3001) {
          EXPECT_FALSE(co_await peer_write(std::string_view(bytes).substr(pos, 3001)));
        }
      },
      [&]() -> asio::awaitable<void> {
        for (int i = 0; i < 5; ++i) got.push_back(co_await read_one(*ch));
      },
  }));
  ASSERT_EQ(got.size(), 5u);
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(got[i].status.ok()) << got[i].status.to_string();
    EXPECT_EQ(got[i].call_id, static_cast<std::uint32_t>(i + 1));
    std::string_view p;
    ASSERT_TRUE(wire::parse_request(got[i].body, p).ok());
    EXPECT_TRUE(p == payloads[i]) << "frame " << i;
  }
}

TEST_F(FrameChannelTest, OversizeHeaderIsFrameTooLarge) {
  auto ch = make_channel(4096);
  std::uint8_t header[wire::kFrameHeaderSize];
  wire::write_frame_header(header, FrameType::kRequest, 1, 4096);  // 4108 bytes in all
  Got got;
  ASSERT_TRUE(run({[&]() -> asio::awaitable<void> {
    // Only the header is sent: the limit is enforced before the body arrives.
    EXPECT_FALSE(co_await peer_write(std::string_view(reinterpret_cast<char*>(header), sizeof header)));
    got = co_await read_one(*ch);
  }}));
  EXPECT_EQ(got.status.code, Errc::kFrameTooLarge) << got.status.to_string();
}

TEST_F(FrameChannelTest, FrameExactlyAtTheLimitIsAccepted) {
  auto ch = make_channel(4096);
  const std::string payload(4096 - wire::kFrameHeaderSize - 2 - 2 - 4, 'z');  // svc "", m ""
  std::string frame;
  wire::append_request(frame, 3, {"", "", 0}, payload);
  ASSERT_EQ(frame.size(), 4096u);
  Got got;
  ASSERT_TRUE(run({
      [&]() -> asio::awaitable<void> { EXPECT_FALSE(co_await peer_write(frame)); },
      [&]() -> asio::awaitable<void> { got = co_await read_one(*ch); },
  }));
  ASSERT_TRUE(got.status.ok()) << got.status.to_string();
  EXPECT_EQ(got.body.size(), 4096u - wire::kFrameHeaderSize);
}

TEST_F(FrameChannelTest, BadHeadersAreProtocolErrors) {
  auto ch = make_channel();
  std::string frame = ping_frame("x");
  frame[4] = 0x2F;  // reserved streaming type
  Got got;
  ASSERT_TRUE(run({[&]() -> asio::awaitable<void> {
    EXPECT_FALSE(co_await peer_write(frame));
    got = co_await read_one(*ch);
  }}));
  EXPECT_EQ(got.status.code, Errc::kProtocolError) << got.status.to_string();
}

TEST_F(FrameChannelTest, EofBeforeAnyFrameIsConnectionClosed) {
  auto ch = make_channel();
  Got got;
  ASSERT_TRUE(run({[&]() -> asio::awaitable<void> {
    peer_->shutdown_send();
    got = co_await read_one(*ch);
  }}));
  EXPECT_EQ(got.status.code, Errc::kConnectionClosed) << got.status.to_string();
}

// A whole frame, then `keep` bytes of a second one, then EOF: none of the
// second frame is the connection's end, part of it a protocol error.
struct TruncationCase {
  const char* name;
  std::size_t keep;  // bytes of the second frame sent before EOF
  Errc second = Errc::kProtocolError;
};

void PrintTo(const TruncationCase& c, std::ostream* os) { *os << c.name; }

class FrameChannelTruncationTest : public FrameChannelTest,
                                   public ::testing::WithParamInterface<TruncationCase> {};

TEST_P(FrameChannelTruncationTest, EofAfterAFrameIsTyped) {
  auto ch = make_channel();
  const std::string second = request_frame(2, std::string(100, 'p'));
  ASSERT_LT(GetParam().keep, second.size());
  std::vector<Got> got;
  ASSERT_TRUE(run({[&]() -> asio::awaitable<void> {
    EXPECT_FALSE(co_await peer_write(ping_frame("complete") + second.substr(0, GetParam().keep)));
    peer_->shutdown_send();
    got.push_back(co_await read_one(*ch));
    got.push_back(co_await read_one(*ch));
  }}));
  ASSERT_EQ(got.size(), 2u);
  ASSERT_TRUE(got[0].status.ok()) << got[0].status.to_string();
  EXPECT_EQ(got[0].body, "complete");
  EXPECT_EQ(got[1].status.code, GetParam().second) << got[1].status.to_string();
}

INSTANTIATE_TEST_SUITE_P(Table, FrameChannelTruncationTest,
                         ::testing::Values(TruncationCase{"between_frames", 0, Errc::kConnectionClosed},
                                           TruncationCase{"one_header_byte", 1},
                                           TruncationCase{"length_field_only", 4},
                                           TruncationCase{"header_minus_one", 11},
                                           TruncationCase{"header_only", 12},
                                           TruncationCase{"half_body", 60},
                                           TruncationCase{"all_but_last_byte", 123}),
                         [](const auto& tp) { return std::string(tp.param.name); });

TEST_F(FrameChannelTest, ReadExactThenFrames) {
  auto ch = make_channel();
  const auto preamble = wire::make_preamble();
  const std::string bytes =
      std::string(reinterpret_cast<const char*>(preamble.data()), preamble.size()) +
      ping_frame("after preamble");
  std::uint8_t got_preamble[wire::kPreambleSize] = {};
  Status preamble_status;
  Got got;
  ASSERT_TRUE(run({[&]() -> asio::awaitable<void> {
    EXPECT_FALSE(co_await peer_write(bytes));
    preamble_status = co_await ch->read_exact(got_preamble, sizeof got_preamble);
    got = co_await read_one(*ch);
  }}));
  ASSERT_TRUE(preamble_status.ok()) << preamble_status.to_string();
  EXPECT_TRUE(wire::check_preamble(got_preamble).ok());
  ASSERT_TRUE(got.status.ok()) << got.status.to_string();
  EXPECT_EQ(got.body, "after preamble");
}

TEST_F(FrameChannelTest, ReadExactAtEofIsConnectionClosed) {
  auto ch = make_channel();
  std::uint8_t buf[wire::kPreambleSize];
  Status s;
  ASSERT_TRUE(run({[&]() -> asio::awaitable<void> {
    EXPECT_FALSE(co_await peer_write("ARP"));
    peer_->shutdown_send();
    s = co_await ch->read_exact(buf, sizeof buf);
  }}));
  EXPECT_EQ(s.code, Errc::kConnectionClosed) << s.to_string();
}

TEST_F(FrameChannelTest, FramesQueuedInOneTurnLeaveInOneWrite) {
  int writes = 0;
  auto ch = make_channel(1 << 24, &writes);
  std::string expected;
  for (std::uint32_t i = 1; i <= 10; ++i) {
    const std::size_t before = ch->out().size();
    wire::append_response(ch->out(), i, 0, "", "response " + std::to_string(i));
    expected += ch->out().substr(before);
    ch->schedule_flush();  // each call in the same turn: still one write
  }
  EXPECT_EQ(ch->pending_bytes(), expected.size());
  std::string received;
  ASSERT_TRUE(run({
      [&]() -> asio::awaitable<void> {
        co_await ch->wait_pending_below(0);
        ch->shutdown_after_flush();
      },
      [&]() -> asio::awaitable<void> { received = co_await peer_read_to_eof(); },
  }));
  EXPECT_EQ(writes, 1);
  EXPECT_EQ(received, expected);
  EXPECT_EQ(ch->pending_bytes(), 0u);
  EXPECT_FALSE(ch->write_error());
}

TEST_F(FrameChannelTest, FramesQueuedWhileWritingLeaveInTheNextWrite) {
  int writes = 0;
  auto ch = make_channel(1 << 24, &writes);
  std::string expected;
  auto queue = [&](std::uint32_t id) {
    const std::size_t before = ch->out().size();
    wire::append_response(ch->out(), id, 0, "", "r" + std::to_string(id));
    expected += ch->out().substr(before);
    ch->schedule_flush();
  };
  std::string received;
  ASSERT_TRUE(run({
      [&]() -> asio::awaitable<void> {
        queue(1);
        queue(2);
        co_await ch->wait_pending_below(0);
        queue(3);
        queue(4);
        queue(5);
        co_await ch->wait_pending_below(0);
        ch->close_after_flush();
      },
      [&]() -> asio::awaitable<void> { received = co_await peer_read_to_eof(); },
  }));
  EXPECT_EQ(writes, 2);
  EXPECT_EQ(received, expected);
}

TEST_F(FrameChannelTest, CloseAfterFlushDeliversQueuedBytesThenEof) {
  auto ch = make_channel();
  std::string expected;
  for (std::uint32_t i = 1; i <= 3; ++i) {
    const std::size_t before = ch->out().size();
    wire::append_error(ch->out(), 100 + i, "bye " + std::to_string(i));
    expected += ch->out().substr(before);
  }
  // A large frame too, bigger than a socket buffer, so the close has to wait
  // for several partial writes.
  {
    const std::size_t before = ch->out().size();
    wire::append_response(ch->out(), 7, 0, "", std::string(2 << 20, 'L'));
    expected += ch->out().substr(before);
  }
  ch->close_after_flush();
  EXPECT_FALSE(ch->closed());  // not before the bytes are out
  std::string received;
  std::error_code last;
  ASSERT_TRUE(run({[&]() -> asio::awaitable<void> {
    received = co_await peer_read_to_eof(&last);
  }}));
  EXPECT_EQ(last, asio::error::eof) << last.message();
  EXPECT_EQ(received.size(), expected.size());
  EXPECT_TRUE(received == expected);
  EXPECT_TRUE(ch->closed());
  EXPECT_FALSE(ch->write_error());
}

TEST_F(FrameChannelTest, CloseAfterFlushWithNothingQueuedClosesAtOnce) {
  auto ch = make_channel();
  ch->close_after_flush();
  EXPECT_TRUE(ch->closed());
  std::string received;
  ASSERT_TRUE(run({[&]() -> asio::awaitable<void> { received = co_await peer_read_to_eof(); }}));
  EXPECT_EQ(received, "");
}

TEST_F(FrameChannelTest, CloseDropsQueuedBytes) {
  auto ch = make_channel();
  wire::append_error(ch->out(), 100, "never sent");
  ch->close();
  EXPECT_TRUE(ch->closed());
  EXPECT_EQ(ch->pending_bytes(), 0u);
  ch->schedule_flush();  // no effect once closed
  std::string received;
  ASSERT_TRUE(run({[&]() -> asio::awaitable<void> { received = co_await peer_read_to_eof(); }}));
  EXPECT_EQ(received, "");
}

TEST_F(FrameChannelTest, ShutdownAfterFlushKeepsReading) {
  auto ch = make_channel();
  const std::size_t start = ch->out().size();
  wire::append_goaway(ch->out(), {5, "going away"});
  const std::string sent = ch->out().substr(start);
  ch->shutdown_after_flush();
  std::string received;
  Got reply;
  ASSERT_TRUE(run({
      [&]() -> asio::awaitable<void> {
        received = co_await peer_read_to_eof();
        // Our side saw EOF; the channel still reads what we send back.
        EXPECT_FALSE(co_await peer_write(ping_frame("still here")));
      },
      [&]() -> asio::awaitable<void> { reply = co_await read_one(*ch); },
  }));
  EXPECT_EQ(received, sent);
  ASSERT_TRUE(reply.status.ok()) << reply.status.to_string();
  EXPECT_EQ(reply.body, "still here");
  EXPECT_FALSE(ch->closed());
}

TEST_F(FrameChannelTest, WriteToAClosedPeerSetsWriteErrorButStillReadsWhatThePeerSent) {
  auto ch = make_channel();
  // The peer's last words, then it goes away.
  ASSERT_TRUE(run({[&]() -> asio::awaitable<void> {
    std::string error_frame;
    wire::append_error(error_frame, 104, "go away");
    EXPECT_FALSE(co_await peer_write(error_frame));
  }}));
  peer_->close();
  // Enough bytes that the write cannot vanish into a socket buffer unnoticed.
  wire::append_response(ch->out(), 1, 0, "", std::string(1 << 20, 'w'));
  ch->schedule_flush();
  ASSERT_TRUE(run({[&]() -> asio::awaitable<void> { co_await ch->wait_pending_below(0); }}));
  EXPECT_TRUE(ch->write_error());
  EXPECT_FALSE(ch->closed()) << "a failed write must not hide what the peer sent";
  ASSERT_TRUE(run({[&]() -> asio::awaitable<void> {
    auto frame = co_await ch->read_frame();
    EXPECT_TRUE(frame.ok()) << frame.status().to_string();
    if (frame.ok()) {
      EXPECT_EQ(frame->header.type, wire::FrameType::kError);
    }
  }}));
}

// Parking (ServerConnection): an idle reader interrupted gives up its read
// at once; a plain wait on the stream then sees the next frame arrive, and
// the frame is read whole afterwards. Never while output is being written
// (the stream's cancel would end the write too).
TEST_F(FrameChannelTest, AnInterruptedIdleReaderParksAndAWaitSeesTheNextFrame) {
  auto ch = make_channel();
  struct Woken final : ReadReady {
    explicit Woken(asio::io_context& io) : timer(io, asio::steady_timer::time_point::max()) {}
    void readable(std::error_code e) override {
      ec = e;
      timer.cancel();
    }
    asio::steady_timer timer;
    std::optional<std::error_code> ec;
  };
  auto woken = std::make_shared<Woken>(io_);
  Got interrupted, after;
  bool interrupted_flag = false;
  ASSERT_TRUE(run({
      [&]() -> asio::awaitable<void> {
        interrupted = co_await read_one(*ch);
        interrupted_flag = ch->read_interrupted();
        ch->byte_stream().wait_readable(woken);
        while (!woken->ec) {
          std::error_code ignored;
          co_await woken->timer.async_wait(asio::redirect_error(asio::use_awaitable, ignored));
        }
        after = co_await read_one(*ch);
      },
      [&]() -> asio::awaitable<void> {
        co_await pause(20ms);
        // Output queued, its write not done: not parkable.
        wire::append_ping(ch->out(), FrameType::kPong, "busy");
        ch->schedule_flush();
        EXPECT_FALSE(ch->reader_parkable());
        EXPECT_TRUE(ch->parkable()) << "a plain wait may stand beside a write";
        EXPECT_FALSE(ch->interrupt_reader());
        co_await pause(20ms);  // written
        EXPECT_TRUE(ch->reader_parkable());
        EXPECT_TRUE(ch->interrupt_reader());
        EXPECT_FALSE(ch->interrupt_reader()) << "interrupted twice";
        co_await pause(20ms);
        EXPECT_FALSE(woken->ec.has_value()) << "woken with nothing to read";
        EXPECT_FALSE(co_await peer_write(ping_frame("after parking")));
      },
  }));
  EXPECT_FALSE(interrupted.status.ok());
  EXPECT_TRUE(interrupted_flag) << interrupted.status.to_string();
  ASSERT_TRUE(woken->ec.has_value());
  EXPECT_FALSE(*woken->ec) << woken->ec->message();
  ASSERT_TRUE(after.status.ok()) << after.status.to_string();
  EXPECT_EQ(after.body, "after parking");
  EXPECT_FALSE(ch->read_interrupted());
}

// A negotiation's messages are larger than the inline read buffer, and the
// heap buffer they took stays until input that fits the inline one has come
// (for an idle connection, its first keepalive): a reader interrupted to
// park gives it back at once.
TEST_F(FrameChannelTest, AnInterruptedReaderGivesBackItsHeapReadBuffer) {
  auto ch = make_channel();
  Got large, interrupted;
  bool held_after_large = false;
  ASSERT_TRUE(run({
      [&]() -> asio::awaitable<void> {
        large = co_await read_one(*ch);
        held_after_large = ch->holds_heap_read_buffer();
        interrupted = co_await read_one(*ch);
      },
      [&]() -> asio::awaitable<void> {
        EXPECT_FALSE(co_await peer_write(ping_frame(std::string(2000, 'n'))));
        co_await pause(20ms);
        EXPECT_TRUE(ch->interrupt_reader());
      },
  }));
  ASSERT_TRUE(large.status.ok()) << large.status.to_string();
  EXPECT_EQ(large.body.size(), 2000u);
  EXPECT_TRUE(held_after_large) << "the 2000-byte frame was read into the inline buffer?";
  EXPECT_TRUE(ch->read_interrupted()) << interrupted.status.to_string();
  EXPECT_FALSE(ch->holds_heap_read_buffer());
}

// A parked wait ends when the channel is closed (Server::stop closing a
// parked connection): operation_aborted, and the waiter is released.
TEST_F(FrameChannelTest, ClosingTheChannelEndsAParkedWait) {
  auto ch = make_channel();
  struct Woken final : ReadReady {
    void readable(std::error_code e) override { ec = e; }
    std::optional<std::error_code> ec;
  };
  auto woken = std::make_shared<Woken>();
  ch->byte_stream().wait_readable(woken);
  EXPECT_EQ(woken.use_count(), 2) << "the wait holds its waiter";
  io_.poll();
  EXPECT_FALSE(woken->ec.has_value());
  ch->close();
  io_.restart();
  io_.run_for(1s);
  ASSERT_TRUE(woken->ec.has_value());
  EXPECT_EQ(*woken->ec, asio::error::operation_aborted);
  EXPECT_EQ(woken.use_count(), 1) << "the ended wait still holds its waiter";
}

TEST_F(FrameChannelTest, MaxFrameSizeAccessor) {
  auto ch = make_channel(12345);
  EXPECT_EQ(ch->max_frame_size(), 12345u);
  EXPECT_EQ(ch->byte_stream().scheme(), Endpoint::Scheme::kUnix);
  EXPECT_FALSE(ch->closed());
}

}  // namespace
}  // namespace authrpc
