// Typed services (components/protobuf/, docs/PROTOBUF.md) end to end over
// real sockets: the test services of tests/protos/ (tests/testing/
// proto_items.h) through their generated stubs and as raw bytes, each
// execution kind and streaming kind, typed errors, unknown fields, ACLs and
// proxy users on proto methods, sys.describe, and protoc-gen-authrpc's
// refusals.
#include <google/protobuf/descriptor.h>
#include <google/protobuf/descriptor.pb.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <asio/co_spawn.hpp>
#include <asio/use_future.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>

#include "authrpc/auth/authz/authorizer.h"
#include "authrpc/auth/authz/authz_policy.h"
#include "authrpc/components/protobuf/service_schema.h"
#include "authrpc/security/base64url.h"
#include "tests/testing/proto_items.h"
#include "tests/testing/scoped_temp_dir.h"
#include "tests/testing/test_server.h"
#include "tests/testing/test_support.h"

namespace authrpc {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using test::Count;
using test::Failure;
using test::Item;
using test::ItemsStub;
using test::Summary;

constexpr std::string_view kItems = "authrpc.test.Items";

// An item with every kind of field: nested messages, a oneof, a map,
// repeated fields and a message of another package.
Item RichItem() {
  Item item;
  item.set_key("k1");
  item.set_value(std::string("\0\xff", 2));
  auto* tag = item.add_tags();
  tag->set_name("red");
  tag->set_weight(-3);
  (*item.mutable_counters())["reads"] = 7;
  item.mutable_nested()->add_values(1);
  item.mutable_nested()->add_values(2);
  item.mutable_nested()->mutable_child()->set_text("inner");
  return item;
}

// A server with the three test services, logging to a string.
class ProtoServer {
 public:
  explicit ProtoServer(std::function<void(ServerOptions&)> tweak = {}, std::string endpoint = "tcp:") {
    server_.endpoint(endpoint)
        .service(test::ItemsService::make_service(testing::make_items_service()))
        .service(test::TagsService::make_service(testing::make_tags_service()))
        .service(other::v2::ScaleService::make_service(testing::make_scale_service()))
        .log([this](LogLevel, std::string_view line) {
          std::lock_guard lock(mu_);
          log_.append(line).append("\n");
        });
    if (tweak) server_.options(std::move(tweak));
    const Status s = server_.start();
    EXPECT_TRUE(s.ok()) << s.to_string();
  }
  testing::TestServer& server() { return server_; }
  std::unique_ptr<Client> Connect(const std::string& user = "alice") {
    auto client = server_.client().simple(user).connect();
    EXPECT_TRUE(client.ok()) << client.status().to_string();
    return client.ok() ? std::move(*client) : nullptr;
  }
  std::string log() {
    std::lock_guard lock(mu_);
    return log_;
  }

 private:
  std::mutex mu_;
  std::string log_;  // before server_: the server logs until it is destroyed
  testing::TestServer server_;
};

// Runs `a` on the client's executor and waits for it.
template <typename T>
T OnClient(Client& client, asio::awaitable<T> a) {
  return asio::co_spawn(client.executor(), std::move(a), asio::use_future).get();
}

TEST(ProtoServiceTest, UnaryEachExecutionKindRoundTripsEveryFieldKind) {
  ProtoServer server;
  auto client = server.Connect();
  ASSERT_TRUE(client);
  ItemsStub stub(*client);
  const Item item = RichItem();
  struct Case {
    const char* name;
    std::function<Result<Item>()> call;
  } cases[] = {
      {"Echo (inline)", [&] { return stub.Echo(item); }},
      {"EchoAsync (coroutine)", [&] { return stub.EchoAsync(item); }},
      {"EchoBlocking (pool)", [&] { return stub.EchoBlocking(item); }},
      {"EchoFuture", [&] { return stub.EchoFuture(item).get(); }},
      {"EchoFuture, its stub gone before the call runs",
       [&] {
         auto future = ItemsStub(*client).EchoFuture(item);
         return future.get();
       }},
      {"AsyncEcho", [&] { return OnClient(*client, stub.AsyncEcho(item)); }},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    auto reply = c.call();
    ASSERT_TRUE(reply.ok()) << reply.status().to_string();
    EXPECT_EQ(reply->SerializeAsString(), item.SerializeAsString());
    EXPECT_EQ(reply->nested().child().text(), "inner");
    EXPECT_EQ(reply->counters().at("reads"), 7);
  }
}

TEST(ProtoServiceTest, UnknownFieldsAreKept) {
  ProtoServer server;
  auto client = server.Connect();
  ASSERT_TRUE(client);
  // Field 99 (a varint of 5), which items.proto does not define: a newer
  // client's field reaches this server's handler and comes back.
  const std::string request = RichItem().SerializeAsString() + std::string("\x98\x06\x05", 3);
  for (const char* method : {"Echo", "EchoAsync", "EchoBlocking"}) {
    auto reply = client->call(kItems, method, request);
    ASSERT_TRUE(reply.ok()) << method << ": " << reply.status().to_string();
    EXPECT_EQ(*reply, request) << method;
  }
}

// The server parses requests into messages it keeps for the next ones
// (service_binding.h, RecycledMessages): nothing of a request, known or
// unknown field, reaches a later one, whichever way the method runs.
TEST(ProtoServiceTest, ARequestLeavesNothingForTheNext) {
  ProtoServer server;
  auto client = server.Connect();
  ASSERT_TRUE(client);
  const std::string rich = RichItem().SerializeAsString() + std::string("\x98\x06\x05", 3);
  Item plain;
  plain.set_key("plain");
  for (const char* method : {"Echo", "EchoAsync", "EchoBlocking"}) {
    for (int round = 0; round < 3; ++round) {
      auto first = client->call(kItems, method, rich);
      ASSERT_TRUE(first.ok()) << method << ": " << first.status().to_string();
      EXPECT_EQ(*first, rich) << method;
      auto second = client->call(kItems, method, plain.SerializeAsString());
      ASSERT_TRUE(second.ok()) << method << ": " << second.status().to_string();
      EXPECT_EQ(*second, plain.SerializeAsString()) << method;
      auto broken = client->call(kItems, method, std::string("\xff\xff\xff\xff", 4));
      EXPECT_EQ(broken.code(), Errc::kInvalidArgument) << method;
    }
  }
}

TEST(ProtoServiceTest, RequestThatDoesNotParseIsInvalidArgument) {
  ProtoServer server;
  auto client = server.Connect();
  ASSERT_TRUE(client);
  const std::string garbage("\xff\xff\xff\xff", 4);
  for (const char* method : {"Echo", "EchoAsync", "EchoBlocking", "Fail"}) {
    auto reply = client->call(kItems, method, garbage);
    EXPECT_EQ(reply.code(), Errc::kInvalidArgument) << method << ": " << reply.status().to_string();
    EXPECT_THAT(reply.status().message, HasSubstr("authrpc.test."));
  }
  // A server-streaming call's opening message is its request.
  auto opened = OnClient(*client, client->async_open_stream(kItems, "List", garbage));
  ASSERT_TRUE(opened.ok()) << opened.status().to_string();
  auto end = OnClient(*client, (*opened)->finish());
  EXPECT_EQ(end.code(), Errc::kInvalidArgument) << end.status().to_string();
  // The server still serves.
  EXPECT_TRUE(ItemsStub(*client).Echo(RichItem()).ok());
}

TEST(ProtoServiceTest, HandlerErrorsReachTheCallerTyped) {
  ProtoServer server;
  auto client = server.Connect();
  ASSERT_TRUE(client);
  ItemsStub stub(*client);
  for (Errc code : {Errc::kNotFound, Errc::kPermissionDenied, Errc::kFailedPrecondition, Errc::kUnavailable}) {
    Failure failure;
    failure.set_code(static_cast<std::uint32_t>(code));
    failure.set_message("because " + std::to_string(failure.code()));
    auto reply = stub.Fail(failure);
    EXPECT_EQ(reply.code(), code);
    EXPECT_EQ(reply.status().message, failure.message());
  }
  Count count;
  auto missing = stub.Missing(count);
  EXPECT_EQ(missing.code(), Errc::kUnimplemented);
  EXPECT_THAT(missing.status().message, HasSubstr("authrpc.test.Items.Missing"));
}

TEST(ProtoServiceTest, ThrowingHandlerIsInternalWithDetailsOnlyInTheServerLog) {
  ProtoServer server;
  auto client = server.Connect();
  ASSERT_TRUE(client);
  Failure failure;
  failure.set_throw_exception(true);
  failure.set_message("db password is hunter2");
  auto reply = ItemsStub(*client).Fail(failure);
  ASSERT_EQ(reply.code(), Errc::kInternal);
  EXPECT_THAT(reply.status().message, Not(HasSubstr("hunter2")));
  EXPECT_THAT(reply.status().message, HasSubstr("server's log"));
  EXPECT_TRUE(testing::Eventually([&] { return server.log().find("hunter2") != std::string::npos; }));
  EXPECT_THAT(server.log(), HasSubstr("authrpc.test.Items.Fail call "));
  EXPECT_TRUE(ItemsStub(*client).Echo(RichItem()).ok());
}

TEST(ProtoServiceTest, ResponseOfAnotherSchemaIsDataLoss) {
  ProtoServer server;
  auto client = server.Connect();
  ASSERT_TRUE(client);
  proto::Channel channel(*client);
  // sys.echo answers with the request's bytes: not an Item encoding.
  Result<std::string> bytes = client->call("sys", "echo", std::string("\xff\xff", 2));
  ASSERT_TRUE(bytes.ok());
  auto reply = proto::to_response<Item>(bytes);
  EXPECT_EQ(reply.code(), Errc::kDataLoss);
  EXPECT_THAT(reply.status().message, HasSubstr("authrpc.test.Item"));
  // The coroutine call parses where the response arrived: the same. As an
  // Item, Summary's field 3 is a Tag whose one byte is no valid tag.
  Summary not_an_item;
  not_an_item.set_user("\x0f");
  auto async_reply = OnClient(*client, proto::async_call<Item>(channel, "sys", "echo", not_an_item, {}));
  EXPECT_EQ(async_reply.code(), Errc::kDataLoss) << async_reply.status().to_string();
  EXPECT_THAT(async_reply.status().message, HasSubstr("authrpc.test.Item"));
}

TEST(ProtoServiceTest, ServerStreamingReadsEachMessageThenTheEnd) {
  ProtoServer server({}, "unix:");  // streams over unix:// (shared memory when offered)
  auto client = server.Connect();
  ASSERT_TRUE(client);
  ItemsStub stub(*client);
  auto run = [&]() -> asio::awaitable<void> {
    Count count;
    count.set_count(5);
    count.set_prefix("item-");
    auto reader = co_await stub.List(count);
    EXPECT_TRUE(reader.ok()) << reader.status().to_string();
    if (!reader.ok()) co_return;
    for (std::uint32_t i = 0; i < 5; ++i) {
      auto item = co_await reader->read();
      EXPECT_TRUE(item.ok() && item->has_value()) << i;
      if (!item.ok() || !item->has_value()) co_return;
      EXPECT_EQ((*item)->key(), "item-" + std::to_string(i));
      EXPECT_EQ((*item)->number(), i);
    }
    auto end = co_await reader->read();
    EXPECT_TRUE(end.ok() && !end->has_value());
    EXPECT_TRUE((co_await reader->finish()).ok());
  };
  OnClient(*client, run());
}

TEST(ProtoServiceTest, ClientStreamingAndBidirectional) {
  ProtoServer server;
  auto client = server.Connect();
  ASSERT_TRUE(client);
  ItemsStub stub(*client);
  auto collect = [&]() -> asio::awaitable<Result<Summary>> {
    auto writer = co_await stub.Collect();
    if (!writer.ok()) co_return writer.status();
    for (const char* key : {"a", "b", "c"}) {
      Item item;
      item.set_key(key);
      if (Status s = co_await writer->write(item); !s.ok()) co_return s;
    }
    co_return co_await writer->finish();
  };
  auto summary = OnClient(*client, collect());
  ASSERT_TRUE(summary.ok()) << summary.status().to_string();
  EXPECT_EQ(summary->count(), 3u);
  EXPECT_THAT(summary->keys(), ::testing::ElementsAre("a", "b", "c"));
  EXPECT_EQ(summary->user(), "alice");

  // Chat echoes each message; the client ends its messages first and
  // still reads every answer.
  auto chat = [&]() -> asio::awaitable<std::vector<std::string>> {
    std::vector<std::string> keys;
    auto both = co_await stub.Chat();
    if (!both.ok()) co_return keys;
    for (const char* key : {"x", "y"}) {
      Item item;
      item.set_key(key);
      if (!(co_await both->write(item)).ok()) co_return keys;
    }
    both->end_writes();
    for (;;) {
      auto item = co_await both->read();
      if (!item.ok() || !item->has_value()) break;
      keys.push_back((*item)->key());
    }
    EXPECT_TRUE((co_await both->finish()).ok());
    co_return keys;
  };
  EXPECT_THAT(OnClient(*client, chat()), ::testing::ElementsAre("x", "y"));
}

TEST(ProtoServiceTest, StreamedRequestThatDoesNotParseOrNonEmptyOpeningIsInvalidArgument) {
  ProtoServer server;
  auto client = server.Connect();
  ASSERT_TRUE(client);
  auto run = [&](std::string opening, std::string message) -> asio::awaitable<Status> {
    auto stream = co_await client->async_open_stream(kItems, "Collect", opening);
    if (!stream.ok()) co_return stream.status();
    if (!message.empty()) (void)co_await (*stream)->write(message);
    auto end = co_await (*stream)->finish();
    co_return end.status();
  };
  EXPECT_EQ(OnClient(*client, run("", std::string("\xff\xff\xff", 3))).code, Errc::kInvalidArgument);
  EXPECT_EQ(OnClient(*client, run("opening", "")).code, Errc::kInvalidArgument);
}

TEST(ProtoServiceTest, SeveralServicesPackagesAndImports) {
  ProtoServer server;
  auto client = server.Connect();
  ASSERT_TRUE(client);
  Count count;
  count.set_count(9);
  count.set_prefix("heavy");
  auto tag = test::TagsStub(*client).Heaviest(count);
  ASSERT_TRUE(tag.ok()) << tag.status().to_string();
  EXPECT_EQ(tag->name(), "heavy");
  other::v2::Weigh weigh;
  for (int w : {2, 3, 5}) weigh.add_tags()->set_weight(w);
  auto total = other::v2::ScaleStub(*client).Total(weigh);
  ASSERT_TRUE(total.ok()) << total.status().to_string();
  EXPECT_EQ(total->weight(), 10);
  EXPECT_EQ(other::v2::ScaleService::kServiceName, "other.v2.Scale");
}

// sys.describe: each service with its methods, and for proto services the
// FileDescriptorSet from which a caller rebuilds the schema.
TEST(ProtoServiceTest, DescribeServesTheSchema) {
  ProtoServer server;
  auto client = server.Connect();
  ASSERT_TRUE(client);
  auto all_bytes = client->call("sys", "describe", "");
  ASSERT_TRUE(all_bytes.ok()) << all_bytes.status().to_string();
  const auto all = nlohmann::json::parse(*all_bytes);
  std::set<std::string> names;
  for (const auto& s : all["services"]) names.insert(s["name"].get<std::string>());
  EXPECT_THAT(names, ::testing::IsSupersetOf({"sys", "authrpc.test.Items", "authrpc.test.Tags", "other.v2.Scale"}));

  auto one = client->call_json("sys", "describe", {{"service", "authrpc.test.Items"}});
  ASSERT_TRUE(one.ok()) << one.status().to_string();
  ASSERT_EQ((*one)["services"].size(), 1u);
  const auto& items = (*one)["services"][0];
  EXPECT_EQ(items["codec"], "protobuf");
  auto bytes = security::base64url_decode(items["schema"].get<std::string>());
  ASSERT_TRUE(bytes.has_value());
  google::protobuf::FileDescriptorSet set;
  ASSERT_TRUE(set.ParseFromString(*bytes));
  google::protobuf::DescriptorPool pool;
  for (const auto& file : set.file()) ASSERT_NE(pool.BuildFile(file), nullptr) << file.name();
  const auto* service = pool.FindServiceByName("authrpc.test.Items");
  ASSERT_NE(service, nullptr);
  EXPECT_EQ(service->method_count(), 9);
  EXPECT_TRUE(service->FindMethodByName("List")->server_streaming());
  EXPECT_TRUE(service->FindMethodByName("Chat")->client_streaming());
  EXPECT_EQ(service->FindMethodByName("Echo")->input_type()->full_name(), "authrpc.test.Item");
  nlohmann::json kinds;
  for (const auto& m : items["methods"]) kinds[m["name"].get<std::string>()] = m["kind"];
  EXPECT_EQ(kinds["Echo"], "unary");
  EXPECT_EQ(kinds["Chat"], "stream");

  EXPECT_EQ(client->call_json("sys", "describe", {{"service", "no.Such"}}).code(), Errc::kNotFound);
  EXPECT_EQ(client->call_json("sys", "describe", {{"service", 5}}).code(), Errc::kInvalidArgument);
  EXPECT_EQ(client->call("sys", "describe", "not json").code(), Errc::kInvalidArgument);
  // A service without a schema has none.
  auto sys = client->call_json("sys", "describe", {{"service", "sys"}});
  ASSERT_TRUE(sys.ok());
  EXPECT_FALSE((*sys)["services"][0].contains("schema"));
  EXPECT_EQ(proto::schema_of("no.Such").codec, "");
}

// ACLs name proto services and methods like any other; sys.describe is a
// method like any other too.
TEST(ProtoServiceTest, AclsApplyToProtoMethodsAndDescribe) {
  const auto policy = AuthzPolicy::from_json(nlohmann::json::parse(R"({
    "groups": {"source": "static"},
    "default": "deny",
    "services": {
      "authrpc.test.Items": {"users": ["alice", "bob"], "methods": {"Fail": {"users": ["alice"]}}},
      "sys": {"users": ["alice"]}
    }
  })"));
  ASSERT_TRUE(policy.ok()) << policy.status().to_string();
  auto authorizer = Authorizer::from_policy(*policy);
  ProtoServer server([authorizer](ServerOptions& o) { o.authorizer = authorizer; });
  auto alice = server.Connect("alice");
  auto bob = server.Connect("bob");
  ASSERT_TRUE(alice && bob);
  Failure failure;
  failure.set_code(static_cast<std::uint32_t>(Errc::kAborted));
  struct Case {
    const char* name;
    Errc alice;
    Errc bob;
    std::function<Errc(Client&)> call;
  } cases[] = {
      {"Items.Echo", Errc::kOk, Errc::kOk,
       [](Client& c) { return static_cast<Errc>(ItemsStub(c).Echo(Item()).status().code.value()); }},
      {"Items.Fail", Errc::kAborted, Errc::kPermissionDenied,
       [&](Client& c) { return static_cast<Errc>(ItemsStub(c).Fail(failure).status().code.value()); }},
      {"Tags.Heaviest", Errc::kPermissionDenied, Errc::kPermissionDenied,
       [](Client& c) { return static_cast<Errc>(test::TagsStub(c).Heaviest(Count()).status().code.value()); }},
      {"sys.describe", Errc::kOk, Errc::kPermissionDenied,
       [](Client& c) { return static_cast<Errc>(c.call("sys", "describe", "").status().code.value()); }},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(c.call(*alice), c.alice) << c.name << " as alice";
    EXPECT_EQ(c.call(*bob), c.bob) << c.name << " as bob";
  }
}

// A call acts as another user through a connection of the channel's own
// (proxy users are per connection on the wire).
TEST(ProtoServiceTest, PerCallDoAs) {
  const auto policy = AuthzPolicy::from_json(nlohmann::json::parse(R"({
    "groups": {"source": "static"},
    "proxy_users": {"alice": {"users": ["bob"], "hosts": ["127.0.0.1"]}},
    "default": "allow"
  })"));
  ASSERT_TRUE(policy.ok()) << policy.status().to_string();
  auto authorizer = Authorizer::from_policy(*policy);
  ProtoServer server([authorizer](ServerOptions& o) { o.authorizer = authorizer; });
  const ClientOptions options = server.server().client().simple("alice").build();
  auto client = Client::connect(options);
  ASSERT_TRUE(client.ok()) << client.status().to_string();
  ItemsStub stub(std::make_shared<proto::Channel>(**client, options));

  auto self = stub.WhoAmI(Count());
  ASSERT_TRUE(self.ok()) << self.status().to_string();
  EXPECT_EQ(self->user(), "alice");
  EXPECT_EQ(self->real_user(), "");
  for (int i = 0; i < 2; ++i) {  // the second reuses bob's connection
    auto as_bob = stub.WhoAmI(Count(), {.do_as = "bob"});
    ASSERT_TRUE(as_bob.ok()) << as_bob.status().to_string();
    EXPECT_EQ(as_bob->user(), "bob");
    EXPECT_EQ(as_bob->real_user(), "alice");
  }
  auto as_bob_async = OnClient(**client, stub.AsyncWhoAmI(Count(), {.do_as = "bob"}));
  ASSERT_TRUE(as_bob_async.ok()) << as_bob_async.status().to_string();
  EXPECT_EQ(as_bob_async->user(), "bob");
  // A blocking call on the client's own thread is refused, not hung,
  // whether the proxy connection is still to be made or already is.
  for (const char* user : {"dave", "bob"}) {
    auto on_io = asio::co_spawn(
        (*client)->executor(),
        [&]() -> asio::awaitable<Result<Summary>> { co_return stub.WhoAmI(Count(), {.do_as = user}); },
        asio::use_future);
    ASSERT_EQ(on_io.wait_for(std::chrono::seconds(10)), std::future_status::ready) << user;
    EXPECT_EQ(on_io.get().code(), Errc::kFailedPrecondition) << user;
  }
  EXPECT_EQ(stub.WhoAmI(Count(), {.do_as = "carol"}).code(), Errc::kPermissionDenied);
  // A channel made from a Client alone has no options to connect with.
  EXPECT_EQ(ItemsStub(**client).WhoAmI(Count(), {.do_as = "bob"}).code(), Errc::kFailedPrecondition);
}

// protoc-gen-authrpc refuses what it cannot generate, with a reason.
TEST(ProtoGeneratorTest, RefusesWithAReason) {
  testing::ScopedTempDir dir("protoc-gen");
  struct Case {
    const char* name;
    const char* proto;
    const char* reason;
  } cases[] = {
      {"execution on a stream",
       "rpc S(M) returns (stream M) { option (authrpc.execution) = EXECUTION_INLINE; }",
       "applies to unary methods only"},
      {"stub name taken", "rpc Get(M) returns (M); rpc GetFuture(M) returns (M);", "method GetFuture"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    std::ofstream(dir.file("bad.proto"))
        << "syntax = \"proto3\"; package bad; import \"authrpc/components/protobuf/options.proto\";\n"
           "message M {}\nservice S { "
        << c.proto << " }\n";
    const std::string command = std::string(AUTHRPC_PROTOC_BIN) + " --plugin=protoc-gen-authrpc=" +
                                AUTHRPC_PROTOC_GEN_BIN + " --authrpc_out=" + dir.path() + " -I" +
                                dir.path() + " -I" + AUTHRPC_PROTO_IMPORT_DIR + " " +
                                dir.file("bad.proto") + " 2>" + dir.file("err");
    EXPECT_NE(std::system(command.c_str()), 0);
    std::ifstream err(dir.file("err"));
    const std::string text((std::istreambuf_iterator<char>(err)), std::istreambuf_iterator<char>());
    EXPECT_THAT(text, HasSubstr(c.reason));
  }
}

}  // namespace
}  // namespace authrpc
