// security/hmac_sha256.h against RFC 4231's HMAC-SHA256 test vectors and
// OpenSSL's one-shot HMAC(), including from several threads at once.
#include "authrpc/security/hmac_sha256.h"

#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <string>
#include <thread>
#include <vector>

namespace authrpc::security {
namespace {

std::string unhex(std::string_view hex) {
  std::string out;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<char>(std::stoi(std::string(hex.substr(i, 2)), nullptr, 16)));
  }
  return out;
}

std::string hex(const std::array<std::uint8_t, kHmacSha256Bytes>& mac) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (auto b : mac) {
    out.push_back(digits[b >> 4]);
    out.push_back(digits[b & 15]);
  }
  return out;
}

std::span<const std::uint8_t> bytes(const std::string& s) {
  return {reinterpret_cast<const std::uint8_t*>(s.data()), s.size()};
}

struct Vector {
  const char* name;
  std::string key;
  std::string data;
  const char* mac;
};

const Vector kVectors[] = {
      {"case 1", std::string(20, '\x0b'), "Hi There",
       "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"},
      {"case 2", "Jefe", "what do ya want for nothing?",
       "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"},
      {"case 3", std::string(20, '\xaa'), std::string(50, '\xdd'),
       "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe"},
      {"case 4", unhex("0102030405060708090a0b0c0d0e0f10111213141516171819"),
       std::string(50, '\xcd'), "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b"},
      {"case 6 (key longer than a block)", std::string(131, '\xaa'),
       "Test Using Larger Than Block-Size Key - Hash Key First",
       "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"},
      {"exactly one block of key", std::string(64, '\x5a'), "one block",
       ""},  // filled in from OpenSSL's one-shot HMAC below
  };

std::string one_shot(const std::string& key, const std::string& data) {
  std::array<std::uint8_t, kHmacSha256Bytes> mac{};
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(data.data()), data.size(), mac.data(), &len);
  return hex(mac);
}

std::string expected(const Vector& v) { return *v.mac != '\0' ? v.mac : one_shot(v.key, v.data); }

TEST(HmacSha256Test, Rfc4231Vectors) {
  for (const auto& v : kVectors) {
    std::array<std::uint8_t, kHmacSha256Bytes> mac{};
    ASSERT_TRUE(hmac_sha256(bytes(v.key), {v.data}, &mac)) << v.name;
    EXPECT_EQ(hex(mac), expected(v)) << v.name;
    // The same MAC when the data comes in parts (the token proofs' label +
    // transcript), and after the per-thread context was keyed differently.
    const std::string first = v.data.substr(0, v.data.size() / 2);
    const std::string rest = v.data.substr(v.data.size() / 2);
    std::array<std::uint8_t, kHmacSha256Bytes> parts{};
    ASSERT_TRUE(hmac_sha256(bytes(v.key), {first, "", rest}, &parts)) << v.name;
    EXPECT_EQ(hex(parts), expected(v)) << v.name;
  }
}

// A prepared key gives the same MACs, whole or in parts, again and again
// (its states are copied per MAC, never consumed).
TEST(HmacSha256Test, PreparedKeyMatchesTheVectors) {
  for (const auto& v : kVectors) {
    const HmacSha256Key key(bytes(v.key));
    ASSERT_FALSE(key.empty()) << v.name;
    const std::string first = v.data.substr(0, v.data.size() / 2);
    const std::string rest = v.data.substr(v.data.size() / 2);
    for (int round = 0; round < 3; ++round) {
      std::array<std::uint8_t, kHmacSha256Bytes> whole{}, parts{};
      ASSERT_TRUE(key.mac({v.data}, &whole)) << v.name;
      ASSERT_TRUE(key.mac({first, "", rest}, &parts)) << v.name;
      EXPECT_EQ(hex(whole), expected(v)) << v.name << " round " << round;
      EXPECT_EQ(hex(parts), expected(v)) << v.name << " round " << round;
    }
  }
}

TEST(HmacSha256Test, EmptyOrMovedFromPreparedKeyMakesNoMac) {
  std::array<std::uint8_t, kHmacSha256Bytes> mac{};
  const HmacSha256Key none;
  EXPECT_TRUE(none.empty());
  EXPECT_FALSE(none.mac({"data"}, &mac));
  EXPECT_TRUE(HmacSha256Key(std::span<const std::uint8_t>()).empty());
  HmacSha256Key key(bytes("a key"));
  HmacSha256Key moved = std::move(key);
  EXPECT_TRUE(key.empty());  // NOLINT(bugprone-use-after-move): the moved-from state is specified
  EXPECT_FALSE(key.mac({"data"}, &mac));
  ASSERT_TRUE(moved.mac({"data"}, &mac));
  EXPECT_EQ(hex(mac), one_shot("a key", "data"));
}

TEST(HmacSha256Test, EmptyKeyIsRefused) {
  std::array<std::uint8_t, kHmacSha256Bytes> mac{};
  EXPECT_FALSE(hmac_sha256({}, {"data"}, &mac));
}

TEST(HmacSha256Test, ThreadsAgreeWithOneShotHmac) {
  const std::string key = "a token password of 32 bytes....";
  const HmacSha256Key prepared(bytes(key));  // one key, all threads at once
  std::vector<std::thread> threads;
  std::vector<int> mismatches(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 500; ++i) {
        const std::string data = "message " + std::to_string(t) + "/" + std::to_string(i);
        std::array<std::uint8_t, kHmacSha256Bytes> ours{}, theirs{};
        unsigned int len = 0;
        HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
             reinterpret_cast<const unsigned char*>(data.data()), data.size(), theirs.data(), &len);
        if (!hmac_sha256(bytes(key), {data}, &ours) || ours != theirs) ++mismatches[t];
        if (!prepared.mac({data}, &ours) || ours != theirs) ++mismatches[t];
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < 4; ++t) EXPECT_EQ(mismatches[t], 0) << "thread " << t;
}

}  // namespace
}  // namespace authrpc::security
