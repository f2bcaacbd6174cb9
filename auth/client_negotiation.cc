#include "authrpc/auth/client_negotiation.h"

#include "authrpc/base/log.h"
#include "authrpc/rpc/messages.h"

namespace authrpc {
namespace {

using wire::FrameType;

Result<ClientNegotiationResult> fail(FrameChannel& channel, Status status, bool tell_server) {
  if (tell_server) {
    wire::append_error(channel.out(), static_cast<std::uint16_t>(to_wire_errc(status.code)),
                       status.message);
    // Written now, not on a later turn: a failed connect often ends its
    // event loop at once, and the server should learn why (its logs and
    // metrics count the refusal by this code).
    channel.close_after_flush();
    channel.flush_now();
  } else {
    channel.close();
  }
  return status;
}

Status from_error_frame(const Frame& frame) {
  auto body = wire::parse_error(frame.body);
  if (!body.ok()) return body.status();
  return {errc_from_wire(body->code), "server: " + body->message};
}

// The server's first answer was no authrpc frame (`framing` says why: a
// length beyond the limit, an unknown type): whatever answered is not an
// authrpc server. Says so, quoting the start of its answer (escaped: the
// peer chose it), rather than "frame of 1213486164 bytes" ("HTTP" read as a
// length). Transport failures and a close without an answer pass unchanged.
Status not_an_authrpc_server(const FrameChannel& channel, const Status& framing,
                             const ChannelInfo& info) {
  if (framing.code != Errc::kProtocolError && framing.code != Errc::kFrameTooLarge) return framing;
  std::string_view answer = channel.unread_input();
  answer = answer.substr(0, answer.find_first_of("\r\n"));
  std::string message = "the server at " + info.server_uri + " is not an authrpc server";
  if (answer.starts_with("HTTP/")) {
    message += " (it answered " + peer_text(answer) + ")";
  } else if (!answer.empty()) {
    message += " (its answer \"" + peer_text(answer, 32) + "\" is not an authrpc frame)";
  } else {
    message += " (" + framing.message + ")";
  }
  return {Errc::kProtocolError, std::move(message)};
}

std::string join(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

void queue_preamble(FrameChannel& channel) {
  const auto preamble = wire::make_preamble();
  channel.out().append(reinterpret_cast<const char*>(preamble.data()), preamble.size());
}

// Writes what was just queued (a HELLO or an AUTH_RESPONSE carrying `step`)
// at once: whatever should travel with a last message (calls pipelined
// behind it) has been queued by on_event(); the read that follows then waits
// without a turn of the event loop first. Returns whether it was the last.
bool send(FrameChannel& channel, const ClientStep& step,
          const std::function<void(NegotiationEvent)>& on_event) {
  if (step.final) on_event(NegotiationEvent::kFinalMessageQueued);
  channel.flush_now();
  return step.final;
}

bool send_hello(FrameChannel& channel, std::string_view mechanism, const ClientStep& step,
                const std::string& do_as, const std::function<void(NegotiationEvent)>& on_event) {
  wire::append_hello(channel.out(), {do_as.empty() ? wire::kNoFeatures : wire::kFeatureDoAs,
                                     std::string(mechanism), step.message, do_as});
  return send(channel, step, on_event);
}

bool send_response(FrameChannel& channel, const ClientStep& step,
                   const std::function<void(NegotiationEvent)>& on_event) {
  wire::append_auth_message(channel.out(), FrameType::kAuthResponse, step.message);
  return send(channel, step, on_event);
}

// What the client tells a server that sent a frame negotiation does not
// expect (or one with a call id).
Status stray(const Frame& frame) {
  const std::string type(wire::frame_type_name(frame.header.type));
  if (frame.header.call_id != 0) {
    return {Errc::kProtocolError, type + " with call id " +
                                      std::to_string(frame.header.call_id) +
                                      " during negotiation"};
  }
  return {Errc::kProtocolError, "unexpected " + type + " during negotiation"};
}

// AUTH_SUCCESS, once the session has verified it: asked to act as another
// user (`do_as`), the server must have confirmed it.
Status confirm(const wire::AuthSuccess& success, const std::string& do_as) {
  if (do_as.empty() || (success.features & wire::kFeatureDoAs)) return {};
  return {Errc::kPermissionDenied, "server did not confirm acting as " + do_as};
}

// MECHANISMS (the server refused `current`): the first mechanism of the
// server's list that the client allows, other than `current`.
Result<ClientMechanism*> next_mechanism(
    const wire::Mechanisms& list, const std::vector<std::shared_ptr<ClientMechanism>>& allowed,
    const ClientMechanism* current) {
  for (const auto& name : list.names) {
    for (const auto& m : allowed) {
      if (m->name() == name && m.get() != current) return m.get();
    }
  }
  std::vector<std::string> mine;
  for (const auto& m : allowed) mine.emplace_back(m->name());
  return Status(Errc::kMechanismUnavailable, "server offers [" + join(list.names) +
                                                 "] on this connection, client allows [" +
                                                 join(mine) + "]");
}

}  // namespace

asio::awaitable<Result<ClientNegotiationResult>> negotiate_client(
    FrameChannel& channel, const std::vector<std::shared_ptr<ClientMechanism>>& allowed,
    const ChannelInfo& info, const std::function<void(NegotiationEvent)>& on_event,
    std::string do_as, std::unique_ptr<ClientAuthSession>* spent) {
  if (allowed.empty()) {
    co_return fail(channel, {Errc::kConfigError, "no client mechanism configured"}, false);
  }
  queue_preamble(channel);
  ClientMechanism* mechanism = allowed.front().get();
  bool refused_once = false;
  bool answered = false;  // a frame has come from the server
  for (;;) {
    // HELLO, with the mechanism's first message.
    if (Status s = check_channel(mechanism->name(), mechanism->traits(), info, true); !s.ok()) {
      co_return fail(channel, std::move(s), false);
    }
    auto session = mechanism->start(info);
    ClientStep step = co_await session->initial();
    if (step.kind == ClientStep::Kind::kFailure) co_return fail(channel, step.error, false);
    bool final_sent = send_hello(channel, mechanism->name(), step, do_as, on_event);

    // The server's answers: AUTH_CHALLENGE (each answered with
    // AUTH_RESPONSE), then AUTH_SUCCESS; or MECHANISMS, and HELLO again.
    ClientMechanism* next = nullptr;
    while (next == nullptr) {
      auto incoming = channel.buffered_frame();
      if (!incoming) incoming = co_await channel.read_frame();
      auto& frame = *incoming;
      if (!frame.ok()) {
        Status why = frame.status();
        if (!answered) why = not_an_authrpc_server(channel, why, info);
        co_return fail(channel, std::move(why), false);
      }
      answered = true;
      if (frame->header.call_id != 0) co_return fail(channel, stray(*frame), true);
      const FrameType type = frame->header.type;
      if (type == FrameType::kAuthChallenge) {
        auto challenge = wire::parse_auth_message(frame->body);
        if (!challenge.ok()) co_return fail(channel, challenge.status(), true);
        // Challenged after our last message: the server drops what was
        // pipelined behind it, and the calls are sent again after the
        // next last message.
        if (final_sent) on_event(NegotiationEvent::kFinalMessageChallenged);
        step = co_await session->challenge(challenge->message);
        if (step.kind == ClientStep::Kind::kFailure) co_return fail(channel, step.error, true);
        final_sent = send_response(channel, step, on_event);
      } else if (type == FrameType::kAuthSuccess) {
        auto success = wire::parse_auth_success(frame->body);
        if (!success.ok()) co_return fail(channel, success.status(), true);
        Status s = co_await session->complete(success->message);
        if (s.ok()) s = confirm(*success, do_as);
        if (!s.ok()) co_return fail(channel, std::move(s), true);
        if (spent != nullptr) *spent = std::move(session);
        co_return ClientNegotiationResult{std::string(mechanism->name()), success->user,
                                          success->features};
      } else if (type == FrameType::kMechanisms) {
        auto list = wire::parse_mechanisms(frame->body);
        if (!list.ok()) co_return fail(channel, list.status(), true);
        if (refused_once) {
          co_return fail(channel, {Errc::kProtocolError, "server refused a mechanism twice"}, true);
        }
        refused_once = true;
        on_event(NegotiationEvent::kMechanismRefused);
        auto chosen = next_mechanism(*list, allowed, mechanism);
        if (!chosen.ok()) co_return fail(channel, chosen.status(), true);
        next = *chosen;
      } else if (type == FrameType::kError) {
        co_return fail(channel, from_error_frame(*frame), false);
      } else {
        co_return fail(channel, stray(*frame), true);
      }
    }
    mechanism = next;
  }
}

}  // namespace authrpc
