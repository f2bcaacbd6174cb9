// Internal: the connection behind a Client, from connect to close. Its life
// reads as one coroutine, run(): negotiate → read frames and route them
// (RESPONSE to the unary call waiting for it, the frames of streaming calls
// through ClientStreams) → close. Unary calls wait in place (PendingCall, a
// DeadlineQueue entry in the caller's coroutine frame). It keeps its state,
// channel and unary calls; each other job is a value member with no pointer
// back to it (HeldRequests, ResponseBatch, PendingAuthentication,
// ClientStreams, ClientConnectionCounts, ConnectionSummary).
//
// Threading and ownership: everything but its ConnectionSummary runs on
// the connection's executor. Shared by its Client, by every call in flight
// and by its ClientStreams; the reader coroutine (run) owns a reference too,
// so the connection outlives its Client until the reader ends.
#pragma once

#include <asio/any_io_executor.hpp>
#include <asio/awaitable.hpp>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "authrpc/auth/client_negotiation.h"
#include "authrpc/auth/mechanism.h"
#include "authrpc/client/call_id_table.h"
#include "authrpc/client/client.h"
#include "authrpc/client/client_connection_counts.h"
#include "authrpc/client/client_stream.h"
#include "authrpc/client/client_streams.h"
#include "authrpc/client/connection_summary.h"
#include "authrpc/client/held_requests.h"
#include "authrpc/client/pending_authentication.h"
#include "authrpc/client/pending_call.h"
#include "authrpc/client/response_batch.h"
#include "authrpc/rpc/deadline_queue.h"

namespace authrpc {

class CallStream;
class FrameChannel;
struct Frame;

class Client::Connection : public std::enable_shared_from_this<Client::Connection>,
                           public ClientStreamOwner {
 public:
  Connection(asio::any_io_executor ex, ClientOptions options);

  // Connects and starts run(); returns once authenticated, or once the last
  // negotiation message is queued (ClientOptions::wait_for_authentication).
  asio::awaitable<Status> open();
  asio::awaitable<Status> wait_authenticated();
  // `self` (this connection) keeps it alive while the call waits.
  asio::awaitable<Result<std::string>> call(std::shared_ptr<Connection> self,
                                            std::string_view service, std::string_view method,
                                            std::string_view request, CallOptions call_options);
  // As call(), the response's payload read by `decode` (Client::async_call_decoded).
  asio::awaitable<Status> call_decoded(std::shared_ptr<Connection> self, std::string_view service,
                                       std::string_view method, std::string_view request,
                                       const ResponseDecoder& decode, CallOptions call_options);
  asio::awaitable<Result<std::shared_ptr<CallStream>>> open_stream(std::string_view service,
                                                                   std::string_view method,
                                                                   std::string_view request,
                                                                   StreamOptions stream_options);
  void cancel_stream(std::uint32_t call_id) override;
  // Closes the connection (idempotent): calls waiting fail with `why`.
  void close(Status why);

  std::string mechanism() const;
  std::string authenticated_user() const;
  Status status() const;
  const asio::any_io_executor& executor() const noexcept { return executor_; }
  // Set in open(), before the Client is handed out; read-only afterwards.
  const std::optional<TlsInfo>& tls_info() const noexcept { return summary_.tls(); }

 private:
  // The body of call() and call_decoded(): `take` turns the answered
  // PendingCall into the Outcome.
  template <typename Outcome, typename Take>
  asio::awaitable<Outcome> make_call(std::shared_ptr<Connection> self, std::string_view service,
                                     std::string_view method, std::string_view request,
                                     CallOptions call_options, Take take);
  using Clock = std::chrono::steady_clock;

  enum class State {
    kHolding,     // negotiating; calls wait in held_
    kOptimistic,  // our last message is queued; calls follow it (and held_ keeps a copy)
    kReady,       // authenticated
    kClosed,
  };

  // ClientOptions::keepalive: every interval, a PING if nothing was sent
  // during the last one. An entry of the context's DeadlineQueue, re-added
  // at the back of its lane each time, rather than a timer per connection.
  class Keepalive final : public DeadlineQueue::Entry {
   public:
    explicit Keepalive(Connection& c) : connection_(c) {}
    ~Keepalive() override { cancel(); }
    // Once authenticated; again after each interval.
    void arm();

   private:
    void expired() override;
    // Bytes written or queued so far: unchanged over an interval, nothing
    // was sent.
    std::uint64_t queued_total() const;
    Connection& connection_;
    std::uint64_t mark_ = 0;
  };

  // The connection's life after open(): negotiation, then the read loop.
  // Its steps, in order:
  asio::awaitable<void> run();
  // negotiate_client's events: calls follow the last message, or wait.
  void on_negotiation_event(NegotiationEvent event);
  // Negotiation failed with `why`: counted; returns the failure to report.
  Status negotiation_failed(Status why);
  // AUTH_SUCCESS: held requests leave, calls go straight out from now on.
  void become_ready(ClientNegotiationResult& negotiated);
  // The read loop's read failed (the server closed, or sent no frame).
  void read_failed(Status why);
  // Any frame but RESPONSE and DATA. False if the connection ended.
  bool route(const Frame& frame);
  // A RESPONSE: to its unary call or its streaming call. False if the
  // connection failed.
  bool deliver(const Frame& frame);
  // A DATA frame, through the router. False if the connection failed.
  asio::awaitable<bool> deliver_data(const Frame& frame);
  // GOAWAY: calls the server will not run fail with kUnavailable.
  void fail_calls_after(std::uint32_t last_call_id);
  void protocol_error(std::string message);
  // Tells the server why we give up on the connection, then closes it.
  void protocol_error(Status why);
  // The connection's end, decided once: every call waiting fails with `why`,
  // which later calls report too.
  void fail(Status why);

  asio::any_io_executor executor_;
  ClientOptions options_;
  ClientConnectionCounts counts_;
  std::shared_ptr<FrameChannel> channel_;
  // The channel as negotiation sees it, described by open(). A member rather
  // than run()'s argument: through co_spawn its five strings would be moved
  // three times per session.
  ChannelInfo info_;
  State state_ = State::kHolding;
  HeldRequests held_;
  CallIdTable<PendingCall> pending_;  // and the next call id
  DeadlineQueue* deadlines_ = nullptr;  // this context's, looked up once in open()
  ClientStreams streams_;
  bool going_away_ = false;
  ResponseBatch batch_;
  PendingAuthentication auth_;
  Keepalive keepalive_;
  ConnectionSummary summary_;
};

}  // namespace authrpc
