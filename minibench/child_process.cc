#include "minibench/child_process.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <system_error>

namespace minibench {
namespace {

// Whether `text` holds a whole line that starts with `word`.
bool has_line(const std::string& text, const std::string& word) {
  for (std::size_t pos = 0; pos < text.size();) {
    const auto end = text.find('\n', pos);
    if (end == std::string::npos) return false;
    if (text.compare(pos, word.size(), word) == 0) return true;
    pos = end + 1;
  }
  return false;
}

}  // namespace

authrpc::Result<std::unique_ptr<ReportingChild>> ReportingChild::fork(const std::function<void(int)>& body) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return authrpc::Status(std::error_code(errno, std::system_category()), "pipe");
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int e = errno;
    ::close(fds[0]);
    ::close(fds[1]);
    return authrpc::Status(std::error_code(e, std::system_category()), "fork");
  }
  if (pid == 0) {
    ::close(fds[0]);
    body(fds[1]);
    ::_exit(1);
  }
  ::close(fds[1]);
  std::unique_ptr<ReportingChild> child(new ReportingChild(pid));  // stops the child on every return
  char buf[4096];
  while (!has_line(child->report_, "ready") && !has_line(child->report_, "error ")) {
    pollfd p{fds[0], POLLIN, 0};
    if (::poll(&p, 1, 15000) <= 0) {
      ::close(fds[0]);
      return authrpc::Status(authrpc::Errc::kDeadlineExceeded, "the server child did not start");
    }
    const ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n <= 0) break;
    child->report_.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fds[0]);
  if (const auto e = child->report_.find("error "); e != std::string::npos) {
    return authrpc::Status(authrpc::Errc::kInternal, "server child: " + child->report_.substr(e + 6));
  }
  if (!has_line(child->report_, "ready")) {
    return authrpc::Status(authrpc::Errc::kInternal, "server child ended without a report: " + child->report_);
  }
  return child;
}

void ReportingChild::stop() noexcept {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGTERM);
  ::waitpid(pid_, nullptr, 0);
  pid_ = -1;
}

}  // namespace minibench
