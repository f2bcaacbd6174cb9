// CallIdTable (client/call_id_table.h), the client connection's table of
// calls waiting for their responses: every sequence of inserts and takes
// finds exactly what a std::map holding the same entries would — in order
// and out of order, across growth and shrinking, with ids that collide in
// their home slot and ids near the 32-bit wrap — and take_if/take_all
// remove what they return.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "authrpc/client/call_id_table.h"

namespace authrpc {
namespace {

struct Op {
  bool insert;  // else take
  std::uint32_t id;
};

struct Case {
  const char* name;
  std::vector<Op> ops;
};

std::vector<Op> Inserts(std::uint32_t first, std::uint32_t count, std::uint32_t step = 1) {
  std::vector<Op> ops;
  for (std::uint32_t i = 0; i < count; ++i) ops.push_back({true, first + i * step});
  return ops;
}

std::vector<Op> Takes(std::vector<std::uint32_t> ids) {
  std::vector<Op> ops;
  for (auto id : ids) ops.push_back({false, id});
  return ops;
}

std::vector<Op> Join(std::initializer_list<std::vector<Op>> parts) {
  std::vector<Op> out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

// A pipelined client: D calls in flight, each response frees the next call.
std::vector<Op> Pipelined(std::uint32_t depth, std::uint32_t calls) {
  std::vector<Op> ops = Inserts(1, depth);
  for (std::uint32_t id = 1; id <= calls; ++id) {
    ops.push_back({false, id});
    ops.push_back({true, id + depth});
  }
  return ops;
}

// Random inserts and takes (of present and absent ids) from one seed.
std::vector<Op> Random(std::uint32_t seed, std::size_t n) {
  std::mt19937 rng(seed);
  std::vector<Op> ops;
  std::vector<std::uint32_t> live;
  std::uint32_t next = 1;
  for (std::size_t i = 0; i < n; ++i) {
    if (live.empty() || rng() % 3 != 0) {
      // Sequential like a client's ids, with gaps and some ids 16 apart
      // (the same home slot in a 16-slot table).
      next += 1 + (rng() % 4 == 0 ? 16 * (rng() % 3) : 0);
      ops.push_back({true, next});
      live.push_back(next);
    } else if (rng() % 5 == 0) {
      ops.push_back({false, next + 1000});  // never inserted
    } else {
      const std::size_t k = rng() % live.size();
      ops.push_back({false, live[k]});
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(k));
    }
  }
  return ops;
}

class CallIdTableTest : public ::testing::TestWithParam<Case> {};

TEST_P(CallIdTableTest, FindsWhatAMapWould) {
  CallIdTable<int> table;
  std::map<std::uint32_t, int*> expected;
  std::vector<int> values(GetParam().ops.size());
  std::size_t step = 0;
  for (const Op& op : GetParam().ops) {
    if (op.insert) {
      table.insert(op.id, &values[step]);
      expected[op.id] = &values[step];
    } else {
      const auto it = expected.find(op.id);
      int* const want = it == expected.end() ? nullptr : it->second;
      ASSERT_EQ(table.take(op.id), want) << "step " << step << ": take " << op.id;
      if (it != expected.end()) expected.erase(it);
    }
    ASSERT_EQ(table.size(), expected.size()) << "step " << step;
    ++step;
  }
  // What is left is still found, and only once.
  for (const auto& [id, value] : expected) EXPECT_EQ(table.take(id), value) << id;
  EXPECT_TRUE(table.empty());
  for (const auto& [id, value] : expected) EXPECT_EQ(table.take(id), nullptr) << id;
}

INSTANTIATE_TEST_SUITE_P(
    Table, CallIdTableTest,
    ::testing::Values(
        Case{"in_order", Join({Inserts(1, 10), Takes({1, 2, 3, 4, 5, 6, 7, 8, 9, 10})})},
        Case{"reverse_order", Join({Inserts(1, 10), Takes({10, 9, 8, 7, 6, 5, 4, 3, 2, 1})})},
        Case{"absent_and_zero", Join({Inserts(5, 3), Takes({0, 4, 8, 6, 6, 5, 7})})},
        // Every id in one home slot of a 16-slot table: one long probe run,
        // taken from its middle, its start and its end.
        Case{"colliding", Join({Inserts(3, 7, 16), Takes({51, 3, 99, 19, 83, 35, 67, 115})})},
        // Probe runs that wrap past the table's last slot.
        Case{"wrapping_run", Join({Inserts(14, 6), Takes({15, 14, 19, 16, 18, 17})})},
        Case{"growth_then_shrink", Join({Inserts(1, 1000), Takes({500, 1, 1000, 999}),
                                         Inserts(2000, 10), Takes({2003, 2, 3})})},
        Case{"near_the_wrap", Join({Inserts(0xFFFFFFF0u, 15), Inserts(1, 5),
                                    Takes({0xFFFFFFFFu, 1, 0xFFFFFFF0u, 5, 0xFFFFFFF8u})})},
        Case{"pipelined_d16", Pipelined(16, 5000)},
        Case{"random_1", Random(1, 20000)},
        Case{"random_2", Random(2, 20000)}),
    [](const ::testing::TestParamInfo<Case>& row) { return std::string(row.param.name); });

TEST(CallIdTableTest, TakeIfAndTakeAllRemoveWhatTheyReturn) {
  CallIdTable<int> table;
  std::vector<int> values(40);
  for (std::uint32_t id = 1; id <= 40; ++id) table.insert(id, &values[id - 1]);
  auto above = table.take_if([](std::uint32_t id) { return id > 30; });
  ASSERT_EQ(above.size(), 10u);
  for (int* v : above) EXPECT_GE(v - values.data(), 30);
  EXPECT_EQ(table.size(), 30u);
  EXPECT_EQ(table.take(31), nullptr);
  EXPECT_EQ(table.take(30), &values[29]);
  auto rest = table.take_all();
  EXPECT_EQ(rest.size(), 29u);
  EXPECT_TRUE(table.empty());
  EXPECT_EQ(table.take(1), nullptr);
  table.insert(7, &values[6]);  // usable again after take_all
  EXPECT_EQ(table.take(7), &values[6]);
}

TEST(CallIdTableTest, NextIdCountsFromOneWhateverTheTableHolds) {
  CallIdTable<int> table;
  int value = 0;
  EXPECT_EQ(table.next_id(), 1u);
  table.insert(1, &value);
  EXPECT_EQ(table.next_id(), 2u);
  table.take_all();
  EXPECT_EQ(table.next_id(), 3u);
}

}  // namespace
}  // namespace authrpc
