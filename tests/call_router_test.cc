// Unit tests for rpc/call_router.h: the routing of a streaming call's frames
// (DATA, WINDOW_UPDATE, END_STREAM, CANCEL, the ending RESPONSE) to its
// CallStream, shared by the client and the server connection. Real pieces
// throughout: the streams sit on a FrameChannel over a connected Unix socket
// pair (the library's own transport), and a large DATA body is read from that
// socket by the router itself.
#include "authrpc/rpc/call_router.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>
#include <atomic>
#include <chrono>
#include <functional>
#include <optional>
#include <ostream>
#include <string>

#include "authrpc/rpc/call_stream.h"
#include "authrpc/rpc/frame_channel.h"
#include "authrpc/rpc/messages.h"
#include "authrpc/rpc/transport.h"
#include "tests/testing/test_support.h"

namespace authrpc {
namespace {

using namespace std::chrono_literals;
using wire::FrameType;

constexpr std::uint32_t kWindow = 64 * 1024;

class CallRouterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto pair = testing::ConnectUnixPair(io_, "utest-cr");
    ASSERT_TRUE(pair.ok()) << pair.status().to_string();
    peer_ = std::move(pair->connected);
    channel_ = std::make_shared<FrameChannel>(std::move(pair->accepted), 1 << 24);
  }

  void TearDown() override {
    router_.fail_all(Status(Errc::kCancelled, "test over"));
    if (channel_) channel_->close();
    if (peer_) peer_->close();
    io_.restart();
    io_.run_for(200ms);
  }

  // A call as a client sees it after STREAM_REQUEST (the peer's window not
  // announced yet), in the router's table.
  std::shared_ptr<CallStream> open(std::uint32_t call_id) {
    auto stream = std::make_shared<CallStream>(channel_, call_id, kWindow, 0,
                                               std::chrono::steady_clock::time_point::max());
    router_.add(stream);
    return stream;
  }

  // Runs `task` on the loop to its end.
  template <typename T>
  T run(std::function<asio::awaitable<T>()> task) {
    std::optional<T> out;
    asio::co_spawn(io_, [&]() -> asio::awaitable<void> { out = co_await task(); }, rethrow);
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (!out && std::chrono::steady_clock::now() < deadline) {
      io_.run_for(20ms);
      io_.restart();
    }
    EXPECT_TRUE(out.has_value()) << "task did not finish";
    return out ? std::move(*out) : T{};
  }

  // The next message the application would read from `stream`, as text;
  // "<end>" at its end, the status's text on failure.
  std::string read(const std::shared_ptr<CallStream>& stream) {
    return run<std::string>([stream]() -> asio::awaitable<std::string> {
      auto message = co_await stream->read();
      if (!message.ok()) co_return message.status().to_string();
      if (!*message) co_return "<end>";
      co_return std::string((*message)->data(), (*message)->size());
    });
  }

  static void rethrow(std::exception_ptr e) {
    if (e) std::rethrow_exception(e);
  }

  asio::io_context io_{1};
  std::unique_ptr<ByteStream> peer_;
  std::shared_ptr<FrameChannel> channel_;
  CallRouter router_;
};

// A frame as the connection's reader hands it over (body in memory).
struct TestFrame {
  FrameType type;
  std::uint32_t call_id;
  std::string body;

  Frame frame() const {
    Frame f;
    f.header.length = static_cast<std::uint32_t>(wire::kMinFrameLength + body.size());
    f.header.type = type;
    f.header.call_id = call_id;
    f.body = body;
    return f;
  }
};

std::string u32_body(std::uint32_t v) {
  std::string out;
  wire::Writer(out).u32(v);
  return out;
}

// What the call under id 1 has been through before the frame arrives.
enum class Before { kOpen, kInputEnded, kFailed, kNoCall };

struct Case {
  const char* name;
  Before before;
  TestFrame frame;
  Errc expected;        // what the router returns
  bool still_routed;    // call 1 is in the table afterwards
  const char* message;  // call 1's next read() (nullptr: not checked)
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class CallRouterFrameTest : public CallRouterTest,
                            public ::testing::WithParamInterface<Case> {};

// Each frame against each state of its call: what the router returns (OK,
// or the protocol error the connection ends with), whether the call stays
// routed, and what its application reads next.
TEST_P(CallRouterFrameTest, RoutesTheFrameToItsCall) {
  const Case& c = GetParam();
  std::shared_ptr<CallStream> stream;
  if (c.before != Before::kNoCall) stream = open(1);
  if (c.before == Before::kInputEnded) {
    ASSERT_TRUE(router_.on_end_stream(TestFrame{FrameType::kEndStream, 1, ""}.frame()).ok());
  }
  if (c.before == Before::kFailed) stream->fail(Status(Errc::kDeadlineExceeded, "timed out"));

  const Frame frame = c.frame.frame();
  Status got;
  switch (frame.header.type) {
    case FrameType::kData:
      got = run<Status>([&]() { return router_.on_data(*channel_, frame); });
      break;
    case FrameType::kWindowUpdate:
      got = router_.on_window_update(frame);
      break;
    case FrameType::kEndStream:
      got = router_.on_end_stream(frame);
      break;
    case FrameType::kCancel:
      got = router_.on_cancel(frame, Status(Errc::kCancelled, "the client cancelled the call"));
      break;
    default:
      FAIL() << "no route for " << wire::frame_type_name(frame.header.type);
  }
  if (c.expected == Errc::kOk) {
    EXPECT_TRUE(got.ok()) << got.to_string();
  } else {
    EXPECT_EQ(got.code, c.expected) << got.to_string();
  }
  EXPECT_EQ(router_.contains(1), c.still_routed);
  if (c.message != nullptr) {
    EXPECT_EQ(read(stream), c.message);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Table, CallRouterFrameTest,
    ::testing::Values(
        Case{"DataToAnOpenCall", Before::kOpen, {FrameType::kData, 1, "hello"}, Errc::kOk, true,
             "hello"},
        Case{"EmptyDataIsAnEmptyMessage", Before::kOpen, {FrameType::kData, 1, ""}, Errc::kOk,
             true, ""},
        Case{"DataToAnUnknownCallIsDropped", Before::kNoCall, {FrameType::kData, 1, "late"},
             Errc::kOk, false, nullptr},
        Case{"DataAfterEndStreamOnARunningCall", Before::kInputEnded,
             {FrameType::kData, 1, "more"}, Errc::kProtocolError, true, "<end>"},
        Case{"DataToAFailedCallIsDropped", Before::kFailed, {FrameType::kData, 1, "late"},
             Errc::kOk, true, "DEADLINE_EXCEEDED: timed out"},
        Case{"WindowUpdateToAnOpenCall", Before::kOpen, {FrameType::kWindowUpdate, 1,
             u32_body(4096)}, Errc::kOk, true, nullptr},
        Case{"WindowUpdateToAnUnknownCall", Before::kNoCall, {FrameType::kWindowUpdate, 1,
             u32_body(4096)}, Errc::kOk, false, nullptr},
        Case{"MalformedWindowUpdate", Before::kOpen, {FrameType::kWindowUpdate, 1, "ab"},
             Errc::kProtocolError, true, nullptr},
        Case{"MalformedWindowUpdateToAnUnknownCall", Before::kNoCall,
             {FrameType::kWindowUpdate, 1, "ab"}, Errc::kProtocolError, false, nullptr},
        Case{"EndStreamEndsTheInput", Before::kOpen, {FrameType::kEndStream, 1, ""}, Errc::kOk,
             true, "<end>"},
        Case{"EndStreamWithABody", Before::kOpen, {FrameType::kEndStream, 1, "x"},
             Errc::kProtocolError, true, nullptr},
        Case{"ASecondEndStream", Before::kInputEnded, {FrameType::kEndStream, 1, ""},
             Errc::kProtocolError, true, nullptr},
        Case{"EndStreamToAFailedCall", Before::kFailed, {FrameType::kEndStream, 1, ""},
             Errc::kOk, true, "DEADLINE_EXCEEDED: timed out"},
        Case{"EndStreamToAnUnknownCall", Before::kNoCall, {FrameType::kEndStream, 1, ""},
             Errc::kOk, false, nullptr},
        Case{"CancelFailsAndForgetsTheCall", Before::kOpen, {FrameType::kCancel, 1, ""},
             Errc::kOk, false, "CANCELLED: the client cancelled the call"},
        Case{"CancelWithABody", Before::kOpen, {FrameType::kCancel, 1, "x"},
             Errc::kProtocolError, true, nullptr},
        Case{"CancelWithABodyToAnUnknownCall", Before::kNoCall, {FrameType::kCancel, 1, "x"},
             Errc::kProtocolError, false, nullptr},
        Case{"CancelToAnUnknownCall", Before::kNoCall, {FrameType::kCancel, 1, ""}, Errc::kOk,
             false, nullptr}),
    [](const ::testing::TestParamInfo<Case>& row) { return std::string(row.param.name); });

// Flow control is the stream's; the router passes its verdict on.
TEST_F(CallRouterTest, DataBeyondTheCallsWindowIsAProtocolError) {
  auto stream = open(1);
  // The Frame views the TestFrame's body: both outlive the calls.
  const TestFrame data{FrameType::kData, 1, std::string(kWindow / 2 + 1, 'x')};
  const Frame frame = data.frame();
  const Status first = run<Status>([&]() { return router_.on_data(*channel_, frame); });
  EXPECT_TRUE(first.ok()) << first.to_string();
  const Status second = run<Status>([&]() { return router_.on_data(*channel_, frame); });
  EXPECT_EQ(second.code, Errc::kProtocolError) << second.to_string();
}

TEST_F(CallRouterTest, CreditAboveTheWindowIsAProtocolError) {
  auto stream = open(1);
  const TestFrame credit{FrameType::kWindowUpdate, 1, u32_body(kWindow)};
  const Frame update = credit.frame();
  EXPECT_TRUE(router_.on_window_update(update).ok());  // announces the window
  EXPECT_EQ(router_.on_window_update(update).code, Errc::kProtocolError);
}

// A DATA body above the direct threshold is left on the socket by the
// channel and read by the router straight into the stream's buffer (or
// skipped, for a call that is gone), after which the next frame reads whole.
TEST_F(CallRouterTest, LargeDataBodyIsReadFromTheConnection) {
  auto stream = open(1);
  channel_->set_direct_data_threshold(kDirectDataThreshold);
  const std::string message(kDirectDataThreshold * 2, 'm');
  std::string bytes;
  wire::append_data_header(bytes, 1, message.size());
  bytes += message;
  wire::append_data_header(bytes, 9, message.size());  // no such call: skipped
  bytes += message;
  wire::append_end_stream(bytes, 1);
  struct Done final : WriteCompletion {
    void write_done(std::error_code e) override { ec = e; }
    std::optional<std::error_code> ec;
  } done;
  const asio::const_buffer buffer(bytes.data(), bytes.size());
  peer_->write_all(std::span(&buffer, 1), done);

  const Status got = run<Status>([&]() -> asio::awaitable<Status> {
    for (int i = 0; i < 3; ++i) {
      auto frame = co_await channel_->read_frame();
      if (!frame.ok()) co_return frame.status();
      // (No co_await inside ?: — GCC 12 miscompiles it.)
      Status s;
      if (frame->header.type == FrameType::kData) {
        s = co_await router_.on_data(*channel_, *frame);
      } else {
        s = router_.on_end_stream(*frame);
      }
      if (!s.ok()) co_return s;
    }
    co_return Status();
  });
  ASSERT_TRUE(got.ok()) << got.to_string();
  EXPECT_EQ(read(stream), message);
  EXPECT_EQ(read(stream), "<end>");
}

TEST_F(CallRouterTest, ResponseEndsTheCallAfterItsMessages) {
  auto ok_call = open(1);
  auto failed_call = open(2);
  // on_data() is a coroutine that reads the frame after the lambda returns.
  const TestFrame m1{FrameType::kData, 1, "m1"};
  const Frame data = m1.frame();
  ASSERT_TRUE(run<Status>([&]() { return router_.on_data(*channel_, data); }).ok());
  wire::ResponseHeader ok{0, {}};
  EXPECT_TRUE(router_.on_response(1, ok, "final"));
  wire::ResponseHeader refused{static_cast<std::uint16_t>(Errc::kPermissionDenied), "no"};
  EXPECT_TRUE(router_.on_response(2, refused, {}));
  EXPECT_FALSE(router_.on_response(3, ok, {}));  // a unary call's, or one long gone
  EXPECT_FALSE(router_.contains(1));
  EXPECT_FALSE(router_.contains(2));

  EXPECT_EQ(read(ok_call), "m1");
  EXPECT_EQ(read(ok_call), "<end>");
  EXPECT_EQ(ok_call->final_message(), "final");
  EXPECT_EQ(read(failed_call), "PERMISSION_DENIED: no");
  // Writing after the server ended the call fails, typed.
  const Status write = run<Status>([&]() { return ok_call->write("late"); });
  EXPECT_EQ(write.code, Errc::kFailedPrecondition) << write.to_string();
}

TEST_F(CallRouterTest, FailAfterFailsOnlyTheCallsAboveTheLastId) {
  auto kept = open(3);
  auto dropped = open(4);
  router_.fail_after(3, Status(Errc::kUnavailable, "server is shutting down; call not run"));
  EXPECT_TRUE(router_.contains(3));
  EXPECT_FALSE(router_.contains(4));
  EXPECT_FALSE(kept->failed());
  EXPECT_EQ(read(dropped), "UNAVAILABLE: server is shutting down; call not run");
}

TEST_F(CallRouterTest, FailAllEmptiesTheTable) {
  auto a = open(1);
  auto b = open(2);
  router_.fail_all(Status(Errc::kCancelled, "the connection to the client ended"));
  EXPECT_TRUE(router_.empty());
  EXPECT_TRUE(a->failed());
  EXPECT_TRUE(b->failed());
}

// A call that ended by itself leaves only if the id still carries it: a
// newer call reusing the id stays.
TEST_F(CallRouterTest, RemoveLeavesANewerCallUnderTheSameId) {
  auto old_call = open(5);
  EXPECT_EQ(router_.take(5), old_call);
  auto new_call = open(5);
  router_.remove(old_call);
  EXPECT_TRUE(router_.contains(5));
  router_.remove(new_call);
  EXPECT_FALSE(router_.contains(5));
  EXPECT_EQ(router_.take(5), nullptr);
}

TEST(CallRouterFrames, CallFramesAreTheOnesThatNameACall) {
  struct Row {
    FrameType type;
    bool names_a_call;
  };
  const Row rows[] = {
      {FrameType::kCancel, true},          {FrameType::kData, true},
      {FrameType::kWindowUpdate, true},    {FrameType::kEndStream, true},
      {FrameType::kShmRing, true},         {FrameType::kRequest, false},
      {FrameType::kStreamRequest, false},  {FrameType::kResponse, false},
      {FrameType::kPing, false},           {FrameType::kShmHello, false},
      {FrameType::kError, false},          {FrameType::kGoAway, false},
  };
  for (const Row& row : rows) {
    EXPECT_EQ(CallRouter::is_call_frame(row.type), row.names_a_call)
        << wire::frame_type_name(row.type);
  }
}

}  // namespace
}  // namespace authrpc
