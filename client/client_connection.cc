#include "authrpc/client/client_connection.h"

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/post.hpp>
#include <asio/redirect_error.hpp>
#include <asio/use_awaitable.hpp>

#include "authrpc/auth/client_negotiation.h"
#include "authrpc/client/client_policy.h"
#include "authrpc/client/client_metrics.h"
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
      negotiation_deadline_(*this),
      keepalive_(*this) {}

asio::awaitable<Status> Client::Connection::open() {
  connect_started_ = Clock::now();
  const auto deadline = connect_started_ + options_.connect_timeout;
  if (Status s = validate_client_policies(options_); !s.ok()) co_return s;
  if (options_.metrics) {
    metrics_ = &options_.metrics->extension<ClientMetrics>();
    metrics_transport_ = ClientMetrics::transport_of(options_.endpoint.scheme);
  }
  auto stream = co_await connect_byte_stream(executor_, options_, deadline);
  if (!stream.ok()) {
    Status why = unreachable(stream.status(), options_);
    if (metrics_) {
      metrics_->connected(ClientMetrics::Transport(metrics_transport_),
                          static_cast<std::uint16_t>(to_wire_errc(why.code)), {}, {});
    }
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
    tls_info_ = *tls;
  }
  channel_ = std::make_shared<FrameChannel>(std::move(*stream), options_.max_frame_size);

  deadlines_ = &DeadlineQueue::of(executor_);
  deadlines_->add(negotiation_deadline_, deadline, executor_);
  info_ = std::move(info);
  asio::co_spawn(executor_, [self = shared_from_this()]() { return self->run(); },
                 asio::detached);
  if (options_.wait_for_authentication) co_return co_await wait_authenticated();
  co_return Status();
}

asio::awaitable<Status> Client::Connection::wait_authenticated() {
  while (state_ == State::kHolding || state_ == State::kOptimistic) {
    if (!auth_event_) auth_event_.emplace(executor_);
    auth_event_->expires_at(Clock::time_point::max());
    std::error_code ec;
    co_await auth_event_->async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
  co_return state_ == State::kReady ? Status() : closed_status_;
}

asio::awaitable<Result<std::string>> Client::Connection::call(
    [[maybe_unused]] std::shared_ptr<Connection> self, std::string_view service,
    std::string_view method, std::string_view request, CallOptions call_options) {
  if (state_ == State::kClosed) co_return closed_status_;
  if (going_away_) co_return Status(Errc::kUnavailable, "server is shutting down (GOAWAY)");
  const auto timeout = call_options.timeout.count() > 0 ? call_options.timeout
                                                        : options_.default_call_timeout;
  // A call its caller makes while the reader delivers (the caller was
  // woken by a response) starts at that batch's read.
  const Clock::time_point sent =
      !metrics_ ? Clock::time_point() : delivering_ ? read_at_ : Clock::now();
  const auto deadline = timeout.count() > 0 ? Clock::now() + timeout : Clock::time_point::max();
  std::uint32_t id = next_call_id_++;
  if (id == 0) id = next_call_id_++;

  std::string& out = state_ == State::kHolding ? held_ : channel_->out();
  const std::size_t start = out.size();
  wire::append_request(out, id, {service, method, static_cast<std::uint32_t>(timeout.count())},
                       request);
  if (out.size() - start > options_.max_frame_size) {
    out.resize(start);
    co_return Status(Errc::kFrameTooLarge, "request of " + std::to_string(request.size()) +
                                               " bytes exceeds the frame limit");
  }
  // Until the server confirms authentication, keep a copy: if it refuses our
  // mechanism (or challenges our last message) it drops pipelined requests
  // and we send them again. It reads those it drops under its limit before
  // authentication (max_negotiation_frame_size, at least
  // kMinNegotiationFrameSize): a larger request, and every one after it,
  // waits for AUTH_SUCCESS.
  if (state_ != State::kReady) {
    const bool too_large = out.size() - start > wire::kMinNegotiationFrameSize;
    if (state_ == State::kOptimistic) {
      held_.append(out, start, std::string::npos);
      if (too_large) {
        out.resize(start);
        held_deferred_ = held_sent_;  // where this request starts
        state_ = State::kHolding;
      } else {
        held_sent_ = held_.size();
      }
    } else if (too_large && held_deferred_ == std::string::npos) {
      held_deferred_ = start;
    }
  }
  if (state_ != State::kHolding) {
    if (delivering_) {
      requests_held_ = true;  // the reader sends it with the rest of its batch
    } else {
      channel_->flush_now();
    }
  }

  // The caller waits with its handler parked in `pending`, completed once
  // by the response, a failure, the deadline, or the context's shutdown.
  Pending pending(*this, id);
  pending_.insert(id, &pending);
  deadlines_->add(pending, deadline, executor_);
  co_await pending.wait();
  if (metrics_) {
    const auto code = pending.done ? pending.code() : Errc::kDeadlineExceeded;
    metrics_->call(static_cast<std::uint16_t>(code),
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
  co_return pending.take_result();
}

asio::awaitable<Result<std::shared_ptr<CallStream>>> Client::Connection::open_stream(
    std::string_view service, std::string_view method, std::string_view request,
    StreamOptions stream_options) {
  if (state_ == State::kHolding || state_ == State::kOptimistic) {
    if (Status s = co_await wait_authenticated(); !s.ok()) co_return s;
  }
  if (state_ == State::kClosed) co_return closed_status_;
  if (going_away_) co_return Status(Errc::kUnavailable, "server is shutting down (GOAWAY)");
  if (!(server_features_ & wire::kFeatureStreams)) {
    co_return Status(Errc::kUnimplemented, "the server does not support streaming calls");
  }
  if (shm_ && shm_->state() == ShmLink::State::kOffered) {
    // One round trip, once per connection: streams then know whether
    // their messages may go through shared memory.
    auto link = shm_;
    co_await link->wait_answer();
    if (state_ == State::kClosed) co_return closed_status_;
  }
  const auto timeout = stream_options.timeout.count() > 0 ? stream_options.timeout
                                                          : options_.default_call_timeout;
  const auto deadline = timeout.count() > 0 ? Clock::now() + timeout : Clock::time_point::max();
  const std::uint32_t window =
      stream_options.window != 0 ? stream_options.window : kDefaultStreamWindow;
  std::uint32_t id = next_call_id_++;
  if (id == 0) id = next_call_id_++;
  std::string& out = channel_->out();
  const std::size_t start = out.size();
  wire::append_stream_request(
      out, id, {service, method, static_cast<std::uint32_t>(timeout.count()), window}, request);
  if (out.size() - start > options_.max_frame_size) {
    out.resize(start);
    co_return Status(Errc::kFrameTooLarge, "request of " + std::to_string(request.size()) +
                                               " bytes exceeds the frame limit");
  }
  channel_->set_direct_data_threshold(kDirectDataThreshold);
  auto stream = std::make_shared<CallStream>(channel_, id, window, 0, deadline);
  if (shm_) stream->set_shm(shm_);
  stream->set_on_local_failure([weak = weak_from_this(), id](const Status&) {
    if (auto self = weak.lock()) self->cancel_stream(id);
  });
  streams_.add(stream);
  channel_->flush_now();
  co_return stream;
}

void Client::Connection::cancel_stream(std::uint32_t call_id) {
  if (!streams_.take(call_id)) return;
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

std::string Client::Connection::mechanism() const {
  std::lock_guard lock(summary_mu_);
  return mechanism_;
}

std::string Client::Connection::authenticated_user() const {
  std::lock_guard lock(summary_mu_);
  return server_user_;
}

Status Client::Connection::status() const {
  std::lock_guard lock(summary_mu_);
  return closed_status_;
}

void Client::Connection::NegotiationDeadline::expired() {
  if (connection_.state_ != State::kHolding && connection_.state_ != State::kOptimistic) return;
  connection_.negotiation_timed_out_ = true;
  connection_.channel_->close();
}

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

Client::Connection::Pending::~Pending() {
  cancel();
  if (registered_) connection_.pending_.take(id_);
}

void Client::Connection::Pending::finish(Result<std::string> outcome) {
  settle();
  owned_.emplace(std::move(outcome));
  handler_.post();
}

void Client::Connection::Pending::answer(std::uint16_t status, std::string_view text,
                                         Clock::time_point read_at,
                                         const asio::any_io_executor& current) {
  settle();
  status_ = status;
  read_at_ = read_at;
  if (handler_.runs_here(current)) {
    in_place_ = true;
    text_ = text;
    handler_.resume_here();  // `*this` may be gone after this
    return;
  }
  if (status == 0) {
    owned_.emplace(std::string(text));
  } else {
    owned_.emplace(Status(errc_from_wire(status), std::string(text)));
  }
  handler_.post();
}

Result<std::string> Client::Connection::Pending::take_result() {
  if (!in_place_) return std::move(*owned_);
  if (status_ == 0) return Result<std::string>(std::in_place, text_);
  return Status(errc_from_wire(status_), std::string(text_));
}

Errc Client::Connection::Pending::code() const {
  if (in_place_) {
    return status_ == 0 ? Errc::kOk : to_wire_errc(make_error_code(errc_from_wire(status_)));
  }
  return owned_->ok() ? Errc::kOk : to_wire_errc(owned_->code());
}

void Client::Connection::Pending::settle() {
  registered_ = false;
  done = true;
  cancel();  // off the deadline queue
}

void Client::Connection::Pending::expired() {
  registered_ = false;
  connection_.pending_.take(id_);
  handler_.post();
}

asio::awaitable<void> Client::Connection::run() {
  // Start once the turn that connected is over: calls the connecting
  // coroutine makes right away (wait_for_authentication off) are then
  // held already and leave with the HELLO in one write, and the reader
  // waits for the reply without another turn of the loop.
  co_await asio::post(executor_, asio::use_awaitable);
  auto negotiated = co_await negotiate_client(
      *channel_, options_.mechanisms, info_, [this](NegotiationEvent event) {
        if (event == NegotiationEvent::kFinalMessageQueued) {
          held_sent_ = std::min(held_deferred_, held_.size());
          channel_->out().append(held_, 0, held_sent_);
          state_ = held_sent_ == held_.size() ? State::kOptimistic : State::kHolding;
        } else {
          held_sent_ = 0;
          state_ = State::kHolding;
        }
      },
      options_.do_as, &spent_session_);
  negotiation_deadline_.cancel();
  if (!negotiated.ok()) {
    Status why = negotiated.status();
    if (negotiation_timed_out_) {
      why = Status(Errc::kNegotiationTimeout,
                   "connect + negotiation took longer than " +
                       std::to_string(options_.connect_timeout.count()) + " ms");
    }
    if (metrics_) {
      metrics_->connected(ClientMetrics::Transport(metrics_transport_),
                          static_cast<std::uint16_t>(to_wire_errc(why.code)), {}, {});
    }
    // The ERROR negotiate_client() queued for the server (why we give up:
    // its logs and metrics count refusals by that code) leaves before the
    // caller hears of the failure and perhaps ends the event loop: a TLS
    // write completes asynchronously. One small frame into an almost empty
    // socket buffer; returns at once if the channel is closed.
    co_await channel_->wait_pending_below(0);
    close(std::move(why));
    co_return;
  }
  if (held_sent_ < held_.size()) {
    // Requests that waited for AUTH_SUCCESS (too large to travel before it).
    channel_->out().append(held_, held_sent_, std::string::npos);
    channel_->flush_now();
  }
  held_.clear();
  held_.shrink_to_fit();
  held_sent_ = 0;
  held_deferred_ = std::string::npos;
  state_ = State::kReady;
  if (metrics_) {
    metrics_->connected(ClientMetrics::Transport(metrics_transport_), 0, negotiated->mechanism,
                        Clock::now() - connect_started_);
    counted_open_ = true;
  }
  {
    std::lock_guard lock(summary_mu_);
    mechanism_ = std::move(negotiated->mechanism);
    server_user_ = std::move(negotiated->server_user);
  }
  server_features_ = negotiated->server_features;
  if ((server_features_ & wire::kFeatureStreams) && (server_features_ & wire::kFeatureShm)) {
    shm_ = ShmLink::offer(*channel_, options_.shm);
    if (shm_) channel_->schedule_flush();
  }
  if (auth_event_) auth_event_->cancel();
  if (options_.keepalive.count() > 0) keepalive_.arm();

  for (;;) {
    auto incoming = channel_->buffered_frame();
    if (!incoming || !incoming->ok() || (*incoming)->header.type != FrameType::kResponse) {
      flush_held_requests();  // the batch of responses is over
    }
    if (!incoming) {
      incoming = co_await channel_->read_frame();
      if (metrics_) read_at_ = Clock::now();
    }
    auto& frame = *incoming;
    if (!frame.ok()) {
      Status why = frame.status();
      if (why.code == Errc::kConnectionClosed) {
        why = going_away_ ? Status(Errc::kUnavailable, "server shut down the connection (GOAWAY)")
                          : Status(Errc::kConnectionClosed, "server closed the connection");
      } else if (why.code == Errc::kProtocolError || why.code == Errc::kFrameTooLarge) {
        protocol_error(std::move(why));
        co_return;
      }
      close(std::move(why));
      co_return;
    }
    // The frames of streaming calls go through the router; an error it
    // returns is the peer's breach of the protocol.
    Status breach;
    if (frame->header.call_id != 0 && wire::is_connection_frame_type(frame->header.type))
        [[unlikely]] {
      protocol_error(Status(Errc::kProtocolError,
                            std::string(wire::frame_type_name(frame->header.type)) +
                                " with call id " + std::to_string(frame->header.call_id)));
      co_return;
    }
    switch (frame->header.type) {
      case FrameType::kResponse: {
        delivering_ = true;
        const bool delivered = deliver(*frame);
        delivering_ = false;
        if (!delivered) co_return;
        // The caller may have closed the connection meanwhile (it ran
        // inside deliver()): nothing left to read.
        if (state_ == State::kClosed) co_return;
        if (!channel_->frame_buffered()) {
          flush_held_requests();
          // The callers we woke here have run already (inside deliver()),
          // and a read that finds nothing waits, letting the loop's other
          // work run. Only a reader that keeps finding input would not: it
          // lets that work run every kBatchesPerTurn batches. (A turn of
          // the loop after every batch cost an epoll_wait of its own per
          // batch.)
          if (++batches_in_turn_ >= kBatchesPerTurn) {
            batches_in_turn_ = 0;
            co_await asio::post(executor_, asio::use_awaitable);
          }
          spent_session_.reset();  // see negotiate_client()
        }
        break;
      }
      case FrameType::kData:
        if (!co_await deliver_data(*frame)) co_return;
        break;
      case FrameType::kShmAccept:
        breach = shm_ ? shm_->on_accept(frame->body)
                      : Status(Errc::kProtocolError, "SHM_ACCEPT without SHM_HELLO");
        break;
      case FrameType::kShmRing:
        breach = shm_ && shm_->active()
                     ? streams_.on_shm_ring(shm_, *channel_, *frame)
                     : Status(Errc::kProtocolError, "SHM_RING without shared memory");
        break;
      case FrameType::kWindowUpdate:
        breach = streams_.on_window_update(*frame);
        break;
      case FrameType::kGoAway: {
        auto body = wire::parse_goaway(frame->body);
        going_away_ = true;
        if (body.ok()) fail_calls_after(body->last_call_id);
        break;
      }
      case FrameType::kPing:
        wire::append_ping(channel_->out(), FrameType::kPong, frame->body);
        channel_->schedule_flush();
        break;
      case FrameType::kPong:
        break;
      case FrameType::kError: {
        auto body = wire::parse_error(frame->body);
        close(body.ok() ? Status(errc_from_wire(body->code), "server: " + body->message)
                        : body.status());
        co_return;
      }
      default:
        breach = Status(Errc::kProtocolError,
                        "unexpected " + std::string(wire::frame_type_name(frame->header.type)) +
                            " frame from server");
        break;
    }
    if (!breach.ok()) {
      protocol_error(std::move(breach));
      co_return;
    }
  }
}

bool Client::Connection::deliver(const Frame& frame) {
  std::string_view payload;
  auto header = wire::parse_response(frame.body, payload);
  if (!header.ok()) {
    protocol_error(header.status().message);
    return false;
  }
  Pending* const waiting = pending_.take(frame.header.call_id);
  if (waiting == nullptr) {
    // A streaming call's end, or a call that timed out or was cancelled:
    // ignored.
    streams_.on_response(frame.header.call_id, *header, payload);
    return true;
  }
  // The caller runs before this returns and may close the connection:
  // run() checks the channel before it reads on.
  waiting->answer(header->status, header->status == 0 ? payload : header->error_message,
                  read_at_, executor_);
  return true;
}

asio::awaitable<bool> Client::Connection::deliver_data(const Frame& frame) {
  Status s = co_await streams_.on_data(*channel_, frame);
  if (s.ok()) co_return true;
  if (s.code == Errc::kProtocolError) {
    protocol_error(std::move(s));
  } else {
    close(std::move(s));
  }
  co_return false;
}

void Client::Connection::flush_held_requests() {
  if (!requests_held_) return;
  requests_held_ = false;
  channel_->flush_now();
}

void Client::Connection::fail_calls_after(std::uint32_t last_call_id) {
  const Status not_run(Errc::kUnavailable, "server is shutting down; call not run");
  streams_.fail_after(last_call_id, not_run);
  for (Pending* p : pending_.take_if([&](std::uint32_t id) { return id > last_call_id; })) {
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
  if (counted_open_) {
    counted_open_ = false;
    metrics_->closed(ClientMetrics::Transport(metrics_transport_));
  }
  {
    // Written once, here; status() reads it from other threads.
    std::lock_guard lock(summary_mu_);
    closed_status_ = std::move(why);
  }
  const Status& why_closed = closed_status_;
  for (Pending* p : pending_.take_all()) p->finish(why_closed);
  streams_.fail_all(why_closed);
  if (shm_) shm_->cancel_wait();
  negotiation_deadline_.cancel();
  keepalive_.cancel();
  if (auth_event_) auth_event_->cancel();
}

}  // namespace authrpc
