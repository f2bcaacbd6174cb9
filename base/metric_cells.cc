#include "authrpc/base/metric_cells.h"

#include <pthread.h>
#include <sys/mman.h>

#include <mutex>
#include <vector>

namespace authrpc::metric_cells {

constinit thread_local std::uint64_t* this_thread_row [[gnu::tls_model("initial-exec")]] = nullptr;

namespace {

constexpr std::uint32_t kNoRow = ~0u;

// This thread's lease has ended (it is exiting): its updates go to the
// shared row from now on.
constinit thread_local bool lease_ended = false;
// Updates this thread made in the shared row since a lease was refused
// (kMaxRows threads held rows); it asks again every kRetryLeaseAfter.
constinit thread_local std::uint32_t since_refused = 0;
constexpr std::uint32_t kRetryLeaseAfter = 4096;

// The row of threads without one of their own: atomic adds only. In .bss:
// zero, and resident only where counted in.
alignas(64) std::uint64_t shared_row[kRowWords];

std::uint64_t* map_row() {
  void* p = mmap(nullptr, sizeof(std::uint64_t) * kRowWords, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? nullptr : static_cast<std::uint64_t*>(p);
}

// Stores only where a cell is not zero: a page no thread counted in stays
// untouched (reading it maps the shared zero page; writing would make it
// resident in every row).
void zero(std::uint64_t* row, std::uint32_t offset, std::uint32_t words) {
  for (std::uint32_t i = 0; i < words; ++i) {
    std::atomic_ref<std::uint64_t> cell(row[offset + i]);
    if (cell.load(std::memory_order_relaxed) != 0) cell.store(0, std::memory_order_relaxed);
  }
}

// The rows, which threads lease them, and which offsets Spans hold. Made on
// first use and never destroyed: threads, and metrics in statics, may count
// after static destruction began.
class Table {
 public:
  static Table& get() {
    static Table* const table = new Table;
    return *table;
  }

  bool allocate(std::uint32_t words, std::uint32_t& offset) {
    std::lock_guard lock(mu_);
    // Room for this span in free_spans_ now: release() runs in destructors.
    free_spans_.reserve(free_spans_.size() + live_spans_ + 1);
    ++live_spans_;
    for (auto it = free_spans_.begin(); it != free_spans_.end(); ++it) {
      if (it->words == words) {
        offset = it->offset;
        free_spans_.erase(it);
        return true;
      }
    }
    if (kRowWords - next_offset_ < words) {
      --live_spans_;
      return false;
    }
    offset = next_offset_;
    next_offset_ += words;
    return true;
  }

  // The cells of a Span that is gone: zero for the next Span there. Nobody
  // counts in them now (a metric outlives its updates).
  void release(std::uint32_t offset, std::uint32_t words) {
    std::lock_guard lock(mu_);
    const std::uint32_t made = made_.load(std::memory_order_relaxed);
    for (std::uint32_t r = 0; r < made; ++r) zero(rows_[r].load(std::memory_order_relaxed), offset, words);
    zero(shared_row, offset, words);
    --live_spans_;
    free_spans_.push_back({offset, words});
    // Free spans at the end go back to the unallocated tail, so that spans
    // of any size fit there again.
    for (bool merged = true; merged;) {
      merged = false;
      for (auto it = free_spans_.begin(); it != free_spans_.end(); ++it) {
        if (it->offset + it->words == next_offset_) {
          next_offset_ = it->offset;
          free_spans_.erase(it);
          merged = true;
          break;
        }
      }
    }
  }

  // A row for the calling thread, or null if kMaxRows are leased (or no
  // memory): the shared row then.
  std::uint64_t* lease(std::uint32_t& index) {
    std::lock_guard lock(mu_);
    if (!free_rows_.empty()) {
      index = free_rows_.back();
      free_rows_.pop_back();
      ++leased_;
      return rows_[index].load(std::memory_order_relaxed);
    }
    const std::uint32_t made = made_.load(std::memory_order_relaxed);
    if (made == kMaxRows) return nullptr;
    std::uint64_t* row = map_row();
    if (row == nullptr) return nullptr;
    rows_[made].store(row, std::memory_order_relaxed);
    made_.store(made + 1, std::memory_order_release);  // sum_all() reads rows_ below it
    index = made;
    ++leased_;
    return row;
  }

  // A thread's updates before this happen before those of the thread that
  // leases the row next (the mutex).
  void give_back(std::uint32_t index) {
    std::lock_guard lock(mu_);
    free_rows_.push_back(index);
    --leased_;
  }

  void sum_all(std::uint32_t offset, std::span<std::uint64_t> out) const noexcept {
    for (std::size_t i = 0; i < out.size(); ++i) {
      out[i] = std::atomic_ref<std::uint64_t>(shared_row[offset + i]).load(std::memory_order_relaxed);
    }
    const std::uint32_t made = made_.load(std::memory_order_acquire);
    for (std::uint32_t r = 0; r < made; ++r) {
      std::uint64_t* row = rows_[r].load(std::memory_order_relaxed) + offset;
      for (std::size_t i = 0; i < out.size(); ++i) {
        out[i] += std::atomic_ref<std::uint64_t>(row[i]).load(std::memory_order_relaxed);
      }
    }
  }

  RowStats stats() {
    std::lock_guard lock(mu_);
    return {leased_, made_.load(std::memory_order_relaxed)};
  }

 private:
  Table() {
    free_rows_.reserve(kMaxRows);  // give_back() runs in destructors
    // A child forked while another thread held the mutex would wait on it
    // forever: the fork waits for it instead.
    pthread_atfork([] { get().mu_.lock(); }, [] { get().mu_.unlock(); },
                   [] { get().mu_.unlock(); });
  }

  struct FreeSpan {
    std::uint32_t offset;
    std::uint32_t words;
  };

  std::mutex mu_;
  std::atomic<std::uint64_t*> rows_[kMaxRows] = {};
  std::atomic<std::uint32_t> made_{0};
  std::uint32_t leased_ = 0;
  std::vector<std::uint32_t> free_rows_;
  std::uint32_t next_offset_ = 0;
  std::uint32_t live_spans_ = 0;  // in the rows
  std::vector<FreeSpan> free_spans_;
};

// Made before main(): a fork() while another thread was making it would
// leave the child waiting on its initialization.
[[maybe_unused]] Table& table_made_early = Table::get();

// Gives the thread's row back when the thread exits.
struct RowLease {
  std::uint32_t index = kNoRow;
  ~RowLease() {
    this_thread_row = nullptr;
    lease_ended = true;  // updates from later destructors go to the shared row
    if (index != kNoRow) Table::get().give_back(index);
  }
};

// The calling thread's row, leased on its first update; null: the shared row.
std::uint64_t* lease_row() {
  if (lease_ended) return nullptr;
  if (since_refused != 0 && ++since_refused < kRetryLeaseAfter) return nullptr;
  since_refused = 0;
  thread_local RowLease lease;
  if (lease.index == kNoRow) {
    this_thread_row = Table::get().lease(lease.index);
    if (this_thread_row == nullptr) since_refused = 1;
  }
  return this_thread_row;
}

}  // namespace

Span::Span(std::uint32_t words) : words_(words) {
  if (!Table::get().allocate(words, offset_)) own_ = std::make_unique<std::atomic<std::uint64_t>[]>(words);
}

Span::~Span() {
  if (!own_) Table::get().release(offset_, words_);
}

void Span::add_slow(std::uint32_t i, std::uint64_t n) noexcept {
  if (own_) {
    own_[i].fetch_add(n, std::memory_order_relaxed);
  } else if (std::uint64_t* row = lease_row()) {
    add_to_own(row[offset_ + i], n);
  } else {
    std::atomic_ref<std::uint64_t>(shared_row[offset_ + i]).fetch_add(n, std::memory_order_relaxed);
  }
}

std::uint64_t Span::sum(std::uint32_t i) const noexcept {
  if (own_) return own_[i].load(std::memory_order_relaxed);
  std::uint64_t s = 0;
  Table::get().sum_all(offset_ + i, {&s, 1});
  return s;
}

void Span::sum_all(std::span<std::uint64_t> out) const noexcept {
  if (own_) {
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = own_[i].load(std::memory_order_relaxed);
    return;
  }
  Table::get().sum_all(offset_, out);
}

RowStats row_stats() { return Table::get().stats(); }

}  // namespace authrpc::metric_cells
