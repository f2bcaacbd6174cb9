#include "minibench/typed_calls.h"

#include <array>

#include "bench_echo.authrpc.h"

namespace minibench {
namespace {

using authrpc::bench::EchoStub;
using authrpc::bench::Record;

class EchoImpl final : public authrpc::bench::EchoService {
 public:
  authrpc::Result<Record> Echo(authrpc::CallContext&, const Record& request) override { return request; }
};

bool same(const Record& a, const Record& b) {
  return a.key() == b.key() && a.number() == b.number() && a.flag() == b.flag() && a.blob() == b.blob();
}

// One typed Echo call of `request` through `stub`, timed from before the
// call to the parsed reply; a reply other than the request is kDataLoss.
asio::awaitable<authrpc::Result<Clock::duration>> timed_typed_echo(EchoStub& stub, const Record& request) {
  const auto start = Clock::now();
  auto reply = co_await stub.AsyncEcho(request);
  const auto elapsed = Clock::now() - start;
  if (!reply.ok()) co_return reply.status();
  if (!same(*reply, request)) {
    co_return authrpc::Status(authrpc::Errc::kDataLoss, "authrpc.bench.Echo: wrong reply");
  }
  co_return elapsed;
}

Record small_record() {
  Record r;
  r.set_key("bench-01");
  r.set_number(1234567890123);
  r.set_flag(true);
  return r;
}

Record kib_record() {
  Record r;
  r.set_blob(std::string(1024, 'b'));
  return r;
}

}  // namespace

authrpc::Service typed_echo_service() {
  return authrpc::bench::EchoService::make_service(std::make_shared<EchoImpl>());
}

// A message, its encoding (the bytes row's payload) and both rows' samples.
struct TypedCalls::State {
  struct Message {
    std::string label;
    Record record;
    std::string encoded;
    Samples proto, bytes;
  };
  State(authrpc::Client& c, std::string t) : client(c), stub(c), transport(std::move(t)) {}
  std::string row(const Message& m, const char* api) const {
    return "calls/" + transport + " " + api + " " + m.label;
  }

  authrpc::Client& client;
  EchoStub stub;
  std::string transport;
  std::array<Message, 2> messages{message("small", small_record()), message("1KiB", kib_record())};

 private:
  static Message message(std::string label, Record record) {
    std::string encoded = record.SerializeAsString();
    return {std::move(label), std::move(record), std::move(encoded), {}, {}};
  }
};

TypedCalls::TypedCalls(authrpc::Client& client, std::string transport)
    : state_(std::make_unique<State>(client, std::move(transport))) {}

TypedCalls::~TypedCalls() = default;

void TypedCalls::add_to(std::vector<Measured>& group) {
  State& s = *state_;
  for (auto& m : s.messages) {
    group.push_back({[&s, &m]() { return timed_typed_echo(s.stub, m.record); }, &m.proto, {}, s.row(m, "proto")});
    group.push_back({[&s, &m]() { return timed_echo(s.client, m.encoded); }, &m.bytes, {}, s.row(m, "bytes")});
  }
}

void TypedCalls::report(Report& report, const std::string& method, const Row* floor, bool metrics) const {
  const State& s = *state_;
  for (const auto& m : s.messages) {
    for (const auto& [api, samples] : {std::pair{"proto", &m.proto}, std::pair{"bytes", &m.bytes}}) {
      Row row = compared_row(s.row(m, api), method, s.transport, *samples, floor);
      row.metrics = metrics;
      report.add(std::move(row));
    }
  }
  const auto& small = s.messages.front();
  report.add_target(s.row(small, "proto"), kTypedCallTarget, s.row(small, "bytes"));
}

}  // namespace minibench
