#include "authrpc/client/client_connection.h"

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/post.hpp>
#include <asio/redirect_error.hpp>
#include <asio/use_awaitable.hpp>

#include "authrpc/auth/client_negotiation.h"
#include "authrpc/client/client_policy.h"
#include "authrpc/client/connect_byte_stream.h"
#include "authrpc/rpc/call_stream.h"
#include "authrpc/rpc/frame_channel.h"
#include "authrpc/rpc/messages.h"
#include "authrpc/rpc/shm_link.h"

namespace authrpc {

using Clock = std::chrono::steady_clock;
using wire::FrameType;

Client::Connection::Connection(asio::any_io_executor ex, ClientOptions options)
    : executor_(std::move(ex)),
      options_(std::move(options)),
      keepalive_(*this) {}

asio::awaitable<Status> Client::Connection::open() {
  const auto deadline = counts_.start(options_) + options_.connect_timeout;
  if (Status s = validate_client_policies(options_); !s.ok()) co_return s;
  auto stream = co_await connect_byte_stream(executor_, options_, deadline);
  if (!stream.ok()) {
    Status why = unreachable(stream.status(), options_);
    counts_.failed(why);
    co_return why;
  }
  ChannelInfo info;
  info.peer_address = (*stream)->peer_address();
  info.scheme = (*stream)->scheme();
  info.server_host = options_.endpoint.host;
  // A plaintext socket stream names its peer by the endpoint's URI
  // (rpc/socket_transport.cc): no need to format it twice.
  if ((*stream)->tls() == nullptr && info.scheme == options_.endpoint.scheme) {
    info.server_uri = info.peer_address;
  } else {
    info.server_uri = options_.endpoint.to_string();
  }
  if (const TlsInfo* tls = (*stream)->tls()) {
    info.tls = true;
    info.channel_binding = tls->channel_binding;
    info.peer_certificate = tls->peer_certificate;
    summary_.set_tls(*tls);
  }
  channel_ = std::make_shared<FrameChannel>(std::move(*stream), options_.max_frame_size);

  deadlines_ = &DeadlineQueue::of(executor_);
  auth_.start(*channel_, *deadlines_, deadline, executor_);
  info_ = std::move(info);
  asio::co_spawn(executor_, [self = shared_from_this()]() { return self->run(); },
                 asio::detached);
  if (options_.wait_for_authentication) co_return co_await wait_authenticated();
  co_return Status();
}

asio::awaitable<Status> Client::Connection::wait_authenticated() {
  while (state_ == State::kHolding || state_ == State::kOptimistic) {
    std::error_code ec;
    co_await auth_.event(executor_).async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
  co_return state_ == State::kReady ? Status() : summary_.closed_status();
}

asio::awaitable<Result<std::string>> Client::Connection::call(std::shared_ptr<Connection> self,
                                                              std::string_view service,
                                                              std::string_view method,
                                                              std::string_view request,
                                                              CallOptions call_options) {
  return make_call<Result<std::string>>(std::move(self), service, method, request, call_options,
                                        [](PendingCall& pending) { return pending.take_result(); });
}

asio::awaitable<Status> Client::Connection::call_decoded(std::shared_ptr<Connection> self,
                                                         std::string_view service,
                                                         std::string_view method,
                                                         std::string_view request,
                                                         const ResponseDecoder& decode,
                                                         CallOptions call_options) {
  return make_call<Status>(std::move(self), service, method, request, call_options,
                           [&decode](PendingCall& pending) { return pending.decode_result(decode); });
}

template <typename Outcome, typename Take>
asio::awaitable<Outcome> Client::Connection::make_call([[maybe_unused]] std::shared_ptr<Connection> self,
                                                       std::string_view service,
                                                       std::string_view method,
                                                       std::string_view request,
                                                       CallOptions call_options, Take take) {
  if (state_ == State::kClosed) co_return summary_.closed_status();
  if (going_away_) co_return Status(Errc::kUnavailable, "server is shutting down (GOAWAY)");
  const auto timeout = call_options.timeout.count() > 0 ? call_options.timeout
                                                        : options_.default_call_timeout;
  // A call its caller makes while the reader delivers (the caller was
  // woken by a response) starts at that batch's read.
  const Clock::time_point sent = counts_.on() ? batch_.call_start() : Clock::time_point();
  const auto deadline = timeout.count() > 0 ? Clock::now() + timeout : Clock::time_point::max();
  const std::uint32_t id = pending_.next_id();

  std::string& out = state_ == State::kHolding ? held_.buffer() : channel_->out();
  const std::size_t start = out.size();
  wire::append_request(out, id, {service, method, static_cast<std::uint32_t>(timeout.count())},
                       request);
  if (out.size() - start > options_.max_frame_size) {
    out.resize(start);
    co_return Status(Errc::kFrameTooLarge, "request of " + std::to_string(request.size()) +
                                               " bytes exceeds the frame limit");
  }
  // Until the server confirms authentication, keep a copy (HeldRequests).
  if (state_ != State::kReady && !held_.keep(out, start, state_ == State::kOptimistic)) {
    state_ = State::kHolding;
  }
  if (state_ != State::kHolding) batch_.send(*channel_);

  // The caller waits with its handler parked in `pending`, completed once
  // by the response, a failure, the deadline, or the context's shutdown.
  PendingCall pending(pending_, id);
  deadlines_->add(pending, deadline, executor_);
  co_await pending.wait();
  if (counts_.on()) {
    counts_.call(pending.done ? pending.code() : Errc::kDeadlineExceeded,
                 (pending.done ? pending.answered_at() : Clock::now()) - sent);
  }
  if (!pending.done) {
    if (state_ == State::kReady && !channel_->closed()) {
      wire::append_cancel(channel_->out(), id);
      channel_->schedule_flush();
    }
    co_return Status(Errc::kDeadlineExceeded,
                     std::string(service) + "." + std::string(method) + " timed out after " +
                         std::to_string(timeout.count()) + " ms");
  }
  co_return take(pending);
}

asio::awaitable<Result<std::shared_ptr<CallStream>>> Client::Connection::open_stream(
    std::string_view service, std::string_view method, std::string_view request,
    StreamOptions stream_options) {
  if (state_ == State::kHolding || state_ == State::kOptimistic) {
    if (Status s = co_await wait_authenticated(); !s.ok()) co_return s;
  }
  if (state_ == State::kClosed) co_return summary_.closed_status();
  if (going_away_) co_return Status(Errc::kUnavailable, "server is shutting down (GOAWAY)");
  if (!streams_.supported()) {
    co_return Status(Errc::kUnimplemented, "the server does not support streaming calls");
  }
  if (auto link = streams_.unanswered_link()) {
    // One round trip, once per connection: streams then know whether
    // their messages may use shared memory.
    co_await link->wait_answer();
    if (state_ == State::kClosed) co_return summary_.closed_status();
  }
  co_return streams_.open(channel_, pending_.next_id(), service, method, request, stream_options,
                          options_, weak_from_this());
}

void Client::Connection::cancel_stream(std::uint32_t call_id) {
  if (!streams_.router().take(call_id)) return;
  if (state_ == State::kReady && !channel_->closed()) {
    wire::append_cancel(channel_->out(), call_id);
    channel_->schedule_flush();
  }
}

void Client::Connection::close(Status why) {
  if (state_ == State::kClosed) return;
  fail(std::move(why));
  if (channel_) channel_->close();
}

std::string Client::Connection::mechanism() const { return summary_.mechanism(); }

std::string Client::Connection::authenticated_user() const { return summary_.user(); }

Status Client::Connection::status() const { return summary_.status(); }

std::uint64_t Client::Connection::Keepalive::queued_total() const {
  FrameChannel& channel = *connection_.channel_;
  return channel.bytes_sent() + channel.out().size();
}

void Client::Connection::Keepalive::arm() {
  mark_ = queued_total();
  connection_.deadlines_->add(*this, Clock::now() + connection_.options_.keepalive,
                              connection_.executor_);
}

void Client::Connection::Keepalive::expired() {
  Connection& c = connection_;
  if (c.state_ != State::kReady || c.channel_->closed()) return;
  if (queued_total() == mark_) {
    wire::append_ping(c.channel_->out(), FrameType::kPing, {});
    c.channel_->schedule_flush();
  }
  arm();
}

asio::awaitable<void> Client::Connection::run() {
  // Start once the turn that connected is over: calls the connecting
  // coroutine makes right away (wait_for_authentication off) are then
  // held already and leave with the HELLO in one write, and the reader
  // waits for the reply without another turn of the loop.
  co_await asio::post(executor_, asio::use_awaitable);
  auto negotiated = co_await negotiate_client(
      *channel_, options_.mechanisms, info_,
      [this](NegotiationEvent event) { on_negotiation_event(event); }, options_.do_as,
      auth_.spent());
  auth_.over();
  if (!negotiated.ok()) {
    Status why = negotiation_failed(negotiated.status());
    // The ERROR negotiate_client() queued for the server (why we give up:
    // its logs and metrics count refusals by that code) leaves before the
    // caller hears of the failure and perhaps ends the event loop: a TLS
    // write completes asynchronously. One small frame into an almost empty
    // socket buffer; returns at once if the channel is closed.
    co_await channel_->wait_pending_below(0);
    close(std::move(why));
    co_return;
  }
  become_ready(*negotiated);

  // The read loop: RESPONSE and DATA here, every other frame in route().
  for (;;) {
    auto incoming = channel_->buffered_frame();
    if (!incoming || !incoming->ok() || (*incoming)->header.type != FrameType::kResponse) {
      batch_.flush(*channel_);  // the batch of responses is over
    }
    if (!incoming) {
      incoming = co_await channel_->read_frame();
      if (counts_.on()) batch_.read_now();
    }
    auto& frame = *incoming;
    if (!frame.ok()) {
      read_failed(frame.status());
      co_return;
    }
    if (frame->header.type == FrameType::kResponse) {
      batch_.begin_delivery();
      const bool delivered = deliver(*frame);
      batch_.end_delivery();
      // The caller may have closed the connection meanwhile (it ran inside
      // deliver()): nothing left to read.
      if (!delivered || state_ == State::kClosed) co_return;
      if (!channel_->frame_buffered()) {
        batch_.flush(*channel_);  // the callers woken here have run already
        if (batch_.turn_over()) co_await asio::post(executor_, asio::use_awaitable);
        auth_.drop_spent();  // see negotiate_client()
      }
    } else if (frame->header.type == FrameType::kData) {
      if (!co_await deliver_data(*frame)) co_return;
    } else if (!route(*frame)) {
      co_return;
    }
  }
}

void Client::Connection::on_negotiation_event(NegotiationEvent event) {
  if (event == NegotiationEvent::kFinalMessageQueued) {
    state_ = held_.send_behind_last(channel_->out()) ? State::kOptimistic : State::kHolding;
  } else {
    held_.dropped();
    state_ = State::kHolding;
  }
}

Status Client::Connection::negotiation_failed(Status why) {
  if (auth_.timed_out()) {
    why = Status(Errc::kNegotiationTimeout, "connect + negotiation took longer than " +
                                                std::to_string(options_.connect_timeout.count()) +
                                                " ms");
  }
  counts_.failed(why);
  return why;
}

void Client::Connection::become_ready(ClientNegotiationResult& negotiated) {
  held_.release(*channel_);
  state_ = State::kReady;
  counts_.connected(negotiated.mechanism);
  summary_.authenticated(std::move(negotiated.mechanism), std::move(negotiated.server_user));
  streams_.start(negotiated.server_features, *channel_, options_.shm);
  auth_.wake();
  if (options_.keepalive.count() > 0) keepalive_.arm();
}

void Client::Connection::read_failed(Status why) {
  if (why.code == Errc::kProtocolError || why.code == Errc::kFrameTooLarge) {
    protocol_error(std::move(why));
    return;
  }
  if (why.code == Errc::kConnectionClosed) {
    why = going_away_ ? Status(Errc::kUnavailable, "server shut down the connection (GOAWAY)")
                      : Status(Errc::kConnectionClosed, "server closed the connection");
  }
  close(std::move(why));
}

bool Client::Connection::route(const Frame& frame) {
  const FrameType type = frame.header.type;
  if (frame.header.call_id != 0 && wire::is_connection_frame_type(type)) [[unlikely]] {
    protocol_error(Status(Errc::kProtocolError, std::string(wire::frame_type_name(type)) +
                                                    " with call id " +
                                                    std::to_string(frame.header.call_id)));
    return false;
  }
  // An error a step returns is the peer's breach of the protocol.
  Status breach;
  switch (type) {
    case FrameType::kShmAccept:
      breach = streams_.on_shm_accept(frame);
      break;
    case FrameType::kShmRing:
      breach = streams_.on_shm_ring(*channel_, frame);
      break;
    case FrameType::kWindowUpdate:
      breach = streams_.router().on_window_update(frame);
      break;
    case FrameType::kGoAway: {
      auto body = wire::parse_goaway(frame.body);
      going_away_ = true;
      if (body.ok()) fail_calls_after(body->last_call_id);
      break;
    }
    case FrameType::kPing:
      wire::append_ping(channel_->out(), FrameType::kPong, frame.body);
      channel_->schedule_flush();
      break;
    case FrameType::kPong:
      break;
    case FrameType::kError: {
      auto body = wire::parse_error(frame.body);
      close(body.ok() ? Status(errc_from_wire(body->code), "server: " + body->message)
                      : body.status());
      return false;
    }
    default:
      breach = Status(Errc::kProtocolError, "unexpected " +
                                                std::string(wire::frame_type_name(type)) +
                                                " frame from server");
      break;
  }
  if (breach.ok()) return true;
  protocol_error(std::move(breach));
  return false;
}

bool Client::Connection::deliver(const Frame& frame) {
  std::string_view payload;
  auto header = wire::parse_response(frame.body, payload);
  if (!header.ok()) {
    protocol_error(header.status().message);
    return false;
  }
  PendingCall* const waiting = pending_.take(frame.header.call_id);
  if (waiting == nullptr) {
    // A streaming call's end, or a call that timed out or was cancelled:
    // ignored.
    streams_.router().on_response(frame.header.call_id, *header, payload);
    return true;
  }
  // The caller runs before this returns and may close the connection:
  // run() checks the channel before it reads on.
  waiting->answer(header->status, header->status == 0 ? payload : header->error_message,
                  batch_.read_at(), executor_);
  return true;
}

asio::awaitable<bool> Client::Connection::deliver_data(const Frame& frame) {
  Status s = co_await streams_.router().on_data(*channel_, frame);
  if (s.ok()) co_return true;
  if (s.code == Errc::kProtocolError) {
    protocol_error(std::move(s));
  } else {
    close(std::move(s));
  }
  co_return false;
}

void Client::Connection::fail_calls_after(std::uint32_t last_call_id) {
  const Status not_run(Errc::kUnavailable, "server is shutting down; call not run");
  streams_.router().fail_after(last_call_id, not_run);
  for (PendingCall* p : pending_.take_if([&](std::uint32_t id) { return id > last_call_id; })) {
    p->finish(not_run);
  }
}

void Client::Connection::protocol_error(std::string message) {
  protocol_error(Status(Errc::kProtocolError, std::move(message)));
}

void Client::Connection::protocol_error(Status why) {
  wire::append_error(channel_->out(), static_cast<std::uint16_t>(to_wire_errc(why.code)),
                     why.message);
  channel_->close_after_flush();
  fail(std::move(why));
}

void Client::Connection::fail(Status why) {
  if (state_ == State::kClosed) return;
  state_ = State::kClosed;
  counts_.closed();
  summary_.close(std::move(why));  // status() reads it from other threads
  const Status& why_closed = summary_.closed_status();
  for (PendingCall* p : pending_.take_all()) p->finish(why_closed);
  streams_.fail_all(why_closed);
  auth_.over();
  auth_.wake();
  keepalive_.cancel();
}

}  // namespace authrpc
