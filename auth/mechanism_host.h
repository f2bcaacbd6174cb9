// MechanismHost: what the runtime carrying a connection lends the mechanism
// that authenticates it, so that mechanisms do not make their own threads.
// By default it belongs to the io_context the connection runs on
// (mechanism_host_of()), and so to the server or client runtime that owns
// that context; a program may lend its own through ChannelInfo::host.
#pragma once

#include <asio/any_io_executor.hpp>
#include <memory>
#include <mutex>

namespace asio {
class thread_pool;
}

namespace authrpc {

class MechanismHost {
 public:
  virtual ~MechanismHost() = default;
  // Runs work that may block (a request to the KDC, a library call that may
  // wait for one): never an IO thread. Sessions post to it and resume on
  // their IO thread. Thread-safe.
  virtual asio::any_io_executor blocking_executor() = 0;
};

// One blocking thread, started on first use (most connections never need
// it); destruction stops it (work not yet started is dropped) and joins it.
class LocalMechanismHost final : public MechanismHost {
 public:
  LocalMechanismHost();
  ~LocalMechanismHost() override;
  LocalMechanismHost(const LocalMechanismHost&) = delete;
  LocalMechanismHost& operator=(const LocalMechanismHost&) = delete;

  asio::any_io_executor blocking_executor() override;

 private:
  std::once_flag started_;
  std::unique_ptr<asio::thread_pool> pool_;
};

// The host of the io_context `executor` belongs to: a LocalMechanismHost
// kept by that context (an asio service) and destroyed with it. What a
// session uses when ChannelInfo::host is null; call it from the session's
// own executor (co_await asio::this_coro::executor).
MechanismHost& mechanism_host_of(const asio::any_io_executor& executor);

}  // namespace authrpc
