// Internal: one accepted connection, from preamble to close, as a single
// coroutine on its reactor's thread (read preamble → negotiate → serve calls
// → close). Owned by its coroutine while it runs (the Reactor's connection
// list only links it); in-flight async and blocking calls hold it alive
// until they respond. An authenticated connection that has been quiet a
// while is parked: its coroutines end and a plain wait on the socket holds
// it, which starts serving again when input arrives (docs/DESIGN.md, "Idle
// connections park").
//
// Its jobs are the connection's life and the unary calls' path (admit,
// dispatch, respond). The rest is its members', each a value with one job
// (docs/DESIGN.md, "The connection classes, split by job"): who the peer is
// (ConnectionPeer), its place in the pre-authentication budget
// (PreauthPlace), its deadlines (IdleDeadlines), its counts
// (ServerConnectionCounts), the method cache (MethodCache), the calls
// running off the inline path (RunningCalls), its memory (MemoryShare),
// shared memory (ConnectionShm), streaming calls' frames (CallRouter,
// rpc/call_router.h), and authorization and audit (CallAdmission).
#pragma once

#include <asio/awaitable.hpp>
#include <atomic>
#include <chrono>
#include <memory>
#include <optional>

#include "authrpc/auth/identity.h"
#include "authrpc/auth/server_negotiation.h"
#include "authrpc/rpc/call_router.h"
#include "authrpc/rpc/frame_channel.h"
#include "authrpc/server/call_admission.h"
#include "authrpc/server/connection_peer.h"
#include "authrpc/server/connection_shm.h"
#include "authrpc/server/idle_deadlines.h"
#include "authrpc/server/memory_share.h"
#include "authrpc/server/method_cache.h"
#include "authrpc/server/preauth_place.h"
#include "authrpc/server/running_calls.h"
#include "authrpc/server/server_connection_counts.h"
#include "authrpc/server/server_impl.h"
#include "authrpc/server/server_metrics.h"

namespace authrpc {

class CallStream;

class ServerConnection final : public std::enable_shared_from_this<ServerConnection>,
                               public ConnectionList::Hook,
                               private ReadReady {
 public:
  using Clock = std::chrono::steady_clock;

  ServerConnection(Server::Impl& server, Reactor& reactor,
                   std::unique_ptr<ByteStream> byte_stream);
  // Leaves the reactor's list if it is still in one: only when its
  // handlers were abandoned at stop (release() unlinks it otherwise).
  ~ServerConnection();

  // The connection's life up to its first parking (or its end). `refuse`
  // set: send it as an ERROR and close. The caller spawns it and calls
  // run_ended() when it returns; the connection then ends (count_close(),
  // leaves the reactor's list and the budget) once no serving coroutine and
  // no parked wait is left.
  asio::awaitable<void> run(Status refuse = {});
  void run_ended() { release(); }
  // Stop taking calls (GOAWAY), finish in-flight ones, then close.
  void go_away();
  // Close now; in-flight results are dropped.
  void force_close();
  // Called by the reactor's sweeper every tick: enforces the negotiation,
  // idle and linger deadlines.
  void on_tick(Clock::time_point now);

  // The pre-authentication budget (server/preauth_budget.h). The accept loop
  // sets the ticket before run() (none: the connection is refused and
  // counts nowhere); the connection leaves the budget when it ends.
  const std::string& peer() const noexcept { return peer_.address; }
  void set_budget_ticket(std::uint64_t ticket) noexcept { place_.set_ticket(ticket); }
  // The budget gave this connection's place to a newer one: if it is still
  // negotiating, SERVER_BUSY and close, without a log line (a storm would
  // make one per connection; ServerStats counts them).
  void shed();

 private:
  using State = ConnectionPhase;

  // A call that passed admit_call(), as its handler sees it. The names view
  // the server's service table, which outlives every call.
  struct AdmittedCall : MethodCache::Found {
    std::uint32_t call_id;
    Clock::time_point deadline;
  };

  // The steps of run(), synchronous so that a session pays for no further
  // coroutine frame. preamble_read: the preamble's outcome `status` (TLS
  // handshake metrics, a shed or timed-out connection's reason); false when
  // the connection ends here, `status` then the ERROR to send (OK: none).
  bool preamble_read(Status& status);
  ChannelInfo channel_info() const;
  ServerNegotiationHooks negotiation_hooks();
  // Authenticated: counts and audits it, lifts the frame limit to the
  // server's and answers the calls pipelined behind AUTH_SUCCESS.
  void start_serving(const ServerNegotiationHooks& hooks, Clock::time_point accepted);
  // Negotiation failed (`ending`: the server's own reason, if it had one):
  // counts, logs and audits it, then lingers so that the ERROR arrives.
  asio::awaitable<void> negotiation_failed(Status why, PreauthPlace::Ending ending,
                                           const ServerNegotiationHooks& hooks);
  // Serves calls until the connection ends, or until the sweeper has
  // interrupted its idle read (on_tick): then it parks. `woken`: from
  // parking (readable()); if all it gets are keepalive PINGs, it parks
  // again as soon as they are answered.
  asio::awaitable<void> serve(bool woken = false);
  // The steps of serve(), synchronous for the same reason. route_frame
  // handles the frames serve() does not (it does REQUEST, and DATA with a
  // call id); data_failed a DATA frame's failure (a protocol error is
  // returned, any other closes the connection);
  // ended_quietly whether a failed read ends the connection without an
  // ERROR; quiet whether it may park now.
  Status route_frame(const Frame& frame);
  Status data_failed(Status why);
  bool ended_quietly(const Status& read) const noexcept;
  bool quiet() const noexcept;
  // A call came after the identity's expiry: logs it and returns what the
  // connection closes with.
  Status credentials_expired_ending();
  // Waits for input without a coroutine (ByteStream::wait_readable); the
  // wait holds the connection. readable() serves again, or ends it.
  void park();
  void readable(std::error_code ec) override;
  // One of the connection's holds (its serving coroutine, its parked wait)
  // is gone: at the last, the connection ends.
  void release();
  // run() ended: counts the close (metrics) with its reason.
  void count_close();
  // Ends the connection on the server's initiative: queues `error` (if any)
  // as an ERROR frame, sends it, then reads until the peer closes or 2 s pass
  // so that the frame is not destroyed by a reset.
  asio::awaitable<void> linger(std::optional<Status> error);
  // The client broke the protocol: counts and logs `why`, sends it as ERROR
  // and lingers.
  asio::awaitable<void> close_for_protocol_error(Status why);
  void cancel_all_calls();
  // Each returns OK, or the protocol error the connection ends with.
  Status handle_request(const Frame& frame);
  Status handle_cancel(const Frame& frame);
  // Streaming calls (docs/DATAPLANE.md).
  Status handle_stream_request(const Frame& frame);
  static Clock::time_point deadline_after(std::uint32_t timeout_ms);
  // A new call's id (`frame`: the frame type that opened it, for the
  // message): the protocol error if a call still outstanding uses it, else
  // OK, the id then marked used.
  Status claim_call_id(std::uint32_t call_id, std::string_view frame);
  // What every call passes before it runs: the server is serving, the
  // method exists, the caller may call it, and it was opened the way it
  // executes (`streaming`: by STREAM_REQUEST). On refusal, responds with
  // the typed error and returns nullopt.
  std::optional<AdmittedCall> admit_call(std::uint32_t call_id, std::string_view service,
                                         std::string_view method, Clock::time_point deadline,
                                         bool streaming);
  // Runs an admitted call's handler the way its method asks
  // (Service::Method::execution): inline, as a coroutine on this thread
  // (async and streaming methods; `stream` set for the latter) or on the
  // blocking pool. A handler's exception becomes the call's status
  // (server/handler_outcome.h).
  void dispatch(const AdmittedCall& call, std::string_view payload,
                std::shared_ptr<CallStream> stream);
  // Those ways; run_inline answers at once, the others through finish_call.
  void run_inline(const AdmittedCall& call, std::string_view payload);
  // An inline EncodingHandler: its response encoded in the output itself.
  void run_inline_encoded(const AdmittedCall& call, CallContext& ctx, std::string_view payload);
  void run_blocking(const AdmittedCall& call, std::string_view payload,
                    RunningCalls::Flag cancelled, Clock::time_point started);
  void run_coroutine(const AdmittedCall& call, std::string_view payload,
                     RunningCalls::Flag cancelled, std::shared_ptr<CallStream> stream,
                     Clock::time_point started);
  // `cells`: the method's metrics (null: metrics off, or the call named no
  // method and counts as "unknown").
  void respond(std::uint32_t call_id, const Result<std::string>& result,
               Clock::time_point deadline, ServerMetrics::Method* cells);
  // What a call whose handler ended with `handler_status` answers: its
  // error, or DEADLINE_EXCEEDED for a success past `deadline`; counted in
  // the method's metrics. nullopt: the connection is closed, nothing to
  // write.
  std::optional<std::uint16_t> answer_code(const Status& handler_status, Clock::time_point deadline,
                                           ServerMetrics::Method* cells);
  // The RESPONSE for a `code` other than 0 that answer_code() chose.
  void append_error(std::uint32_t call_id, std::uint16_t code, const Status& handler_status);
  // A call's handler has returned: answers unless `cancelled` (the call's
  // own flag) is set.
  void finish_call(std::uint32_t call_id, const std::atomic<bool>* cancelled,
                   const Result<std::string>& result, Clock::time_point deadline,
                   ServerMetrics::Method* cells, Clock::time_point started);
  // No further frame is buffered: sends what the batch queued.
  void end_batch();
  void close_when_drained();
  ServerMetrics* metrics() const noexcept { return counts_.metrics(); }  // null: metrics off

  Server::Impl& server_;
  Reactor& reactor_;
  ServerConnectionCounts counts_;
  std::shared_ptr<FrameChannel> channel_;
  ConnectionPeer peer_;
  CallAdmission admission_;
  IdleDeadlines deadlines_;  // when on_tick acts
  CallRouter streams_;
  MethodCache methods_;  // the last call's method (handle_request, admit_call)
  RunningCalls calls_;
  MemoryShare memory_;
  PreauthPlace place_;
  ConnectionShm shm_;
  State state_ = State::kNegotiating;
  // What keeps the connection's life going: its coroutine (run(), later
  // serve() again after a parking) and its parked wait. Both may be under
  // way for a moment (a wait started while the coroutine unwinds).
  std::uint8_t holds_ = 1;  // run(), spawned by the accept loop
};

}  // namespace authrpc
