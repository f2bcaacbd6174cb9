// The ring's shared header, its index protocol and its wake-ups; docs/SHM.md
// explains the layout and why each fence is where it is.
#include "authrpc/rpc/shm_ring.h"

#include <asio/posix/stream_descriptor.hpp>
#include <asio/redirect_error.hpp>
#include <asio/use_awaitable.hpp>
#include <fcntl.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

namespace authrpc {
namespace {

// Header page layout (native byte order: both peers are on one host). Each
// side's hot fields sit on a cache line of their own.
constexpr std::uint64_t kMagic = 0x314d485343505241ull;  // "ARPCSHM1"
constexpr std::uint32_t kVersion = 1;
constexpr std::size_t kOffMagic = 0;            // u64
constexpr std::size_t kOffVersion = 8;          // u32
constexpr std::size_t kOffHeaderSize = 12;      // u32
constexpr std::size_t kOffSlotSize = 16;        // u32
constexpr std::size_t kOffSlotCount = 20;       // u32
constexpr std::size_t kOffRegionSize = 24;      // u64
constexpr std::size_t kOffHead = 64;            // u64, written by the writer
constexpr std::size_t kOffWriterClosed = 72;    // u32, written by the writer
constexpr std::size_t kOffTail = 128;           // u64, written by the reader
constexpr std::size_t kOffReaderClosed = 136;   // u32, written by the reader
constexpr std::size_t kOffReaderWaiting = 192;  // u32, set by the reader, cleared by the writer
constexpr std::size_t kOffWriterWaiting = 256;  // u32, set by the writer, cleared by the reader
constexpr std::size_t kOffSlots = 320;          // slot_count × {u32 length, u32 tag}
constexpr std::size_t kSlotDescSize = 8;
constexpr std::uint32_t kPage = 4096;
constexpr std::uint32_t kMinSlotSize = kPage;
constexpr std::uint32_t kMaxSlotSize = 64u << 20;
constexpr std::uint32_t kMinSlotCount = 2;
constexpr std::uint32_t kMaxSlotCount = 1024;
constexpr unsigned kRequiredSeals = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL;

static_assert(std::atomic_ref<std::uint64_t>::is_always_lock_free);
static_assert(std::atomic_ref<std::uint32_t>::is_always_lock_free);

std::uint32_t header_size_for(std::uint32_t slot_count) {
  const std::size_t raw = kOffSlots + kSlotDescSize * slot_count;
  return static_cast<std::uint32_t>((raw + kPage - 1) / kPage * kPage);
}

Status sys_failure(ShmErrc kind, std::string_view what) {
  return Status(kind, std::string(what) + ": " + std::strerror(errno));
}

// Whether `fd` is an anonymous inode of the given kind ("[eventfd]").
bool is_anon_inode(int fd, std::string_view kind) {
  const std::string link = "/proc/self/fd/" + std::to_string(fd);
  char target[64];
  const ssize_t n = ::readlink(link.c_str(), target, sizeof target);
  return n > 0 && std::string_view(target, static_cast<std::size_t>(n)) ==
                      "anon_inode:" + std::string(kind);
}

bool set_nonblocking(int fd) {
  const int flags = ::fcntl(fd, F_GETFL);
  return flags >= 0 && ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) == 0;
}

inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

}  // namespace

// One side of a ring once its role is known: the slots mapped, the eventfd it
// sleeps on, the one it signals, and the liveness watch. Shared by the
// ShmWriter/ShmReader handle and its pending waits, so that a wait resumed
// after the handle is gone still finds valid state.
struct ShmEndpoint : std::enable_shared_from_this<ShmEndpoint> {
  enum class Role { kWriter, kReader };

  ShmEndpoint(const asio::any_io_executor& ex, ShmRing r, Role ro, ShmWaitOptions o,
              std::byte* slots)
      : ring(std::move(r)), role(ro), options(o), data(slots),
        slot_size(ring.slot_size_), slot_count(ring.slot_count_), wait_desc(ex), liveness(ex) {
    UniqueFd& wait_fd = role == Role::kWriter ? ring.fds_.space_ready : ring.fds_.data_ready;
    UniqueFd& signal = role == Role::kWriter ? ring.fds_.data_ready : ring.fds_.space_ready;
    wait_desc.assign(wait_fd.release());
    signal_fd = std::move(signal);
    liveness.assign(ring.fds_.liveness.release());
    ring.fds_.memfd.reset();  // the mappings keep the region alive
  }
  ~ShmEndpoint() { ::munmap(data, std::size_t{slot_size} * slot_count); }

  std::atomic_ref<std::uint64_t> u64(std::size_t off) const {
    return std::atomic_ref<std::uint64_t>(*reinterpret_cast<std::uint64_t*>(ring.header_ + off));
  }
  std::atomic_ref<std::uint32_t> u32(std::size_t off) const {
    return std::atomic_ref<std::uint32_t>(*reinterpret_cast<std::uint32_t*>(ring.header_ + off));
  }
  std::byte* slot_at(std::uint64_t index) const {
    return data + static_cast<std::size_t>(index % slot_count) * slot_size;
  }

  // Maps the slots (read-only for a reader) and starts the liveness watch.
  static Result<std::shared_ptr<ShmEndpoint>> open(const asio::any_io_executor& ex, ShmRing ring,
                                                   Role role, ShmWaitOptions options);

  // Records the first failure; every later call reports it.
  Status fail(Status s) {
    if (failure.ok()) failure = std::move(s);
    stop_watching();
    return failure;
  }

  // Once this side is done (closed, failed, or at the end of the ring) the
  // peer's liveness no longer matters, and the watch would keep the event
  // loop busy.
  void stop_watching() {
    std::error_code ignored;
    liveness.cancel(ignored);
  }

  void signal_peer() {
    const std::uint64_t one = 1;
    ++wakeups_sent;
    // EAGAIN only if the counter is near overflow: the peer is awake anyway.
    [[maybe_unused]] const ssize_t n = ::write(signal_fd.get(), &one, sizeof one);
  }

  // After publishing an index: wake the peer if it said it sleeps. The
  // seq_cst fence pairs with the one in wait(): either the peer sees our
  // index, or we see its flag.
  void wake_peer_if_waiting(std::size_t flag_off) {
    std::atomic_thread_fence(std::memory_order_seq_cst);
    auto flag = u32(flag_off);
    if (flag.load(std::memory_order_relaxed) != 0 && flag.exchange(0, std::memory_order_relaxed) != 0) {
      signal_peer();
    }
  }

  void watch_liveness() {
    liveness.async_wait(asio::posix::descriptor_base::wait_read,
                        [weak = weak_from_this()](std::error_code ec) {
                          const auto self = weak.lock();
                          if (!self || ec == asio::error::operation_aborted) return;
                          char byte;
                          const ssize_t n =
                              ::recv(self->liveness.native_handle(), &byte, 1, MSG_DONTWAIT);
                          if (!ec && n < 0 && (errno == EAGAIN || errno == EINTR)) {
                            self->watch_liveness();
                            return;
                          }
                          // End of stream (the peer's end is closed), an error,
                          // or bytes nobody should send: the peer is gone.
                          self->peer_gone = true;
                          std::error_code ignored;
                          self->wait_desc.cancel(ignored);
                        });
  }

  // Sleeps until the eventfd is signalled or the wait is cancelled, then
  // drains the eventfd (a stale count only costs a spurious wake-up).
  asio::awaitable<void> sleep() {
    ++sleeps;
    std::error_code ec;
    co_await wait_desc.async_wait(asio::posix::descriptor_base::wait_read,
                                  asio::redirect_error(asio::use_awaitable, ec));
    std::uint64_t count;
    [[maybe_unused]] const ssize_t n = ::read(wait_desc.native_handle(), &count, sizeof count);
  }

  // try_fn() until it has an answer other than would_block: spin a little if
  // asked, then say "waiting" in the header, look once more, and sleep.
  template <typename T, typename TryFn>
  static asio::awaitable<Result<T>> wait(std::shared_ptr<ShmEndpoint> self, TryFn try_fn,
                                         std::size_t waiting_off) {
    for (;;) {
      Result<T> r = try_fn();
      if (r.code() != asio::error::would_block) co_return r;
      for (std::uint32_t i = 0; i < self->options.spin; ++i) {
        cpu_relax();
        r = try_fn();
        if (r.code() != asio::error::would_block) co_return r;
      }
      auto waiting = self->u32(waiting_off);
      waiting.store(1, std::memory_order_relaxed);
      std::atomic_thread_fence(std::memory_order_seq_cst);
      r = try_fn();
      if (r.code() != asio::error::would_block) {
        waiting.store(0, std::memory_order_relaxed);
        co_return r;
      }
      co_await self->sleep();
      waiting.store(0, std::memory_order_relaxed);
    }
  }

  // --- writer ---
  Result<std::span<std::byte>> try_acquire() {
    if (!failure.ok()) return failure;
    if (peer_gone) return fail(Status(ShmErrc::kPeerGone, "reader vanished"));
    if (u32(kOffReaderClosed).load(std::memory_order_acquire) != 0) {
      return fail(Status(ShmErrc::kPeerClosed, "reader closed the ring"));
    }
    if (closed) return Status(Errc::kFailedPrecondition, "ring closed by this writer");
    const std::uint64_t released = u64(kOffTail).load(std::memory_order_acquire);
    if (released > head || head - released > slot_count) {
      return fail(Status(ShmErrc::kCorrupted, "tail index out of range"));
    }
    if (head - released == slot_count) return Status(asio::error::would_block, "ring full");
    acquired = true;
    return std::span<std::byte>(slot_at(head), slot_size);
  }

  Status commit(std::size_t length, std::uint32_t tag) {
    if (!acquired) return Status(Errc::kFailedPrecondition, "commit without an acquired slot");
    if (length > slot_size) return Status(Errc::kInvalidArgument, "commit longer than a slot");
    if (!failure.ok()) return failure;
    const std::size_t desc = kOffSlots + kSlotDescSize * static_cast<std::size_t>(head % slot_count);
    u32(desc).store(static_cast<std::uint32_t>(length), std::memory_order_relaxed);
    u32(desc + 4).store(tag, std::memory_order_relaxed);
    ++head;
    acquired = false;
    u64(kOffHead).store(head, std::memory_order_release);
    wake_peer_if_waiting(kOffReaderWaiting);
    return Status();
  }

  // --- reader ---
  Result<ShmSlot> try_next() {
    if (!failure.ok()) return failure;
    std::uint64_t h = u64(kOffHead).load(std::memory_order_acquire);
    if (h == cursor) {
      if (u32(kOffWriterClosed).load(std::memory_order_acquire) != 0) {
        h = u64(kOffHead).load(std::memory_order_acquire);  // final: stored before the flag
        if (h == cursor) {
          stop_watching();
          return Status(ShmErrc::kEndOfRing, "writer closed the ring");
        }
      } else if (writer_finished) {
        // The head loaded above is final: the writer's last commit was
        // stored before it sent the frame that made the owner call
        // writer_finished() (the socket orders the two).
        stop_watching();
        return Status(ShmErrc::kEndOfRing, "the writer's side of the call ended");
      } else if (peer_gone) {
        return fail(Status(ShmErrc::kPeerGone, "writer vanished without closing the ring"));
      } else if (closed) {
        return Status(Errc::kFailedPrecondition, "ring closed by this reader");
      } else {
        return Status(asio::error::would_block, "ring empty");
      }
    }
    if (h < cursor || h - tail > slot_count) {
      return fail(Status(ShmErrc::kCorrupted, "head index out of range"));
    }
    const std::size_t desc = kOffSlots + kSlotDescSize * static_cast<std::size_t>(cursor % slot_count);
    const std::uint32_t length = u32(desc).load(std::memory_order_relaxed);
    const std::uint32_t tag = u32(desc + 4).load(std::memory_order_relaxed);
    if (length > slot_size) return fail(Status(ShmErrc::kCorrupted, "slot length out of range"));
    const std::byte* slot = slot_at(cursor);
    ++cursor;
    return ShmSlot{std::span<const std::byte>(slot, length), tag};
  }

  Status release() {
    if (tail == cursor) return Status(Errc::kFailedPrecondition, "release without a held slot");
    ++tail;
    u64(kOffTail).store(tail, std::memory_order_release);
    wake_peer_if_waiting(kOffWriterWaiting);
    return Status();
  }

  void close_side() {
    if (closed) return;
    closed = true;
    stop_watching();
    u32(role == Role::kWriter ? kOffWriterClosed : kOffReaderClosed).store(1, std::memory_order_release);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    signal_peer();  // once per ring: unconditional, whether or not the peer sleeps
  }

  void cancel(Status reason) {
    if (reason.ok()) reason = Status(Errc::kCancelled, "cancelled");
    fail(std::move(reason));
    std::error_code ignored;
    wait_desc.cancel(ignored);
  }

  // Reader: nothing more will be committed (ShmReader::writer_finished).
  void finish_writer() {
    writer_finished = true;
    std::error_code ignored;
    wait_desc.cancel(ignored);
  }

  ShmRing ring;
  const Role role;
  const ShmWaitOptions options;
  std::byte* const data;
  const std::uint32_t slot_size;
  const std::uint32_t slot_count;
  asio::posix::stream_descriptor wait_desc;
  asio::posix::stream_descriptor liveness;
  UniqueFd signal_fd;
  std::uint64_t head = 0;    // writer: slots committed
  std::uint64_t cursor = 0;  // reader: slots handed out by next()
  std::uint64_t tail = 0;    // reader: slots released
  bool acquired = false;
  bool closed = false;
  bool peer_gone = false;
  bool writer_finished = false;  // reader: the owner knows the writer is done
  Status failure;
  std::uint64_t sleeps = 0;
  std::uint64_t wakeups_sent = 0;
};

// ---------------------------------------------------------------- ShmRing

ShmRing::ShmRing(ShmRing&& other) noexcept
    : fds_(std::move(other.fds_)),
      peer_liveness_(std::move(other.peer_liveness_)),
      peer_fds_taken_(other.peer_fds_taken_),
      header_(std::exchange(other.header_, nullptr)),
      header_size_(other.header_size_),
      slot_size_(other.slot_size_),
      slot_count_(other.slot_count_),
      region_size_(other.region_size_) {}

ShmRing& ShmRing::operator=(ShmRing&& other) noexcept {
  if (this != &other) {
    unmap();
    fds_ = std::move(other.fds_);
    peer_liveness_ = std::move(other.peer_liveness_);
    peer_fds_taken_ = other.peer_fds_taken_;
    header_ = std::exchange(other.header_, nullptr);
    header_size_ = other.header_size_;
    slot_size_ = other.slot_size_;
    slot_count_ = other.slot_count_;
    region_size_ = other.region_size_;
  }
  return *this;
}

ShmRing::~ShmRing() { unmap(); }

void ShmRing::unmap() noexcept {
  if (header_ != nullptr) ::munmap(header_, header_size_);
  header_ = nullptr;
}

Result<ShmRing> ShmRing::create(const ShmRingOptions& options) {
  if (options.slot_size < kMinSlotSize || options.slot_size > kMaxSlotSize ||
      options.slot_size % kPage != 0) {
    return Status(Errc::kInvalidArgument, "shm slot size must be a multiple of 4096 in [4 KiB, 64 MiB]");
  }
  if (options.slot_count < kMinSlotCount || options.slot_count > kMaxSlotCount) {
    return Status(Errc::kInvalidArgument, "shm slot count must be in [2, 1024]");
  }
  ShmRing ring;
  ring.slot_size_ = options.slot_size;
  ring.slot_count_ = options.slot_count;
  ring.header_size_ = header_size_for(options.slot_count);
  ring.region_size_ = ring.header_size_ + std::uint64_t{options.slot_size} * options.slot_count;

  ring.fds_.memfd.reset(::memfd_create("authrpc-shm", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (!ring.fds_.memfd) return sys_failure(ShmErrc::kUnsupported, "memfd_create");
  if (::ftruncate(ring.fds_.memfd.get(), static_cast<off_t>(ring.region_size_)) != 0) {
    return sys_failure(ShmErrc::kUnsupported, "ftruncate(memfd)");
  }
  if (::fcntl(ring.fds_.memfd.get(), F_ADD_SEALS, kRequiredSeals) != 0) {
    return sys_failure(ShmErrc::kUnsupported, "sealing the memfd");
  }
  void* header = ::mmap(nullptr, ring.header_size_, PROT_READ | PROT_WRITE, MAP_SHARED,
                        ring.fds_.memfd.get(), 0);
  if (header == MAP_FAILED) return sys_failure(ShmErrc::kUnsupported, "mmap(shm header)");
  ring.header_ = static_cast<std::byte*>(header);
  // The region is zero-filled; the geometry goes in before anyone else sees it.
  std::memcpy(ring.header_ + kOffMagic, &kMagic, sizeof kMagic);
  std::memcpy(ring.header_ + kOffVersion, &kVersion, sizeof kVersion);
  std::memcpy(ring.header_ + kOffHeaderSize, &ring.header_size_, sizeof ring.header_size_);
  std::memcpy(ring.header_ + kOffSlotSize, &ring.slot_size_, sizeof ring.slot_size_);
  std::memcpy(ring.header_ + kOffSlotCount, &ring.slot_count_, sizeof ring.slot_count_);
  std::memcpy(ring.header_ + kOffRegionSize, &ring.region_size_, sizeof ring.region_size_);

  ring.fds_.data_ready.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  ring.fds_.space_ready.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!ring.fds_.data_ready || !ring.fds_.space_ready) {
    return sys_failure(ShmErrc::kUnsupported, "eventfd");
  }
  int pair[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, pair) != 0) {
    return sys_failure(ShmErrc::kUnsupported, "socketpair(liveness)");
  }
  ring.fds_.liveness.reset(pair[0]);
  ring.peer_liveness_.reset(pair[1]);
  return ring;
}

Result<ShmRingFds> ShmRing::take_peer_fds() {
  if (peer_fds_taken_ || !peer_liveness_ || !fds_.memfd) {
    return Status(Errc::kFailedPrecondition, "peer descriptors already taken or ring not created here");
  }
  ShmRingFds peer;
  peer.memfd.reset(::fcntl(fds_.memfd.get(), F_DUPFD_CLOEXEC, 0));
  peer.data_ready.reset(::fcntl(fds_.data_ready.get(), F_DUPFD_CLOEXEC, 0));
  peer.space_ready.reset(::fcntl(fds_.space_ready.get(), F_DUPFD_CLOEXEC, 0));
  if (!peer.memfd || !peer.data_ready || !peer.space_ready) {
    return Status(std::error_code(errno, std::system_category()), "dup of shm descriptors");
  }
  peer.liveness = std::move(peer_liveness_);
  peer_fds_taken_ = true;
  return peer;
}

Result<ShmRing> ShmRing::attach(ShmRingFds fds, const ShmAttachLimits& limits) {
  if (!fds.memfd || !fds.data_ready || !fds.space_ready || !fds.liveness) {
    return Status(ShmErrc::kBadHandoff, "missing shm descriptor");
  }
  if (!is_anon_inode(fds.data_ready.get(), "[eventfd]") ||
      !is_anon_inode(fds.space_ready.get(), "[eventfd]")) {
    return Status(ShmErrc::kBadHandoff, "wake-up descriptor is not an eventfd");
  }
  struct stat st {};
  if (::fstat(fds.liveness.get(), &st) != 0 || !S_ISSOCK(st.st_mode)) {
    return Status(ShmErrc::kBadHandoff, "liveness descriptor is not a socket");
  }
  if (!set_nonblocking(fds.data_ready.get()) || !set_nonblocking(fds.space_ready.get()) ||
      !set_nonblocking(fds.liveness.get())) {
    return sys_failure(ShmErrc::kBadHandoff, "fcntl(O_NONBLOCK)");
  }
  // The region: sealed so that the peer cannot shrink it under our mapping
  // (a SIGBUS here) or grow it, and exactly as large as its header says.
  if (::fstat(fds.memfd.get(), &st) != 0 || !S_ISREG(st.st_mode)) {
    return Status(ShmErrc::kBadHandoff, "shm region is not a memory file");
  }
  const int seals = ::fcntl(fds.memfd.get(), F_GET_SEALS);
  if (seals < 0 || (static_cast<unsigned>(seals) & kRequiredSeals) != kRequiredSeals) {
    return Status(ShmErrc::kBadGeometry, "shm region is not sealed against resizing");
  }
  const auto file_size = static_cast<std::uint64_t>(st.st_size);
  if (file_size < kPage || file_size > limits.max_region_size) {
    return Status(ShmErrc::kBadGeometry, "shm region size out of range");
  }
  // Read the geometry once, into locals; nothing is re-read from shared memory.
  std::uint64_t magic, region_size;
  std::uint32_t version, header_size, slot_size, slot_count;
  {
    void* probe = ::mmap(nullptr, kPage, PROT_READ, MAP_SHARED, fds.memfd.get(), 0);
    if (probe == MAP_FAILED) return sys_failure(ShmErrc::kBadGeometry, "mmap(shm header)");
    const auto* p = static_cast<const std::byte*>(probe);
    std::memcpy(&magic, p + kOffMagic, sizeof magic);
    std::memcpy(&version, p + kOffVersion, sizeof version);
    std::memcpy(&header_size, p + kOffHeaderSize, sizeof header_size);
    std::memcpy(&slot_size, p + kOffSlotSize, sizeof slot_size);
    std::memcpy(&slot_count, p + kOffSlotCount, sizeof slot_count);
    std::memcpy(&region_size, p + kOffRegionSize, sizeof region_size);
    ::munmap(probe, kPage);
  }
  if (magic != kMagic) return Status(ShmErrc::kBadGeometry, "bad shm magic");
  if (version != kVersion) {
    return Status(ShmErrc::kBadGeometry, "unsupported shm version " + std::to_string(version));
  }
  if (slot_size < kMinSlotSize || slot_size > std::min(kMaxSlotSize, limits.max_slot_size) ||
      slot_size % kPage != 0 || slot_count < kMinSlotCount ||
      slot_count > std::min(kMaxSlotCount, limits.max_slot_count)) {
    return Status(ShmErrc::kBadGeometry, "shm slot geometry out of range");
  }
  const std::uint64_t expected_size = header_size_for(slot_count) + std::uint64_t{slot_size} * slot_count;
  if (header_size != header_size_for(slot_count) || region_size != expected_size ||
      file_size != expected_size) {
    return Status(ShmErrc::kBadGeometry, "shm header and region size disagree");
  }
  ShmRing ring;
  void* header = ::mmap(nullptr, header_size, PROT_READ | PROT_WRITE, MAP_SHARED, fds.memfd.get(), 0);
  if (header == MAP_FAILED) return sys_failure(ShmErrc::kBadGeometry, "mmap(shm header)");
  ring.header_ = static_cast<std::byte*>(header);
  ring.header_size_ = header_size;
  ring.slot_size_ = slot_size;
  ring.slot_count_ = slot_count;
  ring.region_size_ = region_size;
  ring.fds_ = std::move(fds);
  ring.peer_fds_taken_ = true;
  return ring;
}

// ---------------------------------------------------------------- roles

Result<std::shared_ptr<ShmEndpoint>> ShmEndpoint::open(const asio::any_io_executor& ex, ShmRing ring,
                                                   Role role, ShmWaitOptions options) {
  if (ring.header_ == nullptr || !ring.fds_.memfd || !ring.fds_.liveness) {
    return Status(Errc::kFailedPrecondition, "shm ring is not mapped");
  }
  const std::size_t size = std::size_t{ring.slot_size()} * ring.slot_count();
  const int prot = role == Role::kWriter ? PROT_READ | PROT_WRITE : PROT_READ;
  // Not MAP_POPULATE: prefaulting 2 MiB makes setting a ring up much slower
  // (docs/PERFORMANCE.md, "Measured costs behind the code"), and a short stream never touches most
  // slots; a long one pays the faults once, on its first lap (docs/SHM.md).
  void* slots = ::mmap(nullptr, size, prot, MAP_SHARED, ring.fds_.memfd.get(),
                       static_cast<off_t>(ring.header_size_));
  if (slots == MAP_FAILED) return sys_failure(ShmErrc::kUnsupported, "mmap(shm slots)");
  auto endpoint = std::make_shared<ShmEndpoint>(ex, std::move(ring), role, options,
                                                static_cast<std::byte*>(slots));
  endpoint->watch_liveness();
  return endpoint;
}

Result<ShmWriter> ShmWriter::open(asio::any_io_executor ex, ShmRing ring, ShmWaitOptions options) {
  auto e = ShmEndpoint::open(ex, std::move(ring), ShmEndpoint::Role::kWriter, options);
  if (!e.ok()) return e.status();
  return ShmWriter(std::move(*e));
}

asio::awaitable<Result<std::span<std::byte>>> ShmWriter::acquire() {
  auto e = e_;
  co_return co_await ShmEndpoint::wait<std::span<std::byte>>(
      e, [raw = e.get()] { return raw->try_acquire(); }, kOffWriterWaiting);
}

Result<std::span<std::byte>> ShmWriter::try_acquire() { return e_->try_acquire(); }
Status ShmWriter::commit(std::size_t length, std::uint32_t tag) { return e_->commit(length, tag); }
void ShmWriter::close() { e_->close_side(); }
void ShmWriter::cancel(Status reason) { e_->cancel(std::move(reason)); }
std::size_t ShmWriter::slot_size() const noexcept { return e_->slot_size; }
std::size_t ShmWriter::slot_count() const noexcept { return e_->slot_count; }
std::uint64_t ShmWriter::committed() const noexcept { return e_->head; }
std::uint64_t ShmWriter::sleeps() const noexcept { return e_->sleeps; }
std::uint64_t ShmWriter::wakeups_sent() const noexcept { return e_->wakeups_sent; }

Result<ShmReader> ShmReader::open(asio::any_io_executor ex, ShmRing ring, ShmWaitOptions options) {
  auto e = ShmEndpoint::open(ex, std::move(ring), ShmEndpoint::Role::kReader, options);
  if (!e.ok()) return e.status();
  return ShmReader(std::move(*e));
}

asio::awaitable<Result<ShmSlot>> ShmReader::next() {
  auto e = e_;
  co_return co_await ShmEndpoint::wait<ShmSlot>(
      e, [raw = e.get()] { return raw->try_next(); }, kOffReaderWaiting);
}

Result<ShmSlot> ShmReader::try_next() { return e_->try_next(); }
Status ShmReader::release() { return e_->release(); }
void ShmReader::close() { e_->close_side(); }
void ShmReader::cancel(Status reason) { e_->cancel(std::move(reason)); }
void ShmReader::writer_finished() { e_->finish_writer(); }
std::size_t ShmReader::slot_size() const noexcept { return e_->slot_size; }
std::size_t ShmReader::slot_count() const noexcept { return e_->slot_count; }
std::uint64_t ShmReader::released() const noexcept { return e_->tail; }
std::uint64_t ShmReader::sleeps() const noexcept { return e_->sleeps; }
std::uint64_t ShmReader::wakeups_sent() const noexcept { return e_->wakeups_sent; }

}  // namespace authrpc
