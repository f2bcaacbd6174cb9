#include "authrpc/components/kerberos/kerberos_ticket_names.h"

#include <openssl/evp.h>

#include <cstring>

namespace authrpc {
namespace {

// One DER element at `pos` in `der`: its tag, and where its contents begin
// and end. False if it runs past the end or uses an indefinite or over-long
// length.
struct Element {
  unsigned char tag = 0;
  std::size_t begin = 0;  // first byte of the element (its tag)
  std::size_t content = 0;
  std::size_t end = 0;    // one past its last byte
};

bool read_element(std::string_view der, std::size_t pos, Element& e) noexcept {
  if (pos + 2 > der.size()) return false;
  e.begin = pos;
  e.tag = static_cast<unsigned char>(der[pos]);
  std::size_t length = static_cast<unsigned char>(der[pos + 1]);
  pos += 2;
  if (length & 0x80) {
    const std::size_t bytes = length & 0x7f;
    if (bytes == 0 || bytes > 4 || pos + bytes > der.size()) return false;
    length = 0;
    for (std::size_t i = 0; i < bytes; ++i) length = (length << 8) | static_cast<unsigned char>(der[pos + i]);
    pos += bytes;
  }
  if (length > der.size() - pos) return false;
  e.content = pos;
  e.end = pos + length;
  return true;
}

// 1.2.840.113554.1.2.2, the Kerberos V5 GSS-API mechanism, DER-encoded.
constexpr unsigned char kKrb5Oid[] = {0x2a, 0x86, 0x48, 0x86, 0xf7, 0x12, 0x01, 0x02, 0x02};

}  // namespace

KerberosTicketNames::KerberosTicketNames(std::size_t capacity)
    : capacity_(capacity == 0 ? 1 : capacity) {}

std::string_view KerberosTicketNames::ticket_of(std::string_view token) noexcept {
  // [APPLICATION 0] IMPLICIT SEQUENCE { thisMech OID, innerToken }
  Element outer, oid, ap_req, seq;
  if (!read_element(token, 0, outer) || outer.tag != 0x60 || outer.end != token.size()) return {};
  if (!read_element(token, outer.content, oid) || oid.tag != 0x06 ||
      oid.end - oid.content != sizeof kKrb5Oid ||
      std::memcmp(token.data() + oid.content, kKrb5Oid, sizeof kKrb5Oid) != 0) {
    return {};
  }
  // TOK_ID 01 00: KRB_AP_REQ (RFC 4121 4.1).
  if (oid.end + 2 > outer.end || token[oid.end] != 0x01 || token[oid.end + 1] != 0x00) return {};
  // AP-REQ ::= [APPLICATION 14] SEQUENCE { pvno [0], msg-type [1],
  //   ap-options [2], ticket [3] Ticket, authenticator [4] EncryptedData }
  if (!read_element(token, oid.end + 2, ap_req) || ap_req.tag != 0x6e) return {};
  if (!read_element(token, ap_req.content, seq) || seq.tag != 0x30 || seq.end > ap_req.end) return {};
  for (std::size_t pos = seq.content; pos < seq.end;) {
    Element field;
    if (!read_element(token, pos, field) || field.end > seq.end) return {};
    if (field.tag == 0xa3) return token.substr(field.begin, field.end - field.begin);
    pos = field.end;
  }
  return {};
}

KerberosTicketNames::Digest KerberosTicketNames::digest_of(std::string_view ticket) {
  Digest d{};
  unsigned int length = 0;
  EVP_Digest(ticket.data(), ticket.size(), d.data(), &length, EVP_sha256(), nullptr);
  return d;
}

std::size_t KerberosTicketNames::DigestHash::operator()(const Digest& d) const noexcept {
  std::size_t h;
  std::memcpy(&h, d.data(), sizeof h);  // already uniformly distributed
  return h;
}

std::optional<std::string> KerberosTicketNames::find(std::string_view ticket) {
  if (ticket.empty()) return std::nullopt;
  const Digest key = digest_of(ticket);
  std::lock_guard lock(mu_);
  const auto it = entries_.find(key);
  if (it == entries_.end()) return std::nullopt;
  lru_.splice(lru_.begin(), lru_, it->second.lru);
  return it->second.principal;
}

void KerberosTicketNames::remember(std::string_view ticket, std::string principal) {
  if (ticket.empty() || principal.empty()) return;
  const Digest key = digest_of(ticket);
  std::lock_guard lock(mu_);
  if (const auto it = entries_.find(key); it != entries_.end()) {
    it->second.principal = std::move(principal);
    lru_.splice(lru_.begin(), lru_, it->second.lru);
    return;
  }
  if (entries_.size() >= capacity_) {
    entries_.erase(lru_.back());
    lru_.pop_back();
  }
  lru_.push_front(key);
  entries_.emplace(key, Entry{std::move(principal), lru_.begin()});
}

std::size_t KerberosTicketNames::size() const {
  std::lock_guard lock(mu_);
  return entries_.size();
}

}  // namespace authrpc
