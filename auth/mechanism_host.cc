#include "authrpc/auth/mechanism_host.h"

#include <asio/execution/context.hpp>
#include <asio/execution_context.hpp>
#include <asio/query.hpp>
#include <asio/thread_pool.hpp>

namespace authrpc {
namespace {

class HostService final : public asio::execution_context::service {
 public:
  static inline asio::execution_context::id id;
  explicit HostService(asio::execution_context& context) : service(context) {}
  LocalMechanismHost host;

 private:
  // The blocking thread stops with the service's destruction, after every
  // service of the context has shut down (the IO objects first).
  void shutdown() override {}
};

}  // namespace

LocalMechanismHost::LocalMechanismHost() = default;

// asio::thread_pool's destructor stops the pool and joins its thread.
LocalMechanismHost::~LocalMechanismHost() = default;

asio::any_io_executor LocalMechanismHost::blocking_executor() {
  // One thread per io_context: blocking work is the first service ticket per
  // target, rare once the cache is warm.
  std::call_once(started_, [this] { pool_ = std::make_unique<asio::thread_pool>(1); });
  return pool_->get_executor();
}

MechanismHost& mechanism_host_of(const asio::any_io_executor& executor) {
  return asio::use_service<HostService>(asio::query(executor, asio::execution::context)).host;
}

}  // namespace authrpc
