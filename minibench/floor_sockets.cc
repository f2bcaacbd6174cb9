#include "minibench/floor_sockets.h"

#include <asio/io_context.hpp>
#include <sys/stat.h>
#include <unistd.h>

namespace minibench::net {

Local::endpoint unix_native(const authrpc::Endpoint& endpoint) {
  if (endpoint.path.starts_with("@")) {
    return Local::endpoint(std::string(1, '\0') + endpoint.path.substr(1));
  }
  return Local::endpoint(endpoint.path);
}

authrpc::Result<Tcp::endpoint> tcp_native(const authrpc::Endpoint& endpoint) {
  std::error_code ec;
  const auto address = asio::ip::make_address(endpoint.host, ec);
  if (!ec) return Tcp::endpoint(address, endpoint.port);
  asio::io_context io;
  Tcp::resolver resolver(io);
  const auto results = resolver.resolve(endpoint.host, std::to_string(endpoint.port), ec);
  if (ec || results.empty()) return authrpc::Status(ec, "resolve " + endpoint.host);
  return results.begin()->endpoint();
}

void remove_stale_socket_file(const authrpc::Endpoint& endpoint) {
  struct stat st {};
  if (endpoint.scheme == authrpc::Endpoint::Scheme::kUnix && !endpoint.path.starts_with("@") &&
      ::lstat(endpoint.path.c_str(), &st) == 0 && S_ISSOCK(st.st_mode)) {
    ::unlink(endpoint.path.c_str());
  }
}

}  // namespace minibench::net
