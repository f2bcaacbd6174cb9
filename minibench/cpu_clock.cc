#include "minibench/cpu_clock.h"

#include <time.h>
#include <unistd.h>

namespace minibench {

std::optional<std::int64_t> process_cpu_ns(pid_t pid) {
  clockid_t clock = CLOCK_PROCESS_CPUTIME_ID;
  if (pid != ::getpid() && ::clock_getcpuclockid(pid, &clock) != 0) return std::nullopt;
  timespec ts{};
  if (::clock_gettime(clock, &ts) != 0) return std::nullopt;
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

}  // namespace minibench
