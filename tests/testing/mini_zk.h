// MiniZk: a real standalone ZooKeeper (Debian's `zookeeper` package) for
// tests, on a free loopback port with its data in a temp dir. start() runs
// the server JVM as a child process and waits until `srvr` answers
// "Mode: standalone"; stop() kills it by PID (SIGKILL: the tests want a
// crash, and ZooKeeper recovers from its transaction log); start() again
// serves the same data on the same port. The destructor stops it and
// removes the dir. tickTime is 500 ms, so sessions may be as short as 1 s.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>

#include "tests/testing/test_support.h"

namespace authrpc::testing {

class MiniZk {
 public:
  static constexpr const char* kJar = "/usr/share/java/zookeeper.jar";
  static constexpr const char* kSlf4j = "/usr/share/java/slf4j-nop.jar";

  MiniZk() = default;
  ~MiniZk() {
    stop();
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  MiniZk(const MiniZk&) = delete;
  MiniZk& operator=(const MiniZk&) = delete;

  // True if Debian's zookeeper and a JVM are installed (scripts/setup.sh).
  static bool available() {
    return std::filesystem::exists(kJar) && std::filesystem::exists(kSlf4j) && ::access("/usr/bin/java", X_OK) == 0;
  }

  // Empty on success, else what went wrong. A port this class picked itself
  // (FreeLoopbackPort()) may be taken by someone else before ZooKeeper binds it —
  // another test's outgoing connection gets ephemeral ports from the same
  // range — so a start that fails to bind it tries again with another port.
  std::string start() {
    const bool own_port = port_ == 0;
    std::string error = start_once();
    for (int retry = 0; retry < 3 && own_port && lost_the_port(); ++retry) {
      std::fprintf(stderr, "mini_zk: port %d was taken before ZooKeeper bound it; trying another\n", port_);
      port_ = 0;
      error = start_once();
    }
    return error;
  }

 private:
  std::string start_once() {
    if (pid_ > 0) return {};
    if (dir_.empty()) {
      dir_ = TempDir("minizk");
      if (dir_.empty()) return "no temporary directory";
    }
    if (port_ == 0) port_ = FreeLoopbackPort();
    if (port_ <= 0) return "no free port";
    {
      std::ofstream cfg(dir_ + "/zoo.cfg");
      cfg << "tickTime=500\n"
          << "dataDir=" << dir_ << "/data\n"
          << "clientPort=" << port_ << "\n"
          << "clientPortAddress=127.0.0.1\n"
          << "admin.enableServer=false\n"
          << "4lw.commands.whitelist=ruok,srvr\n"
          << "maxClientCnxns=0\n";
    }
    const std::string cp = std::string(kJar) + ":" + kSlf4j;
    const std::string cfg = dir_ + "/zoo.cfg";
    const std::string log = dir_ + "/zookeeper.log";
    const pid_t parent = ::getpid();
    pid_ = ::fork();
    if (pid_ < 0) return "fork failed";
    if (pid_ == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(127);
      int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      if (fd >= 0) {
        ::dup2(fd, 1);
        ::dup2(fd, 2);
      }
      ::execl("/usr/bin/java", "java", "-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
              "-Dzookeeper.admin.enableServer=false", "-cp", cp.c_str(),
              "org.apache.zookeeper.server.quorum.QuorumPeerMain", cfg.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (std::chrono::steady_clock::now() < deadline) {
      if (srvr().find("Mode: standalone") != std::string::npos) return {};
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return "zookeeper exited during start; see " + log;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    stop();
    return "zookeeper did not answer srvr within 30 s; see " + log;
  }

  // The last start's process exited because its port was in use.
  bool lost_the_port() const {
    if (pid_ > 0) return false;
    std::ifstream in(dir_ + "/zookeeper.log");
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    return text.find("Address already in use") != std::string::npos;
  }

 public:
  // SIGKILL, then wait for the process.
  void stop() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
  }

  std::string connect_string() const { return "127.0.0.1:" + std::to_string(port_); }
  int port() const { return port_; }
  bool running() const { return pid_ > 0; }

  // The answer to the `srvr` four-letter command, or "" if none.
  std::string srvr() const {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return {};
    // A server still starting may accept and then say nothing.
    timeval timeout{1, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<std::uint16_t>(port_));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    std::string out;
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 && ::write(fd, "srvr", 4) == 4) {
      char buf[1024];
      for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) out.append(buf, static_cast<std::size_t>(n));
    }
    ::close(fd);
    return out;
  }

 private:
  std::string dir_;
  int port_ = 0;
  pid_t pid_ = -1;
};

}  // namespace authrpc::testing
