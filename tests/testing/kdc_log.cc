#include "tests/testing/kdc_log.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

namespace authrpc::testing {

void KdcLog::count_line(const std::string& line) {
  if (line.find("): AS_REQ ") != std::string::npos) ++counts_.as;
  if (line.find("): TGS_REQ ") != std::string::npos) ++counts_.tgs;
}

KdcRequestCounts KdcLog::counts() {
  const int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return counts_;
  struct stat st {};
  if (::fstat(fd, &st) == 0 && static_cast<std::uint64_t>(st.st_size) < offset_) {
    offset_ = 0;  // truncated or replaced: count again from the start
    partial_.clear();
    counts_ = {};
  }
  char buffer[16384];
  for (;;) {
    const ssize_t n = ::pread(fd, buffer, sizeof buffer, static_cast<off_t>(offset_));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    offset_ += static_cast<std::uint64_t>(n);
    partial_.append(buffer, static_cast<std::size_t>(n));
    std::size_t start = 0;
    for (std::size_t eol; (eol = partial_.find('\n', start)) != std::string::npos;) {
      count_line(partial_.substr(start, eol - start));
      start = eol + 1;
    }
    partial_.erase(0, start);
  }
  ::close(fd);
  return counts_;
}

}  // namespace authrpc::testing
