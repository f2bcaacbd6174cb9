#include "minibench/jwt_bench.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <openssl/rsa.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <deque>
#include <exception>
#include <filesystem>
#include <vector>

#include "authrpc/components/jwt/jwt_keys.h"
#include "authrpc/components/jwt/jwt_verifier.h"
#include "authrpc/security/base64url.h"
#include "minibench/schedule.h"
#include "tests/testing/jwt_issuer.h"

namespace minibench {
namespace {

using authrpc::Errc;
using authrpc::Result;
using authrpc::Status;
using authrpc::testing::JwtTestKey;

Status errno_status(const std::string& what) {
  return Status(std::error_code(errno, std::system_category()), what);
}

// Owner-only: the token is a bearer secret.
Status write_private_file(const std::string& path, const std::string& text) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return errno_status("create " + path);
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const Status s = errno_status("write " + path);
      ::close(fd);
      return s;
    }
    done += static_cast<std::size_t>(n);
  }
  return ::close(fd) == 0 ? Status() : errno_status("close " + path);
}

// The claims of every minibench token: valid from a minute ago for an hour.
nlohmann::json bench_claims() {
  const auto now = std::chrono::duration_cast<std::chrono::seconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count();
  return {{"iss", kBenchJwtIssuer}, {"aud", kBenchJwtAudience}, {"sub", "minibench"},
          {"iat", now - 60},        {"nbf", now - 60},          {"exp", now + 3600}};
}

// A PS256 token (RSASSA-PSS, SHA-256, salt as long as the digest: RFC 7518
// §3.5) with the RSA key of `key`, whose JwtTestKey::sign() only makes RS256.
Result<std::string> sign_ps256(const JwtTestKey& key, const std::string& kid,
                               const nlohmann::json& payload) {
  using authrpc::security::base64url_encode;
  const nlohmann::json header = {{"alg", "PS256"}, {"kid", kid}};
  const std::string input = base64url_encode(header.dump()) + "." + base64url_encode(payload.dump());
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  EVP_PKEY_CTX* pctx = nullptr;
  std::size_t size = 0;
  if (!ctx || EVP_DigestSignInit(ctx.get(), &pctx, EVP_sha256(), nullptr, key.pkey()) != 1 ||
      EVP_PKEY_CTX_set_rsa_padding(pctx, RSA_PKCS1_PSS_PADDING) != 1 ||
      EVP_PKEY_CTX_set_rsa_pss_saltlen(pctx, RSA_PSS_SALTLEN_DIGEST) != 1 ||
      EVP_DigestSign(ctx.get(), nullptr, &size,
                     reinterpret_cast<const unsigned char*>(input.data()), input.size()) != 1) {
    return Status(Errc::kInternal, "PS256: signing failed");
  }
  std::string signature(size, '\0');
  if (EVP_DigestSign(ctx.get(), reinterpret_cast<unsigned char*>(signature.data()), &size,
                     reinterpret_cast<const unsigned char*>(input.data()), input.size()) != 1) {
    return Status(Errc::kInternal, "PS256: signing failed");
  }
  signature.resize(size);
  return input + "." + base64url_encode(signature);
}

// One cold check of one token.
struct VerifyCase {
  std::string alg;
  std::string token;
};

asio::awaitable<Result<Clock::duration>> verify_once(const authrpc::JwtVerifier& verifier,
                                                     const authrpc::JwkSet& keys,
                                                     const std::string& token) {
  const auto start = Clock::now();
  auto verified = verifier.verify_uncached(token, keys, std::chrono::system_clock::now());
  const auto elapsed = Clock::now() - start;
  if (!verified.ok()) co_return verified.status();
  co_return elapsed;
}

// The four keys' JWKS and one token per algorithm. JwtTestKey throws when
// OpenSSL fails.
Status make_cases(authrpc::JwkSet& keys, std::vector<VerifyCase>& cases) {
  try {
    const JwtTestKey rsa = JwtTestKey::rsa("rs256");
    const JwtTestKey ec = JwtTestKey::ec_p256("es256");
    const JwtTestKey ed = JwtTestKey::ed25519("eddsa");
    // The same RSA key published a second time for PS256: a JWK that names
    // its "alg" is used for that algorithm only.
    nlohmann::json ps = rsa.public_jwk();
    ps["kid"] = "ps256";
    ps["alg"] = "PS256";
    const nlohmann::json jwks = {
        {"keys", {rsa.public_jwk(), ps, ec.public_jwk(), ed.public_jwk()}}};
    auto parsed = authrpc::JwkSet::parse(jwks.dump());
    if (!parsed.ok()) return Status(parsed.code(), "JWKS: " + parsed.status().message);
    keys = std::move(*parsed);
    const nlohmann::json claims = bench_claims();
    auto ps256 = sign_ps256(rsa, "ps256", claims);
    if (!ps256.ok()) return ps256.status();
    cases = {{"RS256", rsa.sign(claims)},
             {"PS256", *ps256},
             {"ES256", ec.sign(claims)},
             {"EdDSA", ed.sign(claims)}};
    return {};
  } catch (const std::exception& e) {
    return Status(Errc::kInternal, std::string("JWT test keys: ") + e.what());
  }
}

}  // namespace

Result<std::unique_ptr<BenchJwtIssuer>> BenchJwtIssuer::make() {
  const char* tmp = std::getenv("TMPDIR");
  std::string dir = std::string(tmp && *tmp ? tmp : "/tmp") + "/minibench-jwt-XXXXXX";
  if (::mkdtemp(dir.data()) == nullptr) return errno_status("mkdtemp");
  std::unique_ptr<BenchJwtIssuer> issuer(new BenchJwtIssuer(dir));  // removes it on every return
  try {
    const JwtTestKey key = JwtTestKey::rsa("minibench");
    if (Status s = write_private_file(dir + "/jwks.json", authrpc::testing::jwks_document({&key}));
        !s.ok()) {
      return s;
    }
    if (Status s = write_private_file(dir + "/token", key.sign(bench_claims())); !s.ok()) return s;
  } catch (const std::exception& e) {
    return Status(Errc::kInternal, std::string("JWT test key: ") + e.what());
  }
  return issuer;
}

BenchJwtIssuer::~BenchJwtIssuer() {
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);
}

nlohmann::json BenchJwtIssuer::server_options() const {
  return {{"issuer", kBenchJwtIssuer},
          {"audience", kBenchJwtAudience},
          {"jwks_file", dir_ + "/jwks.json"}};
}

nlohmann::json BenchJwtIssuer::cold_server_options() const {
  nlohmann::json options = server_options();
  options["cache_entries"] = 0;
  return options;
}

nlohmann::json BenchJwtIssuer::client_options() const { return {{"token_file", dir_ + "/token"}}; }

asio::awaitable<Status> run_jwt_verify(asio::any_io_executor, const BenchPlan& plan,
                                       Report& report) {
  authrpc::JwkSet keys;
  std::vector<VerifyCase> cases;
  if (Status s = make_cases(keys, cases); !s.ok()) co_return s;
  authrpc::JwtPolicy policy;
  policy.issuers = {kBenchJwtIssuer};
  policy.audience = kBenchJwtAudience;
  policy.algorithms.clear();
  for (const auto& c : cases) policy.algorithms.push_back(c.alg);
  const authrpc::JwtVerifier verifier(std::move(policy));

  std::deque<Samples> samples(cases.size());
  std::vector<Measured> group;
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const std::string& token = cases[i].token;
    group.push_back({[&verifier, &keys, &token]() { return verify_once(verifier, keys, token); },
                     &samples[i], {}, "jwt-verify/" + cases[i].alg,
                     [&verifier, &keys, &token](asio::any_io_executor) {
                       return verify_once(verifier, keys, token);
                     }});
  }
  if (Status s = co_await run_group(plan, "jwt verify (in process)", std::move(group), false);
      !s.ok()) {
    co_return s;
  }
  for (std::size_t i = 0; i < cases.size(); ++i) {
    report.add(compared_row("jwt-verify/" + cases[i].alg, "jwt-verify", "in-process", samples[i],
                            nullptr));
  }
  co_return Status();
}

}  // namespace minibench
