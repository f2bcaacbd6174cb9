// keepalive_interval: each wait between keepalive looks is drawn from
// [0.8, 1] x the keepalive, so that connections opened together drift apart
// (client/keepalive_interval.h). That they still keep a connection open past
// the server's idle timeout is client_options_test's KeepaliveTest.
#include "authrpc/client/keepalive_interval.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <initializer_list>
#include <set>

namespace authrpc {
namespace {

using namespace std::chrono_literals;

TEST(KeepaliveIntervalTest, DrawnBetweenFourFifthsAndTheWholeKeepalive) {
  for (const std::chrono::milliseconds keepalive :
       std::initializer_list<std::chrono::milliseconds>{1ms, 20ms, 15s, 150s, 24h}) {
    const std::chrono::steady_clock::duration whole = keepalive;
    auto low = whole, high = decltype(whole)::zero();
    std::set<std::chrono::steady_clock::rep> distinct;
    for (int i = 0; i < 2000; ++i) {
      const auto d = keepalive_interval(keepalive);
      ASSERT_LE(d, whole);
      ASSERT_GE(d, whole - whole / 5);
      low = std::min(low, d);
      high = std::max(high, d);
      distinct.insert(d.count());
    }
    // Spread over the range, not stuck at one value.
    EXPECT_LT(low, whole - whole / 5 + whole / 50) << keepalive.count();
    EXPECT_GT(high, whole - whole / 50) << keepalive.count();
    EXPECT_GT(distinct.size(), 1000u) << keepalive.count();
  }
}

TEST(KeepaliveIntervalTest, ZeroStaysZero) { EXPECT_EQ(keepalive_interval(0ms).count(), 0); }

}  // namespace
}  // namespace authrpc
