// ReactorConnections (server/server_impl.h): the sweeper visits awake
// connections every tick and parked ones only once their idle deadline is
// due, quick ticks the fresh ones (just accepted or woken); stop() visits
// every one. IdleDeadlines (server/idle_deadlines.h): what a visit does.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "authrpc/server/idle_deadlines.h"
#include "authrpc/server/server_impl.h"

namespace authrpc {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

struct Entry : ConnectionList::Hook {
  explicit Entry(std::string n) : name(std::move(n)) {}
  std::string name;
};

// The names a walk visits: walk(visitor) calls sweep, sweep_fresh or for_each.
template <typename Walk>
std::set<std::string> visited(Walk walk) {
  std::set<std::string> seen;
  walk([&](Entry& e) { seen.insert(e.name); });
  return seen;
}
std::set<std::string> swept(ReactorConnections& c, Clock::time_point now) {
  return visited([&](auto f) { c.sweep<Entry>(now, f); });
}
std::set<std::string> swept_fresh(ReactorConnections& c) {
  return visited([&](auto f) { c.sweep_fresh<Entry>(f); });
}
std::set<std::string> all(ReactorConnections& c) {
  return visited([&](auto f) { c.for_each<Entry>(f); });
}

TEST(ReactorConnectionsTest, ParkedConnectionsAreSweptOnlyOnceDue) {
  const auto t0 = Clock::now();
  constexpr auto kIdle = 3200ms;  // 100 ms buckets
  ReactorConnections c;
  Entry awake("awake"), soon("soon"), later("later"), never("never"), overdue("overdue");
  for (Entry* e : {&awake, &soon, &later, &never, &overdue}) c.insert(*e);
  EXPECT_EQ(swept(c, t0), (std::set<std::string>{"awake", "soon", "later", "never", "overdue"}));
  c.park(soon, t0 + 1000ms, kIdle, t0);
  c.park(later, t0 + 5000ms, kIdle, t0);
  c.park(never, Clock::time_point::max(), kIdle, t0);
  c.park(overdue, t0 - 3000ms, kIdle, t0);
  // Each tick: what it visits. The times keep clear of the 100 ms bucket
  // edges (a bucket is visited from its start).
  struct Tick {
    Clock::duration at;
    std::set<std::string> visits;
  };
  const std::vector<Tick> ticks = {
      {0ms, {"awake", "overdue"}},  // due already: the first tick
      {500ms, {"awake"}},
      {1120ms, {"awake", "soon"}},
      {1500ms, {"awake"}},
      {4850ms, {"awake"}},
      {5120ms, {"awake", "later"}},
      {20000ms, {"awake"}},  // a long gap: every bucket once, none left in them
  };
  for (const Tick& t : ticks) {
    SCOPED_TRACE(
        std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(t.at).count()) +
        " ms");
    EXPECT_EQ(swept(c, t0 + t.at), t.visits);
    // The sweeper closes a due one; once it has ended it leaves.
    for (Entry* e : {&soon, &later, &overdue}) {
      if (t.visits.contains(e->name)) c.erase(*e);
    }
  }
  EXPECT_EQ(all(c), (std::set<std::string>{"awake", "never"}));
}

TEST(ReactorConnectionsTest, EveryConnectionIsVisitedByForEachAndMayMoveWhileVisited) {
  const auto t0 = Clock::now();
  ReactorConnections c;
  std::vector<Entry> entries;
  entries.reserve(200);
  for (int i = 0; i < 200; ++i) entries.emplace_back("c" + std::to_string(i));
  for (auto& e : entries) c.insert(e);
  for (std::size_t i = 0; i < entries.size(); i += 2) {
    c.park(entries[i], t0 + std::chrono::milliseconds(10 * i), 10s, t0);
  }
  c.park(entries[1], Clock::time_point::max(), 10s, t0);
  // stop(): go_away() wakes each parked one as it is visited.
  std::size_t visited = 0;
  c.for_each<Entry>([&](Entry& e) {
    ++visited;
    c.insert(e);
  });
  EXPECT_EQ(visited, entries.size());
  // All awake now: one sweep sees each once.
  std::size_t swept_now = 0;
  c.sweep<Entry>(t0, [&](Entry&) { ++swept_now; });
  EXPECT_EQ(swept_now, entries.size());
  for (auto& e : entries) c.erase(e);
  EXPECT_TRUE(all(c).empty());
}

TEST(ReactorConnectionsTest, QuickTicksVisitConnectionsOnlyWhileFresh) {
  const auto t0 = Clock::now();
  ReactorConnections c;
  Entry old("old"), busy("busy"), quiet("quiet"), woken("woken");
  for (Entry* e : {&old, &busy}) c.insert(*e);
  // Accepted together: each quick tick visits both until their
  // kFreshVisits-th; from then on only the sweeper's ticks do.
  for (int i = 0; i < ReactorConnections::kFreshVisits; ++i) {
    EXPECT_EQ(swept_fresh(c), (std::set<std::string>{"old", "busy"})) << "quick tick " << i;
  }
  EXPECT_EQ(swept_fresh(c), (std::set<std::string>{}));
  EXPECT_EQ(swept(c, t0), (std::set<std::string>{"old", "busy"}));
  // One accepted later is fresh on its own; one visited fresh parks (the
  // visit may move it), and a parked one woken is fresh again.
  c.insert(quiet);
  c.insert(woken);
  c.park(woken, t0 + 10s, 10s, t0);
  EXPECT_EQ(swept_fresh(c), (std::set<std::string>{"quiet"}));
  std::size_t visits = 0;
  c.sweep_fresh<Entry>([&](Entry& e) {
    ++visits;
    c.park(e, t0 + 10s, 10s, t0);
  });
  EXPECT_EQ(visits, 1u);
  EXPECT_EQ(swept_fresh(c), (std::set<std::string>{})) << "parked from the fresh list";
  c.insert(woken);
  EXPECT_EQ(swept_fresh(c), (std::set<std::string>{"woken"}));
  // A full tick visits the fresh ones too, and counts as one of their visits.
  EXPECT_EQ(swept(c, t0), (std::set<std::string>{"old", "busy", "woken"}));
  // Each once, also one whose last fresh visit moves it to the awake list
  // in that tick.
  std::vector<std::string> order;
  c.sweep<Entry>(t0, [&](Entry& e) { order.push_back(e.name); });
  std::sort(order.begin(), order.end());
  EXPECT_EQ(order, (std::vector<std::string>{"busy", "old", "woken"}));
  EXPECT_EQ(swept_fresh(c), (std::set<std::string>{})) << "woken had its third visit";
  // A fresh one may end (leave) between ticks.
  c.insert(busy);
  c.erase(busy);
  EXPECT_EQ(swept_fresh(c), (std::set<std::string>{}));
  EXPECT_EQ(all(c), (std::set<std::string>{"old", "quiet", "woken"}));
  for (Entry* e : {&old, &quiet, &woken}) c.erase(*e);
  EXPECT_TRUE(all(c).empty());
}

// A visit that throws (an allocation, an application's log sink) leaves
// the connections it had not reached in the fresh list, linked as before.
TEST(ReactorConnectionsTest, AVisitThatThrowsLeavesTheRestFresh) {
  ReactorConnections c;
  Entry a("a"), b("b"), d("d");
  for (Entry* e : {&a, &b, &d}) c.insert(*e);
  int visits = 0;
  EXPECT_THROW(c.sweep_fresh<Entry>([&](Entry&) {
    if (++visits == 2) throw std::runtime_error("log sink");
  }),
               std::runtime_error);
  EXPECT_EQ(all(c), (std::set<std::string>{"a", "b", "d"}));
  EXPECT_EQ(swept_fresh(c), (std::set<std::string>{"a", "b", "d"}));
  for (Entry* e : {&a, &b, &d}) c.erase(*e);
  EXPECT_TRUE(all(c).empty());
}

// What a sweeper tick does to a connection, by its phase, how long it has
// been quiet, its calls in flight and its streams (the idle timeout 1 s; a
// negotiation or linger deadline at 2 s).
TEST(ReactorConnectionsTest, IdleDeadlinesDecideWhatATickDoes) {
  using Action = IdleDeadlines::Action;
  using P = ConnectionPhase;
  const Clock::time_point t0{};
  const Clock::duration quiet_enough = kReleaseBuffersAfter;
  struct Case {
    const char* name;
    P phase;
    Clock::duration since_activity;  // the tick is at t0 + 5 s, activity this long before
    std::size_t in_flight;
    bool streams_open;
    std::chrono::milliseconds idle_timeout;
    Action expected;
  };
  const Case cases[] = {
      {"negotiating, before its deadline", P::kNegotiating, 5s, 0, false, 1s, Action::kNone},
      {"serving, just active", P::kServing, 0ms, 0, false, 1s, Action::kNone},
      {"serving, quiet", P::kServing, quiet_enough, 0, false, 1s, Action::kPark},
      {"serving, quiet with a stream open", P::kServing, quiet_enough, 0, true, 1s,
       Action::kReleaseBuffers},
      {"serving, quiet with a call in flight", P::kServing, quiet_enough, 1, false, 1s,
       Action::kNone},
      {"serving, idle timeout reached", P::kServing, 1s, 0, false, 1s, Action::kIdleTimeout},
      {"serving, idle timeout passed with a call in flight", P::kServing, 3s, 1, false, 1s,
       Action::kNone},
      {"serving, no idle timeout", P::kServing, 4s, 0, false, 0ms, Action::kPark},
      {"going away, quiet", P::kGoingAway, quiet_enough, 0, false, 1s, Action::kReleaseBuffers},
      {"going away, idle timeout reached", P::kGoingAway, 1s, 0, true, 1s, Action::kIdleTimeout},
  };
  for (const Case& c : cases) {
    IdleDeadlines d;
    d.set_deadline(t0 + 7s);
    d.touch(t0 + 5s - c.since_activity);
    EXPECT_EQ(d.decide(c.phase, t0 + 5s, c.in_flight, c.streams_open, c.idle_timeout), c.expected)
        << c.name;
  }
  // The negotiation's and the linger's deadline: at it, the tick acts.
  IdleDeadlines d;
  d.set_deadline(t0 + 2s);
  d.touch(t0);
  EXPECT_EQ(d.decide(P::kNegotiating, t0 + 2s, 0, false, 1s), Action::kNegotiationTimeout);
  EXPECT_EQ(d.decide(P::kLingering, t0 + 2s - 1ms, 0, false, 1s), Action::kNone);
  EXPECT_EQ(d.decide(P::kLingering, t0 + 2s, 0, false, 1s), Action::kLingerOver);
  // Parked until its idle deadline (none without an idle timeout).
  EXPECT_EQ(d.idle_deadline(1s), t0 + 1s);
  EXPECT_EQ(d.idle_deadline(0ms), Clock::time_point::max());
}

}  // namespace
}  // namespace authrpc
