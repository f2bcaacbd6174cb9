// ConnectionSummary: what a Client reads about its connection from any
// thread — the TLS parameters (set in open(), before the Client is handed
// out, and read-only afterwards), the mechanism and the user the server
// authenticated (set once negotiated, under the mutex), and why the
// connection closed (set once under the mutex; the connection's executor
// reads it without the lock). A value member of Client::Connection, whose
// open(), run() and fail() write it and whose getters read it.
#pragma once

#include <mutex>
#include <optional>
#include <string>

#include "authrpc/base/status.h"
#include "authrpc/rpc/byte_stream.h"

namespace authrpc {

class ConnectionSummary {
 public:
  void set_tls(const TlsInfo& tls) { tls_ = tls; }
  const std::optional<TlsInfo>& tls() const noexcept { return tls_; }

  void authenticated(std::string&& mechanism, std::string&& user);
  std::string mechanism() const;
  std::string user() const;

  // Once, when the connection closes.
  void close(Status&& why);
  // Any thread.
  Status status() const;
  // The connection's executor only.
  const Status& closed_status() const noexcept { return closed_; }

 private:
  std::optional<TlsInfo> tls_;
  mutable std::mutex mu_;
  std::string mechanism_;  // under mu_
  std::string user_;       // under mu_
  Status closed_;          // written under mu_
};

}  // namespace authrpc
