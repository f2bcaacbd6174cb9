// Handing a shared-memory ring (rpc/shm_ring.h) to the peer on an existing,
// already authenticated Unix-domain socket: the peer's credentials are checked
// with SO_PEERCRED, then one 32-byte message carries the ring's geometry and
// its four descriptors (SCM_RIGHTS). docs/SHM.md has the message and the rules
// for where in a byte stream it may travel.
//
// Every failure here leaves the socket usable as it was (nothing is sent when
// the credentials are refused), so the caller falls back to the socket:
// ShmErrc::kPeerRefused (the policy), kUnsupported (not a Unix socket, no
// SCM_RIGHTS), kBadHandoff / kBadGeometry (what arrived was wrong).
#pragma once

#include <asio/awaitable.hpp>
#include <asio/local/stream_protocol.hpp>
#include <sys/types.h>

#include <optional>

#include "authrpc/base/result.h"
#include "authrpc/rpc/shm_options.h"
#include "authrpc/rpc/shm_ring.h"

namespace authrpc {

// The peer of a connected Unix socket, as the kernel recorded it when the
// connection was made (connect() or socketpair()): a later setuid() of the
// peer does not change it.
struct PeerCredentials {
  pid_t pid = 0;
  uid_t uid = 0;
  gid_t gid = 0;
};

Result<PeerCredentials> peer_credentials(int unix_socket);

// kPeerRefused (naming the uids, not secret) unless the peer of `unix_socket`
// satisfies `policy`; kUnsupported if it is not a Unix socket.
Status check_shm_peer(int unix_socket, const ShmPeerPolicy& policy);

// Checks the peer, then sends the peer's half of `ring` (take_peer_fds())
// and its geometry. Waits (asynchronously) while the socket's buffer is full.
asio::awaitable<Status> send_shm_ring(asio::local::stream_protocol::socket& socket, ShmRing& ring,
                                      const ShmPeerPolicy& policy = {});
// Checks the peer, reads exactly one handoff message with its descriptors
// (nothing beyond it) and attaches the ring (ShmRing::attach's checks, and
// the geometry in the message must match the header's).
asio::awaitable<Result<ShmRing>> receive_shm_ring(asio::local::stream_protocol::socket& socket,
                                                  const ShmPeerPolicy& policy = {},
                                                  const ShmAttachLimits& limits = {});

// The same on a raw connected Unix socket, blocking (poll) while the socket
// is not ready: for code outside an event loop, and the building blocks of
// the two above.
Status send_shm_ring_blocking(int unix_socket, ShmRing& ring, const ShmPeerPolicy& policy = {});
Result<ShmRing> receive_shm_ring_blocking(int unix_socket, const ShmPeerPolicy& policy = {},
                                          const ShmAttachLimits& limits = {});

}  // namespace authrpc
