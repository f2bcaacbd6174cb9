// AuditLog: one JSON line per authentication success or failure, per
// authorization refusal and per delegation-token operation (docs/AUTHZ.md,
// "Audit log"). IO threads call
// record(), which formats the line and hands it to a writer thread through a
// bounded queue: an IO thread never waits for the disk. If the queue is full
// (the disk cannot keep up), lines are dropped and counted, and the next line
// written says how many were lost. Owned by ServerOptions (shared).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

#include "authrpc/auth/identity.h"
#include "authrpc/base/log.h"
#include "authrpc/base/result.h"

namespace authrpc {

struct AuditEvent {
  std::string_view event;    // "authentication", "authorization", "proxy", "token"
  std::string_view outcome;  // "success", "failure", "denied"
  std::string_view peer;
  std::string_view mechanism;
  std::string_view principal;  // as authenticated (before mapping); may be empty
  std::string_view user;       // short / effective user; may be empty
  std::optional<std::string_view> real_user;
  std::string_view service;
  std::string_view method;
  std::string_view reason;  // never a secret: Status messages never carry one
  // Written only when non-empty, so that the lines of the events above keep
  // their keys:
  std::string_view operation = {};  // "token": get, renew, cancel
  std::string_view token_id = {};   // "token": "sequence_number=N,master_key_id=K", never the token
  std::string_view code = {};       // a failure's wire code name, e.g. "MECHANISM_UNAVAILABLE"
};

class AuditLog {
 public:
  // Opens `path` for appending (created 0600 if missing; an existing file
  // open to others is made 0600 with a warning on `log`, or refused with
  // CONFIG_ERROR if this process does not own it). reopen() does the same.
  static Result<std::shared_ptr<AuditLog>> open(const std::string& path,
                                                std::size_t max_queued_lines = 65536,
                                                LogSink log = {});
  ~AuditLog();  // writes what is queued, then closes
  AuditLog(const AuditLog&) = delete;
  AuditLog& operator=(const AuditLog&) = delete;

  void record(const AuditEvent& e);
  // Reopens the path (after log rotation); SIGHUP in authrpc-server.
  Status reopen();
  // Blocks until every line recorded so far has been written (tests, stop).
  void flush();
  std::uint64_t dropped() const;

  // The line record() writes for `e` (without the newline), for tests.
  static std::string format(const AuditEvent& e);

 private:
  AuditLog(std::string path, int fd, std::size_t max_queued, LogSink log);
  void run();

  const std::string path_;
  const std::size_t max_queued_;
  const LogSink log_;
  mutable std::mutex mu_;
  std::condition_variable wake_, drained_;
  std::deque<std::string> queue_;
  bool writing_ = false;
  bool stop_ = false;
  int fd_;
  std::uint64_t dropped_ = 0, dropped_reported_ = 0;
  std::thread writer_;
};

}  // namespace authrpc
