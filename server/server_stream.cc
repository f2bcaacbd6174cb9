#include "authrpc/server/server_stream.h"

#include "authrpc/rpc/call_stream.h"

namespace authrpc {

ServerStream::ServerStream(std::shared_ptr<CallStream> stream, std::string request)
    : stream_(std::move(stream)), request_(std::move(request)) {}

asio::awaitable<Result<std::optional<Payload>>> ServerStream::read() { return stream_->read(); }

asio::awaitable<Status> ServerStream::write(std::string_view message) {
  return stream_->write(message);
}

Payload ServerStream::allocate(std::size_t size) { return stream_->allocate(size); }

asio::awaitable<Status> ServerStream::write(Payload message) {
  return stream_->write(std::move(message));
}

asio::awaitable<Result<Payload>> ServerStream::acquire(std::size_t size) {
  return stream_->acquire(size);
}

bool ServerStream::shm_writing() const noexcept { return stream_->shm_writing(); }
bool ServerStream::shm_reading() const noexcept { return stream_->shm_reading(); }

asio::awaitable<Status> ServerStream::send_file(int fd, std::uint64_t offset,
                                               std::uint64_t length) {
  return stream_->send_file(fd, offset, length);
}

bool ServerStream::zero_copy_files() const noexcept { return stream_->zero_copy_files(); }
std::size_t ServerStream::buffered_bytes() const noexcept { return stream_->buffered_bytes(); }
std::uint32_t ServerStream::receive_window() const noexcept { return stream_->receive_window(); }

}  // namespace authrpc
