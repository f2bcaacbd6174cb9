// A single-producer/single-consumer ring of fixed-size buffer slots in shared
// memory (a sealed memfd), for moving bulk data between two processes on one
// host without copying it through a socket. The layout, the index protocol and
// the security checks are in docs/SHM.md.
//
// Life of a ring:
//   one side:   ShmRing::create(options) → take_peer_fds() → send them over the
//               Unix socket (rpc/shm_handoff.h) → ShmWriter::open or ShmReader::open
//   other side: receive the fds → ShmRing::attach(fds) (validates everything
//               the peer wrote) → the other role's open().
// Either side may create; either may be the writer.
//
// Writer:  co_await acquire() → fill the span in place → commit(length).
// Reader:  co_await next() → a read-only view into shared memory → release().
// Nothing is copied by the ring. Waits sleep on an eventfd (one per direction)
// through Asio; a side signals it only when the other has said it is asleep,
// so a busy ring makes almost no system calls.
#pragma once

#include <asio/any_io_executor.hpp>
#include <asio/awaitable.hpp>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "authrpc/base/result.h"
#include "authrpc/rpc/shm_errors.h"
#include "authrpc/rpc/shm_options.h"
#include "authrpc/rpc/unique_fd.h"

namespace authrpc {

// How a ShmWriter or ShmReader waits.
struct ShmWaitOptions {
  // Polls of the shared index (with a CPU pause between) before going to
  // sleep on the eventfd. 0 (the default) sleeps at once: no busy spinning.
  std::uint32_t spin = 0;
};

// The descriptors of one side of a ring. All are close-on-exec.
struct ShmRingFds {
  UniqueFd memfd;        // the shared region; size sealed
  UniqueFd data_ready;   // eventfd, writer → reader: a slot was committed, or closed
  UniqueFd space_ready;  // eventfd, reader → writer: a slot was released, or closed
  UniqueFd liveness;     // one end of a socketpair nobody writes to: hang-up = the peer is gone
};

// One ring's shared region (its header mapped and validated) and its
// descriptors, before it becomes a ShmWriter or a ShmReader. Move-only; owns
// the mapping and the descriptors.
class ShmRing {
 public:
  // A new region (memfd_create, sized and sealed against shrinking and
  // growing), its two eventfds and the liveness socketpair. Fails with
  // ShmErrc::kUnsupported where memfd, sealing or eventfd are unavailable,
  // with kInvalidArgument for a geometry outside the bounds above.
  static Result<ShmRing> create(const ShmRingOptions& options);

  // The descriptors to hand to the peer (duplicates of the region and the
  // eventfds, and the other end of the liveness pair). Once per ring;
  // close them here after sending (the UniqueFds do).
  Result<ShmRingFds> take_peer_fds();

  // Maps a region received from a peer. Checks the descriptors' kinds, the
  // seals, the header's magic, version and geometry against `limits` and
  // against the region's real size; a peer cannot make us touch memory
  // outside the region. Fails with ShmErrc::kBadGeometry or kBadHandoff.
  static Result<ShmRing> attach(ShmRingFds fds, const ShmAttachLimits& limits = {});

  std::uint32_t slot_size() const noexcept { return slot_size_; }
  std::uint32_t slot_count() const noexcept { return slot_count_; }
  std::uint64_t region_size() const noexcept { return region_size_; }

  ShmRing(ShmRing&& other) noexcept;
  ShmRing& operator=(ShmRing&& other) noexcept;
  ~ShmRing();

 private:
  friend class ShmWriter;
  friend class ShmReader;
  friend struct ShmEndpoint;
  ShmRing() = default;
  void unmap() noexcept;

  ShmRingFds fds_;
  UniqueFd peer_liveness_;  // the creator's copy of the peer's end, until taken
  bool peer_fds_taken_ = false;
  std::byte* header_ = nullptr;  // header_size_ bytes, read-write
  std::uint32_t header_size_ = 0;
  std::uint32_t slot_size_ = 0;
  std::uint32_t slot_count_ = 0;
  std::uint64_t region_size_ = 0;
};

struct ShmEndpoint;

// The producing side of a ring. Belongs to the executor given to open(); all
// calls from it, one acquire() at a time.
class ShmWriter {
 public:
  // Maps the slots read-write. Takes the ring over.
  static Result<ShmWriter> open(asio::any_io_executor ex, ShmRing ring, ShmWaitOptions options = {});

  // Waits for a free slot and returns it (slot_size() bytes, in shared
  // memory) to be filled in place. Until commit(), further calls return the
  // same slot. Fails with kPeerClosed, kPeerGone, kCorrupted or the reason
  // given to cancel().
  asio::awaitable<Result<std::span<std::byte>>> acquire();
  // The same without waiting: asio::error::would_block when the ring is full.
  Result<std::span<std::byte>> try_acquire();
  // Publishes the acquired slot's first `length` bytes (≤ slot_size()) with a
  // caller-defined `tag` (a message kind, a stream id) and wakes the reader
  // if it sleeps.
  Status commit(std::size_t length, std::uint32_t tag = 0);
  // Orderly end: the reader gets ShmErrc::kEndOfRing after the last slot.
  void close();
  // Wakes a pending acquire() with `reason`; every later call fails with it
  // (the owner's deadline, or the connection's end).
  void cancel(Status reason);

  std::size_t slot_size() const noexcept;
  std::size_t slot_count() const noexcept;
  // Slots committed so far.
  std::uint64_t committed() const noexcept;
  // Times this side went to sleep on its eventfd, and times it signalled the
  // other side's (both per ring; a busy ring keeps them far below committed()).
  std::uint64_t sleeps() const noexcept;
  std::uint64_t wakeups_sent() const noexcept;

 private:
  explicit ShmWriter(std::shared_ptr<ShmEndpoint> e) : e_(std::move(e)) {}
  std::shared_ptr<ShmEndpoint> e_;
};

// A committed slot as the reader sees it: read-only, in shared memory, valid
// until release(). Its bytes belong to a peer who could still change them:
// parse a structure from it once (or copy it first), never read a length twice.
struct ShmSlot {
  std::span<const std::byte> data;
  std::uint32_t tag = 0;
};

// The consuming side of a ring. Belongs to the executor given to open(); all
// calls from it, one next() at a time.
class ShmReader {
 public:
  // Maps the slots read-only. Takes the ring over.
  static Result<ShmReader> open(asio::any_io_executor ex, ShmRing ring, ShmWaitOptions options = {});

  // Waits for the next committed slot. Several may be held at once; they
  // are released oldest first. Fails with kEndOfRing after the writer's
  // close() (or writer_finished()) and its last slot, kPeerGone if the
  // writer vanished without closing (slots it committed before are still
  // delivered), kCorrupted, or the reason given to cancel().
  asio::awaitable<Result<ShmSlot>> next();
  // The same without waiting: asio::error::would_block when nothing is there.
  Result<ShmSlot> try_next();
  // Gives the oldest held slot back to the writer (its view becomes invalid).
  Status release();
  // Tells the writer to stop (it gets ShmErrc::kPeerClosed).
  void close();
  // Wakes a pending next() with `reason`; every later call fails with it.
  void cancel(Status reason);
  // The owner has learnt by another path that the writer will commit
  // nothing more (its final frame arrived on the socket, sent after its
  // last commit): next() delivers every slot committed so far, then
  // kEndOfRing as if the writer had closed — instead of waiting for a
  // close() that may never come. A pending next() is woken.
  void writer_finished();

  std::size_t slot_size() const noexcept;
  std::size_t slot_count() const noexcept;
  std::uint64_t released() const noexcept;
  std::uint64_t sleeps() const noexcept;
  std::uint64_t wakeups_sent() const noexcept;

 private:
  explicit ShmReader(std::shared_ptr<ShmEndpoint> e) : e_(std::move(e)) {}
  std::shared_ptr<ShmEndpoint> e_;
};

}  // namespace authrpc
