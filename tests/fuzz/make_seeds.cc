// Writes the seed corpora of the fuzz targets (docs/FUZZING.md) into
// <dir>/<target>/, made with the real encoders and the real client halves:
//   build-fuzz/tests/fuzz/fuzz_seeds tests/fuzz/corpus [source dir]
// The source dir (default ".") is where examples/*.json are read from. Seeds
// that carry a random part (a client nonce, a DIGEST-MD5 cnonce, a
// certificate key) differ from run to run; everything else is the same.
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <asio/io_context.hpp>

#include "authrpc/auth/mechanisms/simple/simple.h"
#include "authrpc/auth/mechanisms/token/token_mechanism.h"
#include "authrpc/components/kerberos/token_sasl.h"
#include "authrpc/rpc/messages.h"
#include "authrpc/rpc/wire.h"
#include "authrpc/security/base64url.h"
#include "authrpc/security/byte_codec.h"
#include "authrpc/security/credentials_file.h"
#include "authrpc/security/file_token_store.h"
#include "authrpc/security/hmac_sha256.h"
#include "authrpc/security/secret_manager.h"
#include "tests/fuzz/fuzz_support.h"
#include "tests/testing/tls_test_certs.h"

namespace authrpc::fuzz {
namespace {

namespace fs = std::filesystem;
using wire::FrameType;

fs::path g_out;

void seed(const std::string& target, const std::string& name, std::string_view bytes) {
  const fs::path dir = g_out / target;
  fs::create_directories(dir);
  std::ofstream out(dir / name, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) fail("cannot write a seed");
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(("cannot read " + path.string()).c_str());
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string u8(unsigned v) { return std::string(1, static_cast<char>(v)); }
std::string u16(std::size_t v) { return u8((v >> 8) & 0xff) + u8(v & 0xff); }
std::string u64(std::uint64_t v) {
  std::string out;
  security::ByteWriter(&out).u64(v);
  return out;
}

std::string preamble() {
  const auto p = wire::make_preamble();
  return std::string(p.begin(), p.end());
}

// A frame's body (what follows its 12-byte header).
std::string body_of(const std::string& frame) { return frame.substr(wire::kFrameHeaderSize); }

std::string client_initial(ClientMechanism& m, const ChannelInfo& channel) {
  asio::io_context io;
  auto session = m.start(channel);
  auto step = run(io, session->initial());
  if (step.kind != ClientStep::Kind::kSend) fail(step.error.to_string().c_str());
  return step.message;
}

std::string hello_frame(std::string_view mechanism, std::string message, std::string do_as = {}) {
  wire::Hello h;
  h.mechanism = std::string(mechanism);
  h.message = std::move(message);
  if (!do_as.empty()) {
    h.features |= wire::kFeatureDoAs;
    h.do_as = std::move(do_as);
  }
  std::string out;
  wire::append_hello(out, h);
  return out;
}

// ---- frame_fuzz ----------------------------------------------------------

void frame_seeds() {
  std::string frames;
  std::string hello = hello_frame("simple", "alice");
  std::string mechanisms;
  wire::append_mechanisms(mechanisms, {wire::kNoFeatures, {"kerberos", "token", "simple"}});
  std::string challenge, response, success, error, goaway, ping, request, response_frame, cancel,
      stream_request, data, window, end_stream;
  wire::append_auth_message(challenge, FrameType::kAuthChallenge, "challenge-bytes");
  wire::append_auth_message(response, FrameType::kAuthResponse, "response-bytes");
  wire::append_auth_success(success, {wire::kFeatureStreams, "final", "alice"});
  wire::append_error(error, 16, "authentication failed");
  wire::append_goaway(goaway, {7, "stopping"});
  wire::append_ping(ping, FrameType::kPing, "12345678");
  wire::append_request(request, 1, {"sys", "whoami", 5000}, "payload");
  wire::append_response(response_frame, 1, 0, "", "result");
  wire::append_cancel(cancel, 1);
  wire::append_stream_request(stream_request, 3, {"data", "upload", 0, 65536}, "first");
  wire::append_data_header(data, 3, 300);
  data += std::string(300, 'd');
  wire::append_window_update(window, 3, 65536);
  wire::append_end_stream(end_stream, 3);

  const std::pair<const char*, const std::string*> all[] = {
      {"hello", &hello},         {"mechanisms", &mechanisms}, {"auth-challenge", &challenge},
      {"auth-response", &response}, {"auth-success", &success}, {"error", &error},
      {"goaway", &goaway},       {"ping", &ping},             {"request", &request},
      {"response", &response_frame}, {"cancel", &cancel},     {"stream-request", &stream_request},
      {"window-update", &window}, {"end-stream", &end_stream}};
  for (const auto& [name, frame] : all) {
    // Mode 1: the frame type and its body.
    seed("frame_fuzz", std::string("body-") + name, u8(1) + frame->substr(4, 1) + body_of(*frame));
  }
  std::string hello_do_as = hello_frame("simple", "svc", "alice");
  seed("frame_fuzz", "body-hello-do-as", u8(1) + u8(0x01) + body_of(hello_do_as));
  // Mode 0: a preamble, 3 bytes of frame limit, a header.
  seed("frame_fuzz", "preamble-header", u8(0) + preamble().substr(0, 8) + u8(0) + u8(0x10) + u8(0) +
                                            request.substr(0, 12));
  // Mode 2: a client's whole session, in one read and in small pieces.
  const std::string session = hello + ping + request + stream_request + data + window + cancel +
                              end_stream;
  seed("frame_fuzz", "stream-whole", u8(2) + u8(4) + u8(255) + u8(0) + session);
  seed("frame_fuzz", "stream-chunked", u8(2) + u8(4) + u8(100) + u8(3) + u8(1) + u8(7) + u8(13) +
                                           session);
  seed("frame_fuzz", "stream-too-large", u8(2) + u8(0) + u8(255) + u8(0) + request + data);
}

// ---- negotiation_fuzz ----------------------------------------------------

std::string x509_client_der() {
  ScratchDir dir("seed-ca");
  testing::TestCa ca(dir.path(), "ca");
  testing::TestCa::Leaf leaf;
  leaf.name = "client";
  leaf.common_name = "alice";
  leaf.san = {"email:alice@example.com"};
  leaf.client = true;
  ca.issue(leaf);
  FILE* f = std::fopen(ca.cert_file("client").c_str(), "r");
  if (f == nullptr) fail("no client certificate");
  X509* cert = PEM_read_X509(f, nullptr, nullptr, nullptr);
  std::fclose(f);
  unsigned char* der = nullptr;
  const int n = i2d_X509(cert, &der);
  std::string out(reinterpret_cast<char*>(der), n > 0 ? static_cast<std::size_t>(n) : 0);
  OPENSSL_free(der);
  X509_free(cert);
  return out;
}

void negotiation_seeds() {
  const TokenRealm& realm = token_realm();
  ChannelInfo plain;
  plain.server_uri = std::string(TokenRealm::kService);
  ChannelInfo tls = plain;
  tls.tls = true;
  tls.channel_binding = std::string(TokenRealm::kChannelBinding);

  // flags, chunk count 0, then the client's bytes.
  auto session = [](unsigned flags, const std::string& bytes) { return u8(flags) + u8(0) + bytes; };
  SimpleClientMechanism simple("alice");
  seed("negotiation_fuzz", "simple", session(0, preamble() + hello_frame("simple", client_initial(simple, plain))));
  seed("negotiation_fuzz", "simple-do-as",
       session(8, preamble() + hello_frame("simple", "alice@EXAMPLE.COM", "bob")));
  seed("negotiation_fuzz", "list-then-simple",
       session(0, preamble() + hello_frame("", "") + hello_frame("simple", "alice")));
  std::string chunked = u8(0) + u8(3) + u8(5) + u8(1) + u8(9) + preamble() + hello_frame("simple", "alice");
  seed("negotiation_fuzz", "simple-chunked", chunked);

  TokenClientOptions options;
  options.token = realm.token;
  options.clock = realm.clock;
  TokenClientMechanism token(options);
  seed("negotiation_fuzz", "token", session(0, preamble() + hello_frame("token", client_initial(token, plain))));
  seed("negotiation_fuzz", "token-tls", session(1, preamble() + hello_frame("token", client_initial(token, tls))));

  for (auto name : {kTokenDigestMechanism, kTokenScramMechanism}) {
    TokenSaslClientMechanism sasl(name, options);
    std::string first = client_initial(sasl, plain);
    std::string response;
    wire::append_auth_message(response, FrameType::kAuthResponse, "n,,n=x,r=abc");
    seed("negotiation_fuzz", std::string(name), session(0, preamble() + hello_frame(name, first) + response));
  }
  const std::string der = x509_client_der();
  seed("negotiation_fuzz", "x509", u8(1 | 2) + u16(der.size()) + der + u8(0) + preamble() +
                                       hello_frame("x509", ""));
}

// ---- token_fuzz ----------------------------------------------------------

void token_seeds() {
  const TokenRealm& realm = token_realm();
  seed("token_fuzz", "identifier", u8(0) + realm.token.identifier);
  auto binary = realm.token.encode();
  auto text = realm.token.to_string();
  if (!binary.ok() || !text.ok()) fail("token encode");
  seed("token_fuzz", "token-binary", u8(1) + *binary);
  seed("token_fuzz", "token-string", u8(2) + *text);
  const auto hello = token_wire::make_hello(realm.token, {}, realm.clock->now());
  seed("token_fuzz", "hello", u8(3) + hello.encode());
  seed("token_fuzz", "server-raw-hello", u8(5) + u8(0x18) + hello.encode());

  // Mode 4, session flags: 1 realm identifier, 2 token service, 4 relative
  // time, 8 signed, 16 bound, 32 flip a byte, 64 replay.
  const std::string nonce(token_wire::kNonceBytes, 'n');
  const std::string proof(token_wire::kProofBytes, 'p');
  seed("token_fuzz", "session-valid", u8(4) + u8(0x18) + u8(1 | 2 | 4 | 8) + nonce + u64(0));
  seed("token_fuzz", "session-valid-bound-replayed",
       u8(4) + u8(0x58) + u8(1 | 2 | 4 | 8 | 16 | 64) + nonce + u64(0));
  seed("token_fuzz", "session-skewed", u8(4) + u8(0x08) + u8(1 | 2 | 4 | 8) + nonce + u64(3'600'000));
  seed("token_fuzz", "session-wrong-service",
       u8(4) + u8(0x98) + u8(1 | 4 | 8) + u8(9) + "tcp://x:1" + nonce + u64(0));
  seed("token_fuzz", "session-forged", u8(4) + u8(0x18) + u8(1 | 2 | 4) + nonce + u64(0) + proof);
  seed("token_fuzz", "session-flipped", u8(4) + u8(0x18) + u8(1 | 2 | 4 | 8 | 32) + nonce + u64(0) + u8(40));
  seed("token_fuzz", "session-unknown-identifier",
       u8(4) + u8(0x18) + u8(2 | 4) + u8(5) + "bogus" + nonce + u64(0) + proof);
  // The client clock at the extremes of an i64: INT64_MIN and INT64_MAX
  // (absolute times), which the skew check must not overflow on.
  seed("token_fuzz", "session-time-min", u8(4) + u8(0x18) + u8(1 | 2 | 8) + nonce + u64(1ull << 63));
  seed("token_fuzz", "session-time-max", u8(4) + u8(0x18) + u8(1 | 2 | 8) + nonce + u64(~0ull >> 1));
  std::string four = u8(4) + u8(0x19);
  for (int i = 0; i < 4; ++i) four += u8(1 | 2 | 4 | 8) + std::string(token_wire::kNonceBytes, char('a' + i)) + u64(i);
  seed("token_fuzz", "session-four-fill-replay-cache", four);
  // Mode 6, session flags: 0 genuine, 1 replay the last ticket HELLO (with
  // 4: an unseen one, from another address), 2 flip a byte of it, 3 a raw
  // message (u8 length).
  seed("token_fuzz", "tickets-genuine-replayed-flipped",
       u8(6) + u8(0) + u8(0) + u8(1) + u8(2) + u8(17) + u8(0));
  seed("token_fuzz", "tickets-raw", u8(6) + u8(0) + u8(3) + u8(4) + "\x03\x00\x01x" + u8(0));
  seed("token_fuzz", "tickets-unseen-elsewhere", u8(6) + u8(0) + u8(0) + u8(5) + u8(0));
}

// ---- credentials_file_fuzz -------------------------------------------------

void credentials_seeds() {
  const TokenRealm& realm = token_realm();
  ScratchDir dir("seed-credentials");
  security::CredentialsFile file;
  file.add(realm.token);
  const std::string one = dir.path() + "/one.json";
  if (!file.write(one).ok()) fail("credentials write");
  seed("credentials_file_fuzz", "one-token", read_file(one));
  security::Token other = realm.token;
  other.service = "unix:/run/authrpc.sock";
  file.add(other);
  const std::string two = dir.path() + "/two.json";
  if (!file.write(two).ok()) fail("credentials write");
  seed("credentials_file_fuzz", "two-tokens", read_file(two));
  seed("credentials_file_fuzz", "empty", R"({"version": 1, "tokens": {}})");
}

// ---- token_journal_fuzz ----------------------------------------------------

// The bodies of the records of a store file (header 16 bytes; records of
// u32 length, 4 check bytes, body, 16 digest bytes).
std::vector<std::string> record_bodies(std::string_view file) {
  std::vector<std::string> bodies;
  std::size_t p = 16;
  while (p + 24 <= file.size()) {
    security::ByteReader r(file.substr(p, 4));
    std::uint32_t len = 0;
    r.u32(&len);
    if (p + 24 + len > file.size()) break;
    bodies.emplace_back(file.substr(p + 8, len));
    p += 24 + len;
  }
  return bodies;
}

// A framed file for token_journal_fuzz: generation, count, (u16 len, body)*, tail.
std::string framed(std::uint8_t generation, const std::vector<std::string>& bodies,
                   std::string_view tail = {}) {
  std::string out = u8(generation) + u8(static_cast<unsigned>(bodies.size()));
  for (const auto& b : bodies) out += u16(b.size()) + b;
  return out + u8(static_cast<unsigned>(tail.size())) + std::string(tail);
}

void journal_seeds() {
  const TokenRealm& realm = token_realm();
  ScratchDir dir("seed-journal");
  const std::string store_dir = dir.path() + "/store";
  std::string journal0, snapshot, journal1;
  {
    auto store = security::FileTokenStore::open(store_dir);
    if (!store.ok()) fail("FileTokenStore::open");
    std::shared_ptr<security::FileTokenStore> shared = std::move(*store);
    security::SecretManagerOptions options;
    options.clock = realm.clock;
    auto secrets = security::SecretManager::open(shared, options);
    if (!secrets.ok()) fail("SecretManager::open");
    auto a = (*secrets)->issue({"alice@EXAMPLE.COM", "yarn@EXAMPLE.COM", "", "tcp://db1:7000"});
    auto b = (*secrets)->issue({"bob@EXAMPLE.COM", "", "carol@EXAMPLE.COM", "tcp://db2:7000"});
    if (!a.ok() || !b.ok()) fail("issue");
    (void)(*secrets)->renew(*a, "yarn@EXAMPLE.COM");
    (void)(*secrets)->cancel(*b, "bob@EXAMPLE.COM");
    journal0 = read_file(store_dir + "/journal.0");
    if (!shared->compact().ok()) fail("compact");
    auto c = (*secrets)->issue({"dave@EXAMPLE.COM", "", "", "tcp://db3:7000"});
    if (!c.ok()) fail("issue");
    snapshot = read_file(store_dir + "/snapshot");
    journal1 = read_file(store_dir + "/journal.1");
  }
  // Flags: 1 journal framed, 2 snapshot present, 4 snapshot framed, 16-48 generation.
  seed("token_journal_fuzz", "raw-journal0", u8(0) + u16(journal0.size()) + journal0);
  seed("token_journal_fuzz", "raw-journal0-torn",
       u8(0) + u16(journal0.size() - 5) + journal0.substr(0, journal0.size() - 5));
  seed("token_journal_fuzz", "raw-snapshot-journal1", u8(2 | 16) + u16(snapshot.size()) + snapshot +
                                                          u16(journal1.size()) + journal1);
  seed("token_journal_fuzz", "framed-journal0", u8(1) + framed(0, record_bodies(journal0)));
  seed("token_journal_fuzz", "framed-journal0-torn-tail",
       u8(1) + framed(0, record_bodies(journal0), std::string_view("\x00\x00\x00\x30torn", 8)));
  seed("token_journal_fuzz", "framed-snapshot-journal1",
       u8(1 | 2 | 4 | 16) + framed(1, record_bodies(snapshot)) + framed(1, record_bodies(journal1)));
}

// ---- config_fuzz, kerberos_ticket_fuzz -------------------------------------

void config_seeds(const fs::path& source) {
  const std::string acl = read_file(source / "examples/acl.json");
  seed("config_fuzz", "acl-example", u8(0) + acl);
  seed("config_fuzz", "acl-small", u8(0) + R"({"default": "allow", "admins": {"users": ["carol"]},
 "groups": {"source": "os", "cache_ttl_ms": 0},
 "services": {"data": {"users": ["alice"], "networks": ["10.0.0.0/8", "::1", "unix"]}}})");
  seed("config_fuzz", "server-example", u8(1) + u16(0) + read_file(source / "examples/server.json"));
  seed("config_fuzz", "server-tls-example", u8(1) + u16(0) + read_file(source / "examples/server-tls.json"));
  const std::string server = R"({
  "listen": ["tcp://127.0.0.1:0"],
  "auth": {"mechanisms": ["simple", "token"]},
  "tokens": {"store": "memory", "max_lifetime_ms": 3600000, "renew_interval_ms": 600000},
  "authorization": {"acl_file": "acl.json"},
  "audit_log": {"enabled": true, "path": "audit.log"},
  "shared_memory": {"enabled": true, "slot_size": 65536, "slots": 8},
  "stream_window": 1048576,
  "unix_socket_mode": "0660"
})";
  seed("config_fuzz", "server-with-acl", u8(1) + u16(acl.size()) + acl + server);
}

// A krb5 GSS-API initial context token around a made-up AP-REQ (the ticket
// is not valid anywhere; the framing is what ticket_of walks).
void kerberos_seeds() {
  auto der = [](unsigned tag, const std::string& content) {
    std::string out = u8(tag);
    if (content.size() < 0x80) {
      out += u8(static_cast<unsigned>(content.size()));
    } else {
      out += u8(0x82) + u16(content.size());
    }
    return out + content;
  };
  const std::string oid = der(0x06, "\x2a\x86\x48\x86\xf7\x12\x01\x02\x02");
  const std::string ticket = der(0x61, der(0x30, der(0xa0, der(0x02, "\x05")) +
                                                     der(0xa1, der(0x1b, "EXAMPLE.COM")) +
                                                     der(0xa2, der(0x30, std::string(20, 's'))) +
                                                     der(0xa3, der(0x30, std::string(150, 'e')))));
  const std::string ap_req = der(0x6e, der(0x30, der(0xa0, der(0x02, "\x05")) + der(0xa1, der(0x02, "\x0e")) +
                                                     der(0xa2, der(0x03, std::string("\x00\x20\x00\x00\x00", 5))) +
                                                     der(0xa3, ticket) +
                                                     der(0xa4, der(0x30, std::string(100, 'a')))));
  seed("kerberos_ticket_fuzz", "ap-req", der(0x60, oid + std::string("\x01\x00", 2) + ap_req));
  seed("kerberos_ticket_fuzz", "not-krb5", der(0x60, der(0x06, "\x2b\x06\x01\x05\x05\x02") + "x"));
}

// ---- jwt_fuzz ----------------------------------------------------------------

// An OAUTHBEARER message around an HS256 token signed with jwt_fuzz's key
// (valid until 2030), one with a made-up EdDSA signature, and a JWKS.
void jwt_seeds() {
  using authrpc::security::base64url_encode;
  auto hs256 = [](const std::string& header, const std::string& payload) {
    const std::string input = base64url_encode(header) + "." + base64url_encode(payload);
    std::array<std::uint8_t, authrpc::security::kHmacSha256Bytes> mac{};
    const std::string_view key = kJwtHmacKey;
    if (!authrpc::security::hmac_sha256(
            {reinterpret_cast<const std::uint8_t*>(key.data()), key.size()}, {input}, &mac)) {
      fail("hmac");
    }
    return input + "." +
           base64url_encode(std::string_view(reinterpret_cast<const char*>(mac.data()), mac.size()));
  };
  auto oauthbearer = [](const std::string& token) {
    return "n,,\x01host=localhost\x01" "auth=Bearer " + token + "\x01\x01";
  };
  const std::string claims =
      R"({"iss":"https://idp.fuzz","aud":["fuzz","x"],"sub":"alice","exp":1900000000,)"
      R"("iat":1799999000,"nbf":1799999000,"groups":["staff","ops"],"cnf":{"x5t#S256":"abc"}})";
  seed("jwt_fuzz", "hs256-valid", oauthbearer(hs256(R"({"alg":"HS256","typ":"JWT"})", claims)));
  seed("jwt_fuzz", "eddsa-forged",
       oauthbearer(base64url_encode(R"({"alg":"EdDSA","kid":"ed"})") + "." +
                   base64url_encode(claims) + "." + base64url_encode(std::string(64, 'x'))));
  seed("jwt_fuzz", "es256-forged",
       "y,a=alice,\x01" "auth=bearer " + base64url_encode(R"({"alg":"ES256","kid":"ec","typ":"at+jwt"})") +
           "." + base64url_encode(claims) + "." + base64url_encode(std::string(64, 'y')) + "\x01\x01");
  seed("jwt_fuzz", "jwks",
       R"({"keys":[{"kty":"RSA","kid":"r","use":"sig","alg":"RS256","n":"AQAB","e":"AQAB"},)"
       R"({"kty":"OKP","crv":"Ed25519","kid":"ed","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"},)"
       R"({"kty":"oct","k":"c2VjcmV0"}]})");
}

// ---- jwt_claims_fuzz -----------------------------------------------------------

// Header and claims as an issuer writes them (the target signs them): a
// valid set, dates at the edges of the clock (2262) and of what is read
// (3000), and claims of the wrong types.
void jwt_claims_seeds() {
  const std::string header = R"({"alg":"HS256","typ":"at+jwt"})";
  const std::string base = R"("iss":"https://idp.fuzz","aud":["fuzz","x"],"sub":"alice","groups":["staff","ops"])";
  seed("jwt_claims_fuzz", "valid",
       header + "\n{" + base + R"(,"exp":1800003600,"iat":1799999000,"nbf":1799999000})");
  seed("jwt_claims_fuzz", "far-dates",
       header + "\n{" + base + R"(,"exp":32503679999.5,"iat":9300000000,"nbf":9223372036})");
  seed("jwt_claims_fuzz", "bad-types",
       header + "\n{" + base + R"(,"exp":"soon","iat":-1,"nbf":null,"cnf":{"x5t#S256":7}})");
  seed("jwt_claims_fuzz", "claims-only", "{" + base + R"(,"exp":1e10})");
}

// ---- admin_request_fuzz -------------------------------------------------------

// Requests as they reach the admin listener, as the target splits them
// (method, target, Host fields, one a line): a Prometheus scrape, kubelet's
// probes (Host: the pod IP and port), a configured name, HTTP/1.0 without
// Host, and the refusals: another method, an encoded path, a rebound name,
// two Host fields.
void admin_request_seeds() {
  const auto request = [](const std::string& name, const std::string& text) {
    seed("admin_request_fuzz", name, text);
  };
  request("prometheus-scrape", "GET\n/metrics\n127.0.0.1:9464");
  request("kubelet-liveness", "GET\n/healthz\n10.244.1.7:9464");
  request("kubelet-readiness", "GET\n/readyz\n10.244.1.7:9464");
  request("head-ipv6", "HEAD\n/metrics\n[::1]:9464");
  request("localhost", "GET\n/metrics\nlocalhost:9464");
  request("configured-name", "GET\n/metrics\nmetrics.example:9464\nmetrics.example");
  request("http10-no-host", "GET\n/healthz");
  request("query", "GET\n/metrics?name[]=x\n127.0.0.1");
  request("propfind", "PROPFIND\n/metrics\n127.0.0.1:9464");
  request("connect", "CONNECT\n127.0.0.1:9464\n127.0.0.1:9464");
  request("encoded-nul", "GET\n/metrics%00\n127.0.0.1:9464");
  request("dot-dot", "GET\n/metrics/../metrics\n127.0.0.1:9464");
  request("rebound", "GET\n/metrics\nevil.example:9464");
  request("two-hosts", "GET\n/metrics\n127.0.0.1:9464\nevil.example");
}

}  // namespace
}  // namespace authrpc::fuzz

int main(int argc, char** argv) {
  using namespace authrpc::fuzz;
  if (argc < 2) {
    std::fprintf(stderr, "usage: fuzz_seeds OUT_DIR [SOURCE_DIR]\n");
    return 2;
  }
  g_out = argv[1];
  const std::filesystem::path source = argc > 2 ? argv[2] : ".";
  frame_seeds();
  negotiation_seeds();
  token_seeds();
  credentials_seeds();
  journal_seeds();
  config_seeds(source);
  kerberos_seeds();
  jwt_seeds();
  jwt_claims_seeds();
  admin_request_seeds();
  std::printf("seeds written to %s\n", argv[1]);
  return 0;
}
