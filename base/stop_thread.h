// Stopping a worker thread that waits on a condition variable for its
// `stopping` flag (a sweeper, a watcher, a log writer): the flag is set
// under the mutex the worker waits with, so that the wake-up cannot fall
// between the worker's check and its wait; then the thread is joined.
// Called from the owner's destructor.
#pragma once

#include <condition_variable>
#include <mutex>
#include <thread>

namespace authrpc {

inline void stop_thread(std::mutex& mu, bool& stopping, std::condition_variable& wake,
                        std::thread& thread) {
  {
    std::lock_guard lock(mu);
    stopping = true;
  }
  wake.notify_all();
  if (thread.joinable()) thread.join();
}

}  // namespace authrpc
