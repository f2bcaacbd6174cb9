// Whether a mechanism fits a side's security policy, judged by what it
// declares (auth/mechanism_traits.h), never by its name. The server's and
// the client's policy checks (server/server_policy.h, client/client_policy.h)
// describe their side's connections in a MechanismPolicy and word the
// conflicts their own way. Semantics: docs/TLS.md, "Policies".
#pragma once

#include <array>
#include <string_view>

#include "authrpc/auth/mechanism_traits.h"
#include "authrpc/base/status.h"
#include "authrpc/rpc/security_requirement.h"

namespace authrpc {

// What a side's connections can offer a mechanism.
struct MechanismPolicy {
  SecurityRequirement authentication = SecurityRequirement::kOptional;
  bool tls = false;                 // a connection may be TLS
  bool client_certificate = false;  // ... with a verified client certificate
  bool plaintext_tcp = false;       // a connection may be plaintext tcp://
};

// The ways a mechanism can conflict with a policy, in the order checked.
enum class MechanismConflict {
  kNone,
  kNoProofWhenRequired,     // authentication required, the mechanism proves nothing
  kProofWhenDisabled,       // authentication disabled, the mechanism proves an identity
  kNeedsClientCertificate,  // no TLS with a client certificate
  kNeedsTls,                // no TLS
  kBearerSecretInPlaintext, // a bearer secret over plaintext tcp://
};

MechanismConflict mechanism_conflict(const MechanismTraits& traits, const MechanismPolicy& policy);

// A side's wording of each conflict but kNone, in the enum's order; "{}"
// stands for the mechanism's name.
using MechanismConflictMessages = std::array<std::string_view, 5>;

// kConfigError with the wording of the mechanism's conflict, or OK.
Status check_mechanism_policy(const MechanismTraits& traits, std::string_view name,
                              const MechanismPolicy& policy,
                              const MechanismConflictMessages& messages);

}  // namespace authrpc
