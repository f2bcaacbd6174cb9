#include "authrpc/server/audit_log.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <nlohmann/json.hpp>

#include "authrpc/base/stop_thread.h"

namespace authrpc {
namespace {

// Opens `path` for appending, created 0600. An existing file with a looser
// mode (made by hand, or by another program) is made 0600 if it
// is ours, with a warning; someone else's is refused. The log names peers
// and users.
Result<int> open_append(const std::string& path, const LogSink& log) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) {
    return Status(Errc::kConfigError, "cannot open audit log " + path + ": " + std::strerror(errno));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return Status(Errc::kConfigError, "cannot stat audit log " + path + ": " + std::strerror(err));
  }
  const unsigned mode = st.st_mode & 07777;
  if ((mode & 077) == 0) return fd;
  char text[8];
  std::snprintf(text, sizeof text, "%04o", mode);
  if (st.st_uid != ::geteuid() || ::fchmod(fd, 0600) != 0) {
    const std::string why = st.st_uid != ::geteuid()
                                ? "it belongs to uid " + std::to_string(st.st_uid) +
                                      ", not to this process (uid " + std::to_string(::geteuid()) + ")"
                                : std::string(std::strerror(errno));
    ::close(fd);
    return Status(Errc::kConfigError, "audit log " + path + " has mode " + text +
                                          " and cannot be made 0600: " + why +
                                          "; chown it to this user or chmod it 0600");
  }
  if (log) log(LogLevel::kWarning, "audit log " + path + " had mode " + text + "; made it 0600");
  return fd;
}

// RFC 3339 UTC with milliseconds: 2024-05-01T12:00:00.123Z
std::string now_utc() {
  const auto now = std::chrono::system_clock::now();
  const auto t = std::chrono::system_clock::to_time_t(now);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[40];
  const auto n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  std::snprintf(buf + n, sizeof buf - n, ".%03dZ", static_cast<int>(ms));
  return buf;
}

void write_all(int fd, const std::string& data) {
  std::size_t off = 0;
  while (off < data.size()) {
    const ssize_t n = ::write(fd, data.data() + off, data.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // nothing sensible to do: the audit log cannot log its own failure
    off += static_cast<std::size_t>(n);
  }
}

}  // namespace

Result<std::shared_ptr<AuditLog>> AuditLog::open(const std::string& path,
                                                 std::size_t max_queued_lines, LogSink log) {
  auto fd = open_append(path, log);
  if (!fd.ok()) return fd.status();
  return std::shared_ptr<AuditLog>(new AuditLog(path, *fd, max_queued_lines, std::move(log)));
}

AuditLog::AuditLog(std::string path, int fd, std::size_t max_queued, LogSink log)
    : path_(std::move(path)), max_queued_(max_queued == 0 ? 1 : max_queued), log_(std::move(log)),
      fd_(fd) {
  writer_ = std::thread([this] { run(); });
}

AuditLog::~AuditLog() {
  stop_thread(mu_, stop_, wake_, writer_);
  if (fd_ >= 0) ::close(fd_);
}

std::string AuditLog::format(const AuditEvent& e) {
  nlohmann::json j;
  j["time"] = now_utc();
  j["event"] = e.event;
  j["outcome"] = e.outcome;
  j["peer"] = e.peer;
  j["mechanism"] = e.mechanism;
  j["principal"] = e.principal;
  j["user"] = e.user;
  j["real_user"] = e.real_user ? nlohmann::json(*e.real_user) : nlohmann::json(nullptr);
  j["service"] = e.service;
  j["method"] = e.method;
  j["reason"] = e.reason;
  if (!e.operation.empty()) j["operation"] = e.operation;
  if (!e.token_id.empty()) j["token_id"] = e.token_id;
  if (!e.code.empty()) j["code"] = e.code;
  // Peers choose some of these strings. ensure_ascii escapes everything
  // but printable ASCII (newlines, ESC, DEL, C1 controls, U+2028, bidi
  // overrides) as \uXXXX, so a line is one line and shows no terminal
  // tricks; JSON readers get the strings back as sent. Invalid UTF-8 is
  // replaced instead of throwing.
  return j.dump(-1, ' ', true, nlohmann::json::error_handler_t::replace);
}

void AuditLog::record(const AuditEvent& e) {
  std::string line = format(e);
  line += '\n';
  {
    std::lock_guard lock(mu_);
    if (queue_.size() >= max_queued_) {
      ++dropped_;
      return;
    }
    queue_.push_back(std::move(line));
  }
  wake_.notify_one();
}

void AuditLog::run() {
  std::unique_lock lock(mu_);
  for (;;) {
    wake_.wait(lock, [this] { return stop_ || !queue_.empty(); });
    if (queue_.empty() && stop_) return;
    std::string batch;
    while (!queue_.empty()) {
      batch += queue_.front();
      queue_.pop_front();
    }
    if (dropped_ != dropped_reported_) {
      batch += "{\"event\":\"audit\",\"outcome\":\"dropped\",\"count\":" +
               std::to_string(dropped_ - dropped_reported_) + ",\"time\":\"" + now_utc() + "\"}\n";
      dropped_reported_ = dropped_;
    }
    writing_ = true;
    const int fd = fd_;
    lock.unlock();
    write_all(fd, batch);  // one write(2) per batch with O_APPEND
    lock.lock();
    writing_ = false;
    drained_.notify_all();
  }
}

void AuditLog::flush() {
  std::unique_lock lock(mu_);
  drained_.wait(lock, [this] { return queue_.empty() && !writing_; });
}

Status AuditLog::reopen() {
  auto fd = open_append(path_, log_);
  if (!fd.ok()) return fd.status();
  std::unique_lock lock(mu_);
  drained_.wait(lock, [this] { return !writing_; });
  ::close(fd_);
  fd_ = *fd;
  return {};
}

std::uint64_t AuditLog::dropped() const {
  std::lock_guard lock(mu_);
  return dropped_;
}

}  // namespace authrpc
