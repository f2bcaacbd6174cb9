#include "authrpc/rpc/shm_errors.h"

#include <string>

namespace authrpc {
namespace {

class ShmCategory final : public std::error_category {
 public:
  const char* name() const noexcept override { return "authrpc.shm"; }

  std::string message(int value) const override {
    switch (static_cast<ShmErrc>(value)) {
      case ShmErrc::kUnsupported: return "shared memory not available";
      case ShmErrc::kPeerRefused: return "peer credentials refused for shared memory";
      case ShmErrc::kBadHandoff: return "malformed shared-memory handoff";
      case ShmErrc::kBadGeometry: return "invalid shared-memory ring header";
      case ShmErrc::kCorrupted: return "shared-memory ring index out of range";
      case ShmErrc::kPeerGone: return "shared-memory peer is gone";
      case ShmErrc::kPeerClosed: return "shared-memory reader closed the ring";
      case ShmErrc::kEndOfRing: return "end of shared-memory ring";
    }
    return "unknown shared-memory error";
  }

  std::error_condition default_error_condition(int value) const noexcept override {
    Errc e = Errc::kUnknown;
    switch (static_cast<ShmErrc>(value)) {
      case ShmErrc::kUnsupported: e = Errc::kUnimplemented; break;
      case ShmErrc::kPeerRefused: e = Errc::kPermissionDenied; break;
      case ShmErrc::kBadHandoff:
      case ShmErrc::kBadGeometry:
      case ShmErrc::kCorrupted: e = Errc::kProtocolError; break;
      case ShmErrc::kPeerGone: e = Errc::kConnectionClosed; break;
      case ShmErrc::kPeerClosed: e = Errc::kCancelled; break;
      case ShmErrc::kEndOfRing: e = Errc::kOutOfRange; break;
    }
    return {static_cast<int>(e), authrpc_category()};
  }
};

}  // namespace

const std::error_category& shm_category() noexcept {
  static const ShmCategory category;
  return category;
}

std::error_code make_error_code(ShmErrc e) noexcept {
  return {static_cast<int>(e), shm_category()};
}

}  // namespace authrpc
