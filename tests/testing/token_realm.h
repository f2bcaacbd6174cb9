// kTokenEpoch, where the token tests' clocks start; StoredTokenFor(), the
// records the token store tests write; and TokenRealm: what unit tests of the token mechanisms (token_mechanism_test,
// token_sasl_test) authenticate against: a real SecretManager over a memory
// store, its clock under the test's control, and tokens it issues for
// kTokenRealmService; RefusedTokens, the bad tokens every token mechanism
// refuses alike. Header only; test code (fails the test on error).
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "authrpc/base/status.h"

#include "authrpc/security/clock.h"
#include "authrpc/security/memory_token_store.h"
#include "authrpc/security/secret_manager.h"
#include "authrpc/security/token.h"
#include "authrpc/security/token_store.h"

namespace authrpc::testing {

// Where the token tests' clocks start (2023-11-14).
inline const security::TokenTime kTokenEpoch{std::chrono::milliseconds(1'700'000'000'000)};

// A token store's record with sequence number `seq` for `id` (its kind,
// sequence number and master key 1 filled in) and a fresh random password.
inline security::StoredToken StoredTokenFor(std::uint64_t seq, security::TokenIdentifier id,
                                            security::TokenTime renew_date) {
  id.kind = "authrpc-delegation";
  id.sequence_number = seq;
  id.master_key_id = 1;
  security::StoredToken t;
  t.sequence_number = seq;
  t.identifier = *id.encode();
  t.password = security::SecretBytes::random(32);
  t.renew_date = renew_date;
  return t;
}

// The service the realm's tokens are for, as a client would name the server.
inline constexpr std::string_view kTokenRealmService = "tcp://127.0.0.1:7000";

struct TokenRealm {
  std::shared_ptr<security::ManualClock> clock = std::make_shared<security::ManualClock>(kTokenEpoch);
  std::shared_ptr<security::SecretManager> secrets;

  TokenRealm() {
    security::SecretManagerOptions o;
    o.clock = clock;
    auto opened = security::SecretManager::open(std::make_shared<security::MemoryTokenStore>(), o);
    EXPECT_TRUE(opened.ok()) << opened.status().to_string();
    if (opened.ok()) secrets = std::move(*opened);
  }

  // A token for OWNER (on behalf of REAL_USER if set), renewable by yarn@R.
  security::Token Issue(std::string owner = "alice@R", std::string real_user = {}) {
    auto t = secrets->issue(
        {std::move(owner), "yarn@R", std::move(real_user), std::string(kTokenRealmService)});
    EXPECT_TRUE(t.ok()) << t.status().to_string();
    return t.ok() ? *t : security::Token{};
  }
};

// A token a realm refuses: `make` issues it in the realm (and spoils it),
// the server refuses it with `code` and a message containing `text`.
struct RefusedToken {
  const char* name;
  std::function<security::Token(TokenRealm&)> make;
  Errc code;
  const char* text;
};

// What every token mechanism refuses alike, one row per way a token goes
// bad: expired, cancelled, forged password, unknown to this server.
inline std::vector<RefusedToken> RefusedTokens() {
  using namespace std::chrono_literals;
  return {
      {"expired",
       [](TokenRealm& r) {
         security::Token t = r.Issue();
         r.clock->advance(25h);
         return t;
       },
       Errc::kCredentialsExpired, "EXPIRED"},
      {"cancelled",
       [](TokenRealm& r) {
         security::Token t = r.Issue();
         EXPECT_TRUE(r.secrets->cancel(t, "alice@R").ok());
         return t;
       },
       Errc::kCredentialsExpired, "CANCELLED"},
      {"forged password",
       [](TokenRealm& r) {
         security::Token t = r.Issue();
         t.password.data()[0] ^= 1;
         return t;
       },
       Errc::kAuthenticationFailed, "FORGED"},
      {"unknown token (another server, same key id)",
       [](TokenRealm& r) {
         (void)r.Issue();
         TokenRealm other;
         (void)other.Issue();
         return other.Issue();  // sequence 2, never issued by r
       },
       Errc::kCredentialsExpired, "UNKNOWN_TOKEN"},
  };
}

}  // namespace authrpc::testing
