// Internal: the memory Counter and Histogram count in (metrics.h). A metric's
// value is split into one cell per thread that writes it, so an update is a
// plain load and store of memory no other thread writes — no locked
// instruction, no cache line passed between IO threads — and a read sums the
// cells (docs/OPERATIONS.md, "Why our own counters").
//
// The cells live in rows, one row per thread: a metric's cells are at the
// same offset in every row (a Span). A thread leases a row at its first
// update and gives it back when it exits; the next thread to lease it goes on
// adding to the values it holds, so no count is lost and no row is wasted.
// Threads beyond kMaxRows at once (each asks for a row again every few
// thousand updates), and a thread's updates from destructors that run after
// its lease ended, add to one shared row with atomic adds; a Span that
// finds no room in the rows keeps cells of its own, also atomic. A freed
// Span's cells are zeroed where not zero, so a row's pages are resident
// only where its thread counted.
//
// Used by Counter and Histogram; thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>

namespace authrpc::metric_cells {

// The calling thread's row, or null before its first update (or after its
// lease ended). Read by Span::add's fast path only; initial-exec, so that
// the read is one instruction in a -fPIC library too.
extern constinit thread_local std::uint64_t* this_thread_row [[gnu::tls_model("initial-exec")]];

// Adds `n` to a cell only the calling thread writes: a relaxed load and
// store, no locked instruction.
inline void add_to_own(std::uint64_t& cell, std::uint64_t n) noexcept {
  std::atomic_ref<std::uint64_t> c(cell);
  c.store(c.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
}

// `words` cells at one offset of every row, zero when made.
class Span {
 public:
  explicit Span(std::uint32_t words);
  ~Span();  // zeroes its cells in every row for the next Span at its offset
  Span(const Span&) = delete;
  Span& operator=(const Span&) = delete;

  // Adds `n` to cell `i` (< words) of the calling thread.
  void add(std::uint32_t i, std::uint64_t n) noexcept {
    std::uint64_t* row = this_thread_row;
    if (row != nullptr && !own_) [[likely]] {
      add_to_own(row[offset_ + i], n);
      return;
    }
    add_slow(i, n);
  }
  // Adds `n` to cell `i` and `m` to cell `j`, with one look at the row.
  void add(std::uint32_t i, std::uint64_t n, std::uint32_t j, std::uint64_t m) noexcept {
    std::uint64_t* row = this_thread_row;
    if (row != nullptr && !own_) [[likely]] {
      add_to_own(row[offset_ + i], n);
      add_to_own(row[offset_ + j], m);
      return;
    }
    add_slow(i, n);
    add_slow(j, m);
  }

  // Cell `i` summed over every row: each thread's updates as far as this
  // thread sees them (as a relaxed atomic's would be).
  std::uint64_t sum(std::uint32_t i) const noexcept;
  // Every cell summed (out.size() == words), a row at a time.
  void sum_all(std::span<std::uint64_t> out) const noexcept;
  // False if the rows had no room for it (its cells are its own): tests.
  bool in_rows() const noexcept { return !own_; }

 private:
  void add_slow(std::uint32_t i, std::uint64_t n) noexcept;

  std::uint32_t offset_ = 0;
  std::uint32_t words_;
  std::unique_ptr<std::atomic<std::uint64_t>[]> own_;  // when the rows had no room
};

// Sizes, for tests and docs: a row is kRowWords cells (virtual memory; a
// thread's row takes resident pages only where it counts).
inline constexpr std::uint32_t kRowWords = 1u << 15;
inline constexpr std::uint32_t kMaxRows = 256;

// Rows leased now, and made so far (tests).
struct RowStats {
  std::uint32_t leased = 0;
  std::uint32_t made = 0;
};
RowStats row_stats();

}  // namespace authrpc::metric_cells
