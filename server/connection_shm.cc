#include "authrpc/server/connection_shm.h"

#include <string>

#include "authrpc/rpc/shm_link.h"

namespace authrpc {

Status ConnectionShm::hello(const Frame& frame, FrameChannel& channel, Server::Impl& server,
                            const std::string& who) {
  // Once per connection, answered or not, also when refused or on tcp://
  // (stream_bad_input_test, ASecondShmHello...). The body is empty (section 3: longer is an error).
  if (answered_ || !frame.body.empty()) {
    return Status(Errc::kProtocolError, answered_ ? "a second SHM_HELLO" : "SHM_HELLO with a body");
  }
  answered_ = true;
  Status why;
  link_ = ShmLink::answer(channel, server.options.shm, &why);
  if (link_ && server.metrics) server.metrics->shm_connections_open().add();
  if (!why.ok() && why.code != ShmErrc::kUnsupported) {
    server.log(LogLevel::kInfo, "shared memory refused to " + who + ": " + why.to_string());
  }
  return Status();
}

// Descriptors (SCM_RIGHTS) may ride only on SHM_RING frames, four each, on
// a connection whose SHM_HELLO was accepted (PROTOCOL.md section 7); until
// then the socket is read without room for any, so the kernel closes them
// and none arrives here (rpc/byte_stream.h). When no input is buffered beyond the frames handled,
// every descriptor that has arrived came with one of those frames, so any left unclaimed were sent
// with something else (or an SHM_RING carried more than four): a protocol
// error, and the descriptors are closed at once rather than held until the
// connection ends. (While more input is buffered, descriptors may belong to
// an SHM_RING frame not handled yet: checked once that input is consumed.)
// Otherwise a client could park descriptors on any frame of a unix://
// connection, and a ring frame's extra descriptors would go to the next ring
// (stream_bad_input_test: DescriptorsWithoutAnShmFrame..., BadShmRings...).
Status ConnectionShm::check_stray_descriptors(FrameChannel& channel) {
  if (channel.input_buffered()) {
    // Descriptors may belong to an SHM_RING still being read (a read brings
    // at most one batch, 16 at most): a few, never this many. Without this
    // bound a client that always left part of a frame unread could pile up
    // descriptors matched to rings (stream_bad_input_test,
    // DescriptorsPiledUpBehindPartialFrames...).
    constexpr std::size_t kMaxUnclaimed = 64;
    if (link_ && link_->pending_fds() > kMaxUnclaimed) {
      return Status(Errc::kProtocolError, std::to_string(link_->pending_fds()) +
                                              " file descriptors sent without SHM_RING frames");
    }
    return Status();
  }
  // take_ring_fds() hands out four at a time: drain the link's list, so that
  // every stray descriptor is closed now rather than when the connection
  // ends (stream_bad_input_test, EveryStrayDescriptorIsClosedAtOnce...).
  std::size_t stray = 0;
  if (link_) {
    for (std::size_t n; (n = link_->take_ring_fds(channel).size()) > 0;) stray += n;
  } else {
    stray = channel.byte_stream().take_received_fds().size();
  }
  if (stray > 0) {
    return Status(Errc::kProtocolError,
                  std::to_string(stray) + " file descriptor(s) sent without an SHM_RING frame");
  }
  return Status();
}

void ConnectionShm::closed(Server::Impl& server) noexcept {
  if (link_ && server.metrics) server.metrics->shm_connections_open().sub();
}

}  // namespace authrpc
