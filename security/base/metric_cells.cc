#include "authrpc/security/base/metric_cells.h"

#include <pthread.h>
#include <sys/mman.h>

#include <mutex>
#include <vector>

namespace authrpc::metric_cells {

constinit thread_local std::uint64_t* this_thread_row = nullptr;

namespace {

constexpr std::uint32_t kNoRow = ~0u;

// This thread's lease has ended (it is exiting) or was refused (kMaxRows
// threads hold rows): its updates go to the shared row from now on.
constinit thread_local bool no_lease = false;

// The row of threads without one of their own: atomic adds only. In .bss:
// zero, and resident only where counted in.
alignas(64) std::uint64_t shared_row[kRowWords];

std::uint64_t* map_row() {
  void* p = mmap(nullptr, sizeof(std::uint64_t) * kRowWords, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? nullptr : static_cast<std::uint64_t*>(p);
}

void zero(std::uint64_t* row, std::uint32_t offset, std::uint32_t words) {
  for (std::uint32_t i = 0; i < words; ++i) {
    std::atomic_ref<std::uint64_t>(row[offset + i]).store(0, std::memory_order_relaxed);
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
    for (auto it = free_spans_.begin(); it != free_spans_.end(); ++it) {
      if (it->words == words) {
        offset = it->offset;
        free_spans_.erase(it);
        return true;
      }
    }
    if (kRowWords - next_offset_ < words) return false;
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
    made_.store(made + 1, std::memory_order_release);  // sum() reads rows_ below it
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

  std::uint64_t sum(std::uint32_t offset) const noexcept {
    std::uint64_t s = std::atomic_ref<std::uint64_t>(shared_row[offset]).load(std::memory_order_relaxed);
    const std::uint32_t made = made_.load(std::memory_order_acquire);
    for (std::uint32_t r = 0; r < made; ++r) {
      s += std::atomic_ref<std::uint64_t>(rows_[r].load(std::memory_order_relaxed)[offset])
               .load(std::memory_order_relaxed);
    }
    return s;
  }

  RowStats stats() {
    std::lock_guard lock(mu_);
    return {leased_, made_.load(std::memory_order_relaxed)};
  }

 private:
  Table() {
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
  std::vector<FreeSpan> free_spans_;
};

// Gives the thread's row back when the thread exits.
struct RowLease {
  std::uint32_t index = kNoRow;
  ~RowLease() {
    this_thread_row = nullptr;
    no_lease = true;  // updates from later destructors go to the shared row
    if (index != kNoRow) Table::get().give_back(index);
  }
};

// The calling thread's row, leased on its first update; null: the shared row.
std::uint64_t* lease_row() {
  if (no_lease) return nullptr;
  thread_local RowLease lease;
  if (lease.index == kNoRow) {
    this_thread_row = Table::get().lease(lease.index);
    if (this_thread_row == nullptr) no_lease = true;
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
    std::atomic_ref<std::uint64_t> cell(row[offset_ + i]);
    cell.store(cell.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  } else {
    std::atomic_ref<std::uint64_t>(shared_row[offset_ + i]).fetch_add(n, std::memory_order_relaxed);
  }
}

std::uint64_t Span::sum(std::uint32_t i) const noexcept {
  if (own_) return own_[i].load(std::memory_order_relaxed);
  return Table::get().sum(offset_ + i);
}

RowStats row_stats() { return Table::get().stats(); }

}  // namespace authrpc::metric_cells
