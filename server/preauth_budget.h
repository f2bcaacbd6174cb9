// Internal: the budget of connections that have not authenticated yet
// (docs/CONFIG.md, "Before authentication"). It decides, for each accepted
// connection, whether it may start negotiating and which older
// unauthenticated connection gives way for it (is shed), so that silent or
// slow peers cannot keep a new client out; it also holds the count of
// authenticated connections that max_connections limits.
//
// Shared by every reactor of a Server: thread-safe, one mutex, taken at
// accept, at authentication and at close (small against a session:
// docs/DESIGN.md, "Measured costs behind the code"). It only counts and
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
    std::size_t per_address = 64;        // per source address; 0: no limit
    std::size_t connections = 10'000;    // authenticated + unauthenticated
  };
  // Who must be closed to make room: its reactor and the connection (which
  // may have ended meanwhile).
  struct Victim {
    Reactor* reactor = nullptr;
    std::weak_ptr<ServerConnection> connection;
    bool same_address = false;  // shed for the per-address limit
  };
  struct Admission {
    std::uint64_t ticket = 0;  // 0: refused, max_connections are authenticated
    std::optional<Victim> shed;
  };

  explicit PreauthBudget(Limits limits) : limits_(limits) {}

  // A new connection from `peer` (ByteStream::peer_address()). Over the limits,
  // the oldest unauthenticated connection from the same address (per-address
  // limit) or from anywhere (the others) leaves the budget and is returned
  // for the caller to close; refused only when max_connections are all
  // authenticated, as nothing can be shed for it then.
  Admission admit(std::string_view peer, std::weak_ptr<ServerConnection> connection,
                  Reactor* reactor);
  // The connection with `ticket` authenticated: it leaves the budget and
  // counts as authenticated. False if it was shed meanwhile (it must close).
  bool authenticate(std::uint64_t ticket);
  // A connection ended: its ticket if it never authenticated (a shed
  // ticket is ignored), else authenticated = true.
  void release(std::uint64_t ticket, bool authenticated);

  std::size_t unauthenticated() const;
  std::size_t authenticated() const;

  // What the per-address limit counts: an IPv4 address, an IPv6 address's
  // /64 (one host commonly holds a whole /64), IPv4-mapped IPv6 as IPv4;
  // empty (exempt) for unix:// peers, which the filesystem already
  // restricts. Exposed for tests.
  static std::string address_key(std::string_view peer);

 private:
  static constexpr std::uint32_t kNone = 0xffffffff;
  // The connections of one source address still in the budget, oldest
  // first (a list through their slots).
  struct AddressList {
    std::uint32_t oldest = kNone;
    std::uint32_t newest = kNone;
    std::size_t count = 0;
  };
  using AddressMap = std::unordered_map<std::string, AddressList>;
  // A connection in the budget, or a free slot. Slots are reused, so a
  // connection costs no allocation here once the budget has seen as many at
  // once; a ticket names its slot and the slot's generation at admission
  // (generation << 32 | index + 1), so a ticket outlives its slot's reuse.
  struct Slot {
    std::uint32_t generation = 0;
    bool live = false;
    std::uint32_t older = kNone;  // age list; `newer` also links free slots
    std::uint32_t newer = kNone;
    std::uint32_t address_older = kNone;
    std::uint32_t address_newer = kNone;
    AddressMap::value_type* address = nullptr;  // null: exempt, or no per-address limit
    Reactor* reactor = nullptr;
    std::weak_ptr<ServerConnection> connection;
  };

  // The live slot a ticket names, or kNone; the caller holds mu_.
  std::uint32_t slot_of(std::uint64_t ticket) const;
  // Removes slot `index` from the budget (and its address's list) and
  // returns it as a victim; the caller holds mu_.
  Victim take(std::uint32_t index, bool same_address);

  const Limits limits_;
  mutable std::mutex mu_;
  std::size_t authenticated_ = 0;
  std::size_t unauthenticated_ = 0;
  std::vector<Slot> slots_;
  std::uint32_t free_ = kNone;    // free slots, through Slot::newer
  std::uint32_t oldest_ = kNone;  // age list: admission order
  std::uint32_t newest_ = kNone;
  // Per source address (per_address > 0 only). An address whose last
  // connection left keeps its entry while there are few (kKeptAddresses):
  // a client reconnecting from the same address allocates nothing.
  AddressMap by_address_;
};

}  // namespace authrpc
