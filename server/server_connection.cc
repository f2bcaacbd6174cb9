#include "authrpc/server/server_connection.h"

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/post.hpp>
#include <asio/use_awaitable.hpp>
#include <algorithm>

#include "authrpc/auth/server_negotiation.h"
#include "authrpc/rpc/call_stream.h"
#include "authrpc/rpc/messages.h"
#include "authrpc/rpc/shm_link.h"
#include "authrpc/rpc/stream_input_budget.h"
#include "authrpc/server/handler_outcome.h"
#include "authrpc/server/inline_response.h"

namespace authrpc {
namespace {

using wire::FrameType;
constexpr auto kLingerTime = std::chrono::seconds(2);

}  // namespace

ServerConnection::ServerConnection(Server::Impl& server, Reactor& reactor,
                                   std::unique_ptr<ByteStream> byte_stream)
    : server_(server),
      reactor_(reactor),
      counts_(server.metrics.get(), byte_stream->scheme()),
      peer_(byte_stream->peer_address()),
      admission_(server.options, peer_.address, server.metrics.get()) {
  // Until AUTH_SUCCESS only frames as large as a Kerberos AP-REQ with a big
  // PAC: a peer nobody knows yet cannot make the server hold megabytes.
  channel_ = std::make_shared<FrameChannel>(
      std::move(byte_stream),
      std::min(server.options.max_negotiation_frame_size, server.options.max_frame_size));
  channel_->set_direct_data_threshold(kDirectDataThreshold);
}

ServerConnection::~ServerConnection() {
  ConnectionList::erase(*this);
  // The channel may outlive the connection (a stream handle holds it).
  channel_->set_on_drained(nullptr);
}

asio::awaitable<void> ServerConnection::run(Status refuse) {
  if (!refuse.ok()) {
    counts_.close_with(ServerMetrics::Close::kRefused);
    co_await linger(std::move(refuse));
    co_return;
  }
  const Clock::time_point accepted = Clock::now();
  deadlines_.set_deadline(accepted + server_.options.negotiation_timeout);

  // 1. The preamble; on a tls:// listener once the client's first byte has
  // made the stream TLS (or plaintext, or refused it: rpc/tls_listener.h),
  // under the same deadline.
  Status status;
  if (channel_->byte_stream().needs_open()) status = co_await channel_->open_byte_stream();
  std::uint8_t preamble[wire::kPreambleSize];
  if (status.ok()) status = co_await channel_->read_exact(preamble, sizeof preamble);
  if (status.ok()) status = wire::check_preamble(preamble);
  if (!preamble_read(status)) {
    if (!status.ok()) co_await linger(std::move(status));
    co_return;
  }

  // 2. Negotiation (auth/server_negotiation.h), with authorization's hooks.
  const ChannelInfo info = channel_info();
  peer_.plaintext_network = !info.tls && info.scheme != Endpoint::Scheme::kUnix;
  ServerNegotiationHooks hooks = negotiation_hooks();
  // peer_.identity stays empty unless the negotiation succeeds.
  Status negotiated = co_await negotiate_server(*channel_, server_.options.mechanisms, info,
                                                peer_.identity, &hooks, &peer_.spent_session);
  const PreauthPlace::Ending ending = place_.ending();
  if (ending == PreauthPlace::Ending::kShed) {
    counts_.close_with(ServerMetrics::Close::kShed);
    channel_->close_after_flush();  // shed() did, or the budget refused AUTH_SUCCESS
    co_return;
  }
  if (!negotiated.ok()) {
    co_await negotiation_failed(std::move(negotiated), ending, hooks);
    co_return;
  }

  // 3. Calls, until either side ends the connection.
  start_serving(hooks, accepted);
  co_await serve();
}

bool ServerConnection::preamble_read(Status& status) {
  if (metrics() && counts_.transport() == ServerMetrics::kTls) {
    // The handshake ran inside the first reads (rpc/tls_stream.h).
    if (const TlsInfo* tls = channel_->byte_stream().tls()) {
      metrics()->tls_handshake_ok(tls->resumed);
    } else if (!status.ok() && status.code.category() != authrpc_category()) {
      metrics()->tls_handshake_failed(status.code);
    }
  }
  switch (place_.ending()) {
    case PreauthPlace::Ending::kShed:
      counts_.close_with(ServerMetrics::Close::kShed);
      status = Status();  // SERVER_BUSY is on its way (shed())
      return false;
    case PreauthPlace::Ending::kNegotiationTimeout:
      if (!status.ok()) {
        status = Status(Errc::kNegotiationTimeout, "no preamble within the negotiation timeout");
      }
      break;
    case PreauthPlace::Ending::kNone:
      break;
  }
  if (status.ok()) return true;
  if (status.code == Errc::kConnectionClosed) {
    status = Status();
    return false;
  }
  counts_.close_with(status.code == Errc::kNegotiationTimeout
                         ? ServerMetrics::Close::kNegotiationTimeout
                         : ServerMetrics::Close::kNegotiationFailed);
  if (metrics()) {
    metrics()->negotiated(-1, static_cast<std::uint16_t>(to_wire_errc(status.code)), {});
  }
  ++server_.negotiation_failures;
  server_.log(LogLevel::kInfo,
              "connection from " + peer_.address + " refused: " + status.to_string());
  return false;
}

ChannelInfo ServerConnection::channel_info() const {
  ChannelInfo info;
  info.peer_address = peer_.address;
  info.scheme = channel_->byte_stream().scheme();
  if (const TlsInfo* tls = channel_->byte_stream().tls()) {
    info.tls = true;
    info.channel_binding = tls->channel_binding;
    info.peer_certificate = tls->peer_certificate;
  }
  return info;
}

ServerNegotiationHooks ServerConnection::negotiation_hooks() {
  // Without authorization the hooks only report the mechanism (metrics,
  // logs, audit).
  ServerNegotiationHooks hooks;
  if (admission_.authorizes()) {
    hooks.authorize = [this](Identity& id, std::string_view do_as) {
      return admission_.establish(id, do_as);
    };
  }
  hooks.admit = [this](const Identity& id) { return place_.authenticate(server_, id); };
  return hooks;
}

void ServerConnection::start_serving(const ServerNegotiationHooks& hooks,
                                     Clock::time_point accepted) {
  const Identity& id = peer_.identity;
  if (metrics()) {
    metrics()->negotiated(hooks.mechanism_index, 0, Clock::now() - accepted);
    if (id.real_user) metrics()->proxy_session();
  }
  if (server_.options.log.enabled(LogLevel::kDebug)) [[unlikely]] {
    server_.log(LogLevel::kDebug,
                "connection from " + peer_.address + " authenticated: user " + id.user +
                    (id.real_user ? " (real user " + *id.real_user + ")" : "") + ", mechanism " +
                    id.mechanism + ", transport " +
                    std::string(ServerMetrics::transport_name(counts_.transport())) +
                    (channel_->byte_stream().tls() ? ", TLS" : ""));
  }
  channel_->set_max_frame_size(server_.options.max_frame_size);
  channel_->set_on_drained([this] { memory_.account(server_, *channel_); });
  admission_.audit_authentication(id, "success", id.mechanism, {});
  state_ = State::kServing;
  // Fresh again (ReactorConnections): the quick ticks that would park it
  // once quiet count from here, not from the accept, however long the
  // negotiation took.
  reactor_.connections.insert(*this);
  deadlines_.touch(Clock::now());
  counts_.batch_read();
  // Calls pipelined behind the negotiation are answered in the same write as
  // AUTH_SUCCESS: flush only once no further frame is buffered.
  if (!channel_->frame_buffered()) end_batch();
}

asio::awaitable<void> ServerConnection::negotiation_failed(Status why, PreauthPlace::Ending ending,
                                                          const ServerNegotiationHooks& hooks) {
  const bool timed_out = ending == PreauthPlace::Ending::kNegotiationTimeout;
  const std::string& mechanism = hooks.mechanism;
  // A refusal by the authorizer was audited by it (CallAdmission::establish).
  if (!hooks.refused_by_authorize && why.code != Errc::kConnectionClosed) {
    admission_.audit_authentication(
        peer_.identity, "failure", mechanism,
        (timed_out ? Status(Errc::kNegotiationTimeout, "negotiation timed out") : why)
            .to_string());
  }
  if (timed_out) {
    why = Status(Errc::kNegotiationTimeout,
                 "negotiation did not finish within " +
                     std::to_string(server_.options.negotiation_timeout.count()) + " ms");
  }
  const auto wire_code = static_cast<std::uint16_t>(to_wire_errc(why.code));
  if (metrics()) {
    metrics()->negotiated(hooks.mechanism_index, wire_code, {});
    metrics()->mechanism_error(hooks.mechanism_index, why.code);
  }
  if (why.code == Errc::kConnectionClosed) {
    counts_.close_with(ServerMetrics::Close::kPeerClosed);
    if (server_.options.log.enabled(LogLevel::kDebug)) {
      server_.log(LogLevel::kDebug,
                  "connection from " + peer_.address + " closed during negotiation" +
                      (mechanism.empty() ? "" : " (mechanism " + mechanism + ")"));
    }
  } else {
    counts_.close_with(timed_out ? ServerMetrics::Close::kNegotiationTimeout
                              : ServerMetrics::Close::kNegotiationFailed);
    ++server_.negotiation_failures;
    // At info, not warning: a refused client is the server doing its job.
    // The mechanism is one the server offers, or "none" (never the
    // client's string unescaped: the sink escapes every message).
    server_.log(LogLevel::kInfo, "negotiation with " + peer_.address + " (mechanism " +
                                     (mechanism.empty() ? std::string("none") : mechanism) +
                                     ") failed: " + why.to_string());
  }
  // negotiate_server() queued the ERROR (the timeout path sent its own).
  if (!timed_out) co_await linger(std::nullopt);
}

asio::awaitable<void> ServerConnection::close_for_protocol_error(Status why) {
  counts_.close_with(ServerMetrics::Close::kProtocolError);
  ++server_.protocol_errors;
  server_.log(LogLevel::kWarning, "closing connection from " + peer_.address + " (" +
                                      peer_.identity.user + "): " + why.to_string());
  co_await linger(std::move(why));
}

// Every frame but those serve() handles itself (REQUEST, and DATA with a
// call id).
Status ServerConnection::route_frame(const Frame& frame) {
  // Frames of a call need its id (PROTOCOL.md section 10); the router would
  // silently drop one with call id 0 (stream_bad_input_test,
  // CallFramesWithCallIdZeroAreProtocolErrors). And a connection-level frame
  // carries call id 0 (PROTOCOL.md section 3).
  if (frame.header.call_id == 0 && CallRouter::is_call_frame(frame.header.type)) {
    return Status(Errc::kProtocolError,
                  std::string(wire::frame_type_name(frame.header.type)) + " with call id 0");
  }
  if (frame.header.call_id != 0 && wire::is_connection_frame_type(frame.header.type))
      [[unlikely]] {
    return Status(Errc::kProtocolError, std::string(wire::frame_type_name(frame.header.type)) +
                                            " with call id " +
                                            std::to_string(frame.header.call_id));
  }
  switch (frame.header.type) {
    case FrameType::kCancel:
      return handle_cancel(frame);
    case FrameType::kStreamRequest:
      return handle_stream_request(frame);
    case FrameType::kWindowUpdate:
      return streams_.on_window_update(frame);
    case FrameType::kEndStream:
      return streams_.on_end_stream(frame);
    case FrameType::kShmHello:
      return shm_.hello(frame, *channel_, server_,
                        peer_.address + " (" + peer_.identity.user + ")");
    case FrameType::kShmRing:
      if (!shm_.link()) {
        return Status(Errc::kProtocolError, "SHM_RING without shared memory negotiated");
      }
      return streams_.on_shm_ring(shm_.link(), *channel_, frame);
    case FrameType::kPing:
      wire::append_ping(channel_->out(), FrameType::kPong, frame.body);
      return Status();
    case FrameType::kPong:
      return Status();
    case FrameType::kError: {
      auto body = wire::parse_error(frame.body);
      server_.log(LogLevel::kInfo, "client " + peer_.address + " closed with an error: " +
                                       (body.ok() ? body->message : std::string("(malformed)")));
      channel_->close();
      return Status();
    }
    default:
      return Status(Errc::kProtocolError,
                    "unexpected " + std::string(wire::frame_type_name(frame.header.type)) +
                        " frame after negotiation");
  }
}

Status ServerConnection::data_failed(Status why) {
  if (why.code == Errc::kProtocolError) return why;
  // The connection failed inside the frame: as for a failed read.
  if (!channel_->closed() && state_ != State::kLingering) {
    server_.log(LogLevel::kInfo, "connection from " + peer_.address + " (" + peer_.identity.user +
                                     ") ended inside a message: " + why.to_string());
  }
  channel_->close();
  return Status();
}

bool ServerConnection::ended_quietly(const Status& read) const noexcept {
  return read.code == Errc::kConnectionClosed || channel_->closed() ||
         state_ == State::kLingering;
}

bool ServerConnection::quiet() const noexcept {
  return state_ == State::kServing && calls_.in_flight() == 0 && streams_.empty() &&
         channel_->parkable();
}

Status ServerConnection::credentials_expired_ending() {
  counts_.close_with(ServerMetrics::Close::kCredentialsExpired);
  server_.log(LogLevel::kInfo, "closing connection from " + peer_.address + " (" +
                                   peer_.identity.user + "): its credentials expired");
  return peer_.expired_credentials();
}

asio::awaitable<void> ServerConnection::serve(bool woken) {
  const bool unix_socket = channel_->byte_stream().native_unix_handle() >= 0;
  // The frame's protocol error, if any (first: descriptors sent during the
  // negotiation). OK at the top of every turn (a breach ends the loop), so
  // made once and set only when a step reports one.
  Status breach = unix_socket ? shm_.check_stray_descriptors(*channel_) : Status();
  if (!breach.ok()) {
    co_await close_for_protocol_error(std::move(breach));
    co_return;
  }
  // PINGs answered since woken (-1: not woken, or another frame came): woken
  // for keepalives alone, it parks again once they are answered, not a tick
  // later, so that an idle connection's PINGs do not keep it awake.
  int keepalives = woken ? 0 : -1;
  // The next frame, taken at the end of the last turn (is the batch over?).
  Frame frame;
  bool taken = false;
  for (;;) {
    // Most frames of a busy connection are whole in the buffer already; else
    // buffered_frame() or a read, which also report a bad header or the end.
    if (!taken && !channel_->take_buffered(frame)) {
      auto incoming = channel_->buffered_frame();
      if (!incoming) {
        if (keepalives > 0 && quiet()) {
          park();
          co_return;
        }
        incoming = co_await channel_->read_frame();
        // One clock read per read, not per frame: what a batch of frames
        // read at once shares (the idle deadlines, the first call's start).
        deadlines_.touch(Clock::now());
        counts_.batch_read();
      }
      if (!incoming->ok()) {
        if (channel_->read_interrupted() && !channel_->closed()) {
          park();
          co_return;
        }
        if (ended_quietly(incoming->status())) break;
        co_await close_for_protocol_error(incoming->status());
        co_return;
      }
      frame = **incoming;
    }
    taken = false;
    if (keepalives >= 0) keepalives = frame.header.type == FrameType::kPing ? keepalives + 1 : -1;
    // REQUEST (handle_request refuses call id 0) and DATA here; others: route_frame.
    if (frame.header.type == FrameType::kRequest) {
      if (Status s = handle_request(frame); !s.ok()) breach = std::move(s);
    } else if (frame.header.type == FrameType::kData && frame.header.call_id != 0) {
      Status s = co_await streams_.on_data(*channel_, frame);
      counts_.batch_read();  // it may have waited for the body
      if (!s.ok()) breach = data_failed(std::move(s));
    } else if (Status s = route_frame(frame); !s.ok()) {
      breach = std::move(s);
    }
    if (peer_.credentials_expired) [[unlikely]] {
      co_await linger(credentials_expired_ending());
      co_return;
    }
    // Taking the next frame tells whether the batch is over; when it is,
    // check for stray descriptors and answer the batch in one write.
    taken = channel_->take_buffered(frame);
    const bool batch_over = !taken && !channel_->frame_buffered();
    if (breach.ok() && unix_socket && batch_over) breach = shm_.check_stray_descriptors(*channel_);
    if (!breach.ok()) {
      co_await close_for_protocol_error(std::move(breach));
      co_return;
    }
    if (channel_->closed()) break;
    if (batch_over) end_batch();
    if (memory_.may_be_over(*channel_) && memory_.over(server_, *channel_)) [[unlikely]] {
      co_await memory_.wait_under(server_, *channel_);
      counts_.batch_read();
    }
  }
  counts_.fold_calls(server_);
  cancel_all_calls();
  channel_->close();
}

void ServerConnection::park() {
  counts_.fold_calls(server_);  // a parked connection's calls are in stats() until it wakes
  ++holds_;
  ++server_.connections_parked;
  // Until its idle deadline the sweeper has nothing to do with it.
  const auto idle = server_.options.idle_timeout;
  reactor_.connections.park(*this, deadlines_.idle_deadline(idle), idle, Clock::now());
  channel_->byte_stream().wait_readable(std::shared_ptr<ReadReady>(shared_from_this(), this));
}

void ServerConnection::readable(std::error_code ec) {
  --server_.connections_parked;
  if (ec || channel_->closed()) {
    // Closed while parked (stop(), the idle timeout's linger): no call is
    // in flight, nothing is read any more.
    cancel_all_calls();
    channel_->close();
    release();
    return;
  }
  reactor_.connections.insert(*this);  // awake: the sweeper visits it again
  // The wait's hold passes to the coroutine.
  asio::co_spawn(reactor_.io, serve(true),
                 [self = shared_from_this()](const std::exception_ptr&) { self->release(); });
}

void ServerConnection::release() {
  if (--holds_ > 0) return;
  memory_.release(server_);
  count_close();
  reactor_.connections.erase(*this);
  place_.leave(server_);
}

void ServerConnection::cancel_all_calls() {
  calls_.cancel_all();
  // Most connections end with no stream open: no Status to build then.
  if (!streams_.empty()) {
    streams_.fail_all(Status(Errc::kCancelled, "the connection to the client ended"));
  }
}

void ServerConnection::end_batch() {
  counts_.fold_calls(server_);  // before the answers leave: a caller that has one sees it counted
  channel_->flush_now();
  peer_.spent_session.reset();  // after the first replies have left (negotiate_server)
}

namespace {

// The refusals of admit_call() and claim_call_id(), out of the per-call path.
[[gnu::cold, gnu::noinline]] Status wrong_call_kind(std::string_view service,
                                                    std::string_view method, bool streaming) {
  return Status(Errc::kInvalidArgument,
                std::string(service) + "." + std::string(method) +
                    (streaming ? " is not a streaming method"
                               : " is a streaming method: open it as a stream"));
}

[[gnu::cold, gnu::noinline]] Status reused_call_id(std::string_view frame,
                                                   std::uint32_t call_id) {
  return Status(Errc::kProtocolError,
                std::string(frame) + " reuses call id " + std::to_string(call_id));
}

}  // namespace

// A call's deadline from its header's timeout (0: none).
ServerConnection::Clock::time_point ServerConnection::deadline_after(std::uint32_t timeout_ms) {
  return timeout_ms == 0 ? Clock::time_point::max()
                         : Clock::now() + std::chrono::milliseconds(timeout_ms);
}

std::optional<ServerConnection::AdmittedCall> ServerConnection::admit_call(
    std::uint32_t call_id, std::string_view service, std::string_view method,
    Clock::time_point deadline, bool streaming) {
  const AdmittedCall call{methods_.find(server_, metrics(), service, method), call_id, deadline};
  if (state_ != State::kServing) {
    respond(call_id, Status(Errc::kUnavailable, "server is shutting down"), deadline, call.cells);
    return std::nullopt;
  }
  // A session does not outlive its credentials (Identity::expires).
  if (peer_.identity.expires && std::chrono::system_clock::now() >= *peer_.identity.expires)
      [[unlikely]] {
    respond(call_id, peer_.expired_credentials(), deadline, call.cells);
    peer_.credentials_expired = true;
    return std::nullopt;
  }
  if (call.method == nullptr) {
    respond(call_id,
            Status(Errc::kNotFound, "no method " + peer_text(service) + "." + peer_text(method)),
            deadline, call.cells);
    return std::nullopt;
  }
  if (admission_.authorizes()) {
    if (Status s = admission_.check_call(peer_.identity, call.service, call.method_name); !s.ok()) {
      respond(call_id, s, deadline, call.cells);
      return std::nullopt;
    }
  }
  if ((call.method->execution == Execution::kStream) != streaming) [[unlikely]] {
    respond(call_id, wrong_call_kind(call.service, call.method_name, streaming), deadline,
            call.cells);
    return std::nullopt;
  }
  return call;
}

// Inlined into both callers: an OK Status made and dropped per call would
// cost as much as the check itself.
[[gnu::always_inline]] inline Status ServerConnection::claim_call_id(std::uint32_t call_id,
                                                                     std::string_view frame) {
  if (streams_.contains(call_id) || calls_.uses(call_id)) [[unlikely]] {
    return reused_call_id(frame, call_id);
  }
  calls_.saw(call_id);
  return Status();
}

Status ServerConnection::handle_request(const Frame& frame) {
  const std::uint32_t call_id = frame.header.call_id;
  if (call_id == 0) return Status(Errc::kProtocolError, "REQUEST with call id 0");
  std::string_view payload;
  wire::RequestHeader header;
  // Names the method the last call named (MethodCache): the same bytes.
  if (methods_.names_start(frame.body) &&
      wire::parse_request_after_names(frame.body, methods_.names_size(), header.timeout_ms,
                                      payload)) {
    header.service = methods_.service();
    header.method = methods_.method_name();
  } else {
    auto parsed = wire::parse_request(frame.body, payload);
    if (!parsed.ok()) return parsed.status();
    header = *parsed;
  }
  // As for STREAM_REQUEST: an id still outstanding is a protocol error
  // (else both calls would run under it, two RESPONSEs would go out for one
  // id and the first call's cancel flag would be replaced;
  // stream_bad_input_test, ARequestReusingAStreamsCallId...). A cancelled
  // call's id is free (handle_cancel removed it from both tables).
  if (Status s = claim_call_id(call_id, "REQUEST"); !s.ok()) return s;
  const auto deadline = deadline_after(header.timeout_ms);
  const auto call = admit_call(call_id, header.service, header.method, deadline, false);
  if (!call) return Status();
  dispatch(*call, payload, nullptr);
  return Status();
}

Status ServerConnection::handle_stream_request(const Frame& frame) {
  const std::uint32_t call_id = frame.header.call_id;
  std::string_view payload;
  auto header = wire::parse_stream_request(frame.body, payload);
  if (!header.ok()) return header.status();
  if (call_id == 0 || header->window == 0) {
    return Status(Errc::kProtocolError, call_id == 0 ? "STREAM_REQUEST with call id 0"
                                                     : "STREAM_REQUEST with a zero window");
  }
  if (Status s = claim_call_id(call_id, "STREAM_REQUEST"); !s.ok()) return s;
  const auto deadline = deadline_after(header->timeout_ms);
  const auto call = admit_call(call_id, header->service, header->method, deadline, true);
  if (!call) return Status();
  if (streams_.size() >= server_.options.max_streams_per_connection) {
    respond(call_id,
            Status(Errc::kResourceExhausted,
                   "this connection has " + std::to_string(streams_.size()) +
                       " streaming calls open, the server's limit (max_streams_per_connection): "
                       "open another once one has ended"),
            deadline, call->cells);
    return Status();
  }
  auto stream = std::make_shared<CallStream>(channel_, call_id, server_.options.stream_window,
                                             header->window, deadline);
  stream->set_input_budget(
      memory_.stream_input(channel_->byte_stream().executor(),
                           [this](std::size_t) { memory_.account(server_, *channel_); }));
  streams_.add(stream);
  if (metrics()) metrics()->streams_open().add();
  if (shm_.link()) stream->set_shm(shm_.link());
  // Accepts the call and announces our window: the client may send now.
  wire::append_window_update(channel_->out(), call_id, server_.options.stream_window);
  dispatch(*call, payload, std::move(stream));
  return Status();
}

// Every inline call of a batch comes through here: kept in this file, beside
// its callers, so that it is inlined.
inline void ServerConnection::run_inline(const AdmittedCall& call, std::string_view payload) {
  CallContext ctx(peer_.identity, call.service, call.method_name, call.call_id, call.deadline,
                  nullptr, peer_.plaintext_network);
  if (call.method->encoding_handler) {
    run_inline_encoded(call, ctx, payload);
    return;
  }
  const auto result = run_plain_handler(call.method->handler, ctx, payload, server_, peer_.address);
  if (call.cells) counts_.observe_inline(*call.cells);
  respond(call.call_id, result, call.deadline, call.cells);
}

void ServerConnection::run_inline_encoded(const AdmittedCall& call, CallContext& ctx,
                                          std::string_view payload) {
  InlineResponse response(channel_->out());
  const Status status = run_encoding_handler(call.method->encoding_handler, ctx, payload,
                                             response, server_, peer_.address);
  if (call.cells) counts_.observe_inline(*call.cells);
  const auto code = answer_code(status, call.deadline, call.cells);
  if (code == 0) {
    response.seal(call.call_id);
    return;
  }
  response.discard();
  if (code) append_error(call.call_id, *code, status);
}

void ServerConnection::dispatch(const AdmittedCall& call, std::string_view payload,
                                std::shared_ptr<CallStream> stream) {
  const Execution execution = call.method->execution;
  if (execution == Execution::kInline) {
    run_inline(call, payload);
    return;
  }
  // Read only when counting: a clock read per call is not free.
  const Clock::time_point started = call.cells ? Clock::now() : Clock::time_point();
  if (metrics()) metrics()->calls_in_flight().add();
  RunningCalls::Flag cancelled = calls_.start(call.call_id);
  if (execution == Execution::kBlocking) {
    run_blocking(call, payload, std::move(cancelled), started);
  } else {  // kAsync and kStream
    run_coroutine(call, payload, std::move(cancelled), std::move(stream), started);
  }
}

void ServerConnection::run_blocking(const AdmittedCall& call, std::string_view payload,
                                    RunningCalls::Flag cancelled, Clock::time_point started) {
  if (metrics()) metrics()->blocking_queue_length().add();
  asio::post(*server_.blocking_pool, [self = shared_from_this(), call,
                                      request = std::string(payload),
                                      cancelled = std::move(cancelled), started]() mutable {
    // Queue time ends here (Hadoop's RpcQueueTime); processing starts.
    Clock::time_point began = started;
    if (call.cells) {
      began = Clock::now();
      call.cells->queue->observe(began - started);
      self->metrics()->blocking_queue_length().sub();
    }
    Result<std::string> result = Status(Errc::kInternal, "handler did not complete");
    {
      // Refers into *self: gone before self is moved on below.
      CallContext ctx(self->peer_.identity, call.service, call.method_name, call.call_id,
                      call.deadline, cancelled.get(), self->peer_.plaintext_network);
      if (ctx.cancelled()) {
        result = Status(Errc::kCancelled, "cancelled before it started");
      } else if (ctx.deadline_passed()) {
        result = Status(Errc::kDeadlineExceeded, "deadline passed while queued");
      } else {
        result = run_plain_handler(call.method->handler, ctx, request, self->server_,
                                   self->peer_.address);
      }
    }
    // `self` is moved (the lambda is mutable), not copied, so the
    // connection's last reference is dropped on its IO thread, never here.
    auto& ex = self->channel_->byte_stream().executor();
    asio::post(ex, [self = std::move(self), call_id = call.call_id,
                    cancelled = std::move(cancelled), result = std::move(result),
                    deadline = call.deadline, cells = call.cells, began]() {
      self->finish_call(call_id, cancelled.get(), result, deadline, cells, began);
    });
  });
}

void ServerConnection::run_coroutine(const AdmittedCall& call, std::string_view payload,
                                     RunningCalls::Flag cancelled,
                                     std::shared_ptr<CallStream> stream,
                                     Clock::time_point started) {
  asio::co_spawn(
      channel_->byte_stream().executor(),
      [self = shared_from_this(), call, request = std::string(payload),
       cancelled = std::move(cancelled), stream = std::move(stream),
       started]() mutable -> asio::awaitable<void> {
        CallContext ctx(self->peer_.identity, call.service, call.method_name, call.call_id,
                        call.deadline, cancelled.get(), self->peer_.plaintext_network);
        Result<std::string> result = Status(Errc::kInternal, "handler did not complete");
        try {
          if (stream) {
            ServerStream server_stream(stream, std::move(request));
            result = co_await call.method->stream_handler(ctx, server_stream);
          } else {
            result = co_await call.method->async_handler(ctx, std::move(request));
          }
        } catch (...) {
          result = handler_threw(self->server_, ctx, self->peer_.address);
        }
        if (stream) {
          // A call that failed (cancelled, deadline, connection lost)
          // reports that rather than what the handler made of it.
          if (stream->failed() && result.ok()) result = Status(Errc::kCancelled, "stream failed");
          stream->end_output(Status(Errc::kFailedPrecondition, "the call has ended"));
          self->streams_.remove(stream);
          if (self->metrics()) self->metrics()->streams_open().sub();
        }
        self->finish_call(call.call_id, cancelled.get(), result, call.deadline, call.cells,
                          started);
      },
      asio::detached);
}

void ServerConnection::finish_call(std::uint32_t call_id, const std::atomic<bool>* cancelled,
                                   const Result<std::string>& result, Clock::time_point deadline,
                                   ServerMetrics::Method* cells, Clock::time_point started) {
  calls_.finish(call_id, cancelled);
  if (cells) {
    cells->processing->observe(Clock::now() - started);
    metrics()->calls_in_flight().sub();
  }
  deadlines_.touch(Clock::now());
  // A cancelled call's id may run a new call now, which this one must not
  // answer for.
  if (!cancelled->load()) {
    respond(call_id, result, deadline, cells);
    counts_.fold_calls(server_);
  } else if (cells) {
    metrics()->call(*cells, static_cast<std::uint16_t>(Errc::kCancelled));
  }
  channel_->schedule_flush();
  if (state_ == State::kGoingAway && calls_.in_flight() == 0) close_when_drained();
}

std::optional<std::uint16_t> ServerConnection::answer_code(const Status& handler_status,
                                                          Clock::time_point deadline,
                                                          ServerMetrics::Method* cells) {
  std::uint16_t code = 0;
  if (!handler_status.ok()) {
    code = static_cast<std::uint16_t>(to_wire_errc(handler_status.code));
  } else if (deadline != Clock::time_point::max() && Clock::now() > deadline) {
    code = static_cast<std::uint16_t>(Errc::kDeadlineExceeded);
  }
  if (cells) metrics()->call(*cells, code);
  if (channel_->closed()) return std::nullopt;
  counts_.answered(code);
  return code;
}

void ServerConnection::append_error(std::uint32_t call_id, std::uint16_t code,
                                    const Status& handler_status) {
  wire::append_response(channel_->out(), call_id, code,
                        handler_status.ok() ? "deadline exceeded" : handler_status.message, {});
}

void ServerConnection::respond(std::uint32_t call_id, const Result<std::string>& result,
                               Clock::time_point deadline, ServerMetrics::Method* cells) {
  const Status handler_status = result.ok() ? Status() : result.status();
  const auto code = answer_code(handler_status, deadline, cells);
  if (code == 0) {
    wire::append_ok_response(channel_->out(), call_id, result.value());
  } else if (code) {
    append_error(call_id, *code, handler_status);
  }
}

Status ServerConnection::handle_cancel(const Frame& frame) {
  // The call leaves the id tables now, not when its handler returns: the
  // server sends nothing more for it, so the client may reuse the id at once
  // (PROTOCOL.md section 3), and the handler's result is dropped by
  // finish_call through its own flag. Were it kept until then, whether a
  // REQUEST reusing the id is refused would depend on whether the handler
  // had noticed the cancel yet (stream_bad_input_test,
  // ACallReusingACancelledCallsId...).
  if (Status s =
          streams_.on_cancel(frame, Status(Errc::kCancelled, "the client cancelled the call"));
      !s.ok()) {
    return s;
  }
  calls_.cancel(frame.header.call_id);
  return Status();
}

void ServerConnection::shed() {
  if (state_ != State::kNegotiating || channel_->closed() || !place_.shed()) return;
  wire::append_error(channel_->out(), static_cast<std::uint16_t>(Errc::kServerBusy),
                     PreauthPlace::kShedMessage);
  channel_->close_after_flush();
}

void ServerConnection::go_away() {
  counts_.close_with(ServerMetrics::Close::kServerStopping);
  switch (state_) {
    case State::kNegotiating:
      force_close();
      return;
    case State::kServing:
      state_ = State::kGoingAway;
      wire::append_goaway(channel_->out(), {calls_.last_id(), "server is shutting down"});
      channel_->schedule_flush();
      if (calls_.in_flight() == 0) close_when_drained();
      return;
    case State::kGoingAway:
    case State::kLingering:
      return;
  }
}

void ServerConnection::force_close() {
  counts_.close_with(ServerMetrics::Close::kServerStopping);
  cancel_all_calls();
  channel_->close();
}

void ServerConnection::close_when_drained() {
  // Ended already: a call's handler outlived the connection's coroutines
  // (the client left after GOAWAY). Nothing is left to drain, and it must
  // not rejoin the reactor's list it left in release(): it would be freed
  // while linked there.
  if (holds_ == 0) return;
  reactor_.connections.insert(*this);  // if parked: the linger deadline needs the sweeper
  state_ = State::kLingering;
  channel_->shutdown_after_flush();
  deadlines_.set_deadline(Clock::now() + kLingerTime);
}

asio::awaitable<void> ServerConnection::linger(std::optional<Status> error) {
  counts_.fold_calls(server_);  // the answers queued so far still leave
  state_ = State::kLingering;
  cancel_all_calls();
  if (error) {
    wire::append_error(channel_->out(), static_cast<std::uint16_t>(to_wire_errc(error->code)),
                       error->message);
  }
  channel_->shutdown_after_flush();
  deadlines_.set_deadline(Clock::now() + kLingerTime);
  co_await channel_->discard_input();
  // The peer may have closed before our last frame was written: finish it.
  co_await channel_->wait_pending_below(0);
  channel_->close();
}

void ServerConnection::count_close() {
  shm_.closed(server_);
  counts_.closed(*channel_);
}

void ServerConnection::on_tick(Clock::time_point now) {
  if (channel_->closed()) return;
  counts_.fold_bytes(*channel_);
  const auto idle = server_.options.idle_timeout;
  switch (deadlines_.decide(state_, now, calls_.in_flight(), !streams_.empty(), idle)) {
    case IdleDeadlines::Action::kNone:
      return;
    case IdleDeadlines::Action::kReleaseBuffers:
      channel_->release_idle_buffers();
      return;
    case IdleDeadlines::Action::kPark:
      channel_->release_idle_buffers();
      channel_->interrupt_reader();  // serve() parks
      return;
    case IdleDeadlines::Action::kNegotiationTimeout:
      place_.timed_out();
      wire::append_error(channel_->out(), static_cast<std::uint16_t>(Errc::kNegotiationTimeout),
                         "negotiation timed out");
      channel_->close_after_flush();
      return;
    case IdleDeadlines::Action::kIdleTimeout:
      counts_.close_with(ServerMetrics::Close::kIdleTimeout);
      if (server_.options.log.enabled(LogLevel::kDebug)) {
        server_.log(LogLevel::kDebug, "closing idle connection from " + peer_.address);
      }
      wire::append_error(channel_->out(), static_cast<std::uint16_t>(Errc::kIdleTimeout),
                         "connection idle for " + std::to_string(idle.count()) + " ms");
      close_when_drained();
      return;
    case IdleDeadlines::Action::kLingerOver:
      channel_->close();
      return;
  }
}

}  // namespace authrpc
