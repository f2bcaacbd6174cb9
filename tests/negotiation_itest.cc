// The negotiation table's rows that need a real KDC: every mechanism of the
// kerberos family and every delegation-token mechanism, alone and beside the
// others, over every channel (tests/testing/negotiation_table.h has the table, its
// one test and how to add a mechanism). Real components only: a real KDC
// (tests/testing/kerberos_realm.h), real TLS with a throwaway CA (tests/testing/test_tls.h),
// real Cyrus SASL plugins, a real SecretManager issuing delegation tokens,
// real Servers and Clients on loopback (tests/testing/test_server.h). The rows
// without a KDC run in negotiation_test.
#include <gtest/gtest.h>

#include <string>

#include "tests/testing/negotiation_table.h"

namespace authrpc {
namespace {

using testing::NegotiationTable;

INSTANTIATE_TEST_SUITE_P(WithKdc, NegotiationTable, ::testing::ValuesIn(testing::NegotiationRows(true)),
                         [](const auto& tp) { return std::string(tp.param.name); });

}  // namespace
}  // namespace authrpc
