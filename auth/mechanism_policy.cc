#include "authrpc/auth/mechanism_policy.h"

#include <string>

namespace authrpc {

MechanismConflict mechanism_conflict(const MechanismTraits& traits, const MechanismPolicy& policy) {
  if (policy.authentication == SecurityRequirement::kRequired && !traits.proves_identity) {
    return MechanismConflict::kNoProofWhenRequired;
  }
  if (policy.authentication == SecurityRequirement::kDisabled && traits.proves_identity) {
    return MechanismConflict::kProofWhenDisabled;
  }
  if (traits.needs_client_certificate && !policy.client_certificate) {
    return MechanismConflict::kNeedsClientCertificate;
  }
  if (traits.needs_tls && !policy.tls) return MechanismConflict::kNeedsTls;
  if (traits.bearer_secret && policy.plaintext_tcp) {
    return MechanismConflict::kBearerSecretInPlaintext;
  }
  return MechanismConflict::kNone;
}

Status check_mechanism_policy(const MechanismTraits& traits, std::string_view name,
                              const MechanismPolicy& policy,
                              const MechanismConflictMessages& messages) {
  const MechanismConflict conflict = mechanism_conflict(traits, policy);
  if (conflict == MechanismConflict::kNone) return {};
  std::string message(messages[static_cast<std::size_t>(conflict) - 1]);
  if (const auto at = message.find("{}"); at != std::string::npos) message.replace(at, 2, name);
  return Status(Errc::kConfigError, std::move(message));
}

}  // namespace authrpc
