// DeadlineQueue: many deadlines on one timer (rpc/deadline_queue.h), and the
// socket transport's connect deadline that is built on it.
#include "authrpc/rpc/deadline_queue.h"

#include <arpa/inet.h>
#include <cstddef>
#include <cstring>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <asio/steady_timer.hpp>
#include <asio/use_future.hpp>
#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "authrpc/rpc/transport.h"

namespace authrpc {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// Runs `io` for `d`: the queue's own timer does not keep run() going (see
// AnIdleTimerDoesNotKeepRunGoing), as a connection's pending read would.
void RunFor(asio::io_context& io, std::chrono::milliseconds d) {
  asio::steady_timer keep_alive(io, d);
  keep_alive.async_wait([](std::error_code) {});
  io.run();
}

// An entry that records when it expired.
class Recorder final : public DeadlineQueue::Entry {
 public:
  Recorder(std::string name, std::vector<std::string>& log, std::function<void()> then = {})
      : name_(std::move(name)), log_(log), then_(std::move(then)) {}
  ~Recorder() override { cancel(); }
  Clock::time_point fired_at;

 private:
  void expired() override {
    fired_at = Clock::now();
    log_.push_back(name_);
    if (then_) then_();
  }
  std::string name_;
  std::vector<std::string>& log_;
  std::function<void()> then_;
};

// One context and its queue, a log the Recorders write to, and the time
// the test began: deadlines are offsets from `start`.
class DeadlineQueueTest : public ::testing::Test {
 protected:
  void Add(DeadlineQueue::Entry& entry, Clock::duration after) {
    queue.add(entry, start + after, io.get_executor());
  }
  void ExpectLog(const std::vector<std::string>& expected) { EXPECT_EQ(log, expected); }

  asio::io_context io;
  DeadlineQueue& queue = DeadlineQueue::of(io.get_executor());
  std::vector<std::string> log;
  const Clock::time_point start = Clock::now();
};

TEST_F(DeadlineQueueTest, EntriesExpireInDeadlineOrderWhateverTheOrderAdded) {
  Recorder a("a", log), b("b", log), c("c", log), d("d", log);
  Add(b, 40ms);
  Add(d, 80ms);
  Add(a, 20ms);  // earlier than the armed timer: re-arms
  Add(c, 60ms);  // lands in the middle
  EXPECT_TRUE(a.queued());
  RunFor(io, 150ms);
  ExpectLog({"a", "b", "c", "d"});
  EXPECT_GE(a.fired_at, start + 20ms);
  EXPECT_GE(d.fired_at, start + 80ms);
  EXPECT_FALSE(a.queued());
}

// Deadlines of many timeouts interleaved, as a client holding keepalives,
// calls and connects makes them: more timeouts than the queue keeps lanes
// for, a share added out of any order, some cancelled or moved. Every
// deadline is already past, so all expire in the first timer run, where
// the order they expire in is the queue's own.
TEST_F(DeadlineQueueTest, ManyTimeoutsInterleavedExpireInDeadlineOrder) {
  struct Stamped final : DeadlineQueue::Entry {
    Clock::time_point at;
    std::vector<Clock::time_point>* fired = nullptr;
    ~Stamped() override { cancel(); }
    void expired() override { fired->push_back(at); }
  };
  std::vector<Clock::time_point> fired;
  std::vector<Stamped> entries(3000);
  const auto base = Clock::now() - 1h;
  std::uint32_t rng = 12345;
  auto next = [&rng] { return rng = rng * 1664525u + 1013904223u; };
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const std::uint32_t r = next();
    // 20 timeouts, each started in order; one in 16 at an arbitrary time.
    entries[i].at = r % 16 == 0 ? base + std::chrono::microseconds(next() % 1'000'000)
                                : base + std::chrono::milliseconds((r >> 8) % 20 * 50) +
                                      std::chrono::microseconds(i);
    entries[i].fired = &fired;
    queue.add(entries[i], entries[i].at, io.get_executor());
  }
  std::vector<Clock::time_point> expected;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const std::uint32_t r = next() % 8;
    if (r == 0) {
      entries[i].cancel();
    } else if (r == 1) {  // moved
      entries[i].at = base + std::chrono::microseconds(next() % 1'000'000);
      queue.add(entries[i], entries[i].at, io.get_executor());
    }
    if (entries[i].queued()) expected.push_back(entries[i].at);
  }
  std::sort(expected.begin(), expected.end());
  RunFor(io, 50ms);
  EXPECT_EQ(fired, expected);
}

TEST_F(DeadlineQueueTest, CancelledAndDestroyedEntriesNeverFire) {
  Recorder kept("kept", log), cancelled("cancelled", log);
  Add(cancelled, 10ms);
  {
    Recorder gone("gone", log);
    Add(gone, 5ms);
  }
  Add(kept, 30ms);
  cancelled.cancel();
  cancelled.cancel();  // idempotent
  RunFor(io, 150ms);
  ExpectLog({"kept"});
}

TEST_F(DeadlineQueueTest, ReAddingMovesTheDeadline) {
  Recorder first("first", log), moved("moved", log);
  Add(moved, 10ms);
  Add(first, 30ms);
  Add(moved, 60ms);
  RunFor(io, 150ms);
  ExpectLog({"first", "moved"});
  EXPECT_GE(moved.fired_at, start + 60ms);
}

TEST_F(DeadlineQueueTest, ExpiryMayQueueAndCancelOthers) {
  Recorder later("later", log), doomed("doomed", log);
  Recorder trigger("trigger", log, [&] {
    doomed.cancel();
    queue.add(later, Clock::now() + 5ms, io.get_executor());
  });
  Add(trigger, 5ms);
  Add(doomed, 20ms);
  RunFor(io, 150ms);
  ExpectLog({"trigger", "later"});
}

TEST_F(DeadlineQueueTest, ContextDestroyedWithEntriesQueued) {
  Recorder outlives("outlives", log);
  {
    asio::io_context own;
    DeadlineQueue::of(own.get_executor()).add(outlives, Clock::now() + 1h, own.get_executor());
    EXPECT_TRUE(outlives.queued());
  }
  EXPECT_FALSE(outlives.queued());  // let go by the queue's shutdown
  EXPECT_TRUE(log.empty());
}

// An armed timer with no entry left must not keep run() going: a program
// whose last connection finished negotiating would otherwise wait for the
// connect timeout before run() returned.
TEST_F(DeadlineQueueTest, AnIdleTimerDoesNotKeepRunGoing) {
  Recorder entry("entry", log);
  // Added from a handler, as connections do.
  asio::post(io, [&] {
    DeadlineQueue::of(io.get_executor()).add(entry, Clock::now() + 1h, io.get_executor());
  });
  asio::steady_timer other(io, 20ms);
  other.async_wait([&](std::error_code) { entry.cancel(); });
  const auto ran = Clock::now();
  io.run();
  EXPECT_LT(Clock::now() - ran, 5s);
  EXPECT_TRUE(log.empty());

  // The context stays usable: a new deadline still fires on a later run().
  io.restart();
  asio::post(io, [&] {
    DeadlineQueue::of(io.get_executor()).add(entry, Clock::now() + 10ms, io.get_executor());
  });
  RunFor(io, 50ms);
  ExpectLog({"entry"});
}

// Added from outside run() (no handler of the context running), the wait
// counts as work: run() goes on until the deadline.
TEST_F(DeadlineQueueTest, AddedFromOutsideTheLoopTheWaitKeepsRunGoing) {
  Recorder entry("entry", log);
  Add(entry, 30ms);
  io.run();
  ExpectLog({"entry"});
  EXPECT_GE(entry.fired_at, start + 30ms);
}

TEST_F(DeadlineQueueTest, OneQueuePerContext) {
  asio::io_context io1, io2;
  EXPECT_EQ(&DeadlineQueue::of(io1.get_executor()), &DeadlineQueue::of(io1.get_executor()));
  EXPECT_NE(&DeadlineQueue::of(io1.get_executor()), &DeadlineQueue::of(io2.get_executor()));
}

// A TCP socket bound to 127.0.0.1 on a port the kernel picks (in *addr);
// -1 if that fails.
int bound_loopback_socket(sockaddr_in* addr) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  *addr = sockaddr_in{};
  addr->sin_family = AF_INET;
  addr->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof *addr;
  if (::bind(fd, reinterpret_cast<sockaddr*>(addr), sizeof *addr) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(addr), &len) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// The transport's connect to `endpoint`, run to its end on a fresh io_context.
Result<std::unique_ptr<ByteStream>> connect_until(const Endpoint& endpoint, Clock::time_point deadline) {
  asio::io_context io;
  auto connected = asio::co_spawn(
      io, transport_for(endpoint.scheme).connect(io.get_executor(), endpoint, deadline), asio::use_future);
  io.run();
  return connected.get();
}

Endpoint loopback_endpoint(const sockaddr_in& addr) {
  return Endpoint::parse("tcp://127.0.0.1:" + std::to_string(ntohs(addr.sin_port))).value();
}

// A TCP listener whose accept queue is full drops new SYNs, so a connect to it
// stays in progress: the transport's deadline must end it.
TEST(ConnectDeadlineTest, TcpConnectToAFullBacklogTimesOut) {
  sockaddr_in addr{};
  const int listener = bound_loopback_socket(&addr);
  ASSERT_GE(listener, 0);
  ASSERT_EQ(::listen(listener, 0), 0);
  // Fill the accept queue (nobody accepts).
  std::vector<int> fillers;
  for (int i = 0; i < 4; ++i) {
    const int s = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    ::connect(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    fillers.push_back(s);
  }
  ::usleep(50'000);

  const auto start = Clock::now();
  auto result = connect_until(loopback_endpoint(addr), start + 300ms);
  const auto took = Clock::now() - start;
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.code(), Errc::kDeadlineExceeded) << result.status().to_string();
  EXPECT_GE(took, 300ms);
  EXPECT_LT(took, 5s);
  for (int s : fillers) ::close(s);
  ::close(listener);
}

// A loopback TCP connect has usually finished (or failed) inside connect(),
// which still says EINPROGRESS; the transport asks with a zero-timeout poll
// before it waits. A refusal found that way is typed as one found by waiting.
TEST(ConnectDeadlineTest, TcpRefusalFoundWithoutWaitingIsTyped) {
  // Bound but not listening: a SYN to it is answered with a reset.
  sockaddr_in addr{};
  const int bound = bound_loopback_socket(&addr);
  ASSERT_GE(bound, 0);
  const auto start = Clock::now();
  auto result = connect_until(loopback_endpoint(addr), start + 5s);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.code(), std::errc::connection_refused) << result.status().to_string();
  EXPECT_LT(Clock::now() - start, 2s);
  ::close(bound);
}

TEST(ConnectDeadlineTest, UnixConnectsAtOnceAndRefusalIsTyped) {
  auto result = connect_until(Endpoint::parse("unix:@authrpc-nobody-listens-here").value(),
                              Clock::now() + 1s);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.code(), std::errc::connection_refused) << result.status().to_string();
  EXPECT_NE(result.status().to_string().find("connect unix:@authrpc-nobody-listens-here"),
            std::string::npos)
      << result.status().to_string();
}

// A Unix listener whose queue is full answers a non-blocking connect() with
// EAGAIN and does not connect at all (unlike TCP, nothing is in progress);
// the socket then polls writable with SO_ERROR 0. The transport must say the
// server is busy, not hand back an unconnected stream.
TEST(ConnectDeadlineTest, UnixConnectToAFullQueueIsTypedUnavailable) {
  const std::string name = "authrpc-full-queue-" + std::to_string(::getpid());
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path + 1, name.data(), name.size());  // abstract
  const auto length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  const int listener = ::socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(listener, 0);
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&addr), length), 0);
  ASSERT_EQ(::listen(listener, 0), 0);
  std::vector<int> fillers;  // nobody accepts: the queue fills
  for (int i = 0; i < 4; ++i) {
    const int s = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);
    ::connect(s, reinterpret_cast<sockaddr*>(&addr), length);
    fillers.push_back(s);
  }

  const auto start = Clock::now();
  auto result = connect_until(Endpoint::parse("unix:@" + name).value(), start + 2s);
  ASSERT_FALSE(result.ok()) << "connected to a listener that has no room";
  EXPECT_EQ(result.code(), std::errc::resource_unavailable_try_again) << result.status().to_string();
  EXPECT_EQ(to_wire_errc(result.code()), Errc::kUnavailable) << result.status().to_string();
  EXPECT_EQ(retry_advice(result.code()), RetryAdvice::kRetry) << result.status().to_string();
  EXPECT_NE(result.status().to_string().find("listen queue is full"), std::string::npos)
      << result.status().to_string();
  EXPECT_LT(Clock::now() - start, 1s);
  for (int s : fillers) ::close(s);
  ::close(listener);
}

}  // namespace
}  // namespace authrpc
