// The concurrent schedule of `minibench sessions --concurrency K`: a block of
// a row's iterations spread over K client threads that establish sessions at
// the same time — a reconnect storm, as a service owner sees one. Each thread
// runs its own single-threaded io_context (its own epoll loop, like K
// independent clients), its share of the block back to back, each iteration
// timed on its own. Called by schedule.cc, which blocks its executor's thread
// while a block runs (nothing else runs there meanwhile).
//
// Floors under concurrency get the same treatment: the floor's block runs on
// K threads too, so a row's ratio compares like with like (K concurrent
// authrpc sessions against K concurrent bare sessions on the same server).
#pragma once

#include <cstddef>
#include <vector>

#include "minibench/schedule.h"

namespace minibench {

struct ConcurrentBlock {
  std::vector<double> us;      // every iteration's time, in µs, in no order
  Clock::duration wall{};      // from the threads' start to the last one's end
  authrpc::Status status;      // the first failure, if any
};

// Runs `count` iterations of `on` on `threads` threads (thread t runs
// count / threads, plus one if t < count % threads) and waits for them.
ConcurrentBlock run_concurrently(const IterationOn& on, std::size_t count, std::size_t threads);

}  // namespace minibench
