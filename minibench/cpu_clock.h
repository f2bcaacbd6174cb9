// CPU time a process has used (user + system, all its threads, exited ones
// included), in nanoseconds, read from the kernel's scheduler clock through
// clock_getcpuclockid() + clock_gettime(). /proc/<pid>/stat counts in clock
// ticks (10 ms at USER_HZ 100), too coarse for a throughput row that lasts
// 60 ms. Works for this process and for a child (the throughput server),
// which the kernel lets any process in its pid namespace read.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>

namespace minibench {

// Null if the process is gone or its clock cannot be read.
std::optional<std::int64_t> process_cpu_ns(pid_t pid);

}  // namespace minibench
