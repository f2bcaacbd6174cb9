// The floor of `minibench calls --concurrency K --depth D` (calls.h):
// many small messages in flight on raw connections, with the framing cost of
// authrpc's calls and nothing else — no call ids, no dispatch, no timers.
//
// A message is a 4-byte big-endian length and that many bytes. The client
// sends kEchoRequestSize-byte messages, the size of authrpc's REQUEST frame
// for a 1-byte sys.echo (12-byte frame header, "sys", "echo", a timeout, the
// byte); the server answers each with the first kEchoReplySize bytes of it,
// re-framed — the size of authrpc's RESPONSE frame (header, status, empty
// error text, the byte). So both move exactly authrpc's bytes each way.
//
// The server reads what has arrived, answers every whole message in it and
// sends the answers in one write (authrpc's server coalesces its responses
// the same way, rpc/frame_channel.h); a message split across reads waits
// for its rest. The client keeps D messages in flight: each answer read
// lets one new message go, and the new messages of one read leave in one
// write. Plaintext (tcp, unix) reads try the socket first and wait through
// the Asio loop only when it is empty, as authrpc's socket stream does; TLS
// is OpenSSL on the socket (the same SSL_CTX as authrpc's TLS), driven like
// floor/tls (floor.h), a batch of answers written as one SSL_write.
//
// Threading: a server's acceptors and connections run on the executors given
// to start (one acceptor per executor, all on one listening socket, as
// authrpc's IO threads share theirs); an EchoLoad on the executor it was
// connected on.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "minibench/floor.h"  // FloorServer, and the Asio, endpoint and TLS context names

namespace minibench {

inline constexpr std::size_t kEchoRequestSize = 28;  // = authrpc REQUEST, sys.echo of 1 byte
inline constexpr std::size_t kEchoReplySize = 17;    // = its RESPONSE

// An echo floor listener on `endpoint` (tcp://, port 0 for any; unix:@name
// or unix:/path), one acceptor per executor in `executors` (each a
// single-threaded io_context's). `tls` set: a TLS listener (tcp only).
authrpc::Result<std::unique_ptr<FloorServer>> start_echo_floor_server(
    const std::vector<asio::any_io_executor>& executors, const authrpc::Endpoint& endpoint,
    std::shared_ptr<authrpc::security::TlsServerContext> tls);

// One client connection of the floor, keeping messages in flight.
class EchoLoad {
 public:
  // Connects (and with `tls`, handshakes: the endpoint is then tcp://) on `ex`.
  static asio::awaitable<authrpc::Result<std::unique_ptr<EchoLoad>>> connect(
      asio::any_io_executor ex, authrpc::Endpoint endpoint,
      std::shared_ptr<authrpc::security::TlsClientContext> tls);
  virtual ~EchoLoad() = default;
  // Keeps `depth` messages in flight until `until`, then reads the answers
  // still due; appends each message's round trip (µs, from before the write
  // that carried it to the read that brought its answer) to `us`.
  virtual asio::awaitable<authrpc::Status> run(std::size_t depth, Clock::time_point until,
                                               std::vector<double>& us) = 0;
};

}  // namespace minibench
