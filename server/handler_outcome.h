// Internal: the one place where a handler's exception becomes its call's
// status. The caller gets a generic message: what an exception says is the
// server's business (a path, a query, a key name) and goes to the server's
// log under the call's id. A JSON exception means the request did not have
// the shape the handler reads (a member missing or of another type, or text
// that does not parse): INVALID_ARGUMENT, not the server's fault; any other
// exception is INTERNAL.
//
// Called by ServerConnection's dispatch, on the connection's thread (inline
// and coroutine handlers) or on the blocking pool. run_plain_handler is
// inline: it wraps every inline call.
#pragma once

#include <string>
#include <string_view>

#include "authrpc/base/result.h"
#include "authrpc/server/server_impl.h"
#include "authrpc/server/service.h"

namespace authrpc {

// The status for the exception being handled; call it from inside a catch
// block (of a plain handler, or of a coroutine handler's frame). Logs what
// the exception said, with the call and `peer`.
Result<std::string> handler_threw(const Server::Impl& server, const CallContext& ctx,
                                  const std::string& peer);

// A plain handler (inline or blocking), its exception caught.
inline Result<std::string> run_plain_handler(const Handler& handler, CallContext& ctx,
                                             std::string_view request, const Server::Impl& server,
                                             const std::string& peer) {
  try {
    return handler(ctx, request);
  } catch (...) {
    return handler_threw(server, ctx, peer);
  }
}

// An encoding handler (inline), its exception caught.
inline Status run_encoding_handler(const EncodingHandler& handler, CallContext& ctx,
                                   std::string_view request, ResponseBuffer& response,
                                   const Server::Impl& server, const std::string& peer) {
  try {
    return handler(ctx, request, response);
  } catch (...) {
    return handler_threw(server, ctx, peer).status();
  }
}

}  // namespace authrpc
