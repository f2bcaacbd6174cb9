#include "client/client.h"

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/dispatch.hpp>
#include <asio/post.hpp>
#include <asio/redirect_error.hpp>
#include <asio/steady_timer.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/use_future.hpp>
#include <cstring>
#include <mutex>
#include <unordered_map>

#include "auth/client_negotiation.h"
#include "client/client_tls.h"
#include "rpc/deadline_queue.h"
#include "rpc/frame_channel.h"
#include "rpc/messages.h"
#include "rpc/parked_handler.h"

namespace authrpc {

using Clock = std::chrono::steady_clock;
using wire::FrameType;

// The connection behind a Client. Everything but the mutex-guarded summary
// runs on the connection's executor; the reader coroutine (run) owns a
// reference, so the connection outlives its Client until the reader ends.
class Client::Connection : public std::enable_shared_from_this<Client::Connection>,
                           public ClientStreamOwner {
 public:
  Connection(asio::any_io_executor ex, ClientOptions options)
      : executor_(std::move(ex)), options_(std::move(options)),
        negotiation_deadline_(*this) {}

  asio::awaitable<Status> open() {
    const auto deadline = Clock::now() + options_.connect_timeout;
    if (Status s = validate_client_policies(options_); !s.ok()) co_return s;
    // Plaintext: straight to the transport, one coroutine fewer per connect.
    // (No co_await inside ?: — GCC 12 miscompiles it.)
    auto connecting = client_tries_tls(options_)
                          ? connect_stream(executor_, options_, deadline)
                          : transport_for(options_.endpoint.scheme)
                                .connect(executor_, options_.endpoint, deadline);
    auto stream = co_await std::move(connecting);
    if (!stream.ok()) co_return stream.status();
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

  asio::awaitable<Status> wait_authenticated() {
    while (state_ == State::kHolding || state_ == State::kOptimistic) {
      if (!auth_event_) auth_event_.emplace(executor_);
      auth_event_->expires_at(Clock::time_point::max());
      std::error_code ec;
      co_await auth_event_->async_wait(asio::redirect_error(asio::use_awaitable, ec));
    }
    co_return state_ == State::kReady ? Status() : closed_status_;
  }

  // `self` (this connection) keeps it alive while the call waits.
  asio::awaitable<Result<std::string>> call([[maybe_unused]] std::shared_ptr<Connection> self,
                                            std::string_view service, std::string_view method,
                                            std::string_view request, CallOptions call_options) {
    if (state_ == State::kClosed) co_return closed_status_;
    if (going_away_) co_return Status(Errc::kUnavailable, "server is shutting down (GOAWAY)");
    const auto timeout = call_options.timeout.count() > 0 ? call_options.timeout
                                                          : options_.default_call_timeout;
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
    // mechanism it drops pipelined requests and we send them again.
    if (state_ == State::kOptimistic) held_.append(out, start, std::string::npos);
    if (state_ != State::kHolding) channel_->flush_now();

    // The caller waits with its handler parked in `pending`, completed once
    // by the response, a failure, the deadline, or the context's shutdown.
    Pending pending(*this, id);
    pending_[id] = &pending;
    deadlines_->add(pending, deadline, executor_);
    co_await asio::async_initiate<const asio::use_awaitable_t<>&, void()>(
        [&pending](auto handler) { pending.park(std::move(handler)); }, asio::use_awaitable);
    if (!pending.done) {
      if (state_ == State::kReady && !channel_->closed()) {
        wire::append_cancel(channel_->out(), id);
        channel_->schedule_flush();
      }
      co_return Status(Errc::kDeadlineExceeded,
                       std::string(service) + "." + std::string(method) + " timed out after " +
                           std::to_string(timeout.count()) + " ms");
    }
    co_return std::move(pending.result);
  }

  asio::awaitable<Result<std::shared_ptr<CallStream>>> open_stream(std::string_view service,
                                                                   std::string_view method,
                                                                   std::string_view request,
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
    stream->set_on_local_failure(
        [weak = weak_from_this(), id](const Status&) {
          if (auto self = weak.lock()) self->cancel_stream(id);
        });
    streams_[id] = stream;
    channel_->flush_now();
    co_return stream;
  }

  void cancel_stream(std::uint32_t call_id) override {
    if (streams_.erase(call_id) == 0) return;
    if (state_ == State::kReady && !channel_->closed()) {
      wire::append_cancel(channel_->out(), call_id);
      channel_->schedule_flush();
    }
  }

  void close(Status why) {
    if (state_ == State::kClosed) return;
    fail(std::move(why));
    if (channel_) channel_->close();
  }

  std::string mechanism() const {
    std::lock_guard lock(summary_mu_);
    return mechanism_;
  }
  std::string authenticated_user() const {
    std::lock_guard lock(summary_mu_);
    return server_user_;
  }
  Status status() const {
    std::lock_guard lock(summary_mu_);
    return summary_status_;
  }
  const asio::any_io_executor& executor() const noexcept { return executor_; }
  // Set in open(), before the Client is handed out; read-only afterwards.
  const std::optional<TlsInfo>& tls_info() const noexcept { return tls_info_; }

 private:
  enum class State {
    kHolding,     // negotiating; calls wait in held_
    kOptimistic,  // our last token is queued; calls follow it (and are kept in held_)
    kReady,       // authenticated
    kClosed,
  };

  // Closes the channel if negotiation is not over by the connect deadline.
  class NegotiationDeadline final : public DeadlineQueue::Entry {
   public:
    explicit NegotiationDeadline(Connection& c) : connection_(c) {}
    ~NegotiationDeadline() { cancel(); }

   private:
    void expired() override {
      if (connection_.state_ != State::kHolding && connection_.state_ != State::kOptimistic) return;
      connection_.negotiation_timed_out_ = true;
      connection_.channel_->close();
    }
    Connection& connection_;
  };

  // A unary call waiting for its response: lives in the frame of call(),
  // found by call id in pending_ and queued in the context's DeadlineQueue —
  // always, even without a deadline (time_point::max() costs a tail insert
  // and arms nothing), so that a context shutting down with calls waiting
  // lets go of their handlers. Completed exactly once: finish() (response
  // or failure) or expired() (deadline) posts the parked handler.
  class Pending final : public DeadlineQueue::Entry {
   public:
    Pending(Connection& c, std::uint32_t id) : connection_(c), id_(id) {}
    ~Pending() override {
      cancel();
      if (registered_) connection_.pending_.erase(id_);
    }
    template <typename Handler>
    void park(Handler&& handler) {
      handler_.park(std::forward<Handler>(handler));
    }
    // The caller has been taken out of pending_ already. The waiting call
    // resumes through its executor.
    void finish(Result<std::string> outcome) {
      settle(std::move(outcome));
      handler_.post();
    }
    // The same, but a caller waiting on `current` (the reader's executor)
    // resumes inside this call: it sees its response without another turn
    // of the event loop (which would first poll the reactor).
    void finish_here(Result<std::string> outcome, const asio::any_io_executor& current) {
      settle(std::move(outcome));
      handler_.complete_here(current);  // `*this` may be gone after this
    }

    bool done = false;
    Result<std::string> result = Status(Errc::kInternal, "no result");

   private:
    void settle(Result<std::string> outcome) {
      registered_ = false;
      result = std::move(outcome);
      done = true;
      cancel();  // off the deadline queue
    }
    void expired() override {  // the deadline passed: `done` stays false
      registered_ = false;
      connection_.pending_.erase(id_);
      handler_.post();
    }
    void abandoned() noexcept override { handler_.reset(); }

    Connection& connection_;
    std::uint32_t id_;
    bool registered_ = true;
    ParkedHandler handler_;
  };

  asio::awaitable<void> run() {
    // Start once the turn that connected is over: calls the connecting
    // coroutine makes right away (wait_for_authentication off) are then
    // held already and leave with the HELLO in one write, and the reader
    // waits for the reply without another turn of the loop.
    co_await asio::post(executor_, asio::use_awaitable);
    auto negotiated = co_await negotiate_client(
        *channel_, options_.mechanisms, info_, [this](NegotiationEvent event) {
          if (event == NegotiationEvent::kFinalTokenQueued) {
            channel_->out().append(held_);
            state_ = State::kOptimistic;
          } else {
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
      close(std::move(why));
      co_return;
    }
    held_.clear();
    held_.shrink_to_fit();
    state_ = State::kReady;
    {
      std::lock_guard lock(summary_mu_);
      mechanism_ = negotiated->mechanism;
      server_user_ = negotiated->server_user;
    }
    server_features_ = negotiated->server_features;
    if ((server_features_ & wire::kFeatureStreams) && (server_features_ & wire::kFeatureShm)) {
      shm_ = ShmLink::offer(*channel_, options_.shm);
      if (shm_) channel_->schedule_flush();
    }
    if (auth_event_) auth_event_->cancel();

    for (;;) {
      auto incoming = channel_->buffered_frame();
      if (!incoming) incoming = co_await channel_->read_frame();
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
      switch (frame->header.type) {
        case FrameType::kResponse:
          if (!deliver(*frame)) co_return;
          // The caller may have closed the connection meanwhile (it ran
          // inside deliver()): nothing left to read.
          if (state_ == State::kClosed) co_return;
          // Let the callers we just woke run before we wait for more input.
          if (!channel_->frame_buffered()) {
            co_await asio::post(executor_, asio::use_awaitable);
            spent_session_.reset();  // see negotiate_client()
          }
          break;
        case FrameType::kData:
          if (!co_await deliver_data(*frame)) co_return;
          break;
        case FrameType::kShmAccept: {
          Status s = shm_ ? shm_->on_accept(frame->body)
                          : Status(Errc::kProtocolError, "SHM_ACCEPT without SHM_HELLO");
          if (!s.ok()) {
            protocol_error(std::move(s));
            co_return;
          }
          break;
        }
        case FrameType::kShmRing: {
          if (!shm_ || !shm_->active()) {
            protocol_error(Status(Errc::kProtocolError, "SHM_RING without shared memory"));
            co_return;
          }
          auto ring = take_shm_ring(*shm_, *channel_, *frame);
          if (!ring.ok()) {
            protocol_error(ring.status());
            co_return;
          }
          const auto it = streams_.find(frame->header.call_id);
          if (it == streams_.end()) break;  // ended: dropping the ring tells the writer
          if (Status s = it->second->attach_shm_ring(shm_, std::move(*ring)); !s.ok()) {
            it->second->fail(s);
            cancel_stream(frame->header.call_id);
          }
          break;
        }
        case FrameType::kWindowUpdate: {
          auto increment = wire::parse_window_update(frame->body);
          if (!increment.ok()) {
            protocol_error(increment.status());
            co_return;
          }
          const auto it = streams_.find(frame->header.call_id);
          if (it == streams_.end()) break;
          if (Status s = it->second->on_window_update(*increment); !s.ok()) {
            protocol_error(std::move(s));
            co_return;
          }
          break;
        }
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
          protocol_error("unexpected " + std::string(wire::frame_type_name(frame->header.type)) +
                         " frame from server");
          co_return;
      }
    }
  }

  bool deliver(const Frame& frame) {
    std::string_view payload;
    auto header = wire::parse_response(frame.body, payload);
    if (!header.ok()) {
      protocol_error(header.status().message);
      return false;
    }
    const auto it = pending_.find(frame.header.call_id);
    if (it == pending_.end()) {
      if (const auto s = streams_.find(frame.header.call_id); s != streams_.end()) {
        end_stream_call(s, *header, payload);
      }
      return true;  // timed out or cancelled: ignore
    }
    Pending& p = *it->second;
    pending_.erase(it);
    // The caller runs before this returns and may close the connection:
    // run() checks the channel before it reads on.
    if (header->status == 0) {
      p.finish_here(std::string(payload), executor_);
    } else {
      p.finish_here(Status(errc_from_wire(header->status), std::string(header->error_message)),
                    executor_);
    }
    return true;
  }

  // The RESPONSE that ends a streaming call: messages queued before it are
  // still read, then its status (or end of stream).
  void end_stream_call(std::unordered_map<std::uint32_t, std::shared_ptr<CallStream>>::iterator it,
                       const wire::ResponseHeader& header, std::string_view payload) {
    auto stream = std::move(it->second);
    streams_.erase(it);
    const Status status = header.status == 0
                              ? Status()
                              : Status(errc_from_wire(header.status),
                                       std::string(header.error_message));
    stream->final_message().assign(payload);
    stream->end_output(status.ok() ? Status(Errc::kFailedPrecondition,
                                            "the server has ended the call")
                                   : status);
    stream->end_input(status);
  }

  // A DATA frame: its body goes straight into the stream's buffer. False if
  // the connection failed.
  asio::awaitable<bool> deliver_data(const Frame& frame) {
    const auto it = streams_.find(frame.header.call_id);
    std::shared_ptr<CallStream> stream = it == streams_.end() ? nullptr : it->second;
    Status s;
    if (!frame.body_pending) {
      if (!stream) co_return true;  // a call we cancelled or that timed out
      Payload message = stream->receive_buffer(frame.body.size());
      if (!frame.body.empty()) {
        std::memcpy(message.mutable_data(), frame.body.data(), frame.body.size());
      }
      s = stream->on_data(std::move(message));
    } else if (!stream) {
      s = co_await channel_->skip_body();
    } else {
      Payload message = stream->receive_buffer(frame.header.body_size());
      s = co_await channel_->read_body(message.mutable_data());
      if (s.ok()) s = stream->on_data(std::move(message));
      // Let the consumer take the message while it is still in the cache,
      // rather than read on while more input waits and queue up to a window.
      if (s.ok()) co_await asio::post(executor_, asio::use_awaitable);
    }
    if (s.ok()) co_return true;
    if (s.code == Errc::kProtocolError) {
      protocol_error(std::move(s));
    } else {
      close(std::move(s));
    }
    co_return false;
  }

  void fail_calls_after(std::uint32_t last_call_id) {
    for (auto it = streams_.begin(); it != streams_.end();) {
      if (it->first > last_call_id) {
        it->second->fail(Status(Errc::kUnavailable, "server is shutting down; call not run"));
        it = streams_.erase(it);
      } else {
        ++it;
      }
    }
    for (auto it = pending_.begin(); it != pending_.end();) {
      if (it->first > last_call_id) {
        Pending& p = *it->second;
        it = pending_.erase(it);
        p.finish(Status(Errc::kUnavailable, "server is shutting down; call not run"));
      } else {
        ++it;
      }
    }
  }

  void protocol_error(std::string message) {
    protocol_error(Status(Errc::kProtocolError, std::move(message)));
  }

  // Tells the server why we give up on the connection, then closes it.
  void protocol_error(Status why) {
    wire::append_error(channel_->out(), static_cast<std::uint16_t>(to_wire_errc(why.code)),
                       why.message);
    channel_->close_after_flush();
    fail(std::move(why));
  }

  void fail(Status why) {
    if (state_ == State::kClosed) return;
    state_ = State::kClosed;
    {
      std::lock_guard lock(summary_mu_);
      summary_status_ = why;
    }
    closed_status_ = std::move(why);
    const Status& why_closed = closed_status_;
    auto pending = std::move(pending_);
    pending_.clear();
    for (auto& [id, p] : pending) p->finish(why_closed);
    auto streams = std::move(streams_);
    streams_.clear();
    for (auto& [id, stream] : streams) stream->fail(why_closed);
    if (shm_) shm_->cancel_wait();
    negotiation_deadline_.cancel();
    if (auth_event_) auth_event_->cancel();
  }

  asio::any_io_executor executor_;
  ClientOptions options_;
  std::shared_ptr<FrameChannel> channel_;
  ChannelInfo info_;
  std::optional<TlsInfo> tls_info_;
  State state_ = State::kHolding;
  std::string held_;
  std::unique_ptr<ClientAuthSession> spent_session_;  // dropped after the first response
  std::unordered_map<std::uint32_t, Pending*> pending_;
  DeadlineQueue* deadlines_ = nullptr;  // this context's, looked up once in open()
  std::unordered_map<std::uint32_t, std::shared_ptr<CallStream>> streams_;
  std::uint32_t server_features_ = 0;
  std::shared_ptr<ShmLink> shm_;  // offered or active shared memory (unix:// only)
  std::uint32_t next_call_id_ = 1;
  bool going_away_ = false;
  bool negotiation_timed_out_ = false;
  Status closed_status_;
  std::optional<asio::steady_timer> auth_event_;  // made by the first wait_authenticated()
  NegotiationDeadline negotiation_deadline_;

  mutable std::mutex summary_mu_;
  std::string mechanism_;
  std::string server_user_;
  Status summary_status_;
};

Client::Client(std::shared_ptr<Connection> connection, std::unique_ptr<ClientRuntime> own_runtime,
               asio::io_context* context)
    : own_runtime_(std::move(own_runtime)), connection_(std::move(connection)), context_(context) {}

Client::~Client() { close(); }

asio::awaitable<Result<std::unique_ptr<Client>>> Client::async_connect(
    asio::any_io_executor executor, ClientOptions options) {
  auto connection = std::make_shared<Connection>(executor, std::move(options));
  Status s = co_await connection->open();
  if (!s.ok()) {
    connection->close(s);
    co_return s;
  }
  co_return std::unique_ptr<Client>(new Client(std::move(connection), nullptr, nullptr));
}

Result<std::unique_ptr<Client>> Client::connect(ClientRuntime& runtime, ClientOptions options) {
  asio::io_context& io = runtime.next_context();
  if (io.get_executor().running_in_this_thread()) {
    return Status(Errc::kFailedPrecondition, "blocking connect on the runtime's own IO thread");
  }
  auto future = asio::co_spawn(io, async_connect(io.get_executor(), std::move(options)),
                               asio::use_future);
  auto result = future.get();
  if (result.ok()) (*result)->context_ = &io;
  return result;
}

Result<std::unique_ptr<Client>> Client::connect(ClientOptions options) {
  auto runtime = std::make_unique<ClientRuntime>(1);
  auto result = connect(*runtime, std::move(options));
  if (!result.ok()) return result;
  (*result)->own_runtime_ = std::move(runtime);
  return result;
}

Status Client::check_not_on_io_thread() const {
  if (context_ != nullptr && context_->get_executor().running_in_this_thread()) {
    return {Errc::kFailedPrecondition,
            "blocking call on the client's own IO thread would deadlock; use async_call"};
  }
  return {};
}

asio::awaitable<Result<std::string>> Client::async_call(std::string_view service,
                                                        std::string_view method,
                                                        std::string_view request,
                                                        CallOptions options) {
  // Keep the connection alive even if the Client is destroyed meanwhile.
  // Not a coroutine of its own: the call's keeps the connection alive.
  return connection_->call(connection_, service, method, request, options);
}

std::future<Result<std::string>> Client::call_future(std::string_view service,
                                                     std::string_view method,
                                                     std::string_view request,
                                                     CallOptions options) {
  return asio::co_spawn(
      connection_->executor(),
      [connection = connection_, service = std::string(service), method = std::string(method),
       request = std::string(request), options]() -> asio::awaitable<Result<std::string>> {
        co_return co_await connection->call(connection, service, method, request, options);
      },
      asio::use_future);
}

Result<std::string> Client::call(std::string_view service, std::string_view method,
                                 std::string_view request, CallOptions options) {
  if (Status s = check_not_on_io_thread(); !s.ok()) return s;
  return call_future(service, method, request, options).get();
}

asio::awaitable<Result<std::unique_ptr<ClientStream>>> Client::async_open_stream(
    std::string_view service, std::string_view method, std::string_view request,
    StreamOptions options) {
  auto connection = connection_;
  auto stream = co_await connection->open_stream(service, method, request, options);
  if (!stream.ok()) co_return stream.status();
  co_return std::make_unique<ClientStream>(std::move(*stream), std::move(connection));
}

Result<nlohmann::json> Client::call_json(std::string_view service, std::string_view method,
                                         const nlohmann::json& request, CallOptions options) {
  auto raw = call(service, method,
                  request.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), options);
  if (!raw.ok()) return raw.status();
  auto parsed = nlohmann::json::parse(raw.value(), nullptr, false);
  if (parsed.is_discarded()) return Status(Errc::kDataLoss, "response is not valid JSON");
  return parsed;
}

asio::awaitable<Status> Client::async_wait_authenticated() {
  auto connection = connection_;
  co_return co_await connection->wait_authenticated();
}

std::string Client::mechanism() const { return connection_->mechanism(); }
std::string Client::authenticated_user() const { return connection_->authenticated_user(); }
std::optional<TlsInfo> Client::tls_info() const { return connection_->tls_info(); }
Status Client::connection_status() const { return connection_->status(); }
const asio::any_io_executor& Client::executor() const noexcept { return connection_->executor(); }

void Client::close() {
  if (!connection_) return;
  auto do_close = [connection = connection_] {
    connection->close(Status(Errc::kCancelled, "client closed the connection"));
  };
  if (context_ != nullptr && !context_->get_executor().running_in_this_thread()) {
    // Wait, so that the runtime (perhaps our own) outlives the close.
    std::promise<void> closed;
    asio::post(connection_->executor(), [&] {
      do_close();
      closed.set_value();
    });
    closed.get_future().wait();
    return;
  }
  // On the connection's own thread (the usual case for a coroutine client):
  // close at once, without wrapping the work for the executor.
  const auto* io = connection_->executor().target<asio::io_context::executor_type>();
  if (io != nullptr && io->running_in_this_thread()) {
    do_close();
    return;
  }
  asio::dispatch(connection_->executor(), do_close);
}

}  // namespace authrpc
