// Internal: the budget of connections (docs/CONFIG.md, "Before
// authentication" and "Connection limits"). It decides, for each accepted
// connection, whether it may start negotiating and which unauthenticated
// connection gives way for it (is shed), so that silent or slow peers cannot
// keep a new client out; at authentication, whether the session may start
// (the per-user limit). It counts authenticated connections too, in all
// (max_connections) and per source address.
//
// Shared by every reactor of a Server: thread-safe, one mutex, taken at
// accept, at authentication and at close (small against a session:
// docs/PERFORMANCE.md, "Measured costs behind the code"). It only counts and
// chooses: the Server closes the connections it names, on their own
// reactors.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace authrpc {

class ServerConnection;
struct Reactor;

class PreauthBudget {
 public:
  struct Limits {
    std::size_t unauthenticated = 1024;  // in all
    std::size_t per_address = 64;        // unauthenticated, per source address; 0: no limit
    std::size_t connections = 10'000;    // authenticated + unauthenticated
    std::size_t connections_per_address = 1000;  // authenticated + unauthenticated; 0: no limit
    std::size_t connections_per_user = 0;        // authenticated, per Identity::user; 0: no limit
  };
  // Who must be closed to make room: its reactor and the connection (which
  // may have ended meanwhile).
  struct Victim {
    Reactor* reactor = nullptr;
    std::weak_ptr<ServerConnection> connection;
    bool same_address = false;  // shed for a per-address limit
  };
  enum class Refusal { kNone, kMaxConnections, kPerAddress };
  struct Admission {
    std::uint64_t ticket = 0;  // 0: refused, for `refused`
    Refusal refused = Refusal::kNone;
    std::optional<Victim> shed;
  };
  enum class Authentication { kAccepted, kShed, kTooManyForUser };

  explicit PreauthBudget(Limits limits) : limits_(limits) {}

  // A new connection from `peer` (ByteStream::peer_address()). Over a
  // per-address limit, the oldest unauthenticated connection from the same
  // address is shed; over max_unauthenticated or max_connections, the oldest
  // of the address holding the most unauthenticated connections (the new
  // one's counted), so that an address with few is shed last. The victim
  // leaves the budget and is returned for the caller to close. Refused only
  // when nothing can be shed for it: max_connections, or its address's
  // connections_per_address, are all authenticated.
  Admission admit(std::string_view peer, std::weak_ptr<ServerConnection> connection,
                  Reactor* reactor);
  // The connection with `ticket` authenticated as `user`: it leaves the
  // unauthenticated budget and counts as authenticated, unless it was shed
  // meanwhile or `user` holds connections_per_user already (then it must
  // close, still counted until release()).
  Authentication authenticate(std::uint64_t ticket, std::string_view user);
  // A connection ended (a shed or stale ticket is ignored).
  void release(std::uint64_t ticket);

  std::size_t unauthenticated() const;
  std::size_t authenticated() const;

  // What the per-address limits count: an IPv4 address, an IPv6 address's
  // /64 (one host commonly holds a whole /64), IPv4-mapped IPv6 as IPv4;
  // empty (exempt) for unix:// peers, which the filesystem already
  // restricts. Exposed for tests.
  static std::string address_key(std::string_view peer);

 private:
  static constexpr std::uint32_t kNone = 0xffffffff;
  // A source address (unix:// peers share the empty one, exempt from the
  // per-address limits): its unauthenticated connections, oldest first (a
  // list through their slots), and its authenticated ones
  // (connections_per_address only). An address with unauthenticated
  // connections is in the bucket of its count.
  struct Address;
  using AddressEntry = std::pair<const std::string, Address>;
  struct Address {
    std::uint32_t oldest = kNone;
    std::uint32_t newest = kNone;
    std::size_t unauthenticated = 0;
    std::size_t authenticated = 0;
    AddressEntry* bucket_prev = nullptr;
    AddressEntry* bucket_next = nullptr;
  };
  using AddressMap = std::unordered_map<std::string, Address>;
  using UserMap = std::unordered_map<std::string, std::size_t>;
  // The addresses with one count of unauthenticated connections, in the
  // order they reached it: whom to shed is found in O(1).
  struct Bucket {
    AddressEntry* first = nullptr;
    AddressEntry* last = nullptr;
  };
  enum class SlotState : std::uint8_t { kFree, kNegotiating, kAuthenticated };
  // A connection in the budget, or a free slot. Slots are reused, so a
  // connection costs no allocation here once the budget has seen as many at
  // once; a ticket names its slot and the slot's generation at admission
  // (generation << 32 | index + 1), so a ticket outlives its slot's reuse.
  struct Slot {
    std::uint32_t generation = 0;
    SlotState state = SlotState::kFree;
    std::uint32_t next_free = kNone;
    std::uint32_t address_older = kNone;
    std::uint32_t address_newer = kNone;
    AddressEntry* address = nullptr;  // authenticated: null unless connections_per_address
    UserMap::value_type* user = nullptr;  // connections_per_user only
    Reactor* reactor = nullptr;
    std::weak_ptr<ServerConnection> connection;
  };

  // The slot a ticket names if it is still in the budget, or kNone; the
  // caller holds mu_ (as for every function below).
  std::uint32_t slot_of(std::uint64_t ticket) const;
  // Removes negotiating slot `index` from the budget (and its address's list)
  // and returns it as a victim.
  Victim take(std::uint32_t index, bool same_address);
  // Unlinks negotiating slot `index` from its address's list.
  void leave_negotiating(std::uint32_t index);
  void free_slot(std::uint32_t index);
  // One more / one fewer unauthenticated connection from an address: moves
  // it between buckets.
  void raise(AddressEntry& entry);
  void lower(AddressEntry& entry);
  // Drops an address with no connection left, unless there are few.
  void forget(AddressEntry& entry);

  const Limits limits_;
  mutable std::mutex mu_;
  std::size_t authenticated_ = 0;
  std::size_t unauthenticated_ = 0;
  std::vector<Slot> slots_;
  std::uint32_t free_ = kNone;  // free slots, through Slot::next_free
  // An address whose last connection left keeps its entry while there are
  // few (kKeptAddresses): a client reconnecting from the same address
  // allocates nothing.
  AddressMap by_address_;
  std::vector<Bucket> buckets_;  // by count of unauthenticated connections
  std::size_t most_ = 0;         // the highest count with an address
  UserMap by_user_;              // connections_per_user only
};

}  // namespace authrpc
