#include "tests/testing/glewlwyd_idp.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/rsa.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <thread>
#include <vector>

#include "authrpc/base/log.h"
#include "authrpc/security/base64url.h"
#include "tests/testing/child_process.h"
#include "tests/testing/http_client.h"
#include "tests/testing/test_support.h"
#include "tests/testing/test_tls.h"

namespace authrpc::testing {
namespace {

constexpr const char* kGlewlwyd = "/usr/bin/glewlwyd";
constexpr const char* kSqlite3 = "/usr/bin/sqlite3";
// The package's schema and first data (admin user, module instances), as
// dbconfig-common applies it; /usr/share/doc's gzipped copy may be absent
// from minimal images (dpkg path-exclude).
constexpr const char* kInitSql = "/usr/share/dbconfig-common/data/glewlwyd/install/sqlite3";
constexpr const char* kModuleRoot = "/usr/lib/glewlwyd";
constexpr const char* kPluginName = "oidc";  // its endpoints are /api/oidc/...
constexpr auto kStartTimeout = std::chrono::seconds(20);
constexpr auto kStopTimeout = std::chrono::seconds(5);

using Clock = std::chrono::steady_clock;

// SQL string literal.
std::string sql_quote(std::string_view text) {
  std::string out = "'";
  for (char c : text) {
    out += c;
    if (c == '\'') out += '\'';
  }
  return out + "'";
}

// An RSA-2048 key pair as PEM (PKCS#8 private, SubjectPublicKeyInfo public).
Status make_signing_key(std::string& private_pem, std::string& public_pem) {
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> key(EVP_RSA_gen(2048), EVP_PKEY_free);
  std::unique_ptr<BIO, decltype(&BIO_free)> priv(BIO_new(BIO_s_mem()), BIO_free);
  std::unique_ptr<BIO, decltype(&BIO_free)> pub(BIO_new(BIO_s_mem()), BIO_free);
  if (!key || !priv || !pub ||
      PEM_write_bio_PrivateKey(priv.get(), key.get(), nullptr, nullptr, 0, nullptr, nullptr) != 1 ||
      PEM_write_bio_PUBKEY(pub.get(), key.get()) != 1) {
    return Status(Errc::kInternal, "cannot make an RSA signing key");
  }
  char* data = nullptr;
  long n = BIO_get_mem_data(priv.get(), &data);
  private_pem.assign(data, static_cast<std::size_t>(n));
  n = BIO_get_mem_data(pub.get(), &data);
  public_pem.assign(data, static_cast<std::size_t>(n));
  return {};
}

std::string random_secret() {
  unsigned char bytes[24];
  if (RAND_bytes(bytes, sizeof bytes) != 1) return {};
  return security::base64url_encode(std::string_view(reinterpret_cast<const char*>(bytes), sizeof bytes));
}

// Standard base64 (HTTP Basic credentials).
std::string base64(std::string_view bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3) + 1, '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(bytes.data()), static_cast<int>(bytes.size()));
  out.resize(static_cast<std::size_t>(n));
  return out;
}

}  // namespace

bool GlewlwydIdp::installed() {
  const std::string plugin = std::string(kModuleRoot) + "/plugin/libprotocol_oidc.so";
  return ::access(kGlewlwyd, X_OK) == 0 && ::access(kSqlite3, X_OK) == 0 && std::filesystem::exists(kInitSql) &&
         std::filesystem::exists(plugin);
}

std::string GlewlwydIdp::audience() { return "https://rpc.authrpc.test/"; }
std::string GlewlwydIdp::other_audience() { return "https://other.authrpc.test/"; }
std::string GlewlwydIdp::scope() { return "authrpc"; }
std::string GlewlwydIdp::client_id() { return "authrpc-test"; }

std::string GlewlwydIdp::issuer() const {
  return "https://127.0.0.1:" + std::to_string(port_) + "/api/" + kPluginName;
}
std::string GlewlwydIdp::jwks_url() const { return issuer() + "/jwks"; }
std::string GlewlwydIdp::token_url() const { return issuer() + "/token"; }
std::string GlewlwydIdp::ca_file() const { return tls_.ca_file(); }
std::string GlewlwydIdp::log_file() const { return dir_ + "/glewlwyd.log"; }

GlewlwydIdp::GlewlwydIdp(const TestTls& tls) : tls_(tls) {}

GlewlwydIdp::~GlewlwydIdp() {
  (void)stop();
  if (!dir_.empty()) {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
}

Result<std::unique_ptr<GlewlwydIdp>> GlewlwydIdp::start(const TestTls& tls) {
  if (!installed()) {
    return Result<std::unique_ptr<GlewlwydIdp>>(
        Errc::kFailedPrecondition, "glewlwyd is not installed: run scripts/setup.sh as root (package glewlwyd)");
  }
  std::unique_ptr<GlewlwydIdp> idp(new GlewlwydIdp(tls));
  if (Status s = idp->prepare(); !s.ok()) return s;
  // A port picked by FreeLoopbackPort() may be taken by another process before
  // glewlwyd binds it (ephemeral ports of other tests' connections come from
  // the same range): start again on another port.
  Status s = idp->start_once();
  for (int retry = 0; retry < 3 && !s.ok() && idp->lost_the_port(); ++retry) {
    std::fprintf(stderr, "glewlwyd_idp: port %d was taken before glewlwyd bound it; trying another\n", idp->port_);
    s = idp->start_once();
  }
  if (!s.ok()) return s;
  return idp;
}

Status GlewlwydIdp::prepare() {
  dir_ = TempDir("glewlwyd");
  if (dir_.empty()) return Status(Errc::kInternal, "no temporary directory");
  if (Status s = make_signing_key(signing_private_pem_, signing_public_pem_); !s.ok()) return s;
  client_secret_ = random_secret();
  if (client_secret_.empty()) return Status(Errc::kInternal, "RAND_bytes failed");

  // The OIDC plugin instance, as the admin UI would save it (parameter names:
  // glewlwyd's docs/OIDC.md and src/plugin/protocol_oidc.c). Only the
  // client-credentials grant is on; `aud` is the requested resource, which
  // must be one the scope lists.
  const nlohmann::json plugin = {
      {"iss", "https://127.0.0.1:PORT/api/oidc"},  // replaced per start, see start_once()
      {"jwt-type", "rsa"},
      {"jwt-key-size", "256"},
      {"key", signing_private_pem_},
      {"cert", signing_public_pem_},
      {"access-token-duration", 3600},
      {"refresh-token-duration", 3600},
      {"code-duration", 600},
      {"refresh-token-rolling", false},
      {"allow-non-oidc", true},
      {"auth-type-code-enabled", false},
      {"auth-type-token-enabled", false},
      {"auth-type-none-enabled", false},
      {"auth-type-password-enabled", false},
      {"auth-type-client-enabled", true},
      {"auth-type-refresh-enabled", false},
      {"auth-type-device-enabled", false},
      {"subject-type", "public"},
      {"jwks-show", true},
      {"resource-allowed", true},
      {"resource-scope", {{scope(), {audience(), other_audience()}}}},
      {"scope", nlohmann::json::array()},
  };
  const std::string client = "(SELECT gc_id FROM g_client WHERE gc_client_id=" + sql_quote(client_id()) + ")";
  auto property = [&](std::string_view name, std::string_view value) {
    return "INSERT INTO g_client_property (gc_id, gcp_name, gcp_value) VALUES (" + client + ", " + sql_quote(name) +
           ", " + sql_quote(value) + ");\n";
  };
  std::string sql;
  sql += "INSERT INTO g_plugin_module_instance (gpmi_module, gpmi_name, gpmi_display_name, gpmi_parameters) VALUES "
         "('oidc', " + sql_quote(kPluginName) + ", 'authrpc tests', " + sql_quote(plugin.dump()) + ");\n";
  sql += "INSERT INTO g_scope (gs_name, gs_display_name, gs_description, gs_password_required) VALUES (" +
         sql_quote(scope()) + ", 'authrpc', 'authrpc calls', 0);\n";
  // A confidential client of the database client module that the init SQL
  // creates; glewlwyd compares a `client_secret` property as is.
  sql += "INSERT INTO g_client (gc_client_id, gc_name, gc_confidential, gc_enabled) VALUES (" + sql_quote(client_id()) +
         ", 'authrpc tests', 1, 1);\n";
  sql += property("authorization_type", "client_credentials");
  sql += property("token_endpoint_auth_method", "client_secret_basic");
  sql += property("client_secret", client_secret_);
  sql += "INSERT INTO g_client_scope (gcs_name) VALUES (" + sql_quote(scope()) + ");\n";
  sql += "INSERT INTO g_client_scope_client (gc_id, gcs_id) VALUES (" + client +
         ", (SELECT gcs_id FROM g_client_scope WHERE gcs_name=" + sql_quote(scope()) + "));\n";
  const std::string setup = dir_ + "/setup.sql";
  if (!WriteFile(setup, sql)) return Status(Errc::kInternal, "cannot write " + setup);

  const std::string output = dir_ + "/sqlite3.out";
  // One transaction: statement by statement, sqlite3 would sync the file
  // ~850 times (2.6 s here instead of 20 ms).
  const pid_t pid = SpawnLogged({kSqlite3, "-bail", dir_ + "/glewlwyd.db", "BEGIN;", std::string(".read ") + kInitSql,
                           ".read " + setup, "COMMIT;"},
                          output);
  if (pid < 0) return Status(Errc::kInternal, "fork failed");
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return Status(Errc::kInternal, "sqlite3 could not create glewlwyd's database: " + FileTail(output));
  }
  return {};
}

Status GlewlwydIdp::start_once() {
  port_ = FreeLoopbackPort();
  if (port_ <= 0) return Status(Errc::kUnavailable, "no free port");
  // The issuer names the port, so the plugin's parameters change per start.
  const std::string db = dir_ + "/glewlwyd.db";
  const std::string update_output = dir_ + "/sqlite3.out";
  const std::string set_issuer =
      "UPDATE g_plugin_module_instance SET gpmi_parameters = json_set(gpmi_parameters, '$.iss', " +
      sql_quote(issuer()) + ") WHERE gpmi_name = " + sql_quote(kPluginName) + ";";
  const pid_t sql_pid = SpawnLogged({kSqlite3, "-bail", db, set_issuer}, update_output);
  int status = 0;
  if (sql_pid < 0 || ::waitpid(sql_pid, &status, 0) != sql_pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return Status(Errc::kInternal, "sqlite3 could not set the issuer: " + FileTail(update_output));
  }

  const std::string config = dir_ + "/glewlwyd.conf";
  const std::string modules = kModuleRoot;
  std::string text;
  text += "port=" + std::to_string(port_) + "\n";
  text += "bind_address=\"127.0.0.1\"\n";
  text += "external_url=\"https://127.0.0.1:" + std::to_string(port_) + "\"\n";
  text += "api_prefix=\"api\"\n";
  text += "log_mode=\"file\"\nlog_level=\"DEBUG\"\nlog_file=\"" + log_file() + "\"\n";
  text += "user_module_path=\"" + modules + "/user\"\n";
  text += "client_module_path=\"" + modules + "/client\"\n";
  text += "user_auth_scheme_module_path=\"" + modules + "/scheme\"\n";
  text += "plugin_module_path=\"" + modules + "/plugin\"\n";
  text += "use_secure_connection=true\n";
  text += "secure_connection_key_file=\"" + tls_.key_file("server") + "\"\n";
  text += "secure_connection_pem_file=\"" + tls_.cert_file("server") + "\"\n";
  text += "hash_algorithm=\"SHA512\"\n";
  text += "database = {\n  type = \"sqlite3\"\n  path = \"" + db + "\"\n};\n";
  if (!WriteFile(config, text)) return Status(Errc::kInternal, "cannot write " + config);

  // Each attempt gets a fresh log, so that lost_the_port() reads this one's.
  std::filesystem::remove(log_file());
  pid_ = SpawnLogged({kGlewlwyd, "-c", config}, dir_ + "/glewlwyd.out");
  if (pid_ < 0) return Status(Errc::kInternal, "fork failed");

  const auto deadline = Clock::now() + kStartTimeout;
  std::string last_error;
  while (Clock::now() < deadline) {
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return Status(Errc::kUnavailable, "glewlwyd exited during start (status " + std::to_string(status) +
                                            "); see " + log_file() + ": " + FileTail(log_file()));
    }
    HttpRequest probe;
    probe.url = jwks_url();
    probe.ca_file = ca_file();
    probe.timeout = std::chrono::seconds(2);
    auto answer = http_request(probe);
    if (answer.ok() && answer->status == 200) return {};
    last_error = answer.ok() ? "HTTP " + std::to_string(answer->status) : answer.status().to_string();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  (void)stop();
  return Status(Errc::kUnavailable, "glewlwyd did not serve its JWKS within 20 s (last: " + last_error + "); see " +
                                        log_file() + ": " + FileTail(log_file()));
}

bool GlewlwydIdp::lost_the_port() const {
  return pid_ <= 0 && ReadFile(log_file()).find("Address already in use") != std::string::npos;
}

Status GlewlwydIdp::stop() {
  if (pid_ <= 0) return {};
  ::kill(pid_, SIGTERM);
  const auto deadline = Clock::now() + kStopTimeout;
  int status = 0;
  while (Clock::now() < deadline) {
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return {};
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ::kill(pid_, SIGKILL);
  ::waitpid(pid_, &status, 0);
  pid_ = -1;
  return Status(Errc::kDeadlineExceeded, "glewlwyd ignored SIGTERM for 5 s and was killed; see " + log_file());
}

Result<std::string> GlewlwydIdp::client_credentials_token(std::string_view scope, std::string_view resource) const {
  HttpRequest request;
  request.method = "POST";
  request.url = token_url();
  request.ca_file = ca_file();
  request.headers = {{"Content-Type", "application/x-www-form-urlencoded"},
                     {"Authorization", "Basic " + base64(client_id() + ":" + client_secret_)}};
  request.body = "grant_type=client_credentials&scope=" + form_urlencode(scope) +
                 "&resource=" + form_urlencode(resource.empty() ? std::string_view(audience()) : resource);
  auto answer = http_request(request);
  if (!answer.ok()) return answer.status();
  nlohmann::json body = nlohmann::json::parse(answer->body, nullptr, /*allow_exceptions=*/false);
  if (answer->status == 200 && body.is_object() && body.contains("access_token") &&
      body["access_token"].is_string()) {
    return body["access_token"].get<std::string>();
  }
  const std::string error = body.is_object() && body.contains("error") && body["error"].is_string()
                                ? body["error"].get<std::string>()
                                : std::string();
  const std::string what = "glewlwyd refused the token request: HTTP " + std::to_string(answer->status) +
                           (error.empty() ? std::string() : " " + escape_for_log(error));
  if (answer->status == 401 || answer->status == 403) return Result<std::string>(Errc::kAuthenticationFailed, what);
  if (answer->status == 400) return Result<std::string>(Errc::kInvalidArgument, what);
  return Result<std::string>(Errc::kUnavailable, what + "; see " + log_file());
}

}  // namespace authrpc::testing
