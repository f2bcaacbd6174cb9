// KdcLog: counts the requests an MIT krb5kdc has handled, from its log file
// (the [logging] kdc = FILE:... of its kdc.conf). minibench reads it between
// blocks of sessions to report KDC requests per session; MiniKdc (and
// through it the tests) reads it whole.
//
// krb5kdc writes (and flushes) a request's line before it sends the reply, so
// once a client has its ticket the request is in the file. Lines look like
//   "... krb5kdc[1234](info): AS_REQ (2 etypes {...}) 127.0.0.1: ISSUE: ..."
//   "... krb5kdc[1234](info): TGS_REQ (2 etypes {...}) 127.0.0.1: ISSUE: ..."
// (a pre-authenticated kinit logs two AS_REQ lines: NEEDED_PREAUTH, ISSUE).
#pragma once

#include <cstdint>
#include <string>
#include <utility>

namespace authrpc::testing {

struct KdcRequestCounts {
  int as = 0;   // AS_REQ lines (TGTs)
  int tgs = 0;  // TGS_REQ lines (service tickets)
  int total() const { return as + tgs; }
};

// Reads one log file incrementally. Not thread-safe; cheap to call between
// measurements (it reads only what was appended since the last call).
class KdcLog {
 public:
  explicit KdcLog(std::string path) : path_(std::move(path)) {}

  // Every request logged so far, from the start of the file. A file that
  // does not exist (yet) counts as empty; one that shrank is read afresh.
  KdcRequestCounts counts();
  const std::string& path() const noexcept { return path_; }

 private:
  void count_line(const std::string& line);

  std::string path_;
  std::uint64_t offset_ = 0;
  std::string partial_;  // an unterminated last line, completed by the next read
  KdcRequestCounts counts_;
};

}  // namespace authrpc::testing
