#include "authrpc/components/jwt/jwt_https.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <netinet/in.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>

#include "authrpc/base/log.h"

namespace authrpc {
namespace {

// The status lines and headers of a response may take this much; a JWKS
// endpoint sends a few hundred bytes of them.
constexpr std::size_t kMaxHeaderBytes = 64 * 1024;

// A peer's, libcurl's or a configuration's text for a message: escaped and
// cut short.
std::string escaped(std::string_view text, std::size_t max = 200) {
  return escape_for_log(text.substr(0, max)) + (text.size() > max ? "..." : "");
}
std::string for_message(std::string_view text, std::size_t max = 200) {
  return "\"" + escaped(text, max) + "\"";
}

// libcurl's global state, set up once before the first transfer (not at
// static initialisation: a program that never fetches never pays for it).
CURLcode global_init() {
  static std::once_flag once;
  static CURLcode rc = CURLE_OK;
  std::call_once(once, [] { rc = curl_global_init(CURL_GLOBAL_DEFAULT); });
  return rc;
}

struct CurlUrlFree {
  void operator()(CURLU* u) const noexcept { curl_url_cleanup(u); }
};
struct CurlEasyFree {
  void operator()(CURL* c) const noexcept { curl_easy_cleanup(c); }
};
struct CurlSlistFree {
  void operator()(curl_slist* l) const noexcept { curl_slist_free_all(l); }
};
struct CurlStringFree {
  void operator()(char* s) const noexcept { curl_free(s); }
};

// One part of a parsed URL; empty when the URL has none.
std::string url_part(CURLU* url, CURLUPart what, unsigned flags = 0) {
  char* text = nullptr;
  if (curl_url_get(url, what, &text, flags) != CURLUE_OK) return {};
  std::unique_ptr<char, CurlStringFree> owned(text);
  return text;
}

// The URL for a message: without its query and fragment (which may carry
// an API key), and not at all when it has user information (a password).
std::string url_for_message(std::string_view url) {
  url = url.substr(0, url.find_first_of("?#"));
  if (url.find('@') != std::string_view::npos) return "(not shown: it has user information)";
  return for_message(url);
}

// What a checked URL names, for the transfer and for messages.
struct Target {
  std::unique_ptr<CURLU, CurlUrlFree> url;
  std::string host;        // as in the URL: an IPv6 address in brackets
  bool is_ip = false;
  std::string where;       // "https://host:port"
  std::string where_path;  // where and the path without the query
};

Result<Target> parse_url(std::string_view url) {
  auto bad = [&](std::string_view what) {
    return Result<Target>(Errc::kInvalidArgument,
                          "malformed https URL " + url_for_message(url) + ": " + std::string(what));
  };
  constexpr std::string_view kScheme = "https://";
  if (url.size() < kScheme.size() ||
      !std::equal(kScheme.begin(), kScheme.end(), url.begin(),
                  [](char a, char b) { return a == std::tolower(static_cast<unsigned char>(b)); })) {
    return Result<Target>(Errc::kInvalidArgument, "not an https:// URL: " + url_for_message(url));
  }
  if (std::any_of(url.begin(), url.end(),
                  [](char c) { return static_cast<unsigned char>(c) <= 0x20 || c == 0x7f; })) {
    return bad("a space or control character");
  }
  Target out;
  out.url.reset(curl_url());
  if (!out.url) return Result<Target>(Errc::kInternal, "libcurl: out of memory");
  if (CURLUcode rc = curl_url_set(out.url.get(), CURLUPART_URL, std::string(url).c_str(), 0); rc != CURLUE_OK) {
    return bad(curl_url_strerror(rc));
  }
  // Credentials in a URL would end up in messages and logs.
  char* user = nullptr;
  char* password = nullptr;
  const bool has_user = curl_url_get(out.url.get(), CURLUPART_USER, &user, 0) == CURLUE_OK;
  const bool has_password = curl_url_get(out.url.get(), CURLUPART_PASSWORD, &password, 0) == CURLUE_OK;
  curl_free(user);
  curl_free(password);
  if (has_user || has_password) return bad("user information is not supported");
  out.host = url_part(out.url.get(), CURLUPART_HOST);
  if (out.host.empty()) return bad("no host");
  const std::string bare = out.host.front() == '[' ? out.host.substr(1, out.host.size() - 2) : out.host;
  in6_addr address;
  out.is_ip = inet_pton(AF_INET, bare.c_str(), &address) == 1 || inet_pton(AF_INET6, bare.c_str(), &address) == 1;
  const std::string port = url_part(out.url.get(), CURLUPART_PORT, CURLU_DEFAULT_PORT);
  if (port == "0") return bad("port 0");
  out.where = "https://" + out.host + ":" + port;
  out.where_path = out.where + escaped(url_part(out.url.get(), CURLUPART_PATH));
  return out;
}

// The first error OpenSSL's chain verification met in this thread's
// transfer. libcurl's message names the oldest error in OpenSSL's queue,
// which for some refusals (a CA of the expected name with another key) is
// an ASN.1 or EVP error, and then reports a handshake failure; this keeps
// the verification's own reason. Transfers on the easy interface run on the
// calling thread, handshake included.
thread_local long chain_error = X509_V_OK;

int on_verify(int ok, X509_STORE_CTX* store) {
  if (ok == 0 && chain_error == X509_V_OK) chain_error = X509_STORE_CTX_get_error(store);
  return ok;
}

// Called by libcurl (OpenSSL flavour) with the context of each connection,
// after it set SSL_VERIFY_PEER: the same mode, with on_verify watching.
CURLcode on_ssl_context(CURL*, void* context, void*) {
  SSL_CTX_set_verify(static_cast<SSL_CTX*>(context), SSL_VERIFY_PEER, &on_verify);
  return CURLE_OK;
}

// What the callbacks see and record of one transfer.
struct Transfer {
  CURL* curl = nullptr;
  std::size_t max_bytes = 0;
  std::string body;
  std::string status_line;  // of the last response (after any 1xx)
  std::size_t header_bytes = 0;
  bool headers_complete = false;  // the last response's empty line came
  bool headers_too_long = false;
  bool body_too_long = false;
};

std::size_t on_header(char* data, std::size_t size, std::size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const std::size_t length = size * count;
  t->header_bytes += length;
  if (t->header_bytes > kMaxHeaderBytes) {
    t->headers_too_long = true;
    return 0;  // aborts the transfer
  }
  std::string_view line(data, length);
  while (!line.empty() && (line.back() == '\r' || line.back() == '\n')) line.remove_suffix(1);
  if (line.starts_with("HTTP/")) {
    t->status_line = std::string(line);
    t->headers_complete = false;
  } else if (line.empty()) {
    t->headers_complete = !t->status_line.empty();
  }
  return length;
}

std::size_t on_body(char* data, std::size_t size, std::size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const std::size_t length = size * count;
  long status = 0;
  curl_easy_getinfo(t->curl, CURLINFO_RESPONSE_CODE, &status);
  if (status != 200) return 0;  // not the document: the status says why
  if (length > t->max_bytes - t->body.size()) {
    t->body_too_long = true;
    return 0;
  }
  t->body.append(data, length);
  return length;
}

// Which step a transfer that timed out was in, from the times libcurl
// recorded for the steps it finished.
const char* timed_out_in(CURL* curl, bool is_ip) {
  curl_off_t resolved = 0, connected = 0, handshaken = 0;
  curl_easy_getinfo(curl, CURLINFO_NAMELOOKUP_TIME_T, &resolved);
  curl_easy_getinfo(curl, CURLINFO_CONNECT_TIME_T, &connected);
  curl_easy_getinfo(curl, CURLINFO_APPCONNECT_TIME_T, &handshaken);
  if (handshaken > 0) return "reading the response from";
  if (connected > 0) return "in the TLS handshake with";
  if (resolved > 0 || is_ip) return "connecting to";
  return "resolving";
}

Status failure(CURLcode rc, const Transfer& t, const Target& target, const HttpsGetOptions& options,
               const char* error_buffer) {
  const std::string why = escaped(*error_buffer != '\0' ? error_buffer : curl_easy_strerror(rc));
  long status = 0;
  curl_easy_getinfo(t.curl, CURLINFO_RESPONSE_CODE, &status);
  if (status >= 200 && status != 200) {
    return Status(Errc::kUnavailable, target.where_path + " answered " + for_message(t.status_line));
  }
  auto malformed = [&](const std::string& what) {
    return Status(Errc::kProtocolError, "malformed HTTP response from " + target.where + ": " + what);
  };
  if (t.headers_too_long) {
    return malformed("status line and headers over " + std::to_string(kMaxHeaderBytes) + " bytes");
  }
  if (t.body_too_long || rc == CURLE_FILESIZE_EXCEEDED) {
    return Status(Errc::kResourceExhausted, "response body from " + target.where_path + " is over the limit of " +
                                                std::to_string(options.max_bytes) + " bytes");
  }
  switch (rc) {
    case CURLE_URL_MALFORMAT:
      return Status(Errc::kInvalidArgument, "malformed https URL " + target.where_path + ": " + why);
    case CURLE_OPERATION_TIMEDOUT:
      return Status(Errc::kUnavailable, "timed out after " + std::to_string(options.timeout.count()) + " ms " +
                                            timed_out_in(t.curl, target.is_ip) + " " + target.where);
    case CURLE_COULDNT_RESOLVE_HOST:
      return Status(Errc::kUnavailable, "cannot resolve " + for_message(target.host) + ": " + why);
    case CURLE_COULDNT_CONNECT: {
      long error = 0;
      curl_easy_getinfo(t.curl, CURLINFO_OS_ERRNO, &error);
      return Status(Errc::kUnavailable, "cannot connect to " + target.where + ": " +
                                            (error != 0 ? std::string(std::strerror(static_cast<int>(error))) : why));
    }
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CONNECT_ERROR:
      if (chain_error != X509_V_OK) {
        return Status(Errc::kUnavailable, "certificate verification failed for " + target.where + ": " +
                                              X509_verify_cert_error_string(chain_error));
      }
      if (rc == CURLE_PEER_FAILED_VERIFICATION) {  // the name: libcurl checks it after the handshake
        return Status(Errc::kUnavailable, "certificate verification failed for " + target.where + ": " + why);
      }
      return Status(Errc::kUnavailable, "TLS handshake with " + target.where + " failed: " + why);
    case CURLE_SSL_CACERT_BADFILE:
      return Status(Errc::kConfigError, "cannot load CA file " + for_message(options.ca_file) + ": " + why);
    case CURLE_GOT_NOTHING:
      return Status(Errc::kUnavailable, "connection closed by " + target.where + " before a response");
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
      return Status(Errc::kUnavailable, "connection to " + target.where + " failed: " + why);
    case CURLE_WEIRD_SERVER_REPLY:
    case CURLE_UNSUPPORTED_PROTOCOL:  // an HTTP version it does not speak
    case CURLE_PARTIAL_FILE:
    case CURLE_BAD_CONTENT_ENCODING:
    case CURLE_HTTP2:
      return malformed(why);
    case CURLE_OUT_OF_MEMORY:
      return Status(Errc::kResourceExhausted, "GET " + target.where_path + ": " + why);
    default:
      return Status(Errc::kUnavailable, "GET " + target.where_path + " failed: " + why);
  }
}

}  // namespace

Result<std::string> https_get(std::string_view url, const HttpsGetOptions& options) {
  auto target = parse_url(url);
  if (!target.ok()) return target.status();
  if (CURLcode rc = global_init(); rc != CURLE_OK) {
    return Status(Errc::kInternal, std::string("libcurl cannot start: ") + curl_easy_strerror(rc));
  }
  std::unique_ptr<CURL, CurlEasyFree> curl(curl_easy_init());
  std::unique_ptr<curl_slist, CurlSlistFree> headers;
  for (const char* header : {"Accept: application/json, application/jwk-set+json", "Connection: close"}) {
    curl_slist* longer = curl_slist_append(headers.get(), header);
    if (longer == nullptr) break;
    (void)headers.release();
    headers.reset(longer);
  }
  if (!curl || !headers) return Status(Errc::kInternal, "libcurl: out of memory");
  Transfer transfer;
  transfer.curl = curl.get();
  transfer.max_bytes = options.max_bytes;
  char error_buffer[CURL_ERROR_SIZE] = {};
  // A zero timeout means "none" to libcurl; here it means "at once".
  const long timeout_ms = static_cast<long>(std::max<std::chrono::milliseconds::rep>(options.timeout.count(), 1));
  CURLcode set = CURLE_OK;
  auto option = [&](CURLoption what, auto value) {
    if (set == CURLE_OK) set = curl_easy_setopt(curl.get(), what, value);
  };
  option(CURLOPT_CURLU, target->url.get());
  option(CURLOPT_PROTOCOLS_STR, "https");
  option(CURLOPT_REDIR_PROTOCOLS_STR, "https");
  option(CURLOPT_FOLLOWLOCATION, 0L);
  // Not even a proxy named by https_proxy/all_proxy: the IdP is reached
  // directly, as the configuration names it.
  option(CURLOPT_PROXY, "");
  option(CURLOPT_NOSIGNAL, 1L);  // no SIGALRM for timeouts: other threads run
  option(CURLOPT_SSL_VERIFYPEER, 1L);
  option(CURLOPT_SSL_VERIFYHOST, 2L);
  option(CURLOPT_SSLVERSION, static_cast<long>(CURL_SSLVERSION_TLSv1_2));
  if (!options.ca_file.empty()) {
    option(CURLOPT_CAINFO, options.ca_file.c_str());
    option(CURLOPT_CAPATH, static_cast<const char*>(nullptr));  // that file's CAs only
  }
  option(CURLOPT_HTTP_VERSION, static_cast<long>(CURL_HTTP_VERSION_1_1));
  option(CURLOPT_CONNECTTIMEOUT_MS, timeout_ms);
  option(CURLOPT_TIMEOUT_MS, timeout_ms);
  // A Content-Length over the limit fails before the body is read; a body
  // without one is stopped by on_body().
  option(CURLOPT_MAXFILESIZE_LARGE,
         static_cast<curl_off_t>(std::min<std::size_t>(options.max_bytes, std::numeric_limits<curl_off_t>::max())));
  option(CURLOPT_USERAGENT, "authrpc");
  option(CURLOPT_HTTPHEADER, headers.get());
  option(CURLOPT_HEADERFUNCTION, &on_header);
  option(CURLOPT_HEADERDATA, &transfer);
  option(CURLOPT_WRITEFUNCTION, &on_body);
  option(CURLOPT_WRITEDATA, &transfer);
  option(CURLOPT_ERRORBUFFER, error_buffer);
  if (set != CURLE_OK) {
    return Status(Errc::kInternal, std::string("libcurl refused an option (libcurl 7.85 or later is needed): ") +
                                       curl_easy_strerror(set));
  }
  // Only for a better message: a libcurl on another TLS library refuses it.
  (void)curl_easy_setopt(curl.get(), CURLOPT_SSL_CTX_FUNCTION, &on_ssl_context);
  chain_error = X509_V_OK;
  const CURLcode rc = curl_easy_perform(curl.get());
  long status = 0;
  curl_easy_getinfo(curl.get(), CURLINFO_RESPONSE_CODE, &status);
  if (rc == CURLE_OK && status == 200) {
    // libcurl takes a response cut short in its headers as complete.
    if (!transfer.headers_complete) {
      return Status(Errc::kProtocolError, "malformed HTTP response from " + target->where +
                                              ": connection closed in the middle of the headers");
    }
    return std::move(transfer.body);
  }
  return failure(rc, transfer, *target, options, error_buffer);
}

}  // namespace authrpc
