#include "authrpc/auth/mechanisms/token/token_tickets.h"

#include <openssl/crypto.h>
#include <openssl/rand.h>

#include <algorithm>
#include <cstring>
#include <limits>

#include "authrpc/security/byte_codec.h"

namespace authrpc {
namespace {

constexpr std::size_t kTagBytes = 16;

// Big-endian, n bytes of v at p; returns the end. The tag's fixed fields and
// the ticket's head are written on the stack: no allocation per session.
char* put_be(char* p, std::uint64_t v, int n) {
  for (int i = n - 1; i >= 0; --i) *p++ = static_cast<char>((v >> (8 * i)) & 0xff);
  return p;
}

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
  // counter || expiry || token || str16(client host)
  client_host = client_host.substr(0, 0xffff);
  char fixed[26];
  char* p = put_be(fixed, counter, 8);
  p = put_be(p, static_cast<std::uint64_t>(expiry), 8);
  p = put_be(p, token, 8);
  put_be(p, client_host.size(), 2);
  std::array<std::uint8_t, security::kHmacSha256Bytes> mac{};
  std::array<std::uint8_t, kTagBytes> out{};
  // No label: the key tags nothing else. For an IPv4 client the fields fit
  // one SHA-256 block (two per ticket with the outer hash).
  if (key_.mac({std::string_view(fixed, sizeof fixed), client_host}, &mac)) {
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
  put_be(put_be(reinterpret_cast<char*>(out.data()), counter, 8), static_cast<std::uint64_t>(expiry),
         8);
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
