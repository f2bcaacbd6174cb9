// KerberosTicketNames (components/kerberos/kerberos_ticket_names.h): finding
// the Ticket in a krb5 GSSAPI initial context token, and the bounded cache of
// names. tests/kerberos_itest.cc checks it against tokens from a real KDC.
#include "authrpc/components/kerberos/kerberos_ticket_names.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

namespace authrpc {
namespace {

// One DER element: tag, definite length (short or long form), contents.
std::string Tlv(unsigned char tag, const std::string& content) {
  std::string out(1, static_cast<char>(tag));
  const std::size_t n = content.size();
  if (n < 0x80) {
    out += static_cast<char>(n);
  } else if (n <= 0xff) {
    out += "\x81";
    out += static_cast<char>(n);
  } else {
    out += "\x82";
    out += static_cast<char>(n >> 8);
    out += static_cast<char>(n & 0xff);
  }
  return out + content;
}

const std::string kKrb5Oid = Tlv(0x06, "\x2a\x86\x48\x86\xf7\x12\x01\x02\x02");

// A Ticket element ([3]) with `size` bytes of (fake) contents.
std::string TicketField(std::size_t size, char fill) {
  return Tlv(0xa3, Tlv(0x61, std::string(size, fill)));
}

// An initial context token around an AP-REQ carrying `ticket`.
std::string GssToken(const std::string& ticket, const std::string& oid = kKrb5Oid,
                  const std::string& tok_id = std::string("\x01\x00", 2)) {
  const std::string ap_req = Tlv(
      0x6e, Tlv(0x30, Tlv(0xa0, Tlv(0x02, "\x05")) + Tlv(0xa1, Tlv(0x02, "\x0e")) +
                          Tlv(0xa2, Tlv(0x03, std::string("\x00\x20\x00\x00\x00", 5))) + ticket +
                          Tlv(0xa4, Tlv(0x30, std::string(40, 'A')))));
  return Tlv(0x60, oid + tok_id + ap_req);
}

TEST(TicketOfTest, FindsTheTicketElement) {
  struct Case {
    const char* name;
    std::size_t ticket_size;  // short form, one-byte and two-byte long forms
  };
  for (const Case& c : {Case{"short", 40}, Case{"long1", 200}, Case{"long2", 1500}}) {
    SCOPED_TRACE(c.name);
    const std::string ticket = TicketField(c.ticket_size, 'T');
    const std::string token = GssToken(ticket);
    EXPECT_EQ(KerberosTicketNames::ticket_of(token), ticket);
  }
}

TEST(TicketOfTest, AnythingElseHasNoTicket) {
  const std::string ticket = TicketField(64, 'T');
  const std::string good = GssToken(ticket);
  const std::string spnego_oid = Tlv(0x06, "\x2b\x06\x01\x05\x05\x02");
  struct Case {
    const char* name;
    std::string token;
  };
  const std::vector<Case> cases = {
      {"empty", ""},
      {"not a GSS token", "\x30\x03\x02\x01\x05"},
      {"SPNEGO instead of krb5", GssToken(ticket, spnego_oid)},
      {"AP-REP token id", GssToken(ticket, kKrb5Oid, std::string("\x02\x00", 2))},
      {"no ticket field", GssToken("")},
      {"trailing bytes", good + "x"},
      {"indefinite length", std::string("\x60\x80", 2) + good.substr(2)},
      {"length beyond the end", std::string("\x60\x84\x7f\xff\xff\xff", 6) + good.substr(2)},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_TRUE(KerberosTicketNames::ticket_of(c.token).empty());
  }
  // Every truncation of a good token.
  for (std::size_t n = 0; n < good.size(); ++n) {
    SCOPED_TRACE("first " + std::to_string(n) + " bytes");
    EXPECT_TRUE(KerberosTicketNames::ticket_of(std::string_view(good).substr(0, n)).empty());
  }
}

TEST(KerberosTicketNamesTest, RemembersEachTicketsPrincipal) {
  KerberosTicketNames names;
  const std::string alice = TicketField(100, 'a'), carol = TicketField(100, 'c');
  EXPECT_FALSE(names.find(alice));
  names.remember(alice, "alice@R");
  names.remember(carol, "carol@R");
  EXPECT_EQ(names.find(alice), "alice@R");
  EXPECT_EQ(names.find(carol), "carol@R");
  EXPECT_FALSE(names.find(TicketField(100, 'b')));
  // Nothing to remember: no ticket, no name.
  names.remember("", "x@R");
  names.remember(TicketField(10, 'z'), "");
  EXPECT_FALSE(names.find(""));
  EXPECT_FALSE(names.find(TicketField(10, 'z')));
  EXPECT_EQ(names.size(), 2u);
}

TEST(KerberosTicketNamesTest, ForgetsTheLeastRecentlyUsedAtCapacity) {
  KerberosTicketNames names(2);
  const std::string a = TicketField(8, 'a'), b = TicketField(8, 'b'), c = TicketField(8, 'c');
  names.remember(a, "a@R");
  names.remember(b, "b@R");
  EXPECT_TRUE(names.find(a));  // b is now the least recently used
  names.remember(c, "c@R");
  EXPECT_EQ(names.size(), 2u);
  EXPECT_EQ(names.find(a), "a@R");
  EXPECT_FALSE(names.find(b));
  EXPECT_EQ(names.find(c), "c@R");
}

TEST(KerberosTicketNamesTest, ThreadsSeeOnlyWhatWasRemembered) {
  KerberosTicketNames names(64);
  std::vector<std::thread> threads;
  std::vector<int> wrong(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 2000; ++i) {
        const int k = (i * 7 + t) % 100;
        const std::string ticket = TicketField(32, static_cast<char>('0' + k % 64)) + std::to_string(k);
        const std::string name = "p" + std::to_string(k) + "@R";
        if (auto found = names.find(ticket); found && *found != name) ++wrong[t];
        names.remember(ticket, name);
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int t = 0; t < 4; ++t) EXPECT_EQ(wrong[t], 0) << "thread " << t;
  EXPECT_LE(names.size(), 64u);
}

}  // namespace
}  // namespace authrpc
