// Internal: one accepted connection, from preamble to close, as a single
// coroutine on its reactor's thread (read preamble → negotiate → serve calls
// → close). Owned by its Reactor's connection set while it runs; in-flight
// async and blocking calls hold it alive until they respond.
#pragma once

#include <asio/awaitable.hpp>
#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <unordered_map>

#include "auth/identity.h"
#include "rpc/call_stream.h"
#include "rpc/frame_channel.h"
#include "rpc/shm_stream.h"
#include "server/server_impl.h"

namespace authrpc {

class ServerConnection : public std::enable_shared_from_this<ServerConnection> {
 public:
  using Clock = std::chrono::steady_clock;

  ServerConnection(Server::Impl& server, Reactor& reactor, std::unique_ptr<Stream> stream);

  // The connection's whole life. `refuse` set: send it as an ERROR and close.
  asio::awaitable<void> run(Status refuse = {});
  // Stop taking calls (GOAWAY), finish in-flight ones, then close.
  void go_away();
  // Close now; in-flight results are dropped.
  void force_close();
  // Called by the reactor's sweeper every tick: enforces the negotiation,
  // idle and linger deadlines.
  void on_tick(Clock::time_point now);

  // The pre-authentication budget (server/preauth_budget.h). The accept loop
  // sets the ticket before run(); leave_budget() once run() has ended.
  const std::string& peer() const noexcept { return peer_; }
  void set_budget_ticket(std::uint64_t ticket) noexcept { budget_ticket_ = ticket; }
  void leave_budget();
  // The budget gave this connection's place to a newer one: if it is still
  // negotiating, SERVER_BUSY and close, without a log line (a storm would
  // make one per connection; ServerStats counts them).
  void shed();

 private:
  enum class State { kNegotiating, kServing, kGoingAway, kLingering };

  asio::awaitable<void> serve();
  // Ends the connection on the server's initiative: queues `error` (if any)
  // as an ERROR frame, sends it, then reads until the peer closes or 2 s pass
  // so that the frame is not destroyed by a reset.
  asio::awaitable<void> linger(std::optional<Status> error);
  asio::awaitable<void> close_for_protocol_error();
  void cancel_all_calls();
  void handle_request(const Frame& frame);
  void handle_cancel(std::uint32_t call_id);
  // Streaming calls (docs/DATAPLANE.md).
  void handle_stream_request(const Frame& frame);
  static Clock::time_point deadline_after(std::uint32_t timeout_ms);
  const Service::Method* admit_call(std::uint32_t call_id, std::string_view service,
                                    std::string_view method, Clock::time_point deadline,
                                    std::string_view& service_name, std::string_view& method_name);
  asio::awaitable<Status> handle_data(const Frame& frame);
  void handle_window_update(const Frame& frame);
  void handle_shm_hello(const Frame& frame);
  void handle_shm_ring(const Frame& frame);
  void handle_end_stream(const Frame& frame);
  // Descriptors that arrived without an SHM_RING frame to claim them: fatal_.
  void check_stray_descriptors();
  static bool is_call_frame(wire::FrameType type) noexcept;
  void start_stream_call(const Service::Method& method, std::string_view service_name,
                         std::string_view method_name, std::uint32_t call_id,
                         Clock::time_point deadline, std::string_view payload,
                         std::shared_ptr<CallStream> stream);
  // Connection-time authorization (mapping, proxy users); see negotiate_server.
  Status authorize_identity(Identity& id, std::string_view do_as);
  // Call-time ACL check: nullopt when allowed, else the reason (audited).
  Status authorize_call(std::string_view service, std::string_view method);
  void audit_authentication(std::string_view outcome, std::string_view mechanism,
                            std::string_view reason);
  void start_async_call(const Service::Method& method, std::string_view service_name,
                        std::string_view method_name, std::uint32_t call_id,
                        Clock::time_point deadline, std::string_view payload);
  void start_blocking_call(const Service::Method& method, std::string_view service_name,
                           std::string_view method_name, std::uint32_t call_id,
                           Clock::time_point deadline, std::string_view payload);
  void respond(std::uint32_t call_id, const Result<std::string>& result,
               Clock::time_point deadline);
  // A call's handler has returned: answers unless `cancelled` (the call's
  // own flag) is set.
  void finish_call(std::uint32_t call_id, const std::atomic<bool>* cancelled,
                   const Result<std::string>& result, Clock::time_point deadline);
  void flush_if_idle();
  void close_when_drained();

  Server::Impl& server_;
  Reactor& reactor_;
  std::shared_ptr<FrameChannel> channel_;
  std::string peer_;
  Clock::time_point deadline_;  // when on_tick acts; see on_tick()
  State state_ = State::kNegotiating;
  Identity identity_;
  std::unique_ptr<ServerAuthSession> spent_session_;  // see negotiate_server()
  std::vector<std::string> groups_;  // the effective user's groups, when authorization is on
  bool negotiation_timed_out_ = false;
  std::uint64_t budget_ticket_ = 0;
  bool authenticated_ = false;  // left the budget for max_connections
  bool shed_ = false;
  Status fatal_;  // why the server is closing the connection, if it is
  std::size_t in_flight_ = 0;
  std::uint32_t last_call_id_ = 0;
  Clock::time_point last_activity_;
  // The cancel flags of the async, blocking and stream calls running under
  // each id; a cancelled call leaves at CANCEL (its handler keeps the flag).
  std::unordered_map<std::uint32_t, std::shared_ptr<std::atomic<bool>>> cancel_flags_;
  std::unordered_map<std::uint32_t, std::shared_ptr<CallStream>> streams_;
  std::shared_ptr<ShmLink> shm_;  // set once the client's SHM_HELLO was accepted
  bool shm_answered_ = false;     // the client's SHM_HELLO was answered (accepted or not)
};

}  // namespace authrpc
