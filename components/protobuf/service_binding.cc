#include "authrpc/components/protobuf/service_binding.h"

namespace authrpc::proto {

Status check_empty_opening(const ServerStream& stream) {
  if (stream.request().empty()) return {};
  return Status(Errc::kInvalidArgument,
                "a client-streaming or bidirectional call opens with an empty message; its requests follow as "
                "stream messages");
}

}  // namespace authrpc::proto
