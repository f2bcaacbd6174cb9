#include "authrpc/server/method_cache.h"

namespace authrpc {

MethodCache::Found MethodCache::find_in_table(const Server::Impl& server, ServerMetrics* metrics,
                                              std::string_view service, std::string_view method) {
  Found found;
  std::string_view names_wire;
  found.method =
      server.find_method(service, method, &found.service, &found.method_name, &names_wire);
  if (metrics) found.cells = &metrics->method(found.method);
  if (found.method != nullptr) {
    last_ = found;
    names_wire_ = names_wire;
  }
  return found;
}

}  // namespace authrpc
