// Internal: ConnectionShm, shared memory and descriptors on a server
// connection: the answer to the client's SHM_HELLO (once per connection),
// the ShmLink it made, and the check that every descriptor that arrived
// (SCM_RIGHTS, unix:// only) came with an SHM_RING frame.
//
// Owned by its ServerConnection and used only on the connection's thread:
// serve (SHM_HELLO, SHM_RING, and the end of each batch on unix://),
// handle_stream_request (a new stream's link) and the connection's close.
#pragma once

#include <memory>
#include <string>

#include "authrpc/base/status.h"
#include "authrpc/rpc/frame_channel.h"
#include "authrpc/server/server_impl.h"

namespace authrpc {

class ShmLink;

class ConnectionShm {
 public:
  // Set once the client's SHM_HELLO was accepted.
  const std::shared_ptr<ShmLink>& link() const noexcept { return link_; }

  // The client's SHM_HELLO: answers it (accepted or refused) on `channel`.
  // A protocol error for a second one or one with a body. `who` names the
  // peer in the server's log when it is refused.
  Status hello(const Frame& frame, FrameChannel& channel, Server::Impl& server,
               const std::string& who);
  // Descriptors that arrived without an SHM_RING frame to claim them: a
  // protocol error.
  Status check_stray_descriptors(FrameChannel& channel);
  // The connection has ended (metrics: one shared-memory connection fewer).
  void closed(Server::Impl& server) noexcept;

 private:
  std::shared_ptr<ShmLink> link_;
  bool answered_ = false;  // the client's SHM_HELLO was answered (accepted or not)
};

}  // namespace authrpc
