#include "tests/testing/proto_items.h"

#include <stdexcept>
#include <string>

namespace authrpc::testing {

namespace {

using authrpc::test::Count;
using authrpc::test::Failure;
using authrpc::test::Item;
using authrpc::test::Summary;

class Items final : public authrpc::test::ItemsService {
 public:
  Result<Item> Echo(CallContext&, const Item& request) override { return request; }
  asio::awaitable<Result<Item>> EchoAsync(CallContext&, const Item& request) override { co_return request; }
  Result<Item> EchoBlocking(CallContext&, const Item& request) override { return request; }

  Result<Summary> Fail(CallContext&, const Failure& request) override {
    if (request.throw_exception()) throw std::runtime_error("secret detail: " + request.message());
    return Status(static_cast<Errc>(request.code()), request.message());
  }

  Result<Summary> WhoAmI(CallContext& ctx, const Count&) override {
    Summary summary;
    summary.set_user(ctx.identity().user);
    if (ctx.identity().real_user) summary.set_real_user(*ctx.identity().real_user);
    return summary;
  }

  asio::awaitable<Status> List(CallContext&, const Count& request,
                               proto::ServerWriter<Item>& writer) override {
    for (std::uint32_t i = 0; i < request.count(); ++i) {
      Item item;
      item.set_key(request.prefix() + std::to_string(i));
      item.set_number(i);
      if (Status s = co_await writer.write(item); !s.ok()) co_return s;
    }
    co_return Status();
  }

  asio::awaitable<Result<Summary>> Collect(CallContext& ctx, proto::ServerReader<Item>& reader) override {
    Summary summary;
    summary.set_user(ctx.identity().user);
    Item item;
    for (;;) {
      auto more = co_await reader.read(item);
      if (!more.ok()) co_return more.status();
      if (!*more) break;
      summary.set_count(summary.count() + 1);
      summary.add_keys(item.key());
    }
    co_return summary;
  }

  asio::awaitable<Status> Chat(CallContext&, proto::ServerReaderWriter<Item, Item>& stream) override {
    for (;;) {
      auto item = co_await stream.read();
      if (!item.ok()) co_return item.status();
      if (!item->has_value()) co_return Status();
      if (Status s = co_await stream.write(**item); !s.ok()) co_return s;
    }
  }
};

class Tags final : public authrpc::test::TagsService {
 public:
  Result<test::common::Tag> Heaviest(CallContext&, const Count& request) override {
    test::common::Tag tag;
    tag.set_name(request.prefix());
    tag.set_weight(request.count());
    return tag;
  }
};

class Scale final : public other::v2::ScaleService {
 public:
  Result<test::common::Tag> Total(CallContext&, const other::v2::Weigh& request) override {
    test::common::Tag total;
    total.set_name("total");
    for (const auto& tag : request.tags()) total.set_weight(total.weight() + tag.weight());
    return total;
  }
};

}  // namespace

std::shared_ptr<authrpc::test::ItemsService> make_items_service() { return std::make_shared<Items>(); }
std::shared_ptr<authrpc::test::TagsService> make_tags_service() { return std::make_shared<Tags>(); }
std::shared_ptr<other::v2::ScaleService> make_scale_service() { return std::make_shared<Scale>(); }

}  // namespace authrpc::testing
