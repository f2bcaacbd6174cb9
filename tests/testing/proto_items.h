// The typed test services of tests/protos/items.proto and
// other/v2/other.proto, implemented for the tests of the protobuf
// component (proto_service_test.cc) and of `authrpc describe|call`
// (cli_test.cc): Echo* answer with the request, Fail with the status it
// asks for (or throws), WhoAmI with the caller, List streams `count`
// items, Collect sums what it reads, Chat echoes each message; Missing is
// left to the generated default (UNIMPLEMENTED).
#pragma once

#include <memory>

#include "items.authrpc.h"
#include "other/v2/other.authrpc.h"

namespace authrpc::testing {

std::shared_ptr<authrpc::test::ItemsService> make_items_service();
std::shared_ptr<authrpc::test::TagsService> make_tags_service();
std::shared_ptr<other::v2::ScaleService> make_scale_service();

}  // namespace authrpc::testing
