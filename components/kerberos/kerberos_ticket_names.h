// KerberosTicketNames: the client principal inside each service ticket the
// `kerberos` server has accepted, keyed by a digest of the ticket's bytes.
// Owned by KerberosServerMechanism (one per server), used by its sessions.
//
// Why it is sound: a client presents the same service ticket (from its
// credential cache) on every connection until the ticket expires, and the
// client's name inside a ticket is fixed by the ticket's bytes — they are
// encrypted and integrity-protected under the service's key, which only the
// KDC and this server hold. So once gss_accept_sec_context() has accepted a
// token carrying a ticket, the name it gave for that ticket is the name of
// every later token that carries the same bytes and is accepted too. The
// cache is consulted only for the name; every token is still accepted in
// full (ticket, authenticator, replay cache, channel bindings, mutual flag).
//
// Why it exists: MIT's GSSAPI makes a krb5 context (a re-read of krb5.conf;
// docs/PERFORMANCE.md, "Measured costs behind the code") to turn the accepted name into a union name, another
// to display it and a third to release it. A session whose ticket is known
// asks for no name: three contexts fewer (docs/KERBEROS.md).
//
// Bounded: the least recently used entry goes at `capacity`. Thread-safe.
#pragma once

#include <array>
#include <cstddef>
#include <list>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

namespace authrpc {

class KerberosTicketNames {
 public:
  explicit KerberosTicketNames(std::size_t capacity = 4096);
  KerberosTicketNames(const KerberosTicketNames&) = delete;
  KerberosTicketNames& operator=(const KerberosTicketNames&) = delete;

  // The DER bytes of the Ticket in a krb5 GSSAPI initial context token
  // (RFC 2743 3.1 framing with the krb5 OID, TOK_ID 01 00, then the AP-REQ of
  // RFC 4120 5.5.1); empty if `token` is not such a token.
  static std::string_view ticket_of(std::string_view token) noexcept;

  // The principal remembered for `ticket`, if any.
  std::optional<std::string> find(std::string_view ticket);
  // Remembers that `ticket` was accepted as `principal`'s.
  void remember(std::string_view ticket, std::string principal);

  std::size_t size() const;
  std::size_t capacity() const noexcept { return capacity_; }

 private:
  using Digest = std::array<unsigned char, 32>;
  struct DigestHash {
    std::size_t operator()(const Digest& d) const noexcept;
  };
  struct Entry {
    std::string principal;
    std::list<Digest>::iterator lru;
  };
  static Digest digest_of(std::string_view ticket);

  const std::size_t capacity_;
  mutable std::mutex mu_;
  std::unordered_map<Digest, Entry, DigestHash> entries_;
  std::list<Digest> lru_;  // most recently used first
};

}  // namespace authrpc
