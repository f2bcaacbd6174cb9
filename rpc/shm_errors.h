// Typed shared-memory failures (rpc/shm_ring.h, rpc/shm_handoff.h). Each
// ShmErrc maps (default_error_condition) onto the authrpc Errc that says what
// a caller should do, so retry_advice() and the wire status work unchanged,
// while the exact kind stays comparable (status.code == ShmErrc::kPeerGone).
//
// Every failure to set a ring up (kUnsupported, kPeerRefused, kBadHandoff,
// kBadGeometry) leaves the Unix socket usable: the caller falls back to it.
#pragma once

#include <system_error>

#include "authrpc/base/status.h"

namespace authrpc {

enum class ShmErrc {
  kUnsupported = 1,  // memfd, sealing or eventfd not available here (→ kUnimplemented)
  kPeerRefused,      // the peer's SO_PEERCRED do not match the policy (→ kPermissionDenied)
  kBadHandoff,       // malformed handoff message or wrong descriptors (→ kProtocolError)
  kBadGeometry,      // shared header: bad magic, version, geometry, size or seals (→ kProtocolError)
  kCorrupted,        // an index or length read from shared memory is out of range (→ kProtocolError)
  kPeerGone,         // the peer exited or dropped the ring without closing it (→ kConnectionClosed)
  kPeerClosed,       // the reader closed the ring: the writer stops (→ kCancelled)
  kEndOfRing,        // the writer closed the ring and every slot has been read (→ kOutOfRange)
};

const std::error_category& shm_category() noexcept;
std::error_code make_error_code(ShmErrc e) noexcept;

}  // namespace authrpc

template <>
struct std::is_error_code_enum<authrpc::ShmErrc> : std::true_type {};
