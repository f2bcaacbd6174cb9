// ReportingChild: a process forked to serve one benchmark (throughput's and
// storm's servers), which tells the parent where it listens in lines on a
// pipe — a line starting "ready" when it serves, or "error WHY" — and then
// waits for SIGTERM. Owns the child: stop(), or destruction, ends and reaps
// it. Called by throughput.cc and storm.cc (the sessions/calls server is a
// ServerChild, server_child.h).
#pragma once

#include <sys/types.h>

#include <functional>
#include <memory>
#include <string>

#include "authrpc/base/result.h"

namespace minibench {

class ReportingChild {
 public:
  // Forks (no thread may exist in this process yet); the child runs
  // body(report_fd), which never returns. Waits up to 15 s for the report:
  // kDeadlineExceeded without one, kInternal with the child's "error" line.
  static authrpc::Result<std::unique_ptr<ReportingChild>> fork(const std::function<void(int report_fd)>& body);
  ~ReportingChild() { stop(); }
  ReportingChild(const ReportingChild&) = delete;
  ReportingChild& operator=(const ReportingChild&) = delete;

  // Sends SIGTERM and reaps the child; then a no-op.
  void stop() noexcept;
  pid_t pid() const noexcept { return pid_; }
  // Everything the child reported, up to and including the "ready" line.
  const std::string& report() const noexcept { return report_; }

 private:
  explicit ReportingChild(pid_t pid) : pid_(pid) {}

  pid_t pid_;
  std::string report_;
};

}  // namespace minibench
