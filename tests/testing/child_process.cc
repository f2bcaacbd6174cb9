#include "tests/testing/child_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <iterator>
#include <thread>

#include "authrpc/base/log.h"

namespace authrpc::testing {

pid_t SpawnLogged(const std::vector<std::string>& argv, const std::string& output,
                  const std::string& input) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const char* in = input.empty() ? "/dev/null" : input.c_str();
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid != 0) return pid;
  // Only async-signal-safe calls from here: the test process has threads.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(127);
  const int in_fd = ::open(in, O_RDONLY);
  if (in_fd >= 0) ::dup2(in_fd, 0);
  const int fd = ::open(output.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
  if (fd >= 0) {
    ::dup2(fd, 1);
    ::dup2(fd, 2);
  }
  ::execv(args[0], args.data());
  ::_exit(127);
}

bool ReapedWithin(pid_t pid, std::chrono::steady_clock::duration limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  int status = 0;
  do {
    if (::waitpid(pid, &status, WNOHANG) == pid) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  } while (std::chrono::steady_clock::now() < deadline);
  return false;
}

ToldChild ForkTelling(const std::function<int(const std::function<void(const std::string&)>& tell)>& child) {
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) return {};
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(pipe_fds[0]);
    ::_exit(child([&](const std::string& line) {
      std::size_t sent = 0;
      while (sent < line.size()) {
        const ssize_t n = ::write(pipe_fds[1], line.data() + sent, line.size() - sent);
        if (n <= 0) break;
        sent += static_cast<std::size_t>(n);
      }
      ::close(pipe_fds[1]);
    }));
  }
  ::close(pipe_fds[1]);
  ToldChild told{pid, {}};
  char buf[256];
  for (ssize_t n; pid > 0 && (n = ::read(pipe_fds[0], buf, sizeof buf)) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    told.told.append(buf, static_cast<std::size_t>(n));
  }
  ::close(pipe_fds[0]);
  return told;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

bool WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  return static_cast<bool>(out.flush());
}

std::string FileTail(const std::string& path, std::size_t max) {
  const std::string text = ReadFile(path);
  return escape_for_log(text.size() > max ? text.substr(text.size() - max) : text);
}

}  // namespace authrpc::testing
