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

}  // namespace

asio::awaitable<Status> negotiate_server(
    FrameChannel& channel, const std::vector<std::shared_ptr<ServerMechanism>>& mechanisms,
    const ChannelInfo& info, Identity& identity, ServerNegotiationHooks* hooks,
    std::unique_ptr<ServerAuthSession>* spent) {
  bool refused_once = false;
  ServerMechanism* mechanism = nullptr;
  std::string first_message;
  std::string do_as;
  while (mechanism == nullptr) {
    auto frame = co_await next_frame(channel, refused_once);
    if (!frame.ok()) {
      if (frame.code() == Errc::kConnectionClosed) co_return frame.status();
      co_return fail(channel, read_failure(frame.status()));
    }
    if (frame->header.type == FrameType::kError && refused_once) {
      co_return client_gave_up(*frame);
    }
    if (frame->header.type != FrameType::kHello) {
      co_return fail(channel, unexpected(*frame, "HELLO"));
    }
    auto hello = wire::parse_hello(frame->body);
    if (!hello.ok()) co_return fail(channel, hello.status());
    int index = 0;
    for (const auto& m : mechanisms) {
      if (m->name() == hello->mechanism) {
        mechanism = m.get();
        break;
      }
      ++index;
    }
    if (mechanism != nullptr) {
      if (hooks != nullptr) {
        hooks->mechanism = hello->mechanism;
        hooks->mechanism_index = index;
      }
      first_message = std::move(hello->message);
      do_as = std::move(hello->do_as);
      break;
    }
    if (refused_once) {
      co_return fail(channel, {Errc::kMechanismUnavailable,
                               "mechanism '" + hello->mechanism + "' not enabled (offered: " +
                                   join(offered(mechanisms, info)) + ")"});
    }
    refused_once = true;
    wire::Mechanisms list;
    for (std::string_view name : offered(mechanisms, info)) list.names.emplace_back(name);
    wire::append_mechanisms(channel.out(), list);
    channel.flush_now();
  }

  const MechanismTraits traits = mechanism->traits();
  if (Status s = server_accepts(*mechanism, info); !s.ok()) co_return fail(channel, std::move(s));
  auto session = mechanism->start(info);
  ServerStep step = co_await session->step(first_message);
  while (step.kind == ServerStep::Kind::kChallenge) {
    // Written at once: the read that follows waits for the answer, and
    // nothing else queues frames on a connection still negotiating.
    wire::append_auth_message(channel.out(), FrameType::kAuthChallenge, step.message);
    channel.flush_now();
    // A client whose message was its last (say, a `token` HELLO with a
    // session ticket this server did not issue) may have pipelined calls
    // behind it: they are dropped, and the client sends them again after
    // its answer (docs/PROTOCOL.md, "Pipelining calls behind negotiation").
    auto frame = co_await next_frame(channel, true);
    if (!frame.ok()) {
      if (frame.code() == Errc::kConnectionClosed) co_return frame.status();
      co_return fail(channel, read_failure(frame.status()));
    }
    if (frame->header.type == FrameType::kError) co_return client_gave_up(*frame);
    if (frame->header.type != FrameType::kAuthResponse) {
      co_return fail(channel, unexpected(*frame, "AUTH_RESPONSE"));
    }
    auto response = wire::parse_auth_message(frame->body);
    if (!response.ok()) co_return fail(channel, response.status());
    step = co_await session->step(response->message);
  }
  if (step.kind == ServerStep::Kind::kFailure) co_return fail(channel, step.error);

  Identity& id = step.identity;
  id.mechanism = mechanism->name();
  id.mechanism_traits = traits;
  id.peer_address = info.peer_address;
  std::uint32_t features = wire::kFeatureStreams;
  if (channel.byte_stream().native_unix_handle() >= 0) features |= wire::kFeatureShm;
  if (hooks != nullptr && hooks->authorize) {
    if (Status s = hooks->authorize(id, do_as); !s.ok()) {
      hooks->refused_by_authorize = true;
      co_return fail(channel, std::move(s));
    }
    if (!do_as.empty()) features |= wire::kFeatureDoAs;
  } else if (!do_as.empty()) {
    // Acting as oneself is not impersonation: allowed with or without proxy
    // rules, as an ACL file's server allows it (docs/AUTHZ.md). Without one
    // no principal mapping runs, so "oneself" is the user AUTH_SUCCESS names.
    if (do_as != id.user) {
      co_return fail(channel, {Errc::kPermissionDenied,
                               "this server does not allow acting as another user"});
    }
    features |= wire::kFeatureDoAs;
  }
  if (hooks != nullptr && hooks->admit) {
    if (Status s = hooks->admit(id); !s.ok()) co_return fail(channel, std::move(s));
  }
  wire::append_auth_success(channel.out(), {features, step.message, id.user});
  if (spent != nullptr) *spent = std::move(session);
  identity = std::move(id);
  co_return Status();
}

}  // namespace authrpc
