// Fuzz target: what the `kerberos` server does with a client's token before
// GSSAPI sees it (components/kerberos/kerberos_ticket_names.h): the DER walk
// that finds the Ticket inside a krb5 initial context token (RFC 2743 framing,
// RFC 4120 AP-REQ), and the cache of ticket names keyed by its digest. The
// token arrives in HELLO from an unauthenticated peer, so this runs on anyone's
// bytes. (gss_accept_sec_context itself is MIT krb5's code and needs a keytab
// per process; docs/FUZZING.md says why it is not driven here.)
#include <cstdint>
#include <string>
#include <string_view>

#include "authrpc/components/kerberos/kerberos_ticket_names.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* bytes, std::size_t size) {
  using namespace authrpc;
  const std::string_view token(reinterpret_cast<const char*>(bytes), size);
  const std::string_view ticket = KerberosTicketNames::ticket_of(token);
  if (ticket.empty()) return 0;
  if (ticket.data() < token.data() || ticket.data() + ticket.size() > token.data() + token.size()) {
    fuzz::fail("ticket_of returned bytes outside the token");
  }
  if (static_cast<std::uint8_t>(ticket[0]) != 0xa3) fuzz::fail("ticket_of returned a non-[3] field");
  // A small cache, so that eviction runs too.
  KerberosTicketNames names(2);
  names.remember(ticket, "alice@EXAMPLE.COM");
  names.remember(token, "bob@EXAMPLE.COM");
  names.remember(token.substr(0, token.size() / 2), "carol@EXAMPLE.COM");
  if (names.size() > names.capacity()) fuzz::fail("ticket name cache above its capacity");
  auto found = names.find(token.substr(0, token.size() / 2));
  if (!found || *found != "carol@EXAMPLE.COM") fuzz::fail("ticket name cache lost the newest entry");
  return 0;
}
