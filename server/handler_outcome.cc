#include "authrpc/server/handler_outcome.h"

#include <exception>
#include <nlohmann/json.hpp>

namespace authrpc {

Result<std::string> handler_threw(const Server::Impl& server, const CallContext& ctx,
                                  const std::string& peer) {
  Errc code = Errc::kInternal;
  std::string what;
  try {
    throw;
  } catch (const nlohmann::json::exception& e) {
    code = Errc::kInvalidArgument;
    what = e.what();
  } catch (const std::exception& e) {
    what = e.what();
  } catch (...) {
    what = "an exception that is not a std::exception";
  }
  const std::string call = std::string(ctx.service()) + "." + std::string(ctx.method()) + " call " +
                           std::to_string(ctx.call_id());
  server.log(code == Errc::kInternal ? LogLevel::kError : LogLevel::kInfo,
             call + " from " + peer + " (" + ctx.identity().user + "): the handler threw: " + what);
  if (code == Errc::kInvalidArgument) {
    return Status(code, "the request does not have the form " + std::string(ctx.service()) + "." +
                            std::string(ctx.method()) + " reads (call " +
                            std::to_string(ctx.call_id()) + " in the server's log)");
  }
  return Status(
      code, "the handler failed (call " + std::to_string(ctx.call_id()) + " in the server's log)");
}

}  // namespace authrpc
