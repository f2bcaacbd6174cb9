// shm_ring_bench: moves TOTAL bytes in BATCH-byte batches from a child process
// (writer) to the parent (reader), through a shared-memory ring and, in the
// same run, through a Unix-domain socketpair with the same buffer space, and
// prints MB/s and per-batch latency (the reader's wait for each batch) for
// each. Not run by ctest; build it in Release:
//
//   shm_ring_bench [--bytes N] [--batch N] [--slots N] [--spin N] [--repeat N]
//
// Rows: `unix` (write() from a buffer / read() into a buffer), `shm` (the
// writer copies the batch into a slot, the reader gets a view: zero-copy, as
// a consumer that hands the buffer on), `shm+copy` (the reader also copies
// the view into its own buffer, the same bytes a read() delivers).
#include <asio/io_context.hpp>
#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "authrpc/rpc/shm_handoff.h"
#include "authrpc/rpc/shm_ring.h"
#include "tests/testing/shm_test_util.h"

namespace authrpc {
namespace {

using Clock = std::chrono::steady_clock;
using shm_test::fork_child;
using shm_test::wait_child;

struct Options {
  std::uint64_t bytes = 4ull << 30;
  std::uint32_t batch = 128 * 1024;
  std::uint32_t slots = 16;
  std::uint32_t spin = 0;
  int repeat = 3;
};

struct Row {
  double mb_per_s = 0;
  double batches_per_s = 0;
  double mean_us = 0, p50_us = 0, p95_us = 0, p99_us = 0, max_us = 0;
  std::uint64_t reader_sleeps = 0, writer_sleeps = 0, writer_wakeups = 0, reader_wakeups = 0;
};

Row summarize(std::vector<double> lat_us, std::uint64_t bytes, double seconds) {
  Row r;
  r.mb_per_s = static_cast<double>(bytes) / seconds / 1e6;
  r.batches_per_s = static_cast<double>(lat_us.size()) / seconds;
  std::sort(lat_us.begin(), lat_us.end());
  double sum = 0;
  for (double v : lat_us) sum += v;
  r.mean_us = sum / static_cast<double>(lat_us.size());
  auto q = [&](double p) { return lat_us[static_cast<std::size_t>(p * static_cast<double>(lat_us.size() - 1))]; };
  r.p50_us = q(0.5);
  r.p95_us = q(0.95);
  r.p99_us = q(0.99);
  r.max_us = lat_us.back();
  return r;
}

double us_since(Clock::time_point t) {
  return std::chrono::duration<double, std::micro>(Clock::now() - t).count();
}

// Moves all `n` bytes at `c` through `io` (::read or ::write), a call at a
// time; false at the first call that moves none.
template <typename Byte, typename Io>
bool move_all(int fd, Byte* c, std::size_t n, Io io) {
  while (n > 0) {
    const ssize_t moved = io(fd, c, n);
    if (moved <= 0) return false;
    c += moved;
    n -= static_cast<std::size_t>(moved);
  }
  return true;
}

bool write_all(int fd, const void* p, std::size_t n) {
  return move_all(fd, static_cast<const char*>(p), n, ::write);
}

bool read_all(int fd, void* p, std::size_t n) { return move_all(fd, static_cast<char*>(p), n, ::read); }

Row run_unix(const Options& o) {
  int data[2], ctl[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, data) != 0 ||
      ::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ctl) != 0) {
    std::perror("socketpair");
    std::exit(1);
  }
  // The same buffer space as the ring.
  const int space = static_cast<int>(o.batch * o.slots);
  ::setsockopt(data[0], SOL_SOCKET, SO_SNDBUF, &space, sizeof space);
  ::setsockopt(data[1], SOL_SOCKET, SO_RCVBUF, &space, sizeof space);
  const std::uint64_t batches = o.bytes / o.batch;
  const pid_t pid = fork_child([&]() -> int {
    ::close(data[1]);
    ::close(ctl[0]);
    std::vector<std::byte> source(o.batch);
    shm_test::fill_message(source, 1);
    char go;
    if (!read_all(ctl[1], &go, 1)) return 1;
    for (std::uint64_t i = 0; i < batches; ++i) {
      if (!write_all(data[0], source.data(), source.size())) return 2;
    }
    return 0;
  });
  ::close(data[0]);
  ::close(ctl[1]);
  std::vector<std::byte> sink(o.batch);
  std::vector<double> lat;
  lat.reserve(batches);
  write_all(ctl[0], "g", 1);
  const auto start = Clock::now();
  for (std::uint64_t i = 0; i < batches; ++i) {
    const auto t = Clock::now();
    if (!read_all(data[1], sink.data(), sink.size())) {
      std::fprintf(stderr, "unix: short read\n");
      std::exit(1);
    }
    lat.push_back(us_since(t));
  }
  const double seconds = us_since(start) / 1e6;
  ::close(data[1]);
  ::close(ctl[0]);
  wait_child(pid);
  return summarize(std::move(lat), batches * o.batch, seconds);
}

Row run_shm(const Options& o, bool copy_out) {
  int ctl[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ctl) != 0) std::exit(1);
  const std::uint64_t batches = o.bytes / o.batch;
  const pid_t pid = fork_child([&]() -> int {
    ::close(ctl[0]);
    auto ring = receive_shm_ring_blocking(ctl[1]);
    if (!ring.ok()) return 1;
    asio::io_context io;
    auto writer = ShmWriter::open(io.get_executor(), std::move(*ring), {o.spin});
    if (!writer.ok()) return 2;
    std::vector<std::byte> source(o.batch);
    shm_test::fill_message(source, 1);
    char go;
    if (!read_all(ctl[1], &go, 1)) return 3;
    Status s = shm_test::run_to_end(io, [&]() -> asio::awaitable<Status> {
      for (std::uint64_t i = 0; i < batches; ++i) {
        auto slot = co_await writer->acquire();
        if (!slot.ok()) co_return slot.status();
        std::memcpy(slot->data(), source.data(), source.size());
        if (Status c = writer->commit(source.size()); !c.ok()) co_return c;
      }
      writer->close();
      co_return Status();
    }());
    const std::uint64_t counts[2] = {writer->sleeps(), writer->wakeups_sent()};
    write_all(ctl[1], counts, sizeof counts);
    return s.ok() ? 0 : 4;
  });
  ::close(ctl[1]);
  auto ring = ShmRing::create({o.batch, o.slots});
  if (!ring.ok() || !send_shm_ring_blocking(ctl[0], *ring).ok()) {
    std::fprintf(stderr, "shm: %s\n", ring.ok() ? "handoff failed" : ring.status().to_string().c_str());
    std::exit(1);
  }
  asio::io_context io;
  auto reader = ShmReader::open(io.get_executor(), std::move(*ring), {o.spin});
  if (!reader.ok()) std::exit(1);
  std::vector<std::byte> sink(o.batch);
  std::vector<double> lat;
  lat.reserve(batches);
  write_all(ctl[0], "g", 1);
  const auto start = Clock::now();
  Status s = shm_test::run_to_end(io, [&]() -> asio::awaitable<Status> {
    for (std::uint64_t i = 0; i < batches; ++i) {
      const auto t = Clock::now();
      auto slot = co_await reader->next();
      if (!slot.ok()) co_return slot.status();
      if (copy_out) std::memcpy(sink.data(), slot->data.data(), slot->data.size());
      lat.push_back(us_since(t));
      if (Status r = reader->release(); !r.ok()) co_return r;
    }
    co_return Status();
  }());
  const double seconds = us_since(start) / 1e6;
  if (!s.ok()) {
    std::fprintf(stderr, "shm: %s\n", s.to_string().c_str());
    std::exit(1);
  }
  std::uint64_t counts[2] = {};
  read_all(ctl[0], counts, sizeof counts);
  ::close(ctl[0]);
  wait_child(pid);
  Row row = summarize(std::move(lat), batches * o.batch, seconds);
  row.reader_sleeps = reader->sleeps();
  row.reader_wakeups = reader->wakeups_sent();
  row.writer_sleeps = counts[0];
  row.writer_wakeups = counts[1];
  return row;
}

// Setting a ring up, in one process over a socketpair: create (memfd,
// seals, eventfds, liveness pair), handoff, attach, open both roles.
double setup_us(const Options& o) {
  constexpr int kRounds = 200;
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) std::exit(1);
  asio::io_context io;
  std::vector<double> v;
  for (int i = 0; i < kRounds; ++i) {
    const auto t = Clock::now();
    auto ring = ShmRing::create({o.batch, o.slots});
    if (!ring.ok() || !send_shm_ring_blocking(sv[0], *ring).ok()) std::exit(1);
    auto peer = receive_shm_ring_blocking(sv[1]);
    if (!peer.ok()) std::exit(1);
    auto writer = ShmWriter::open(io.get_executor(), std::move(*ring));
    auto reader = ShmReader::open(io.get_executor(), std::move(*peer));
    if (!writer.ok() || !reader.ok()) std::exit(1);
    v.push_back(us_since(t));
  }
  ::close(sv[0]);
  ::close(sv[1]);
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void print(const char* name, const Row& r) {
  std::printf("%-9s %9.0f MB/s %9.0f batches/s  latency us: mean %7.1f p50 %7.1f p95 %7.1f p99 %7.1f max %8.1f",
              name, r.mb_per_s, r.batches_per_s, r.mean_us, r.p50_us, r.p95_us, r.p99_us, r.max_us);
  if (r.writer_sleeps + r.reader_sleeps > 0) {
    std::printf("  sleeps w/r %llu/%llu wakeups w/r %llu/%llu",
                static_cast<unsigned long long>(r.writer_sleeps),
                static_cast<unsigned long long>(r.reader_sleeps),
                static_cast<unsigned long long>(r.writer_wakeups),
                static_cast<unsigned long long>(r.reader_wakeups));
  }
  std::printf("\n");
  std::fflush(stdout);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int run(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const unsigned long long v = std::strtoull(argv[i + 1], nullptr, 10);
    if (flag == "--bytes") o.bytes = v;
    else if (flag == "--batch") o.batch = static_cast<std::uint32_t>(v);
    else if (flag == "--slots") o.slots = static_cast<std::uint32_t>(v);
    else if (flag == "--spin") o.spin = static_cast<std::uint32_t>(v);
    else if (flag == "--repeat") o.repeat = static_cast<int>(v);
    else {
      std::fprintf(stderr, "usage: %s [--bytes N] [--batch N] [--slots N] [--spin N] [--repeat N]\n", argv[0]);
      return 2;
    }
  }
  std::printf("shm_ring_bench: %llu bytes in %u-byte batches, ring %u slots, spin %u, %d rounds\n",
              static_cast<unsigned long long>(o.bytes), o.batch, o.slots, o.spin, o.repeat);
  std::printf("ring setup (create, handoff, attach, open both): p50 %.1f us\n", setup_us(o));
  std::map<std::string, std::vector<Row>> rows;
  for (int round = 0; round < o.repeat; ++round) {
    std::printf("round %d\n", round + 1);
    const Row u = run_unix(o);
    print("unix", u);
    const Row s = run_shm(o, false);
    print("shm", s);
    const Row c = run_shm(o, true);
    print("shm+copy", c);
    rows["unix"].push_back(u);
    rows["shm"].push_back(s);
    rows["shm+copy"].push_back(c);
  }
  auto med = [&](const std::string& name, double Row::*field) {
    std::vector<double> v;
    for (const Row& r : rows[name]) v.push_back(r.*field);
    return median(v);
  };
  std::printf("medians of %d rounds\n", o.repeat);
  for (const char* name : {"unix", "shm", "shm+copy"}) {
    std::printf("%-9s %9.0f MB/s  p50 %7.1f us  p99 %7.1f us\n", name, med(name, &Row::mb_per_s),
                med(name, &Row::p50_us), med(name, &Row::p99_us));
  }
  for (const char* name : {"shm", "shm+copy"}) {
    const double tput = med(name, &Row::mb_per_s) / med("unix", &Row::mb_per_s);
    const double p50 = med(name, &Row::p50_us) / med("unix", &Row::p50_us);
    std::printf("%-9s throughput %.2f x unix (target >= 2: %s), p50 %.2f x unix (target <= 0.5: %s)\n", name,
                tput, tput >= 2 ? "met" : "not met", p50, p50 <= 0.5 ? "met" : "not met");
  }
  return 0;
}

}  // namespace
}  // namespace authrpc

int main(int argc, char** argv) { return authrpc::run(argc, argv); }
