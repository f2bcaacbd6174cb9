#include "server/server_connection.h"

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/post.hpp>
#include <asio/use_awaitable.hpp>
#include <algorithm>
#include <cstring>
#include <exception>

#include "auth/server_negotiation.h"
#include "rpc/messages.h"

namespace authrpc {
namespace {

using wire::FrameType;
constexpr auto kLingerTime = std::chrono::seconds(2);

Result<std::string> handler_threw(const char* what) {
  return Status(Errc::kInternal, std::string("handler threw: ") + what);
}

}  // namespace

ServerConnection::ServerConnection(Server::Impl& server, Reactor& reactor,
                                   std::unique_ptr<Stream> stream)
    : server_(server),
      reactor_(reactor),
      peer_(stream->peer_address()) {
  // Until AUTH_SUCCESS only frames as large as a Kerberos token with a big
  // PAC: a peer nobody knows yet cannot make the server hold megabytes.
  channel_ = std::make_shared<FrameChannel>(
      std::move(stream),
      std::min(server.options.max_negotiation_frame_size, server.options.max_frame_size));
  channel_->set_direct_data_threshold(kDirectDataThreshold);
}

asio::awaitable<void> ServerConnection::run(Status refuse) {
  if (!refuse.ok()) {
    co_await linger(std::move(refuse));
    co_return;
  }
  deadline_ = Clock::now() + server_.options.negotiation_timeout;

  std::uint8_t preamble[wire::kPreambleSize];
  Status status = co_await channel_->read_exact(preamble, sizeof preamble);
  if (status.ok()) status = wire::check_preamble(preamble);
  if (shed_) co_return;
  if (!status.ok()) {
    if (negotiation_timed_out_) {
      status = Status(Errc::kNegotiationTimeout, "no preamble within the negotiation timeout");
    }
    if (status.code != Errc::kConnectionClosed) {
      ++server_.negotiation_failures;
      server_.log(LogLevel::kWarning, "connection from " + peer_ + " refused: " + status.to_string());
      co_await linger(std::move(status));
    }
    co_return;
  }

  ChannelInfo info;
  info.peer_address = peer_;
  info.scheme = channel_->stream().scheme();
  if (const TlsInfo* tls = channel_->stream().tls()) {
    info.tls = true;
    info.channel_binding = tls->channel_binding;
    info.peer_certificate = tls->peer_certificate;
  }
  // Without authorization or audit log, negotiation runs with no hooks (the
  // fast path).
  ServerNegotiationHooks hooks;
  const bool hooked = server_.options.authorizer || server_.options.audit_log;
  if (server_.options.authorizer) {
    hooks.authorize = [this](Identity& id, std::string_view do_as) {
      return authorize_identity(id, do_as);
    };
  }
  auto identity = co_await negotiate_server(*channel_, server_.options.mechanisms, info,
                                            hooked ? &hooks : nullptr, &spent_session_);
  if (shed_) co_return;
  // Shed while its mechanism was deciding: close, AUTH_SUCCESS unsent.
  if (identity.ok() && !server_.budget.authenticate(budget_ticket_)) {
    channel_->close();
    co_return;
  }
  if (!identity.ok() && server_.options.audit_log && !hooks.refused_by_authorize &&
      identity.code() != Errc::kConnectionClosed) {
    const Status why = negotiation_timed_out_
                           ? Status(Errc::kNegotiationTimeout, "negotiation timed out")
                           : identity.status();
    audit_authentication("failure", hooks.mechanism, why.to_string());
  }
  if (!identity.ok()) {
    Status why = identity.status();
    if (negotiation_timed_out_) {
      why = Status(Errc::kNegotiationTimeout, "negotiation did not finish within " +
                                                  std::to_string(server_.options.negotiation_timeout.count()) + " ms");
    }
    if (why.code != Errc::kConnectionClosed) {
      ++server_.negotiation_failures;
      server_.log(LogLevel::kWarning,
                  "negotiation with " + peer_ + " failed: " + why.to_string());
    }
    // negotiate_server() queued the ERROR (the timeout path sent its own).
    if (!negotiation_timed_out_) co_await linger(std::nullopt);
    co_return;
  }
  authenticated_ = true;
  channel_->set_max_frame_size(server_.options.max_frame_size);
  identity_ = std::move(*identity);
  if (server_.options.audit_log) audit_authentication("success", identity_.mechanism, {});
  state_ = State::kServing;
  last_activity_ = Clock::now();
  // Calls pipelined behind the negotiation are answered in the same write as
  // AUTH_SUCCESS: flush only once no further frame is buffered.
  flush_if_idle();
  co_await serve();
}

// fatal_ is set: counts and logs it, sends it as ERROR and lingers.
asio::awaitable<void> ServerConnection::close_for_protocol_error() {
  ++server_.protocol_errors;
  server_.log(LogLevel::kWarning, "closing connection from " + peer_ + " (" + identity_.user +
                                      "): " + fatal_.to_string());
  co_await linger(fatal_);
}

asio::awaitable<void> ServerConnection::serve() {
  const bool unix_socket = channel_->stream().native_unix_handle() >= 0;
  if (unix_socket) check_stray_descriptors();  // sent during negotiation
  if (!fatal_.ok()) {
    co_await close_for_protocol_error();
    co_return;
  }
  for (;;) {
    auto incoming = channel_->buffered_frame();
    if (!incoming) incoming = co_await channel_->read_frame();
    auto& frame = *incoming;
    if (!frame.ok()) {
      const Status& s = frame.status();
      if (s.code == Errc::kConnectionClosed || channel_->closed() || state_ == State::kLingering) {
        break;
      }
      ++server_.protocol_errors;
      server_.log(LogLevel::kWarning, "closing connection from " + peer_ + " (" + identity_.user +
                                          "): " + s.to_string());
      co_await linger(s);
      co_return;
    }
    last_activity_ = Clock::now();
    // Frames of a call need its id (PROTOCOL.md section 10); the handlers
    // below would silently drop one with call id 0 (stream_bad_input_test,
    // CallFramesWithCallIdZeroAreProtocolErrors).
    if (frame->header.call_id == 0 && is_call_frame(frame->header.type)) {
      fatal_ = Status(Errc::kProtocolError,
                      std::string(wire::frame_type_name(frame->header.type)) + " with call id 0");
    }
    if (fatal_.ok()) switch (frame->header.type) {
      case FrameType::kRequest:
        handle_request(*frame);
        break;
      case FrameType::kCancel:
        // The body is checked before the id, as for every call frame: a
        // malformed frame is an error whether or not its call is open (§3).
        if (!frame->body.empty()) {
          fatal_ = Status(Errc::kProtocolError, "CANCEL with a body");
          break;
        }
        handle_cancel(frame->header.call_id);
        break;
      case FrameType::kStreamRequest:
        handle_stream_request(*frame);
        break;
      case FrameType::kData: {
        Status s = co_await handle_data(*frame);
        if (!s.ok() && s.code != Errc::kProtocolError) {
          // The connection failed inside the frame: as for a failed read.
          if (!channel_->closed() && state_ != State::kLingering) {
            server_.log(LogLevel::kInfo, "connection from " + peer_ + " (" + identity_.user +
                                             ") ended inside a message: " + s.to_string());
          }
          channel_->close();
        } else if (!s.ok()) {
          fatal_ = std::move(s);
        }
        break;
      }
      case FrameType::kWindowUpdate:
        handle_window_update(*frame);
        break;
      case FrameType::kEndStream:
        handle_end_stream(*frame);
        break;
      case FrameType::kShmHello:
        handle_shm_hello(*frame);
        break;
      case FrameType::kShmRing:
        handle_shm_ring(*frame);
        break;
      case FrameType::kPing:
        wire::append_ping(channel_->out(), FrameType::kPong, frame->body);
        break;
      case FrameType::kPong:
        break;
      case FrameType::kError: {
        auto body = wire::parse_error(frame->body);
        server_.log(LogLevel::kInfo, "client " + peer_ + " closed with an error: " +
                                         (body.ok() ? body->message : std::string("(malformed)")));
        channel_->close();
        break;
      }
      default:
        fatal_ = Status(Errc::kProtocolError,
                        "unexpected " + std::string(wire::frame_type_name(frame->header.type)) +
                            " frame after negotiation");
        break;
    }
    if (fatal_.ok() && unix_socket) check_stray_descriptors();
    if (!fatal_.ok()) {
      co_await close_for_protocol_error();
      co_return;
    }
    if (channel_->closed()) break;
    flush_if_idle();
    if (channel_->pending_bytes() > server_.options.max_pending_output) {
      co_await channel_->wait_pending_below(server_.options.max_pending_output / 2);
    }
  }
  cancel_all_calls();
  channel_->close();
}

void ServerConnection::cancel_all_calls() {
  for (auto& [id, flag] : cancel_flags_) flag->store(true);
  auto streams = std::move(streams_);
  streams_.clear();
  for (auto& [id, stream] : streams) {
    stream->fail(Status(Errc::kCancelled, "the connection to the client ended"));
  }
}

// Descriptors (SCM_RIGHTS) may ride only on SHM_RING frames, four each, on
// a connection whose SHM_HELLO was accepted (PROTOCOL.md section 7). When
// no input is buffered beyond the frames handled, every descriptor that has
// arrived came with one of those frames, so any left unclaimed were sent
// with something else (or an SHM_RING carried more than four): a protocol
// error, and the descriptors are closed at once rather than held until the
// connection ends. (While more input is buffered, descriptors may belong to
// an SHM_RING frame not handled yet: checked once that input is consumed.)
// Otherwise a client could park descriptors on any frame of a unix://
// connection, and a ring frame's extra descriptors would go to the next ring
// (stream_bad_input_test: DescriptorsWithoutAnShmFrame..., BadShmRings...).
void ServerConnection::check_stray_descriptors() {
  if (channel_->input_buffered()) {
    // Descriptors may belong to an SHM_RING still being read (a read brings
    // at most one batch, 16 at most): a few, never this many. Without this
    // bound a client that always left part of a frame unread could pile up
    // descriptors matched to rings (stream_bad_input_test,
    // DescriptorsPiledUpBehindPartialFrames...).
    constexpr std::size_t kMaxUnclaimed = 64;
    if (shm_ && shm_->pending_fds() > kMaxUnclaimed) {
      fatal_ = Status(Errc::kProtocolError, std::to_string(shm_->pending_fds()) +
                                                " file descriptors sent without SHM_RING frames");
    }
    return;
  }
  // take_ring_fds() hands out four at a time: drain the link's list, so that
  // every stray descriptor is closed now rather than when the connection
  // ends (stream_bad_input_test, EveryStrayDescriptorIsClosedAtOnce...).
  std::size_t stray = 0;
  if (shm_) {
    for (std::size_t n; (n = shm_->take_ring_fds(*channel_).size()) > 0;) stray += n;
  } else {
    stray = channel_->stream().take_received_fds().size();
  }
  if (stray > 0 && fatal_.ok()) {
    fatal_ = Status(Errc::kProtocolError,
                    std::to_string(stray) + " file descriptor(s) sent without an SHM_RING frame");
  }
}

bool ServerConnection::is_call_frame(FrameType type) noexcept {
  switch (type) {
    case FrameType::kCancel:
    case FrameType::kData:
    case FrameType::kWindowUpdate:
    case FrameType::kEndStream:
    case FrameType::kShmRing:
      return true;
    default:
      return false;  // REQUEST and STREAM_REQUEST check their ids themselves
  }
}

void ServerConnection::flush_if_idle() {
  if (channel_->frame_buffered()) return;
  channel_->flush_now();
  spent_session_.reset();  // after the first replies have left (negotiate_server)
}

// A call's deadline from its header's timeout (0: none).
ServerConnection::Clock::time_point ServerConnection::deadline_after(std::uint32_t timeout_ms) {
  return timeout_ms == 0 ? Clock::time_point::max()
                         : Clock::now() + std::chrono::milliseconds(timeout_ms);
}

// What every call (unary or streaming) passes before it runs: the server is
// serving, the method exists, the caller may call it. On refusal, responds
// with the typed error and returns nullptr.
const Service::Method* ServerConnection::admit_call(std::uint32_t call_id, std::string_view service,
                                                    std::string_view method,
                                                    Clock::time_point deadline,
                                                    std::string_view& service_name,
                                                    std::string_view& method_name) {
  if (state_ != State::kServing) {
    respond(call_id, Status(Errc::kUnavailable, "server is shutting down"), deadline);
    return nullptr;
  }
  const Service::Method* found = server_.find_method(service, method, &service_name, &method_name);
  if (found == nullptr) {
    respond(call_id,
            Status(Errc::kNotFound, "no method " + std::string(service) + "." + std::string(method)),
            deadline);
    return nullptr;
  }
  if (server_.options.authorizer) {
    if (Status denied = authorize_call(service_name, method_name); !denied.ok()) {
      respond(call_id, denied, deadline);
      return nullptr;
    }
  }
  return found;
}

void ServerConnection::handle_request(const Frame& frame) {
  const std::uint32_t call_id = frame.header.call_id;
  std::string_view payload;
  auto header = wire::parse_request(frame.body, payload);
  if (!header.ok()) {
    fatal_ = header.status();
    return;
  }
  if (call_id == 0) {
    fatal_ = Status(Errc::kProtocolError, "REQUEST with call id 0");
    return;
  }
  // As for STREAM_REQUEST: an id still outstanding is a protocol error
  // (else both calls would run under it, two RESPONSEs would go out for one
  // id and the first call's cancel flag would be replaced;
  // stream_bad_input_test, ARequestReusingAStreamsCallId...). A cancelled
  // call's id is free (handle_cancel removed it from both tables).
  if (streams_.contains(call_id) || cancel_flags_.contains(call_id)) {
    fatal_ = Status(Errc::kProtocolError, "REQUEST reuses call id " + std::to_string(call_id));
    return;
  }
  last_call_id_ = std::max(last_call_id_, call_id);
  const auto deadline = deadline_after(header->timeout_ms);
  std::string_view service_name, method_name;
  const Service::Method* method =
      admit_call(call_id, header->service, header->method, deadline, service_name, method_name);
  if (method == nullptr) return;
  switch (method->execution) {
    case Execution::kInline: {
      CallContext ctx(identity_, service_name, method_name, call_id, deadline);
      try {
        respond(call_id, method->handler(ctx, payload), deadline);
      } catch (const std::exception& e) {
        respond(call_id, handler_threw(e.what()), deadline);
      } catch (...) {
        respond(call_id, handler_threw("unknown exception"), deadline);
      }
      break;
    }
    case Execution::kAsync:
      start_async_call(*method, service_name, method_name, call_id, deadline, payload);
      break;
    case Execution::kBlocking:
      start_blocking_call(*method, service_name, method_name, call_id, deadline, payload);
      break;
    case Execution::kStream:
      respond(call_id,
              Status(Errc::kInvalidArgument, std::string(service_name) + "." +
                                                 std::string(method_name) +
                                                 " is a streaming method: open it as a stream"),
              deadline);
      break;
  }
}

void ServerConnection::handle_stream_request(const Frame& frame) {
  const std::uint32_t call_id = frame.header.call_id;
  std::string_view payload;
  auto header = wire::parse_stream_request(frame.body, payload);
  if (!header.ok()) {
    fatal_ = header.status();
    return;
  }
  if (call_id == 0 || header->window == 0) {
    fatal_ = Status(Errc::kProtocolError, call_id == 0 ? "STREAM_REQUEST with call id 0"
                                                       : "STREAM_REQUEST with a zero window");
    return;
  }
  if (streams_.contains(call_id) || cancel_flags_.contains(call_id)) {
    fatal_ = Status(Errc::kProtocolError, "STREAM_REQUEST reuses call id " + std::to_string(call_id));
    return;
  }
  last_call_id_ = std::max(last_call_id_, call_id);
  const auto deadline = deadline_after(header->timeout_ms);
  std::string_view service_name, method_name;
  const Service::Method* method =
      admit_call(call_id, header->service, header->method, deadline, service_name, method_name);
  if (method == nullptr) return;
  if (method->execution != Execution::kStream) {
    respond(call_id,
            Status(Errc::kInvalidArgument, std::string(service_name) + "." +
                                               std::string(method_name) +
                                               " is not a streaming method"),
            deadline);
    return;
  }
  auto stream = std::make_shared<CallStream>(channel_, call_id, server_.options.stream_window,
                                             header->window, deadline);
  streams_[call_id] = stream;
  if (shm_) stream->set_shm(shm_);
  // Accepts the call and announces our window: the client may send now.
  wire::append_window_update(channel_->out(), call_id, server_.options.stream_window);
  start_stream_call(*method, service_name, method_name, call_id, deadline, payload,
                    std::move(stream));
}

void ServerConnection::start_stream_call(const Service::Method& method,
                                         std::string_view service_name,
                                         std::string_view method_name, std::uint32_t call_id,
                                         Clock::time_point deadline, std::string_view payload,
                                         std::shared_ptr<CallStream> stream) {
  ++in_flight_;
  auto cancelled = std::make_shared<std::atomic<bool>>(false);
  cancel_flags_[call_id] = cancelled;
  asio::co_spawn(
      channel_->stream().executor(),
      [self = shared_from_this(), &method, service_name, method_name, call_id, deadline,
       request = std::string(payload), cancelled,
       stream = std::move(stream)]() mutable -> asio::awaitable<void> {
        CallContext ctx(self->identity_, service_name, method_name, call_id, deadline,
                        cancelled.get());
        ServerStream server_stream(stream, std::move(request));
        Result<std::string> result = Status(Errc::kInternal, "handler did not complete");
        try {
          result = co_await method.stream_handler(ctx, server_stream);
        } catch (const std::exception& e) {
          result = handler_threw(e.what());
        } catch (...) {
          result = handler_threw("unknown exception");
        }
        // A call that failed (cancelled, deadline, connection lost) reports
        // that rather than what the handler made of it.
        if (stream->failed() && result.ok()) result = Status(Errc::kCancelled, "stream failed");
        stream->end_output(Status(Errc::kFailedPrecondition, "the call has ended"));
        const auto it = self->streams_.find(call_id);
        if (it != self->streams_.end() && it->second == stream) self->streams_.erase(it);
        self->finish_call(call_id, cancelled.get(), result, deadline);
      },
      asio::detached);
}

asio::awaitable<Status> ServerConnection::handle_data(const Frame& frame) {
  const auto it = streams_.find(frame.header.call_id);
  // A stream that has ended (or never was) drops its late messages.
  std::shared_ptr<CallStream> stream = it == streams_.end() ? nullptr : it->second;
  // A message after the client's own END_STREAM, on a call still running:
  // the client broke its promise, and dropping the message silently would
  // lose data the client believes it sent (stream_bad_input_test,
  // FramesAfterEndStreamOnARunningCall...).
  if (stream && !stream->failed() && stream->finished()) {
    co_return Status(Errc::kProtocolError,
                     "DATA after END_STREAM on call " + std::to_string(frame.header.call_id));
  }
  if (!frame.body_pending) {
    if (!stream) co_return Status();
    Payload message = stream->receive_buffer(frame.body.size());
    if (!frame.body.empty()) std::memcpy(message.mutable_data(), frame.body.data(), frame.body.size());
    co_return stream->on_data(std::move(message));
  }
  if (!stream) co_return co_await channel_->skip_body();
  Payload message = stream->receive_buffer(frame.header.body_size());
  if (Status s = co_await channel_->read_body(message.mutable_data()); !s.ok()) co_return s;
  Status s = stream->on_data(std::move(message));
  // Let the handler take the message while it is still in the cache, rather
  // than read on while more input waits and queue up to a window.
  if (s.ok()) co_await asio::post(channel_->stream().executor(), asio::use_awaitable);
  co_return s;
}

void ServerConnection::handle_window_update(const Frame& frame) {
  auto increment = wire::parse_window_update(frame.body);
  if (!increment.ok()) {
    fatal_ = increment.status();
    return;
  }
  const auto it = streams_.find(frame.header.call_id);
  if (it == streams_.end()) return;
  if (Status s = it->second->on_window_update(*increment); !s.ok()) fatal_ = std::move(s);
}

void ServerConnection::handle_shm_hello(const Frame& frame) {
  // Once per connection, answered or not, also when refused or on tcp://
  // (stream_bad_input_test, ASecondShmHello...). The body is empty (section 3: longer is an error).
  if (shm_answered_ || !frame.body.empty()) {
    fatal_ = Status(Errc::kProtocolError,
                    shm_answered_ ? "a second SHM_HELLO" : "SHM_HELLO with a body");
    return;
  }
  shm_answered_ = true;
  Status why;
  shm_ = ShmLink::answer(*channel_, server_.options.shm, &why);
  if (!why.ok() && why.code != ShmErrc::kUnsupported) {
    server_.log(LogLevel::kInfo, "shared memory refused to " + peer_ + " (" + identity_.user +
                                     "): " + why.to_string());
  }
}

void ServerConnection::handle_shm_ring(const Frame& frame) {
  if (!shm_) {
    fatal_ = Status(Errc::kProtocolError, "SHM_RING without shared memory negotiated");
    return;
  }
  auto ring = take_shm_ring(*shm_, *channel_, frame);
  if (!ring.ok()) {
    fatal_ = ring.status();
    return;
  }
  const auto it = streams_.find(frame.header.call_id);
  if (it == streams_.end()) return;  // ended: dropping the ring tells the writer
  if (Status s = it->second->attach_shm_ring(shm_, std::move(*ring)); !s.ok()) {
    it->second->fail(s);
  }
}

void ServerConnection::handle_end_stream(const Frame& frame) {
  const std::uint32_t call_id = frame.header.call_id;
  if (!frame.body.empty()) {
    fatal_ = Status(Errc::kProtocolError, "END_STREAM with a body");
    return;
  }
  const auto it = streams_.find(call_id);
  if (it == streams_.end()) return;  // ended (or never was): dropped
  // A second END_STREAM on a call still running is a protocol error, like
  // DATA after it (stream_bad_input_test, FramesAfterEndStreamOnARunningCall...).
  if (!it->second->failed() && it->second->finished()) {
    fatal_ = Status(Errc::kProtocolError, "a second END_STREAM on call " + std::to_string(call_id));
    return;
  }
  it->second->end_input(Status());
}

void ServerConnection::start_async_call(const Service::Method& method,
                                        std::string_view service_name,
                                        std::string_view method_name, std::uint32_t call_id,
                                        Clock::time_point deadline, std::string_view payload) {
  ++in_flight_;
  auto cancelled = std::make_shared<std::atomic<bool>>(false);
  cancel_flags_[call_id] = cancelled;
  asio::co_spawn(
      channel_->stream().executor(),
      [self = shared_from_this(), &method, service_name, method_name, call_id, deadline,
       request = std::string(payload), cancelled]() mutable -> asio::awaitable<void> {
        CallContext ctx(self->identity_, service_name, method_name, call_id, deadline,
                        cancelled.get());
        Result<std::string> result = Status(Errc::kInternal, "handler did not complete");
        try {
          result = co_await method.async_handler(ctx, std::move(request));
        } catch (const std::exception& e) {
          result = handler_threw(e.what());
        } catch (...) {
          result = handler_threw("unknown exception");
        }
        self->finish_call(call_id, cancelled.get(), result, deadline);
      },
      asio::detached);
}

void ServerConnection::start_blocking_call(const Service::Method& method,
                                           std::string_view service_name,
                                           std::string_view method_name, std::uint32_t call_id,
                                           Clock::time_point deadline,
                                           std::string_view payload) {
  ++in_flight_;
  auto cancelled = std::make_shared<std::atomic<bool>>(false);
  cancel_flags_[call_id] = cancelled;
  asio::post(*server_.blocking_pool, [self = shared_from_this(), &method, service_name,
                                      method_name, call_id, deadline,
                                      request = std::string(payload), cancelled]() {
    CallContext ctx(self->identity_, service_name, method_name, call_id, deadline,
                    cancelled.get());
    Result<std::string> result = Status(Errc::kInternal, "handler did not complete");
    if (ctx.cancelled()) {
      result = Status(Errc::kCancelled, "cancelled before it started");
    } else if (ctx.deadline_passed()) {
      result = Status(Errc::kDeadlineExceeded, "deadline passed while queued");
    } else {
      try {
        result = method.handler(ctx, request);
      } catch (const std::exception& e) {
        result = handler_threw(e.what());
      } catch (...) {
        result = handler_threw("unknown exception");
      }
    }
    auto& ex = self->channel_->stream().executor();
    asio::post(ex, [self = std::move(self), call_id, cancelled = std::move(cancelled),
                    result = std::move(result), deadline]() {
      self->finish_call(call_id, cancelled.get(), result, deadline);
    });
  });
}

void ServerConnection::finish_call(std::uint32_t call_id, const std::atomic<bool>* cancelled,
                                   const Result<std::string>& result, Clock::time_point deadline) {
  --in_flight_;
  last_activity_ = Clock::now();
  // The id's entry is this call's only if it was not cancelled: a cancelled
  // call left the table (handle_cancel), and the id may run a new call now,
  // which this one must neither remove nor answer for.
  const auto it = cancel_flags_.find(call_id);
  if (it != cancel_flags_.end() && it->second.get() == cancelled) cancel_flags_.erase(it);
  if (!cancelled->load()) respond(call_id, result, deadline);
  channel_->schedule_flush();
  if (state_ == State::kGoingAway && in_flight_ == 0) close_when_drained();
}

void ServerConnection::respond(std::uint32_t call_id, const Result<std::string>& result,
                               Clock::time_point deadline) {
  if (channel_->closed()) return;
  if (result.ok()) {
    if (Clock::now() > deadline) {
      ++server_.calls_failed;
      wire::append_response(channel_->out(), call_id,
                            static_cast<std::uint16_t>(Errc::kDeadlineExceeded),
                            "deadline exceeded", {});
      return;
    }
    ++server_.calls_ok;
    wire::append_response(channel_->out(), call_id, 0, {}, result.value());
  } else {
    ++server_.calls_failed;
    const Status s = result.status();
    wire::append_response(channel_->out(), call_id,
                          static_cast<std::uint16_t>(to_wire_errc(s.code)), s.message, {});
  }
}

Status ServerConnection::authorize_identity(Identity& id, std::string_view do_as) {
  const std::string principal = id.principal.empty() ? id.user : id.principal;
  Status s = server_.options.authorizer->current()->establish(id, do_as, groups_);
  if (!s.ok()) {
    server_.log(LogLevel::kWarning, "connection from " + peer_ + " (" + principal +
                                        ") refused: " + s.to_string());
    if (server_.options.audit_log) {
      const std::string target(do_as);
      server_.options.audit_log->record(
          {do_as.empty() ? "authentication" : "proxy", do_as.empty() ? "failure" : "denied",
           peer_, id.mechanism, principal, do_as.empty() ? std::string_view(id.user) : target,
           do_as.empty() ? std::nullopt : std::optional<std::string_view>(principal), {}, {},
           s.to_string()});
    }
  }
  return s;
}

Status ServerConnection::authorize_call(std::string_view service, std::string_view method) {
  Status denied =
      server_.options.authorizer->current()->check_call({identity_.user, &groups_, peer_}, service, method);
  if (!denied.ok() && server_.options.audit_log) {
    const auto& id = identity_;
    server_.options.audit_log->record({"authorization", "denied", peer_, id.mechanism,
                                       id.real_user ? *id.real_user : id.principal, id.user,
                                       id.real_user, service, method, denied.message});
  }
  return denied;
}

void ServerConnection::audit_authentication(std::string_view outcome, std::string_view mechanism,
                                            std::string_view reason) {
  const auto& id = identity_;
  server_.options.audit_log->record({"authentication", outcome, peer_, mechanism,
                                     id.real_user ? std::string_view(*id.real_user)
                                                  : std::string_view(id.principal),
                                     id.user, id.real_user, {}, {}, reason});
}

void ServerConnection::handle_cancel(std::uint32_t call_id) {
  const auto it = cancel_flags_.find(call_id);
  if (it == cancel_flags_.end()) return;  // finished already, or never existed
  it->second->store(true);
  // The call leaves the id table now, not when its handler returns: the
  // server sends nothing more for it, so the client may reuse the id at once
  // (PROTOCOL.md section 3), and the handler's result is dropped by
  // finish_call through its own flag. Were it kept until then, whether a
  // REQUEST reusing the id is refused would depend on whether the handler
  // had noticed the cancel yet (stream_bad_input_test,
  // ACallReusingACancelledCallsId...).
  cancel_flags_.erase(it);
  if (const auto s = streams_.find(call_id); s != streams_.end()) {
    auto stream = std::move(s->second);
    streams_.erase(s);
    stream->fail(Status(Errc::kCancelled, "the client cancelled the call"));
  }
}

void ServerConnection::leave_budget() {
  server_.budget.release(budget_ticket_, authenticated_);
}

void ServerConnection::shed() {
  if (state_ != State::kNegotiating || channel_->closed() || negotiation_timed_out_) return;
  shed_ = true;
  wire::append_error(channel_->out(), static_cast<std::uint16_t>(Errc::kServerBusy),
                     "too many unauthenticated connections: the oldest is closed");
  channel_->close_after_flush();
}

void ServerConnection::go_away() {
  switch (state_) {
    case State::kNegotiating:
      force_close();
      return;
    case State::kServing:
      state_ = State::kGoingAway;
      wire::append_goaway(channel_->out(), {last_call_id_, "server is shutting down"});
      channel_->schedule_flush();
      if (in_flight_ == 0) close_when_drained();
      return;
    case State::kGoingAway:
    case State::kLingering:
      return;
  }
}

void ServerConnection::force_close() {
  cancel_all_calls();
  channel_->close();
}

void ServerConnection::close_when_drained() {
  state_ = State::kLingering;
  channel_->shutdown_after_flush();
  deadline_ = Clock::now() + kLingerTime;
}

asio::awaitable<void> ServerConnection::linger(std::optional<Status> error) {
  state_ = State::kLingering;
  cancel_all_calls();
  if (error) {
    wire::append_error(channel_->out(), static_cast<std::uint16_t>(to_wire_errc(error->code)),
                       error->message);
  }
  channel_->shutdown_after_flush();
  deadline_ = Clock::now() + kLingerTime;
  co_await channel_->discard_input();
  // The peer may have closed before our last frame was written: finish it.
  co_await channel_->wait_pending_below(0);
  channel_->close();
}

void ServerConnection::on_tick(Clock::time_point now) {
  if (channel_->closed()) return;
  switch (state_) {
    case State::kNegotiating:
      if (now < deadline_) return;
      negotiation_timed_out_ = true;
      wire::append_error(channel_->out(), static_cast<std::uint16_t>(Errc::kNegotiationTimeout),
                         "negotiation timed out");
      channel_->close_after_flush();
      return;
    case State::kServing:
    case State::kGoingAway: {
      const auto idle = server_.options.idle_timeout;
      if (idle.count() == 0 || in_flight_ > 0 || now < last_activity_ + idle) return;
      server_.log(LogLevel::kDebug, "closing idle connection from " + peer_);
      wire::append_error(channel_->out(), static_cast<std::uint16_t>(Errc::kIdleTimeout),
                         "connection idle for " + std::to_string(idle.count()) + " ms");
      close_when_drained();
      return;
    }
    case State::kLingering:
      if (now >= deadline_) channel_->close();
      return;
  }
}

}  // namespace authrpc
