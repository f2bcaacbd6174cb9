#include "authrpc/rpc/stream_half.h"

#include "authrpc/rpc/call_stream.h"

namespace authrpc {

StreamHalf::StreamHalf(std::shared_ptr<CallStream> stream) : stream_(std::move(stream)) {}

asio::awaitable<Result<std::optional<Payload>>> StreamHalf::read() { return stream_->read(); }

asio::awaitable<Status> StreamHalf::write(std::string_view message) {
  return stream_->write(message);
}

Payload StreamHalf::allocate(std::size_t size) { return stream_->allocate(size); }

asio::awaitable<Status> StreamHalf::write(Payload message) {
  return stream_->write(std::move(message));
}

asio::awaitable<Result<Payload>> StreamHalf::acquire(std::size_t size) {
  return stream_->acquire(size);
}

bool StreamHalf::shm_writing() const noexcept { return stream_->shm_writing(); }
bool StreamHalf::shm_reading() const noexcept { return stream_->shm_reading(); }
std::size_t StreamHalf::buffered_bytes() const noexcept { return stream_->buffered_bytes(); }
std::uint32_t StreamHalf::receive_window() const noexcept { return stream_->receive_window(); }

}  // namespace authrpc
