// Internal: MethodCache, the method a connection's last call named, as the
// server's service table has it. A connection's calls mostly name the same
// few methods, and two short compares cost less than the table's and the
// metrics' lookups. With it, the bytes a REQUEST naming that method starts
// with (its two length-prefixed names, from Server::Impl::request_names): a
// REQUEST whose body starts with them names the same method, and the
// connection reads only its timeout and payload.
//
// Owned by its ServerConnection (handle_request, admit_call) and used only on
// the connection's thread. The views are the server's table's, which never
// changes once started. The hit path is inline: it runs on every call.
#pragma once

#include <cstdint>
#include <cstring>
#include <string_view>

#include "authrpc/server/server_impl.h"
#include "authrpc/server/server_metrics.h"
#include "authrpc/server/service.h"

namespace authrpc {

class MethodCache {
 public:
  // A method as the table has it; `method` null: no such method.
  struct Found {
    const Service::Method* method = nullptr;
    std::string_view service;
    std::string_view method_name;
    ServerMetrics::Method* cells = nullptr;  // null when metrics are off
  };

  // The method service.method names: the last one found, or the server's
  // table's (`metrics` null: no cells).
  Found find(const Server::Impl& server, ServerMetrics* metrics, std::string_view service,
             std::string_view method) {
    if (last_.method != nullptr && same_name(service, last_.service) &&
        same_name(method, last_.method_name)) {
      return last_;
    }
    return find_in_table(server, metrics, service, method);
  }

  // `body` (a REQUEST's) starts with the last method's names; then they are
  // names_size() bytes, and service() and method_name() are theirs.
  bool names_start(std::string_view body) const noexcept {
    const std::size_t n = names_wire_.size();
    if (n == 0 || body.size() < n) return false;
    // Names of 4 to 16 bytes in all (most: "sys" and "echo" are 11) as two
    // overlapping words each, without a call to memcmp; longer ones (a
    // protobuf service's full name) with it: two words of each end would
    // leave their middle unread.
    if (n > 16) return std::memcmp(body.data(), names_wire_.data(), n) == 0;
    if (n >= 8) return same_by_two_words<std::uint64_t>(body.data(), names_wire_.data(), n);
    if (n >= 4) return same_by_two_words<std::uint32_t>(body.data(), names_wire_.data(), n);
    return std::memcmp(body.data(), names_wire_.data(), n) == 0;
  }
  std::size_t names_size() const noexcept { return names_wire_.size(); }
  std::string_view service() const noexcept { return last_.service; }
  std::string_view method_name() const noexcept { return last_.method_name; }

 private:
  Found find_in_table(const Server::Impl& server, ServerMetrics* metrics, std::string_view service,
                      std::string_view method);

  // Equality of two names without a call to memcmp: a call's service and
  // method names are a few bytes, compared on every call.
  static bool same_name(std::string_view a, std::string_view b) noexcept {
    if (a.size() != b.size()) return false;
    if (a.data() == b.data()) return true;  // a REQUEST that names_start(): our own views
    for (std::size_t i = 0; i < a.size(); ++i) {
      if (a[i] != b[i]) return false;
    }
    return true;
  }
  // a[0..n) == b[0..n) for sizeof(Word) <= n <= 2 * sizeof(Word): the first
  // and the last word of each, overlapping in the middle.
  template <typename Word>
  static bool same_by_two_words(const char* a, const char* b, std::size_t n) noexcept {
    Word a0, a1, b0, b1;
    std::memcpy(&a0, a, sizeof(Word));
    std::memcpy(&a1, a + n - sizeof(Word), sizeof(Word));
    std::memcpy(&b0, b, sizeof(Word));
    std::memcpy(&b1, b + n - sizeof(Word), sizeof(Word));
    return ((a0 ^ b0) | (a1 ^ b1)) == 0;
  }

  Found last_;
  std::string_view names_wire_;  // empty: none
};

}  // namespace authrpc
