// The typed rows of `minibench calls --api proto|all`: on the calls row's
// open connection, unary calls of authrpc.bench.Echo
// (minibench/bench_echo.proto, inline like sys.echo) through its generated
// stub, each beside sys.echo calls of the bytes API that send the same
// encoded message, so that the two rows of a message differ by the protobuf
// codec alone (encode and parse on each side). Two messages: "small" (an
// 8-byte string, an int64 and a bool: 19 bytes encoded) and "1KiB" (a bytes
// field of 1024 bytes: 1027 bytes encoded). run_calls() (calls.h) measures
// them in the same blocks as its other rows and the ping-pong floor.
//
// Rows "calls/<transport> proto small", "calls/<transport> bytes small",
// "calls/<transport> proto 1KiB" and "calls/<transport> bytes 1KiB"; target:
// proto small p50 ≤ kTypedCallTarget × bytes small p50.
//
// typed_echo_service() is the server side, which the server child
// (server_child.h) registers.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "authrpc/client/client.h"
#include "authrpc/server/service.h"
#include "minibench/report.h"
#include "minibench/schedule.h"

namespace minibench {

inline constexpr double kTypedCallTarget = 1.05;

// authrpc.bench.Echo, whose Echo answers with the request.
authrpc::Service typed_echo_service();

// The typed rows of one transport: their stub, messages and samples.
class TypedCalls {
 public:
  // Calls go over `client`, which must outlive this.
  TypedCalls(authrpc::Client& client, std::string transport);
  ~TypedCalls();
  TypedCalls(const TypedCalls&) = delete;
  TypedCalls& operator=(const TypedCalls&) = delete;

  // Appends the rows' iterations to `group`; they time into this object,
  // which must outlive the group's run.
  void add_to(std::vector<Measured>& group);
  // Adds the measured rows, each compared with `floor` (null: none), and
  // the target.
  void report(Report& report, const std::string& method, const Row* floor, bool metrics) const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace minibench
