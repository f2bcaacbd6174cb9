// The client message of the `jwt` mechanism: RFC 7628's OAUTHBEARER initial
// client response, so that a SASL OAUTHBEARER client (Kafka's, Cyrus's
// plugins) is easily adapted:
//
//   gs2-header  "n," [ "a=" authzid ] ","
//   kvsep       0x01
//   kvpairs     "host=" host 0x01 "port=" port 0x01 "auth=Bearer " token 0x01
//   kvsep       0x01
//
// Parsed strictly and within a size bound: the message arrives before its
// sender is authenticated. docs/PROTOCOL.md "jwt".
#pragma once

#include <string>
#include <string_view>

#include "authrpc/base/result.h"

namespace authrpc {

struct OAuthBearerMessage {
  std::string authzid;  // "" when absent
  std::string host;     // "" when absent
  std::string port;     // "" when absent
  // Points into the parsed text: the b64token after "Bearer ".
  std::string_view token;
};

// The message for `token` (host and port may be empty: their pairs are then
// left out). The result holds the token: wipe it after sending.
std::string format_oauthbearer(std::string_view token, std::string_view host,
                               std::string_view port);

// AUTHENTICATION_FAILED with what is wrong (never quoting the token) for a
// message that is not an OAUTHBEARER initial response: a channel-binding
// flag other than n or y, a malformed authzid, a pair that is not key=value,
// a key twice, more than 16 pairs, no auth pair, a scheme other than Bearer, a token outside
// the b64token alphabet, or more than `max_bytes` bytes.
Result<OAuthBearerMessage> parse_oauthbearer(std::string_view message, std::size_t max_bytes);

}  // namespace authrpc
