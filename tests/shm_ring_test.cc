// The shared-memory ring (rpc/shm_ring.h): byte-exact transfers across two
// threads and two processes, wraparound, a slow reader bounding the writer,
// wake-up economy, peer death, orderly close, cancellation, corrupted shared
// state, and refused geometry and descriptors.
#include "authrpc/rpc/shm_ring.h"

#include <asio/detached.hpp>
#include <asio/io_context.hpp>
#include <asio/steady_timer.hpp>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <thread>

#include "authrpc/rpc/shm_handoff.h"
#include "tests/testing/shm_test_util.h"

namespace authrpc {
namespace {

using namespace shm_test;
using namespace std::chrono_literals;

// The layout documented in docs/SHM.md, for tests that play a hostile peer.
constexpr std::size_t kOffMagic = 0, kOffVersion = 8, kOffHeaderSize = 12, kOffSlotSize = 16,
                      kOffSlotCount = 20, kOffRegionSize = 24, kOffHead = 64, kOffTail = 128,
                      kOffSlots = 320;

// A ring with both ends opened in this process, plus a hostile mapping of
// the whole region (through a duplicate of the memfd).
struct LocalRing {
  std::optional<ShmWriter> writer;
  std::optional<ShmReader> reader;
  std::byte* raw = nullptr;
  std::size_t raw_size = 0;

  LocalRing(asio::io_context& writer_io, asio::io_context& reader_io, ShmRingOptions options,
            ShmWaitOptions wait = {}) {
    auto ring = ShmRing::create(options);
    EXPECT_TRUE(ring.ok()) << ring.status().to_string();
    auto peer = ring->take_peer_fds();
    EXPECT_TRUE(peer.ok()) << peer.status().to_string();
    raw_size = ring->region_size();
    raw = static_cast<std::byte*>(
        ::mmap(nullptr, raw_size, PROT_READ | PROT_WRITE, MAP_SHARED, peer->memfd.get(), 0));
    EXPECT_NE(raw, MAP_FAILED);
    auto attached = ShmRing::attach(std::move(*peer));
    EXPECT_TRUE(attached.ok()) << attached.status().to_string();
    auto w = ShmWriter::open(writer_io.get_executor(), std::move(*ring), wait);
    auto r = ShmReader::open(reader_io.get_executor(), std::move(*attached), wait);
    EXPECT_TRUE(w.ok() && r.ok());
    writer.emplace(std::move(*w));
    reader.emplace(std::move(*r));
  }
  ~LocalRing() { ::munmap(raw, raw_size); }

  // Commits, without waiting, message `tag` (`size` bytes of fill_message)
  // tagged `tag`; false if no slot was free or the commit failed.
  bool commit_now(std::uint32_t tag, std::size_t size) {
    auto slot = writer->try_acquire();
    if (!slot.ok()) return false;
    fill_message(slot->first(size), tag);
    return writer->commit(size, tag).ok();
  }

  void poke64(std::size_t off, std::uint64_t v) { std::memcpy(raw + off, &v, 8); }
  void poke32(std::size_t off, std::uint32_t v) { std::memcpy(raw + off, &v, 4); }
};

// Cancels both ends after `limit`, so that a bug shows as a failure, not a hang.
struct Watchdog {
  asio::steady_timer timer;
  Watchdog(asio::io_context& io, std::chrono::seconds limit, std::function<void()> on_expiry)
      : timer(io, limit) {
    timer.async_wait([f = std::move(on_expiry)](std::error_code ec) {
      if (!ec) f();
    });
  }
};

// A ring of `options` shared with a forked child over a socketpair: the
// child receives its end, runs `child(ring, socket)` and _exits with the
// result (10 if no ring came); the parent keeps the ring and its socket.
struct ChildRing {
  pid_t pid = -1;
  int socket = -1;
  Result<ShmRing> ring;
};
ChildRing share_with_child(const ShmRingOptions& options,
                           const std::function<int(ShmRing& ring, int socket)>& child) {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
    return {-1, -1, Status(Errc::kInternal, "socketpair failed")};
  }
  const pid_t pid = fork_child([&]() -> int {
    ::close(sv[0]);
    auto ring = receive_shm_ring_blocking(sv[1]);
    if (!ring.ok()) return 10;
    return child(*ring, sv[1]);
  });
  ::close(sv[1]);
  auto ring = ShmRing::create(options);
  if (ring.ok()) {
    if (Status sent = send_shm_ring_blocking(sv[0], *ring); !sent.ok()) ring = std::move(sent);
  }
  return {pid, sv[0], std::move(ring)};
}

struct TransferCase {
  const char* name;
  std::uint32_t slot_size;
  std::uint32_t slot_count;
  std::uint64_t messages;
  std::uint32_t spin;
};

const TransferCase kTransferCases[] = {
    {"small_slots_many_wraps", 4096, 2, 3000, 0},
    {"default_geometry", 128 * 1024, 16, 400, 0},
    {"large_slots", 1024 * 1024, 4, 40, 0},
    {"with_spin", 64 * 1024, 8, 1000, 2000},
};

class ShmRingTransfer : public ::testing::TestWithParam<TransferCase> {};

TEST_P(ShmRingTransfer, ByteExactAcrossThreads) {
  const TransferCase& c = GetParam();
  asio::io_context writer_io, reader_io;
  LocalRing ring(writer_io, reader_io, {c.slot_size, c.slot_count}, {c.spin});
  SequenceDigest sent, received;
  Status write_status, read_status;
  std::thread writer_thread([&] {
    write_status = run_to_end(writer_io, write_sequence(*ring.writer, c.messages,
                                                        [&](std::uint64_t seq) {
                                                          return message_size(seq, c.slot_size);
                                                        },
                                                        sent));
  });
  read_status = run_to_end(reader_io, read_sequence(*ring.reader, received));
  writer_thread.join();
  EXPECT_TRUE(write_status.ok()) << write_status.to_string();
  EXPECT_EQ(read_status.code, ShmErrc::kEndOfRing) << read_status.to_string();
  const auto a = sent.finish(), b = received.finish();
  EXPECT_EQ(a.messages, c.messages);
  EXPECT_EQ(a, b);
  EXPECT_EQ(ring.reader->released(), c.messages);
  RecordProperty("writer_sleeps", std::to_string(ring.writer->sleeps()));
  RecordProperty("reader_sleeps", std::to_string(ring.reader->sleeps()));
}

// Parent and child each run one end; the ring travels over a socketpair.
TEST_P(ShmRingTransfer, ByteExactAcrossProcesses) {
  const TransferCase& c = GetParam();
  for (const bool parent_writes : {true, false}) {
    SCOPED_TRACE(parent_writes ? "parent writes" : "child writes");
    auto size = [&](std::uint64_t seq) { return message_size(seq, c.slot_size); };
    ChildRing child = share_with_child({c.slot_size, c.slot_count}, [&](ShmRing& theirs, int to_parent) {
      asio::io_context io;
      SequenceDigest digest;
      Status s;
      if (parent_writes) {
        auto reader = ShmReader::open(io.get_executor(), std::move(theirs), {c.spin});
        if (!reader.ok()) return 11;
        s = run_to_end(io, read_sequence(*reader, digest));
        if (s.code != ShmErrc::kEndOfRing) return 12;
      } else {
        auto writer = ShmWriter::open(io.get_executor(), std::move(theirs), {c.spin});
        if (!writer.ok()) return 11;
        s = run_to_end(io, write_sequence(*writer, c.messages, size, digest));
        if (!s.ok()) return 12;
      }
      const auto v = digest.finish();
      return ::write(to_parent, &v, sizeof v) == static_cast<ssize_t>(sizeof v) ? 0 : 13;
    });
    ASSERT_TRUE(child.ring.ok()) << child.ring.status().to_string();
    asio::io_context io;
    SequenceDigest digest;
    if (parent_writes) {
      auto writer = ShmWriter::open(io.get_executor(), std::move(*child.ring), {c.spin});
      ASSERT_TRUE(writer.ok());
      Status s = run_to_end(io, write_sequence(*writer, c.messages, size, digest));
      EXPECT_TRUE(s.ok()) << s.to_string();
    } else {
      auto reader = ShmReader::open(io.get_executor(), std::move(*child.ring), {c.spin});
      ASSERT_TRUE(reader.ok());
      Status s = run_to_end(io, read_sequence(*reader, digest));
      EXPECT_EQ(s.code, ShmErrc::kEndOfRing) << s.to_string();
    }
    SequenceDigest::Value theirs;
    ASSERT_EQ(::read(child.socket, &theirs, sizeof theirs), static_cast<ssize_t>(sizeof theirs));
    ::close(child.socket);
    EXPECT_EQ(wait_child(child.pid), 0);
    const auto ours = digest.finish();
    EXPECT_EQ(ours.messages, c.messages);
    EXPECT_EQ(ours, theirs);
  }
}

INSTANTIATE_TEST_SUITE_P(Geometries, ShmRingTransfer, ::testing::ValuesIn(kTransferCases),
                         [](const auto& p) { return std::string(p.param.name); });

// A reader that releases a slot every millisecond: the writer never gets more
// than slot_count slots ahead (the ring is all the memory there is), and
// sleeps instead of spinning while it waits.
TEST(ShmRing, SlowReaderBoundsTheWriter) {
  asio::io_context io;
  constexpr std::uint32_t kSlots = 4;
  constexpr std::uint64_t kMessages = 60;
  LocalRing ring(io, io, {4096, kSlots});
  std::uint64_t max_ahead = 0;
  bool full_seen = false;
  Status write_status, read_status;
  asio::co_spawn(io, [&]() -> asio::awaitable<void> {
    for (std::uint64_t seq = 0; seq < kMessages; ++seq) {
      auto probe = ring.writer->try_acquire();
      if (!probe.ok() && probe.code() == asio::error::would_block) full_seen = true;
      auto slot = co_await ring.writer->acquire();
      if (!slot.ok()) { write_status = slot.status(); co_return; }
      fill_message(slot->first(100), seq);
      write_status = ring.writer->commit(100, static_cast<std::uint32_t>(seq));
      max_ahead = std::max(max_ahead, ring.writer->committed() - ring.reader->released());
    }
    ring.writer->close();
  }, asio::detached);
  asio::co_spawn(io, [&]() -> asio::awaitable<void> {
    asio::steady_timer pause(io);
    for (;;) {
      auto slot = co_await ring.reader->next();
      if (!slot.ok()) { read_status = slot.status(); co_return; }
      pause.expires_after(1ms);
      co_await pause.async_wait(asio::use_awaitable);
      (void)ring.reader->release();
    }
  }, asio::detached);
  io.run();
  EXPECT_TRUE(write_status.ok()) << write_status.to_string();
  EXPECT_EQ(read_status.code, ShmErrc::kEndOfRing);
  EXPECT_EQ(max_ahead, kSlots);
  EXPECT_TRUE(full_seen);
  EXPECT_GT(ring.writer->sleeps(), 0u);
  EXPECT_EQ(ring.reader->released(), kMessages);
}

// The writer signals the eventfd only when the reader has said it sleeps:
// five commits to a sleeping reader cost one wake-up, and commits to a
// reader that is awake cost none.
TEST(ShmRing, SignalsOnlyASleepingPeer) {
  asio::io_context io;
  LocalRing ring(io, io, {4096, 8});
  std::uint64_t seen = 0;
  asio::co_spawn(io, [&]() -> asio::awaitable<void> {
    for (;;) {
      auto slot = co_await ring.reader->next();
      if (!slot.ok()) co_return;
      ++seen;
      (void)ring.reader->release();
    }
  }, asio::detached);
  io.poll();  // the reader finds nothing and goes to sleep
  EXPECT_EQ(ring.reader->sleeps(), 1u);
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(ring.writer->try_acquire().ok());
    ASSERT_TRUE(ring.writer->commit(10).ok());
  }
  EXPECT_EQ(ring.writer->wakeups_sent(), 1u);
  io.poll();
  EXPECT_EQ(seen, 5u);
  // The reader is asleep again; it released 5 slots to a writer that never slept.
  EXPECT_EQ(ring.reader->wakeups_sent(), 0u);
  ring.writer->close();
  io.run();
}

// A reader may hold several views at once; they stay intact until released,
// oldest first, and the writer reuses a slot only after its release.
TEST(ShmRing, ReaderHoldsSeveralViews) {
  asio::io_context io;
  LocalRing ring(io, io, {4096, 3});
  for (std::uint32_t i = 0; i < 3; ++i) ASSERT_TRUE(ring.commit_now(i, 4096));
  std::vector<ShmSlot> held;
  for (int i = 0; i < 3; ++i) {
    auto slot = ring.reader->try_next();
    ASSERT_TRUE(slot.ok());
    held.push_back(*slot);
  }
  EXPECT_EQ(ring.writer->try_acquire().code(), asio::error::would_block);
  ASSERT_TRUE(ring.reader->release().ok());  // gives back tag 0's slot only
  ASSERT_TRUE(ring.commit_now(3, 4096));
  std::vector<std::byte> expected(4096);
  fill_message(expected, 3);  // the released view now shows the slot's new bytes
  EXPECT_EQ(std::memcmp(held[0].data.data(), expected.data(), expected.size()), 0);
  for (std::uint32_t i = 1; i < 3; ++i) {
    fill_message(expected, i);
    EXPECT_EQ(held[i].tag, i);
    EXPECT_EQ(std::memcmp(held[i].data.data(), expected.data(), expected.size()), 0);
  }
  EXPECT_TRUE(ring.reader->release().ok());
  EXPECT_TRUE(ring.reader->release().ok());
  EXPECT_EQ(ring.reader->release().code, Errc::kFailedPrecondition);
  EXPECT_EQ(ring.reader->try_next()->tag, 3u);
}

// The reader's views are read-only in fact: a write through one faults.
TEST(ShmRing, ReaderViewsAreReadOnly) {
  const pid_t pid = fork_child([]() -> int {
    asio::io_context io;
    LocalRing ring(io, io, {4096, 2});
    if (!ring.writer->try_acquire().ok() || !ring.writer->commit(16).ok()) return 10;
    auto slot = ring.reader->try_next();
    if (!slot.ok()) return 11;
    ::signal(SIGSEGV, SIG_DFL);  // a plain fault, also under AddressSanitizer
    auto* p = const_cast<volatile std::byte*>(slot->data.data());
    *p = std::byte{1};
    return 12;
  });
  EXPECT_EQ(wait_child(pid), 128 + SIGSEGV);
}

// The seals hold for the peer too: it can neither shrink the region under
// our mapping nor lift the seals.
TEST(ShmRing, PeerCannotResizeTheRegion) {
  auto ring = ShmRing::create({4096, 2});
  ASSERT_TRUE(ring.ok());
  auto peer = ring->take_peer_fds();
  ASSERT_TRUE(peer.ok());
  EXPECT_EQ(::ftruncate(peer->memfd.get(), 4096), -1);
  EXPECT_EQ(errno, EPERM);
  EXPECT_EQ(::ftruncate(peer->memfd.get(), 1 << 20), -1);
  EXPECT_EQ(::fcntl(peer->memfd.get(), F_ADD_SEALS, F_SEAL_WRITE), -1);
  EXPECT_EQ(::fallocate(peer->memfd.get(), 0, 0, 1 << 20), -1);
}

TEST(ShmRing, ReaderCloseStopsTheWriter) {
  asio::io_context io;
  LocalRing ring(io, io, {4096, 2});
  ring.reader->close();
  Status s = run_to_end(io, [&]() -> asio::awaitable<Status> {
    auto slot = co_await ring.writer->acquire();
    co_return slot.status();
  }());
  EXPECT_EQ(s.code, ShmErrc::kPeerClosed);
  EXPECT_EQ(to_wire_errc(s.code), Errc::kCancelled);
}

TEST(ShmRing, CancelWakesAPendingWait) {
  asio::io_context io;
  LocalRing ring(io, io, {4096, 2});
  asio::steady_timer timer(io, 20ms);
  timer.async_wait([&](std::error_code) {
    ring.reader->cancel(Status(Errc::kDeadlineExceeded, "stream deadline"));
  });
  Status s = run_to_end(io, [&]() -> asio::awaitable<Status> {
    auto slot = co_await ring.reader->next();
    co_return slot.status();
  }());
  EXPECT_EQ(s.code, Errc::kDeadlineExceeded);
  EXPECT_FALSE(ring.reader->try_next().ok());
}

// writer_finished(): the owner learnt by another path (the call's final
// frame) that the writer commits nothing more. Slots committed before are
// still delivered, then kEndOfRing, with no close() from the writer; a
// next() already waiting on an empty ring is woken with kEndOfRing.
TEST(ShmRing, WriterFinishedDeliversCommittedSlotsThenEnds) {
  asio::io_context io;
  LocalRing ring(io, io, {4096, 4});
  for (std::uint32_t i = 0; i < 2; ++i) ASSERT_TRUE(ring.commit_now(i, 100 + i));
  ring.reader->writer_finished();
  std::vector<std::byte> expected;
  for (std::uint32_t i = 0; i < 2; ++i) {
    auto slot = ring.reader->try_next();
    ASSERT_TRUE(slot.ok()) << slot.status().to_string();
    expected.assign(100 + i, std::byte{});
    fill_message(expected, i);
    EXPECT_EQ(slot->tag, i);
    ASSERT_EQ(slot->data.size(), expected.size());
    EXPECT_EQ(std::memcmp(slot->data.data(), expected.data(), expected.size()), 0);
    ASSERT_TRUE(ring.reader->release().ok());
  }
  EXPECT_EQ(ring.reader->try_next().status().code, ShmErrc::kEndOfRing);
  Status waited = run_to_end(io, [&]() -> asio::awaitable<Status> {
    auto slot = co_await ring.reader->next();
    co_return slot.status();
  }());
  EXPECT_EQ(waited.code, ShmErrc::kEndOfRing);
}

TEST(ShmRing, WriterFinishedWakesAPendingWait) {
  asio::io_context io;
  LocalRing ring(io, io, {4096, 2});
  asio::steady_timer timer(io, 20ms);
  timer.async_wait([&](std::error_code) { ring.reader->writer_finished(); });
  Watchdog watchdog(io, 10s, [&] { ring.reader->cancel(Status(Errc::kDeadlineExceeded, "hung")); });
  Status s = run_to_end(io, [&]() -> asio::awaitable<Status> {
    auto slot = co_await ring.reader->next();
    watchdog.timer.cancel();
    co_return slot.status();
  }());
  EXPECT_EQ(s.code, ShmErrc::kEndOfRing);
}

// The peer process dies (SIGKILL) in the middle: the other side gets
// kPeerGone through the liveness socket, not a hang.
TEST(ShmRing, PeerDeathIsAnErrorNotAHang) {
  for (const bool writer_dies : {true, false}) {
    SCOPED_TRACE(writer_dies ? "writer dies" : "reader dies");
    ChildRing child = share_with_child({4096, 4}, [&](ShmRing& theirs, int) {
      asio::io_context io;
      SequenceDigest digest;
      if (writer_dies) {
        auto writer = ShmWriter::open(io.get_executor(), std::move(theirs));
        if (!writer.ok()) return 11;
        auto size = [](std::uint64_t) { return std::size_t{1000}; };
        (void)run_to_end(io, write_sequence(*writer, 5, size, digest, /*close=*/false));
      } else {
        auto reader = ShmReader::open(io.get_executor(), std::move(theirs));
        if (!reader.ok()) return 11;
        for (int i = 0; i < 3; ++i) {
          auto slot = reader->try_next();
          while (!slot.ok()) {
            ::usleep(1000);
            slot = reader->try_next();
          }
          (void)reader->release();
        }
      }
      ::kill(::getpid(), SIGKILL);
      return 0;
    });
    ASSERT_TRUE(child.ring.ok());
    asio::io_context io;
    SequenceDigest digest;
    Status s;
    if (writer_dies) {
      auto reader = ShmReader::open(io.get_executor(), std::move(*child.ring));
      ASSERT_TRUE(reader.ok());
      Watchdog dog(io, 20s, [&] { reader->cancel(Status(Errc::kDeadlineExceeded, "hung")); });
      s = run_to_end(io, read_sequence(*reader, digest));
      dog.timer.cancel();
      EXPECT_EQ(digest.finish().messages, 5u);  // what was committed still arrives
    } else {
      auto writer = ShmWriter::open(io.get_executor(), std::move(*child.ring));
      ASSERT_TRUE(writer.ok());
      Watchdog dog(io, 20s, [&] { writer->cancel(Status(Errc::kDeadlineExceeded, "hung")); });
      s = run_to_end(io, write_sequence(*writer, 1000, [](std::uint64_t) { return 10; }, digest));
      dog.timer.cancel();
      EXPECT_LE(writer->committed(), 3u + 4u);  // what it read + a full ring
    }
    EXPECT_EQ(s.code, ShmErrc::kPeerGone) << s.to_string();
    EXPECT_EQ(to_wire_errc(s.code), Errc::kConnectionClosed);
    EXPECT_EQ(wait_child(child.pid), 128 + SIGKILL);
    ::close(child.socket);
  }
}

// A hostile or buggy peer scribbles on the shared indices: the victim reports
// kCorrupted instead of touching memory outside the ring.
struct CorruptionCase {
  const char* name;
  std::function<void(LocalRing&)> corrupt;
  bool writer_sees;  // else the reader does
};

const std::uint32_t kCorruptSlots = 4;
const CorruptionCase kCorruptionCases[] = {
    {"head_beyond_ring", [](LocalRing& r) { r.poke64(kOffHead, kCorruptSlots + 1); }, false},
    {"head_far_beyond", [](LocalRing& r) { r.poke64(kOffHead, ~0ull); }, false},
    {"slot_length_beyond_slot",
     [](LocalRing& r) {
       r.poke64(kOffHead, 1);
       r.poke32(kOffSlots, 4097);
     },
     false},
    {"tail_beyond_head", [](LocalRing& r) { r.poke64(kOffTail, 1); }, true},
    {"tail_backwards_past_ring",
     [](LocalRing& r) {
       for (int i = 0; i < 3; ++i) {
         (void)r.writer->try_acquire();
         (void)r.writer->commit(1);
       }
       r.poke64(kOffTail, ~0ull - 5);
     },
     true},
};

class ShmRingCorruption : public ::testing::TestWithParam<CorruptionCase> {};

TEST_P(ShmRingCorruption, IsDetected) {
  asio::io_context io;
  LocalRing ring(io, io, {4096, kCorruptSlots});
  GetParam().corrupt(ring);
  if (GetParam().writer_sees) {
    auto slot = ring.writer->try_acquire();
    EXPECT_EQ(slot.code(), ShmErrc::kCorrupted) << slot.status().to_string();
    EXPECT_EQ(ring.writer->commit(0).code, Errc::kFailedPrecondition);
    EXPECT_EQ(ring.writer->try_acquire().code(), ShmErrc::kCorrupted);  // sticky
  } else {
    auto slot = ring.reader->try_next();
    EXPECT_EQ(slot.code(), ShmErrc::kCorrupted) << slot.status().to_string();
    EXPECT_EQ(to_wire_errc(slot.code()), Errc::kProtocolError);
    EXPECT_EQ(ring.reader->try_next().code(), ShmErrc::kCorrupted);  // sticky
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, ShmRingCorruption, ::testing::ValuesIn(kCorruptionCases),
                         [](const auto& p) { return std::string(p.param.name); });

TEST(ShmRing, HeadMovingBackwardsIsDetected) {
  asio::io_context io;
  LocalRing ring(io, io, {4096, 4});
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(ring.writer->try_acquire().ok());
    ASSERT_TRUE(ring.writer->commit(5).ok());
    ASSERT_TRUE(ring.reader->try_next().ok());
  }
  ring.poke64(kOffHead, 1);
  EXPECT_EQ(ring.reader->try_next().code(), ShmErrc::kCorrupted);
}

// ShmRing::attach refuses whatever a peer could hand over that is not a
// well-formed ring.
struct AttachCase {
  const char* name;
  std::function<void(ShmRingFds&, std::byte* header)> spoil;
  ShmErrc expected;
  ShmAttachLimits limits = {};
};

UniqueFd raw_memfd(std::size_t size, unsigned seals, const std::byte* first_page) {
  UniqueFd fd(::memfd_create("test", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  EXPECT_EQ(::ftruncate(fd.get(), static_cast<off_t>(size)), 0);
  EXPECT_EQ(::pwrite(fd.get(), first_page, 4096, 0), 4096);
  if (seals != 0) {
    EXPECT_EQ(::fcntl(fd.get(), F_ADD_SEALS, seals), 0);
  }
  return fd;
}

template <typename T>
void put(std::byte* header, std::size_t off, T v) {
  std::memcpy(header + off, &v, sizeof v);
}

const AttachCase kAttachCases[] = {
    {"bad_magic", [](ShmRingFds&, std::byte* h) { put<std::uint64_t>(h, kOffMagic, 42); },
     ShmErrc::kBadGeometry},
    {"future_version", [](ShmRingFds&, std::byte* h) { put<std::uint32_t>(h, kOffVersion, 2); },
     ShmErrc::kBadGeometry},
    {"slot_size_not_pages", [](ShmRingFds&, std::byte* h) { put<std::uint32_t>(h, kOffSlotSize, 5000); },
     ShmErrc::kBadGeometry},
    {"slot_size_larger_than_region",
     [](ShmRingFds&, std::byte* h) { put<std::uint32_t>(h, kOffSlotSize, 8192); }, ShmErrc::kBadGeometry},
    {"slot_count_huge", [](ShmRingFds&, std::byte* h) { put<std::uint32_t>(h, kOffSlotCount, 1u << 30); },
     ShmErrc::kBadGeometry},
    {"header_size_lies", [](ShmRingFds&, std::byte* h) { put<std::uint32_t>(h, kOffHeaderSize, 0); },
     ShmErrc::kBadGeometry},
    {"region_size_lies",
     [](ShmRingFds&, std::byte* h) { put<std::uint64_t>(h, kOffRegionSize, 1ull << 40); },
     ShmErrc::kBadGeometry},
    {"over_our_slot_limit", [](ShmRingFds&, std::byte*) {}, ShmErrc::kBadGeometry, {.max_slot_count = 2}},
    {"over_our_region_limit", [](ShmRingFds&, std::byte*) {}, ShmErrc::kBadGeometry,
     {.max_region_size = 8192}},
    {"unsealed_memfd",
     [](ShmRingFds& f, std::byte* h) { f.memfd = raw_memfd(4096 + 4 * 4096, 0, h); },
     ShmErrc::kBadGeometry},
    {"sealed_but_wrong_size",
     [](ShmRingFds& f, std::byte* h) {
       f.memfd = raw_memfd(4096 + 3 * 4096, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL, h);
     },
     ShmErrc::kBadGeometry},
    {"pipe_as_eventfd",
     [](ShmRingFds& f, std::byte*) {
       int p[2];
       ASSERT_EQ(::pipe2(p, O_CLOEXEC), 0);
       f.data_ready.reset(p[0]);
       ::close(p[1]);
     },
     ShmErrc::kBadHandoff},
    {"eventfd_as_liveness",
     [](ShmRingFds& f, std::byte*) { f.liveness.reset(::eventfd(0, EFD_CLOEXEC)); }, ShmErrc::kBadHandoff},
    {"missing_descriptor", [](ShmRingFds& f, std::byte*) { f.space_ready.reset(); }, ShmErrc::kBadHandoff},
};

class ShmRingAttach : public ::testing::TestWithParam<AttachCase> {};

TEST_P(ShmRingAttach, RefusesBadRings) {
  auto ring = ShmRing::create({4096, 4});
  ASSERT_TRUE(ring.ok());
  auto peer = ring->take_peer_fds();
  ASSERT_TRUE(peer.ok());
  void* header = ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, peer->memfd.get(), 0);
  ASSERT_NE(header, MAP_FAILED);
  GetParam().spoil(*peer, static_cast<std::byte*>(header));
  auto attached = ShmRing::attach(std::move(*peer), GetParam().limits);
  ::munmap(header, 4096);
  ASSERT_FALSE(attached.ok());
  EXPECT_EQ(attached.code(), GetParam().expected) << attached.status().to_string();
}

INSTANTIATE_TEST_SUITE_P(Cases, ShmRingAttach, ::testing::ValuesIn(kAttachCases),
                         [](const auto& p) { return std::string(p.param.name); });

TEST(ShmRing, RefusesBadOptions) {
  const ShmRingOptions bad[] = {{0, 4}, {4097, 4}, {128u << 20, 4}, {4096, 1}, {4096, 5000}};
  for (const auto& o : bad) {
    auto ring = ShmRing::create(o);
    EXPECT_EQ(ring.code(), Errc::kInvalidArgument) << o.slot_size << " x " << o.slot_count;
  }
}

TEST(ShmRing, PeerFdsAreTakenOnce) {
  auto ring = ShmRing::create({});
  ASSERT_TRUE(ring.ok());
  ASSERT_TRUE(ring->take_peer_fds().ok());
  EXPECT_EQ(ring->take_peer_fds().code(), Errc::kFailedPrecondition);
}

// With no descriptor left (as where memfd is forbidden), creation fails with
// a typed error that tells the caller to stay on the socket.
TEST(ShmRing, UnavailableMemfdIsATypedError) {
  const pid_t pid = fork_child([]() -> int {
    const int lowest_free = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (lowest_free < 0) return 10;
    ::close(lowest_free);
    rlimit saved{};
    if (::getrlimit(RLIMIT_NOFILE, &saved) != 0) return 11;
    const rlimit limit{static_cast<rlim_t>(lowest_free), saved.rlim_max};
    if (::setrlimit(RLIMIT_NOFILE, &limit) != 0) return 11;
    auto ring = ShmRing::create({});
    // Descriptors back before looking at the error: UBSan's checks need one.
    if (::setrlimit(RLIMIT_NOFILE, &saved) != 0) return 11;
    if (ring.ok()) return 12;
    if (ring.code() != ShmErrc::kUnsupported) return 13;
    if (to_wire_errc(ring.code()) != Errc::kUnimplemented) return 14;
    return 0;
  });
  EXPECT_EQ(wait_child(pid), 0);
}

}  // namespace
}  // namespace authrpc
