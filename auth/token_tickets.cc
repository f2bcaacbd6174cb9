#include "authrpc/auth/token_tickets.h"

#include <openssl/crypto.h>
#include <openssl/rand.h>

#include <algorithm>
#include <cstring>
#include <limits>

#include "authrpc/security/byte_codec.h"

namespace authrpc {
namespace {

constexpr std::size_t kTagBytes = 16;

std::size_t round_up_to_64(std::size_t n) {
  return (std::min(n, TokenTickets::kMaxWindow) + 63) / 64 * 64;
}

}  // namespace

TokenTickets::TokenTickets(std::size_t window, std::chrono::milliseconds lifetime)
    : window_(round_up_to_64(window)),
      lifetime_(std::clamp(lifetime, std::chrono::milliseconds(1), kMaxLifetime)),
      unspent_(window_ / 64, 0) {
  if (window_ == 0) return;
  std::array<std::uint8_t, 32> key{};
  if (RAND_bytes(key.data(), static_cast<int>(key.size())) == 1) {
    key_ = security::HmacSha256Key(key);
  }
  OPENSSL_cleanse(key.data(), key.size());
}

std::array<std::uint8_t, kTagBytes> TokenTickets::tag(std::uint64_t counter, std::int64_t expiry,
                                                      std::uint64_t token,
                                                      std::string_view client_host) const {
  std::string fields;
  fields.reserve(26 + client_host.size());
  security::ByteWriter w(&fields);
  w.u64(counter);
  w.i64(expiry);
  w.u64(token);
  w.str16(client_host.substr(0, 0xffff));
  std::array<std::uint8_t, security::kHmacSha256Bytes> mac{};
  std::array<std::uint8_t, kTagBytes> out{};
  // No label: the key tags nothing else. For an IPv4 client the fields fit
  // one SHA-256 block (two per ticket with the outer hash).
  if (key_.mac({fields}, &mac)) {
    std::memcpy(out.data(), mac.data(), kTagBytes);
  } else {
    // Never a usable tag: random bytes match nothing.
    RAND_bytes(out.data(), static_cast<int>(out.size()));
  }
  return out;
}

std::optional<TokenTickets::Ticket> TokenTickets::issue(std::uint64_t token,
                                                        std::string_view client_host,
                                                        std::int64_t now_ms) {
  if (!enabled()) return std::nullopt;
  std::uint64_t counter = 0;
  {
    std::lock_guard lock(mu_);
    counter = next_++;
    // The slot's previous ticket (window_ issues ago) is refused from now on.
    unspent_[(counter % window_) / 64] |= std::uint64_t{1} << (counter % 64);
  }
  const std::int64_t expiry =
      now_ms > std::numeric_limits<std::int64_t>::max() - lifetime_.count()
          ? std::numeric_limits<std::int64_t>::max()
          : now_ms + lifetime_.count();
  Ticket out{};
  std::string head;
  security::ByteWriter w(&head);
  w.u64(counter);
  w.i64(expiry);
  std::memcpy(out.data(), head.data(), 16);
  const auto t = tag(counter, expiry, token, client_host);
  std::memcpy(out.data() + 16, t.data(), kTagBytes);
  return out;
}

TokenTickets::Verdict TokenTickets::check(std::string_view ticket, std::uint64_t token,
                                          std::string_view client_host, std::int64_t now_ms,
                                          std::uint64_t* counter) const {
  if (!enabled() || ticket.size() != kBytes) return Verdict::kForeign;
  security::ByteReader r(ticket);
  std::uint64_t c = 0;
  std::int64_t expiry = 0;
  std::string_view received;
  if (!r.u64(&c) || !r.i64(&expiry) || !r.raw(kTagBytes, &received)) return Verdict::kForeign;
  const auto expected = tag(c, expiry, token, client_host);
  if (CRYPTO_memcmp(expected.data(), received.data(), kTagBytes) != 0) return Verdict::kForeign;
  if (expiry <= now_ms) return Verdict::kExpired;
  *counter = c;
  return Verdict::kValid;
}

bool TokenTickets::redeem(std::uint64_t counter) {
  if (!enabled()) return false;
  std::lock_guard lock(mu_);
  // In the window: issued, and not more than window_ issues ago.
  if (counter >= next_ || next_ - counter > window_) return false;
  std::uint64_t& word = unspent_[(counter % window_) / 64];
  const std::uint64_t bit = std::uint64_t{1} << (counter % 64);
  if ((word & bit) == 0) return false;
  word &= ~bit;
  return true;
}

}  // namespace authrpc
