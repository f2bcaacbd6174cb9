#include "authrpc/server/server_stream.h"

#include "authrpc/rpc/call_stream.h"

namespace authrpc {

ServerStream::ServerStream(std::shared_ptr<CallStream> stream, std::string request)
    : StreamHalf(std::move(stream)), request_(std::move(request)) {}

asio::awaitable<Status> ServerStream::send_file(int fd, std::uint64_t offset,
                                               std::uint64_t length) {
  return stream_->send_file(fd, offset, length);
}

bool ServerStream::zero_copy_files() const noexcept { return stream_->zero_copy_files(); }

}  // namespace authrpc
