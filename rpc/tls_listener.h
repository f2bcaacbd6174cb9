// The tls:// listener: the TCP listener whose accepted streams are wrapped
// in TLS (as kj's TlsContext::wrapPort / TlsConnectionReceiver), and the
// first-byte check that decides what an accepted connection carries.
//
// accept() returns at once, before the client has sent anything, so that a
// slow client never holds up the accept loop. Its stream needs_open()
// (rpc/byte_stream.h): the connection that owns it runs open() under its own
// negotiation timeout and pre-authentication budget — which end it by closing
// the stream — and open() waits for the client's first byte, peeked without
// taking it off the socket (MSG_PEEK):
//   - a TLS handshake record (0x16): the stream becomes TLS
//     (wrap_tls_server, rpc/tls_stream.h; the handshake then runs inside its
//     first reads, under the same bounds);
//   - anything else, on a listener that serves plaintext too (encryption
//     `optional`): the accepted TCP stream, unchanged, not a byte lost;
//   - anything else, on a TLS-only listener (`required`): one fixed ERROR
//     frame (FAILED_PRECONDITION, "this endpoint requires TLS") and
//     TlsErrc::kTlsRequired.
// Until open() has returned, nothing can be written to the stream: no byte
// leaves in plaintext before the client has shown it is not speaking TLS.
// Wire behaviour: docs/TLS.md, docs/PROTOCOL.md section 11.
#pragma once

#include <memory>

#include "authrpc/rpc/transport.h"

namespace authrpc {
namespace security {
class TlsServerContext;
}  // namespace security

// The first byte of every TLS connection: a handshake record.
inline constexpr unsigned char kTlsHandshakeRecordType = 0x16;

// What a tls:// listener does with a client whose first byte is not TLS.
enum class PlaintextClients { kRefuse, kServe };

// Wraps `tcp` (a TCP listener, consumed) so that its accepted streams become
// TLS or, by `plaintext`, are refused or served in plaintext. Fails
// (kConfigError) without a context.
Result<std::unique_ptr<Listener>> wrap_tls_listener(
    std::unique_ptr<Listener> tcp, std::shared_ptr<security::TlsServerContext> context,
    PlaintextClients plaintext);

}  // namespace authrpc
