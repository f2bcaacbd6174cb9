// The options of the shared-memory data plane (docs/SHM.md): what
// ClientOptions and ServerOptions carry, apart from the machinery that
// reads them (rpc/shm_ring.h, rpc/shm_handoff.h, rpc/shm_link.h,
// rpc/shm_stream_plane.h), so that the public headers need none of it.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>

namespace authrpc {

// Geometry chosen by the side that creates a ring.
struct ShmRingOptions {
  // Bytes per slot: a multiple of 4096, from 4 KiB to 64 MiB.
  std::uint32_t slot_size = 128 * 1024;
  // Slots in the ring: 2 to 1024. The ring is the only buffer between the two
  // sides: a writer that gets ahead of its reader by slot_count slots waits.
  std::uint32_t slot_count = 16;
};

// What an attaching side accepts from its peer's header (the peer picked the
// geometry; these bound how much it can make us map).
struct ShmAttachLimits {
  std::uint32_t max_slot_size = 64u << 20;
  std::uint32_t max_slot_count = 1024;
  std::uint64_t max_region_size = 1ull << 30;
};

// Who may share memory with us. Shared memory bypasses the socket's
// permission checks for as long as the mapping lives, so a peer is accepted
// only if it runs as `uid` (unset: our own effective uid).
struct ShmPeerPolicy {
  std::optional<uid_t> uid;
};

// Client and server option: whether to use shared memory on unix://
// connections, whom to trust, and the geometry of the rings this side writes.
struct ShmOptions {
  bool enabled = false;
  ShmPeerPolicy peer;      // default: the peer must run as our effective uid
  ShmRingOptions ring;     // 16 × 128 KiB
  ShmAttachLimits limits;  // what a peer's ring may make us map
};

}  // namespace authrpc
