#include "authrpc/auth/server_negotiation.h"

#include "authrpc/rpc/messages.h"

namespace authrpc {
namespace {

using wire::FrameType;

// Reads the next negotiation frame, skipping REQUEST frames the client
// pipelined behind a message the server refused (MECHANISMS) or challenged.
// A skipped REQUEST is checked as any call frame is (its body, then a call
// id other than 0): dropping one that is malformed would hide the breach.
// A connection-level frame carries call id 0 (docs/PROTOCOL.md section 3).
asio::awaitable<Result<Frame>> next_frame(FrameChannel& channel, bool drop_requests) {
  for (;;) {
    auto incoming = channel.buffered_frame();
    if (!incoming) incoming = co_await channel.read_frame();
    auto& frame = *incoming;
    if (!frame.ok()) co_return frame;
    const wire::FrameHeader& header = frame->header;
    if (drop_requests && header.type == FrameType::kRequest) {
      std::string_view payload;
      if (auto request = wire::parse_request(frame->body, payload); !request.ok()) {
        co_return request.status();
      }
      if (header.call_id == 0) co_return Status(Errc::kProtocolError, "REQUEST with call id 0");
      continue;
    }
    if (header.call_id != 0 && wire::is_connection_frame_type(header.type)) {
      co_return Status(Errc::kProtocolError, std::string(wire::frame_type_name(header.type)) +
                                                 " with call id " + std::to_string(header.call_id));
    }
    co_return frame;
  }
}

// A failed read of a negotiation frame. One over the channel's limit is over
// the server's pre-authentication limit (max_negotiation_frame_size), which
// a client may not expect: say so.
Status read_failure(Status status) {
  if (status.code == Errc::kFrameTooLarge) status.message += " before authentication";
  return status;
}

Status unexpected(const Frame& frame, std::string_view expected) {
  return {Errc::kProtocolError, "expected " + std::string(expected) + " during negotiation, got " +
                                    std::string(wire::frame_type_name(frame.header.type))};
}

// The client sent ERROR instead of its next negotiation message: it gave
// up, with a code of its own (a known wire code, else PROTOCOL_ERROR: the
// code becomes a metric label and a log word, so only known ones pass).
// Nothing is sent back.
Status client_gave_up(const Frame& frame) {
  auto body = wire::parse_error(frame.body);
  if (!body.ok()) return body.status();
  const std::uint16_t c = body->code;
  const bool known = (c >= 1 && c <= 16) || (c >= 100 && c <= 110 && c != 108);
  return Status(known ? static_cast<Errc>(c) : Errc::kProtocolError,
                "the client gave up: " + body->message);
}

Status fail(FrameChannel& channel, Status status) {
  wire::append_error(channel.out(), static_cast<std::uint16_t>(to_wire_errc(status.code)),
                     status.message);
  return status;
}

// The mechanisms this server runs on this channel, most preferred first:
// what MECHANISMS lists. One it would refuse here (x509 without a client
// certificate, a bearer secret on plaintext, `token` on plaintext tcp://
// without the opt-in) is not offered, so that a client takes the next one
// it allows instead of one sure to fail.
std::vector<std::string_view> offered(
    const std::vector<std::shared_ptr<ServerMechanism>>& mechanisms, const ChannelInfo& info) {
  std::vector<std::string_view> out;
  for (const auto& m : mechanisms) {
    if (server_accepts(*m, info).ok()) out.push_back(m->name());
  }
  return out;
}

std::string join(const std::vector<std::string_view>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + std::string(n);
  return out;
}

// A read of a negotiation frame failed: a client that closed is told
// nothing; any other failure is answered with ERROR.
Status read_failed(FrameChannel& channel, const Status& status) {
  if (status.code == Errc::kConnectionClosed) return status;
  return fail(channel, read_failure(status));
}

// HELLO names `hello.mechanism`: the server's mechanism of that name, or
// null after queueing MECHANISMS, the ones it offers here (the client then
// sends HELLO again, once). Fills the hooks' out fields once chosen.
Result<ServerMechanism*> choose_mechanism(
    FrameChannel& channel, const std::vector<std::shared_ptr<ServerMechanism>>& mechanisms,
    const ChannelInfo& info, const wire::Hello& hello, bool refused_once,
    ServerNegotiationHooks* hooks) {
  for (std::size_t i = 0; i < mechanisms.size(); ++i) {
    if (mechanisms[i]->name() != hello.mechanism) continue;
    if (hooks != nullptr) {
      hooks->mechanism = hello.mechanism;
      hooks->mechanism_index = static_cast<int>(i);
    }
    return mechanisms[i].get();
  }
  if (refused_once) {
    return Status(Errc::kMechanismUnavailable, "mechanism '" + hello.mechanism +
                                                   "' not enabled (offered: " +
                                                   join(offered(mechanisms, info)) + ")");
  }
  wire::Mechanisms list;
  for (std::string_view name : offered(mechanisms, info)) list.names.emplace_back(name);
  wire::append_mechanisms(channel.out(), list);
  channel.flush_now();
  return nullptr;
}

// Queues an AUTH_CHALLENGE and writes it at once: the read that follows
// waits for the answer, and nothing else queues frames on a connection
// still negotiating.
void send_challenge(FrameChannel& channel, const ServerStep& step) {
  wire::append_auth_message(channel.out(), FrameType::kAuthChallenge, step.message);
  channel.flush_now();
}

// The session accepted the client (`step.identity`): the hooks authorize
// it (and may map it) and admit it, then AUTH_SUCCESS is queued; else the
// refusal is queued as ERROR and returned.
Status conclude(FrameChannel& channel, const ServerMechanism& mechanism, const ChannelInfo& info,
                ServerStep& step, const std::string& do_as, ServerNegotiationHooks* hooks) {
  Identity& id = step.identity;
  id.mechanism = mechanism.name();
  id.mechanism_traits = mechanism.traits();
  id.peer_address = info.peer_address;
  std::uint32_t features = wire::kFeatureStreams;
  if (channel.byte_stream().native_unix_handle() >= 0) features |= wire::kFeatureShm;
  if (hooks != nullptr && hooks->authorize) {
    if (Status s = hooks->authorize(id, do_as); !s.ok()) {
      hooks->refused_by_authorize = true;
      return fail(channel, std::move(s));
    }
    if (!do_as.empty()) features |= wire::kFeatureDoAs;
  } else if (!do_as.empty()) {
    // Acting as oneself is not impersonation: allowed with or without proxy
    // rules, as an ACL file's server allows it (docs/AUTHZ.md). Without one
    // no principal mapping runs, so "oneself" is the user AUTH_SUCCESS names.
    if (do_as != id.user) {
      return fail(channel, {Errc::kPermissionDenied,
                            "this server does not allow acting as another user"});
    }
    features |= wire::kFeatureDoAs;
  }
  if (hooks != nullptr && hooks->admit) {
    if (Status s = hooks->admit(id); !s.ok()) return fail(channel, std::move(s));
  }
  wire::append_auth_success(channel.out(), {features, step.message, id.user});
  return {};
}

}  // namespace

asio::awaitable<Status> negotiate_server(
    FrameChannel& channel, const std::vector<std::shared_ptr<ServerMechanism>>& mechanisms,
    const ChannelInfo& info, Identity& identity, ServerNegotiationHooks* hooks,
    std::unique_ptr<ServerAuthSession>* spent) {
  // HELLO; after a refusal (MECHANISMS), HELLO once more.
  ServerMechanism* mechanism = nullptr;
  wire::Hello hello;
  for (bool refused_once = false; mechanism == nullptr; refused_once = true) {
    auto frame = co_await next_frame(channel, refused_once);
    if (!frame.ok()) co_return read_failed(channel, frame.status());
    if (frame->header.type == FrameType::kError && refused_once) {
      co_return client_gave_up(*frame);
    }
    if (frame->header.type != FrameType::kHello) {
      co_return fail(channel, unexpected(*frame, "HELLO"));
    }
    auto parsed = wire::parse_hello(frame->body);
    if (!parsed.ok()) co_return fail(channel, parsed.status());
    hello = std::move(*parsed);
    auto chosen = choose_mechanism(channel, mechanisms, info, hello, refused_once, hooks);
    if (!chosen.ok()) co_return fail(channel, chosen.status());
    mechanism = *chosen;
  }

  // The session's steps: AUTH_CHALLENGE ↔ AUTH_RESPONSE until it decides.
  if (Status s = server_accepts(*mechanism, info); !s.ok()) co_return fail(channel, std::move(s));
  auto session = mechanism->start(info);
  ServerStep step = co_await session->step(hello.message);
  while (step.kind == ServerStep::Kind::kChallenge) {
    send_challenge(channel, step);
    // A client whose message was its last (say, a `token` HELLO with a
    // session ticket this server did not issue) may have pipelined calls
    // behind it: they are dropped, and the client sends them again after
    // its answer (docs/PROTOCOL.md, "Pipelining calls behind negotiation").
    auto frame = co_await next_frame(channel, true);
    if (!frame.ok()) co_return read_failed(channel, frame.status());
    if (frame->header.type == FrameType::kError) co_return client_gave_up(*frame);
    if (frame->header.type != FrameType::kAuthResponse) {
      co_return fail(channel, unexpected(*frame, "AUTH_RESPONSE"));
    }
    auto response = wire::parse_auth_message(frame->body);
    if (!response.ok()) co_return fail(channel, response.status());
    step = co_await session->step(response->message);
  }
  if (step.kind == ServerStep::Kind::kFailure) co_return fail(channel, step.error);

  // AUTH_SUCCESS, for the identity the hooks admit.
  if (Status s = conclude(channel, *mechanism, info, step, hello.do_as, hooks); !s.ok()) {
    co_return s;
  }
  if (spent != nullptr) *spent = std::move(session);
  identity = std::move(step.identity);
  co_return Status();
}

}  // namespace authrpc
