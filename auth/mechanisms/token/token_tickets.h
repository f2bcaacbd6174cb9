// TokenTickets: the single-use session tickets a `token` server hands its
// plaintext tcp:// clients so that their next session needs no challenge
// (docs/TOKENS.md "Session tickets", wire format in docs/PROTOCOL.md,
// version 3). Owned by TokenServerMechanism; called from IO threads
// (thread-safe: one mutex around the window; MACs outside it).
//
// A ticket stands in for the server's challenge nonce: it is a nonce this
// server process made, so a client proof over it is fresh as long as each
// ticket is accepted once. Each ticket is
//   u64 counter || i64 expiry (ms since the epoch) || 16-byte tag
// with tag = the first 16 bytes of HMAC-SHA256(key, counter || expiry ||
// u64 token sequence number || str16(client host)), under a key drawn from
// the CSPRNG when the mechanism is made and never stored: another server of
// a fleet, this one after a restart, or a connection from another address
// fails the tag (kForeign) and challenges. The address binding is what keeps a ticket HELLO that
// never reached its issuer (a load balancer sent it to another server, the
// connection broke first) from being played to the issuer by an observer
// elsewhere: docs/TOKENS.md, "Session tickets". Counters are issued in
// order; the window keeps one bit per counter for the last `window` issued
// ("not yet spent"), as IPsec's anti-replay window keeps the sequence
// numbers it has seen: memory is `window` bits whatever the rate, and a
// ticket more than `window` issues old is refused by redeem() like a spent
// one.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string_view>
#include <vector>

#include "authrpc/security/hmac_sha256.h"

namespace authrpc {

class TokenTickets {
 public:
  static constexpr std::size_t kBytes = 32;
  using Ticket = std::array<std::uint8_t, kBytes>;
  enum class Verdict { kValid, kForeign, kExpired };
  static constexpr std::size_t kMaxWindow = std::size_t{1} << 24;
  static constexpr std::chrono::milliseconds kMaxLifetime{std::chrono::hours(1)};

  // `window` tickets outstanding at most (0: none are issued; rounded up to
  // a multiple of 64, at most kMaxWindow); each valid for `lifetime` (1 ms
  // to kMaxLifetime). A CSPRNG failure leaves the issuer disabled.
  TokenTickets(std::size_t window, std::chrono::milliseconds lifetime);

  bool enabled() const noexcept { return window_ > 0 && !key_.empty(); }
  std::chrono::milliseconds lifetime() const noexcept { return lifetime_; }
  std::size_t window() const noexcept { return window_; }

  // A new ticket for sessions of token `token` (its sequence number) from
  // `client_host` (the peer address without its port), valid until
  // now_ms + lifetime; nullopt if disabled.
  std::optional<Ticket> issue(std::uint64_t token, std::string_view client_host,
                              std::int64_t now_ms);

  // Whether `ticket` is one of ours, for `token` from `client_host`, and
  // unexpired at now_ms; on kValid, *counter is what to redeem(). Changes
  // nothing: the caller checks the proof over the ticket before spending
  // it, so that a stranger who saw the ticket go by cannot spend it. Any
  // bytes are safe.
  Verdict check(std::string_view ticket, std::uint64_t token, std::string_view client_host,
                std::int64_t now_ms, std::uint64_t* counter) const;

  // Spends a checked ticket: true once per counter; false if spent already
  // or no longer in the window.
  bool redeem(std::uint64_t counter);

 private:
  std::array<std::uint8_t, 16> tag(std::uint64_t counter, std::int64_t expiry, std::uint64_t token,
                                   std::string_view client_host) const;

  const std::size_t window_;  // a multiple of 64
  const std::chrono::milliseconds lifetime_;
  security::HmacSha256Key key_;
  std::mutex mu_;  // guards next_ and unspent_
  std::uint64_t next_ = 0;             // the counter the next ticket gets
  std::vector<std::uint64_t> unspent_;  // bit (counter % window_): issued, not spent
};

}  // namespace authrpc
