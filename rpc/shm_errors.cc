#include "authrpc/rpc/shm_errors.h"

#include "authrpc/base/error_table.h"

namespace authrpc {
namespace {

// Shared-memory codes have no names: Status::to_string() prints the message.
constexpr ErrorRow<ShmErrc> kShmErrors[] = {
    {ShmErrc::kUnsupported, "", "shared memory not available", Errc::kUnimplemented},
    {ShmErrc::kPeerRefused, "", "peer credentials refused for shared memory",
     Errc::kPermissionDenied},
    {ShmErrc::kBadHandoff, "", "malformed shared-memory handoff", Errc::kProtocolError},
    {ShmErrc::kBadGeometry, "", "invalid shared-memory ring header", Errc::kProtocolError},
    {ShmErrc::kCorrupted, "", "shared-memory ring index out of range", Errc::kProtocolError},
    {ShmErrc::kPeerGone, "", "shared-memory peer is gone", Errc::kConnectionClosed},
    {ShmErrc::kPeerClosed, "", "shared-memory reader closed the ring", Errc::kCancelled},
    {ShmErrc::kEndOfRing, "", "end of shared-memory ring", Errc::kOutOfRange},
};
constexpr ErrorTable<ShmErrc> kShmTable{
    kShmErrors, {ShmErrc{}, "", "unknown shared-memory error", Errc::kUnknown}};
constinit const TableErrorCategory<ShmErrc, std::error_category> kShmCategory("authrpc.shm",
                                                                              kShmTable);

}  // namespace

const std::error_category& shm_category() noexcept { return kShmCategory; }

std::error_code make_error_code(ShmErrc e) noexcept {
  return {static_cast<int>(e), kShmCategory};
}

}  // namespace authrpc
