// A unary call's wait on the client (client/client.cc, rpc/parked_handler.h):
// the caller's handler is parked until its response, a failure, its deadline
// or the context's shutdown completes it, exactly once; a response resumes
// the caller at once on the reader's executor.
#include <gtest/gtest.h>

#include <asio/async_result.hpp>
#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <asio/steady_timer.hpp>
#include <asio/strand.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/use_future.hpp>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <cstring>
#include <future>
#include <chrono>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "authrpc/auth/mechanisms/simple/simple.h"
#include "authrpc/client/client.h"
#include "authrpc/client/client_runtime.h"
#include "authrpc/rpc/deadline_queue.h"
#include "authrpc/rpc/messages.h"
#include "authrpc/rpc/parked_handler.h"
#include "authrpc/server/server.h"
#include "authrpc/server/service.h"
#include "tests/testing/test_server.h"
#include "tests/testing/test_support.h"

namespace authrpc {
namespace {

using namespace std::chrono_literals;
using testing::Describe;
using testing::Eventually;
using testing::StopAndDestroy;

using testing::Code;

// Parks the awaiting coroutine in `slot`: directly (wait_in, as a client
// call does), or through asio::async_initiate with use_awaitable (what
// wait_in does on Asio versions other than 1.22).
asio::awaitable<void> WaitIn(ParkedHandler& slot, bool direct) {
  if (direct) {
    co_await wait_in(slot);
  } else {
    co_await asio::async_initiate<const asio::use_awaitable_t<>&, void()>(
        [&slot](auto handler) { slot.park(std::move(handler)); }, asio::use_awaitable);
  }
}

// Counts its destruction (to see a coroutine frame freed).
struct Tracer {
  explicit Tracer(int& destroyed) : destroyed_(destroyed) {}
  ~Tracer() { ++destroyed_; }
  int& destroyed_;
};

struct ParkedCase {
  const char* name;
  // kResumeHere: runs_here() on the waiter's executor, then resume_here()
  // (the client's reader answering a call in place).
  enum class How { kPost, kHereSameExecutor, kHereOtherExecutor, kResumeHere } how;
  bool resumed_inside_the_call;  // before complete_here()/post() returned
  bool direct;                    // WaitIn's way
};

class ParkedHandlerTest : public ::testing::TestWithParam<ParkedCase> {};

TEST_P(ParkedHandlerTest, ResumesTheWaiterExactlyOnceOnItsOwnExecutor) {
  const ParkedCase& c = GetParam();
  asio::io_context io;
  asio::io_context other;
  ParkedHandler slot;
  std::vector<std::string> log;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        co_await WaitIn(slot, c.direct);
        log.push_back(io.get_executor().running_in_this_thread() ? "resumed on its executor"
                                                                 : "resumed elsewhere");
      },
      asio::detached);
  io.poll();  // the coroutine parks
  ASSERT_TRUE(slot.parked());
  ASSERT_TRUE(log.empty());

  auto complete = [&] {
    switch (c.how) {
      case ParkedCase::How::kPost: slot.post(); break;
      case ParkedCase::How::kHereSameExecutor:
        slot.complete_here(asio::any_io_executor(io.get_executor()));
        break;
      case ParkedCase::How::kHereOtherExecutor:
        slot.complete_here(asio::any_io_executor(other.get_executor()));
        break;
      case ParkedCase::How::kResumeHere:
        EXPECT_FALSE(slot.runs_here(asio::any_io_executor(other.get_executor())));
        EXPECT_TRUE(slot.runs_here(asio::any_io_executor(io.get_executor())));
        slot.resume_here();
        break;
    }
    log.push_back("completed");
  };
  // Complete from inside one of io's handlers, as the client's reader does.
  asio::post(io, complete);
  io.run();
  EXPECT_FALSE(slot.parked());
  const std::vector<std::string> inside = {"resumed on its executor", "completed"};
  const std::vector<std::string> later = {"completed", "resumed on its executor"};
  EXPECT_EQ(log, c.resumed_inside_the_call ? inside : later);
  slot.post();  // empty: nothing happens
  EXPECT_FALSE(slot.runs_here(asio::any_io_executor(io.get_executor())));  // empty
  EXPECT_EQ(log.size(), 2u);
}

INSTANTIATE_TEST_SUITE_P(
    Table, ParkedHandlerTest,
    ::testing::Values(
        ParkedCase{"post", ParkedCase::How::kPost, false, true},
        ParkedCase{"here_same_executor", ParkedCase::How::kHereSameExecutor, true, true},
        ParkedCase{"here_other_executor", ParkedCase::How::kHereOtherExecutor, false, true},
        ParkedCase{"resume_here", ParkedCase::How::kResumeHere, true, true},
        ParkedCase{"initiate_post", ParkedCase::How::kPost, false, false},
        ParkedCase{"initiate_here_same_executor", ParkedCase::How::kHereSameExecutor, true,
                   false},
        ParkedCase{"initiate_here_other_executor", ParkedCase::How::kHereOtherExecutor, false,
                   false},
        ParkedCase{"initiate_resume_here", ParkedCase::How::kResumeHere, true, false}),
    [](const auto& param_info) { return std::string(param_info.param.name); });

TEST(ParkedHandlerTest, ResetFreesTheWaitingCoroutineWithoutResumingIt) {
  for (const bool direct : {true, false}) {
    SCOPED_TRACE(direct ? "wait_in" : "async_initiate");
    int destroyed = 0;
    bool resumed = false;
    ParkedHandler slot;
    {
      asio::io_context io;
      asio::co_spawn(
          io,
          [&]() -> asio::awaitable<void> {
            Tracer tracer(destroyed);
            co_await WaitIn(slot, direct);
            resumed = true;
          },
          asio::detached);
      io.poll();
      ASSERT_TRUE(slot.parked());
      slot.reset();  // the frame is unwound through the context
      EXPECT_FALSE(slot.parked());
    }
    EXPECT_FALSE(resumed);
    EXPECT_EQ(destroyed, 1);
  }
}

// A coroutine that waits in a slot again and again, with its result and
// its caller's frames intact across each wait (wait_in parks the frame that
// suspended, and the stack above it resumes in order).
TEST(ParkedHandlerTest, AWaiterParksAgainAndItsCallersSeeItsResults) {
  asio::io_context io;
  ParkedHandler slot;
  auto inner = [&](int i) -> asio::awaitable<int> {
    co_await wait_in(slot);
    co_return i * 10;
  };
  int sum = 0;
  bool done = false;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        for (int i = 1; i <= 100; ++i) sum += co_await inner(i);
        done = true;
      },
      asio::detached);
  for (int i = 1; i <= 100; ++i) {
    io.poll();
    ASSERT_TRUE(slot.parked()) << i;
    if (i % 2 == 0) {
      slot.post();
    } else {
      asio::post(io, [&] { slot.complete_here(asio::any_io_executor(io.get_executor())); });
    }
  }
  io.poll();
  EXPECT_TRUE(done);
  EXPECT_EQ(sum, 10 * 5050);
}

// An entry that parks a waiter, as a client call does: the queue's shutdown
// must let it go (abandoned()), else the waiting coroutine would leak.
class ParkingEntry final : public DeadlineQueue::Entry {
 public:
  ~ParkingEntry() override { cancel(); }
  ParkedHandler slot;
  int abandoned_calls = 0;

 private:
  void expired() override { slot.post(); }
  void abandoned() noexcept override {
    ++abandoned_calls;
    slot.reset();
  }
};

TEST(ParkedHandlerTest, AContextShuttingDownLetsGoOfAParkedWaiterInItsDeadlineQueue) {
  for (const bool direct : {true, false}) {
    SCOPED_TRACE(direct ? "wait_in" : "async_initiate");
    int destroyed = 0;
    ParkingEntry entry;
    {
      asio::io_context io;
      asio::co_spawn(
          io,
          [&]() -> asio::awaitable<void> {
            Tracer tracer(destroyed);
            DeadlineQueue::of(io.get_executor())
                .add(entry, std::chrono::steady_clock::time_point::max(), io.get_executor());
            co_await WaitIn(entry.slot, direct);
          },
          asio::detached);
      io.poll();
      ASSERT_TRUE(entry.slot.parked());
      ASSERT_TRUE(entry.queued());
    }
    EXPECT_EQ(entry.abandoned_calls, 1);
    EXPECT_FALSE(entry.queued());
    EXPECT_EQ(destroyed, 1);
  }
}

// --- Through a real server and client on loopback TCP.

struct Gate {
  std::atomic<bool> open{false};
  testing::Latch three_holding{3};  // three "hold" calls have begun
};

class ClientCallTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Service s("test");
    auto gate = gate_;
    s.add_async("hold", [gate](CallContext& ctx,
                               std::string) -> asio::awaitable<Result<std::string>> {
      gate->three_holding.CountDown();
      // Answers once the gate opens or the call is cancelled.
      asio::steady_timer t(co_await asio::this_coro::executor);
      while (!gate->open && !ctx.cancelled()) {
        t.expires_after(5ms);
        co_await t.async_wait(asio::use_awaitable);
      }
      co_return std::string("released");
    });
    server_.service(std::move(s));
    ASSERT_OK(server_.start());
    endpoint_ = server_.endpoint();
  }
  void TearDown() override {
    gate_->open = true;
    server_.stop();
  }

  ClientOptions Options() const {
    ClientOptions o;
    o.endpoint = endpoint_;
    o.mechanisms = {std::make_shared<SimpleClientMechanism>("alice")};
    o.connect_timeout = 5s;
    return o;
  }

  std::shared_ptr<Gate> gate_ = std::make_shared<Gate>();
  testing::TestServer server_;
  Endpoint endpoint_;
};

// The benchmark's session: connect without waiting for authentication, one
// call, close as soon as the reply is in (the caller runs inside the
// reader's delivery and closes the connection under it).
TEST_F(ClientCallTest, SessionsThatCloseAsSoonAsTheReplyArrives) {
  constexpr int kSessions = 50;
  asio::io_context io;
  int ok = 0;
  std::vector<std::string> failures;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        for (int i = 0; i < kSessions; ++i) {
          ClientOptions o = Options();
          o.wait_for_authentication = false;
          auto client = co_await Client::async_connect(io.get_executor(), std::move(o));
          if (!client.ok()) {
            failures.push_back(client.status().to_string());
            continue;
          }
          auto reply = co_await (*client)->async_call("sys", "whoami", "");
          if (reply.ok() && !reply->empty()) {
            ++ok;
          } else {
            failures.push_back(reply.ok() ? "empty reply" : reply.status().to_string());
          }
          client->reset();
        }
      },
      asio::detached);
  io.run();
  EXPECT_EQ(ok, kSessions);
  EXPECT_TRUE(failures.empty()) << failures.front();
  EXPECT_TRUE(Eventually([&] { return server_.stats().connections_accepted >= kSessions; }));
}

TEST_F(ClientCallTest, ADeadlineStillEndsAWaitingCallAndTheConnectionStaysUsable) {
  auto client = Client::connect(Options());
  ASSERT_TRUE(client.ok()) << Describe(client);
  CallOptions options;
  options.timeout = 50ms;
  const auto start = std::chrono::steady_clock::now();
  auto held = (*client)->call("test", "hold", "", options);
  EXPECT_EQ(held.code(), Code(Errc::kDeadlineExceeded)) << Describe(held);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
  auto after = (*client)->call("sys", "whoami", "");
  EXPECT_TRUE(after.ok()) << Describe(after);
}

// async_call_decoded hands a successful response's payload to its decoder,
// whose status is the call's; an error answer or a deadline is the call's
// status without the decoder. The same from a coroutine on the client's
// executor (answered in place, from the reader's buffer) and on a strand
// over it (answered with a copy, posted).
TEST_F(ClientCallTest, ADecodedCallHandsThePayloadToItsDecoderAlone) {
  auto client = Client::connect(Options());
  ASSERT_TRUE(client.ok()) << Describe(client);
  const struct {
    const char* service;
    const char* method;
    bool decoder_fails;
    Errc code;
    bool decoded;
  } rows[] = {
      {"sys", "echo", false, Errc::kOk, true},
      {"sys", "echo", true, Errc::kDataLoss, true},
      {"sys", "no_such", false, Errc::kNotFound, false},
      {"test", "hold", false, Errc::kDeadlineExceeded, false},
  };
  for (const bool on_strand : {false, true}) {
    for (const auto& row : rows) {
      std::string seen;
      bool called = false;
      const ResponseDecoder decode = [&](std::string_view payload) {
        called = true;
        seen = payload;
        return row.decoder_fails ? Status(Errc::kDataLoss, "not mine") : Status();
      };
      auto call = [&]() -> asio::awaitable<Status> {
        co_return co_await (*client)->async_call_decoded(row.service, row.method, "payload", decode,
                                                         {50ms});
      };
      auto done = on_strand ? asio::co_spawn(asio::make_strand((*client)->executor()), call, asio::use_future)
                            : asio::co_spawn((*client)->executor(), call, asio::use_future);
      const Status status = done.get();
      const std::string what = std::string(row.service) + "." + row.method + (on_strand ? " (strand)" : "");
      if (row.code == Errc::kOk) {
        EXPECT_TRUE(status.ok()) << what << ": " << status.to_string();
      } else {
        EXPECT_EQ(status.code, row.code) << what << ": " << status.to_string();
      }
      EXPECT_EQ(called, row.decoded) << what;
      if (row.decoded) EXPECT_EQ(seen, "payload") << what;
    }
  }
}

TEST_F(ClientCallTest, ClosingFailsEveryWaitingCallOnce) {
  auto client = Client::connect(Options());
  ASSERT_TRUE(client.ok()) << Describe(client);
  std::vector<std::future<Result<std::string>>> calls;
  for (int i = 0; i < 3; ++i) calls.push_back((*client)->call_future("test", "hold", ""));
  ASSERT_TRUE(gate_->three_holding.WaitFor(5s)) << "the calls never reached the handler";
  (*client)->close();
  for (auto& f : calls) {
    ASSERT_EQ(f.wait_for(5s), std::future_status::ready);
    EXPECT_EQ(f.get().code(), Code(Errc::kCancelled));
  }
}

// A context destroyed while a call waits without a deadline: the call's
// coroutine (and the client it owns) is freed with the context — LSan would
// report a leak — and nothing resumes or hangs.
TEST_F(ClientCallTest, AContextDestroyedWithACallWaitingFreesIt) {
  int destroyed = 0;
  bool waiting = false;
  bool finished = false;
  {
    asio::io_context io;
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
          Tracer tracer(destroyed);
          auto client = co_await Client::async_connect(io.get_executor(), Options());
          if (!client.ok()) co_return;
          waiting = true;
          co_await (*client)->async_call("test", "hold", "");
          finished = true;
        },
        asio::detached);
    EXPECT_TRUE(Eventually([&] {
      io.run_for(10ms);
      return waiting;
    }));
    io.run_for(50ms);
  }
  EXPECT_TRUE(waiting);
  EXPECT_FALSE(finished);
  EXPECT_EQ(destroyed, 1);
}

// Destroying the Client while calls wait, and with one made but not yet
// awaited, fails them with kCancelled; the connection goes once the last
// has returned (LSan would report one kept alive, ASan one freed under a
// call).
TEST_F(ClientCallTest, CallsWaitingWhenTheirClientIsDestroyedFailAndReleaseTheConnection) {
  asio::io_context io;
  std::vector<Result<std::string>> outcomes;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        auto client = co_await Client::async_connect(io.get_executor(), Options());
        if (!client.ok()) co_return;
        Client* c = client->get();
        for (int i = 0; i < 3; ++i) {
          asio::co_spawn(
              io,
              [&, c]() -> asio::awaitable<void> {
                outcomes.push_back(co_await c->async_call("test", "hold", ""));
              },
              asio::detached);
        }
        // A call made but not yet awaited when the Client goes.
        auto late = (*client)->async_call("sys", "whoami", "");
        while (!gate_->three_holding.WaitFor(0ms)) {
          asio::steady_timer t(io.get_executor(), 5ms);
          co_await t.async_wait(asio::use_awaitable);
        }
        client->reset();
        outcomes.push_back(co_await std::move(late));
      },
      asio::detached);
  io.run_for(10s);
  ASSERT_EQ(outcomes.size(), 4u);
  for (const auto& r : outcomes) EXPECT_EQ(r.code(), Code(Errc::kCancelled)) << Describe(r);
}

// Where a unary call's awaitable is made — on the client's IO thread or on
// another thread (co_spawn'd onto the client's executor later) — and what
// becomes of it once its Client is destroyed and the connection's reader has
// ended: awaited later (it fails with kCancelled) or dropped unawaited.
// Either way the call's frame keeps the connection from its creation, not
// from its first resumption, and lets it go with the frame (ASan would
// report a use after free, LSan a connection kept alive). A guard for any
// cheaper lifetime rule (docs/DESIGN.md, "Calls").
struct CallLifetimeCase {
  const char* name;
  bool made_on_io_thread;
  bool awaited;
};

class CallKeepaliveTest : public ClientCallTest,
                          public ::testing::WithParamInterface<CallLifetimeCase> {};

TEST_P(CallKeepaliveTest, ACallMadeBeforeItsClientIsDestroyedKeepsTheConnectionUntilItEnds) {
  const CallLifetimeCase& c = GetParam();
  ClientRuntime runtime(1);
  asio::io_context& io = runtime.next_context();
  auto client = Client::connect(runtime, Options());
  ASSERT_TRUE(client.ok()) << Describe(client);
  // Runs fn on the IO thread and waits for it.
  auto on_io = [&](auto fn) {
    std::promise<void> done;
    asio::post(io, [&] {
      fn();
      done.set_value();
    });
    done.get_future().wait();
  };

  std::optional<asio::awaitable<Result<std::string>>> call;
  if (c.made_on_io_thread) {
    on_io([&] { call.emplace((*client)->async_call("sys", "whoami", "")); });
  } else {
    call.emplace((*client)->async_call("sys", "whoami", ""));
  }
  client->reset();
  // Let the connection's reader see the close and end (it held the other
  // reference), so that only the call keeps the connection.
  for (int i = 0; i < 5; ++i) on_io([] {});
  std::this_thread::sleep_for(20ms);
  for (int i = 0; i < 5; ++i) on_io([] {});

  if (c.awaited) {
    auto outcome = asio::co_spawn(io, std::move(*call), asio::use_future);
    call.reset();
    ASSERT_EQ(outcome.wait_for(5s), std::future_status::ready);
    auto result = outcome.get();
    EXPECT_EQ(result.code(), Code(Errc::kCancelled)) << Describe(result);
  } else if (c.made_on_io_thread) {
    on_io([&] { call.reset(); });
  } else {
    call.reset();
  }
}

INSTANTIATE_TEST_SUITE_P(
    Table, CallKeepaliveTest,
    ::testing::Values(CallLifetimeCase{"MadeOnTheIoThreadThenAwaited", true, true},
                      CallLifetimeCase{"MadeOnTheIoThreadThenDropped", true, false},
                      CallLifetimeCase{"MadeOnAnotherThreadThenAwaited", false, true},
                      CallLifetimeCase{"MadeOnAnotherThreadThenDropped", false, false}),
    [](const ::testing::TestParamInfo<CallLifetimeCase>& param_info) { return param_info.param.name; });

// Destroying a ClientRuntime runs everything already queued on its loops,
// however long that takes (3 s of queued work here), and stops a loop that
// only has operations left waiting: a 1 h timer owned by its own handler, as
// a connection is by its read (a Client that outlives its runtime).
TEST(ClientRuntimeStopTest, RunsWhatIsQueuedAndStopsOnlyWhatWaits) {
  constexpr int kQueued = 300;
  std::atomic<int> ran{0};
  auto stopping = std::chrono::steady_clock::now();
  {
    ClientRuntime runtime(1);
    asio::io_context& io = runtime.next_context();
    auto waiting = std::make_shared<asio::steady_timer>(io, 1h);
    waiting->async_wait([waiting](std::error_code) {});
    for (int i = 0; i < kQueued; ++i) {
      asio::post(io, [&ran] {
        std::this_thread::sleep_for(10ms);
        ++ran;
      });
    }
    stopping = std::chrono::steady_clock::now();
  }
  const auto took = std::chrono::steady_clock::now() - stopping;
  EXPECT_EQ(ran.load(), kQueued) << "queued work was dropped by the runtime's destructor";
  EXPECT_LT(took, 30s) << "a loop with only a waiting timer was not stopped";
}

// A server played with raw frames on a blocking Unix socket (abstract
// name), every read bounded in time: what the client writes, as it arrives.
class RawServer {
 public:
  explicit RawServer(const std::string& name) {
    listener_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path + 1, name.data(), name.size());
    const auto len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
    if (::bind(listener_, reinterpret_cast<sockaddr*>(&addr), len) != 0 ||
        ::listen(listener_, 4) != 0) {
      ::close(listener_);
      listener_ = -1;
    }
  }
  ~RawServer() {
    if (fd_ >= 0) ::close(fd_);
    if (listener_ >= 0) ::close(listener_);
  }
  bool listening() const { return listener_ >= 0; }
  int fd() const { return fd_; }

  // Accepts the client, reads its preamble and HELLO, answers AUTH_SUCCESS
  // (with `call_id` in its header: 0 unless a test breaks the rule).
  bool AcceptAndAuthenticate(std::uint32_t call_id = 0) {
    pollfd p{listener_, POLLIN, 0};
    if (::poll(&p, 1, 10'000) != 1) return false;
    fd_ = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
    std::string preamble;
    if (fd_ < 0 || !ReadExact(preamble, wire::kPreambleSize)) return false;
    auto hello = ReadFrame();
    if (!hello || hello->header.type != wire::FrameType::kHello) return false;
    std::string out;
    wire::append_auth_success(out, {wire::kNoFeatures, "", "alice"});
    SetCallId(out, call_id);
    return Send(out);
  }
  // Rewrites the call id of the frame that starts `frame`.
  static void SetCallId(std::string& frame, std::uint32_t call_id) {
    for (int i = 0; i < 4; ++i) frame[8 + i] = static_cast<char>(call_id >> (24 - 8 * i));
  }

  struct RawFrame {
    wire::FrameHeader header;
    std::string body;
  };
  std::optional<RawFrame> ReadFrame() {
    std::string header;
    if (!ReadExact(header, wire::kFrameHeaderSize)) return std::nullopt;
    auto parsed = wire::parse_frame_header(reinterpret_cast<const std::uint8_t*>(header.data()),
                                           wire::kDefaultMaxFrameSize);
    if (!parsed.ok()) return std::nullopt;
    RawFrame f{*parsed, {}};
    if (!ReadExact(f.body, parsed->body_size())) return std::nullopt;
    return f;
  }
  bool Send(std::string_view bytes) {
    return ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL) ==
           static_cast<ssize_t>(bytes.size());
  }

 private:
  bool ReadExact(std::string& out, std::size_t n) {
    out.clear();
    while (out.size() < n) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 10'000) != 1) return false;
      char buf[512];
      const ssize_t got = ::recv(fd_, buf, std::min(sizeof buf, n - out.size()), 0);
      if (got <= 0) return false;
      out.append(buf, static_cast<std::size_t>(got));
    }
    return true;
  }

  int listener_ = -1;
  int fd_ = -1;
};

// A `simple` client for alice of the RawServer listening at `name`.
ClientOptions AliceAt(const std::string& name) {
  ClientOptions options;
  options.endpoint = *Endpoint::parse("unix:@" + name);
  options.mechanisms = {std::make_shared<SimpleClientMechanism>("alice")};
  options.connect_timeout = 10s;
  options.metrics = nullptr;
  return options;
}

// Responses that arrive together free their callers' next requests
// together: the client sends those in one write once it has delivered every
// response it read — as the server answers a batch of requests — not one
// write per caller (each a sendmsg, which cost pipelined clients most of
// their CPU: minibench calls --concurrency K --depth D). With a raw server
// on a Unix socket (a write is in the peer's queue when it returns): while
// the woken callers run, none of their new requests has left; then all
// have, in order.
TEST(ClientPipeliningTest, RequestsFreedByABatchOfResponsesLeaveTogether) {
  constexpr int kCallers = 4;
  const std::string name = "authrpc-client-batch-" + std::to_string(::getpid());
  RawServer server(name);
  ASSERT_TRUE(server.listening());
  const ClientOptions options = AliceAt(name);
  auto connecting = std::async(std::launch::async, [&] { return Client::connect(options); });
  ASSERT_TRUE(server.AcceptAndAuthenticate());
  auto client = connecting.get();
  ASSERT_OK(client.status());

  // Bytes waiting at the server when each caller was woken by its response.
  std::vector<int> queued_when_woken(kCallers, -1);
  auto caller = [&](int i) -> asio::awaitable<Result<std::string>> {
    auto first = co_await (*client)->async_call("t", "m", "first " + std::to_string(i));
    if (!first.ok()) co_return first.status();
    ::ioctl(server.fd(), FIONREAD, &queued_when_woken[i]);
    co_return co_await (*client)->async_call("t", "m", "second " + std::to_string(i));
  };
  std::vector<std::future<Result<std::string>>> calls;
  for (int i = 0; i < kCallers; ++i) {
    calls.push_back(asio::co_spawn((*client)->executor(), caller(i), asio::use_future));
  }
  std::string responses;
  for (int i = 0; i < kCallers; ++i) {
    auto request = server.ReadFrame();
    ASSERT_TRUE(request);
    ASSERT_EQ(request->header.type, wire::FrameType::kRequest);
    wire::append_response(responses, request->header.call_id, 0, "", "one");
  }
  ASSERT_TRUE(server.Send(responses));  // one write: the client reads them at once

  std::string answers;
  std::set<std::string> seconds;
  for (int i = 0; i < kCallers; ++i) {
    auto request = server.ReadFrame();
    ASSERT_TRUE(request);
    std::string_view payload;
    ASSERT_OK(wire::parse_request(request->body, payload).status());
    seconds.insert(std::string(payload));
    wire::append_response(answers, request->header.call_id, 0, "", "two");
  }
  EXPECT_EQ(seconds, (std::set<std::string>{"second 0", "second 1", "second 2", "second 3"}));
  ASSERT_TRUE(server.Send(answers));
  for (auto& call : calls) {
    auto reply = call.get();
    ASSERT_OK(reply.status());
    EXPECT_EQ(*reply, "two");
  }
  EXPECT_EQ(queued_when_woken, std::vector<int>(kCallers, 0))
      << "a caller's next request left before the rest of the batch was delivered";
}

// A connection-level frame carries call id 0 (PROTOCOL.md section 3): the
// client answers one from the server with another id with ERROR
// PROTOCOL_ERROR and closes, during negotiation (AUTH_SUCCESS) or after it
// (PING: not echoed).
TEST(ClientProtocolTest, AConnectionLevelFrameWithACallIdIsAProtocolError) {
  for (const bool in_negotiation : {true, false}) {
    SCOPED_TRACE(in_negotiation ? "AUTH_SUCCESS with call id 3" : "PING with call id 5");
    const std::string name = "authrpc-client-frame-id-" + std::to_string(::getpid()) +
                             (in_negotiation ? "-a" : "-b");
    RawServer server(name);
    ASSERT_TRUE(server.listening());
    const ClientOptions options = AliceAt(name);
    auto connecting = std::async(std::launch::async, [&] { return Client::connect(options); });
    ASSERT_TRUE(server.AcceptAndAuthenticate(in_negotiation ? 3 : 0));
    auto client = connecting.get();
    if (in_negotiation) {
      ASSERT_FALSE(client.ok());
      EXPECT_EQ(client.code(), Errc::kProtocolError) << client.status().to_string();
    } else {
      ASSERT_OK(client.status());
      std::string ping;
      wire::append_ping(ping, wire::FrameType::kPing, "hi");
      RawServer::SetCallId(ping, 5);
      ASSERT_TRUE(server.Send(ping));
    }
    auto answer = server.ReadFrame();
    ASSERT_TRUE(answer) << "the client closed without a frame";
    ASSERT_EQ(answer->header.type, wire::FrameType::kError);
    auto error = wire::parse_error(answer->body);
    ASSERT_OK(error.status());
    EXPECT_EQ(error->code, 100) << error->message;
    if (!in_negotiation) {
      EXPECT_TRUE(Eventually([&] { return !(*client)->connection_status().ok(); }));
    }
  }
}

}  // namespace
}  // namespace authrpc
