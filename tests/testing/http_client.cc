#include "tests/testing/http_client.h"

#include <curl/curl.h>

#include <algorithm>
#include <cctype>
#include <memory>
#include <mutex>

#include "authrpc/base/log.h"

namespace authrpc::testing {
namespace {

constexpr std::size_t kMaxBody = 16 << 20;

struct Answer {
  HttpResponse response;
  bool too_large = false;
};

std::size_t on_header(char* data, std::size_t size, std::size_t count, void* user) {
  auto* answer = static_cast<Answer*>(user);
  const std::size_t length = size * count;
  std::string_view line(data, length);
  while (!line.empty() && (line.back() == '\r' || line.back() == '\n')) line.remove_suffix(1);
  if (line.starts_with("HTTP/")) {
    answer->response.headers.clear();  // a new response: the one after a 1xx
    return length;
  }
  const std::size_t colon = line.find(':');
  if (colon == std::string_view::npos) return length;
  std::string name(line.substr(0, colon));
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
  std::string_view value = line.substr(colon + 1);
  while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
  while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.remove_suffix(1);
  answer->response.headers[name] = std::string(value);
  return length;
}

std::size_t on_body(char* data, std::size_t size, std::size_t count, void* user) {
  auto* answer = static_cast<Answer*>(user);
  const std::size_t length = size * count;
  if (answer->response.body.size() + length > kMaxBody) {
    answer->too_large = true;
    return 0;
  }
  answer->response.body.append(data, length);
  return length;
}

Errc error_code(CURLcode rc, bool too_large) {
  if (too_large) return Errc::kProtocolError;
  switch (rc) {
    case CURLE_URL_MALFORMAT:
    case CURLE_UNSUPPORTED_PROTOCOL:
    case CURLE_SSL_CACERT_BADFILE:
      return Errc::kInvalidArgument;
    case CURLE_PEER_FAILED_VERIFICATION:
      return Errc::kAuthenticationFailed;
    case CURLE_WEIRD_SERVER_REPLY:
    case CURLE_BAD_CONTENT_ENCODING:
      return Errc::kProtocolError;
    default:
      return Errc::kUnavailable;
  }
}

struct CurlEasyFree {
  void operator()(CURL* c) const noexcept { curl_easy_cleanup(c); }
};
struct CurlSlistFree {
  void operator()(curl_slist* l) const noexcept { curl_slist_free_all(l); }
};

}  // namespace

Result<HttpResponse> http_request(const HttpRequest& request) {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
  std::unique_ptr<CURL, CurlEasyFree> curl(curl_easy_init());
  if (!curl) return Status(Errc::kInternal, "curl_easy_init failed");

  // libcurl's header list: "Name: value" replaces or adds, "Name;" sends
  // an empty value, "Name:" removes one libcurl would add.
  std::vector<std::string> lines;
  for (const auto& [name, value] : request.headers) lines.push_back(value.empty() ? name + ";" : name + ": " + value);
  // libcurl writes an entry as given, CRLFs and all: raw lines ride on one.
  if (!request.raw_header_lines.empty()) {
    std::string raw = "X-Authrpc-Test: raw";
    for (const std::string& line : request.raw_header_lines) raw += "\r\n" + line;
    lines.push_back(raw);
  }
  if (!request.send_host) lines.push_back("Host:");
  lines.push_back("Expect:");  // a body goes at once, never after "100 Continue"
  std::unique_ptr<curl_slist, CurlSlistFree> headers;
  for (const std::string& line : lines) {
    curl_slist* longer = curl_slist_append(headers.get(), line.c_str());
    if (longer == nullptr) return Status(Errc::kInternal, "curl_slist_append failed");
    (void)headers.release();
    headers.reset(longer);
  }

  Answer answer;
  char error_buffer[CURL_ERROR_SIZE] = {};
  CURL* c = curl.get();
  curl_easy_setopt(c, CURLOPT_URL, request.url.c_str());
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c, CURLOPT_PROXY, "");  // never a proxy from the environment
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_PATH_AS_IS, 1L);
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, static_cast<long>(request.timeout.count()));
  curl_easy_setopt(c, CURLOPT_HTTP_VERSION,
                   static_cast<long>(request.http10 ? CURL_HTTP_VERSION_1_0 : CURL_HTTP_VERSION_1_1));
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers.get());
  if (!request.target.empty()) curl_easy_setopt(c, CURLOPT_REQUEST_TARGET, request.target.c_str());
  if (!request.body.empty() || request.method == "POST") {
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(request.body.size()));
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, request.body.data());
  }
  if (request.method == "HEAD") {
    curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
  } else if (request.method != "GET" || !request.body.empty()) {
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, request.method.c_str());
  }
  if (!request.ca_file.empty()) {
    curl_easy_setopt(c, CURLOPT_CAINFO, request.ca_file.c_str());
    curl_easy_setopt(c, CURLOPT_CAPATH, static_cast<const char*>(nullptr));
  }
  curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 1L);
  curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 2L);
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, &on_header);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, &answer);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, &on_body);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &answer);
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, error_buffer);

  const CURLcode rc = curl_easy_perform(c);
  if (rc != CURLE_OK) {
    const std::string why = answer.too_large ? std::string("answer over 16 MiB")
                                             : std::string(curl_easy_strerror(rc)) + ": " + error_buffer;
    return Status(error_code(rc, answer.too_large),
                  request.method + " " + escape_for_log(request.url) + ": " + escape_for_log(why));
  }
  long status = 0;
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
  answer.response.status = static_cast<int>(status);
  return std::move(answer.response);
}

Result<HttpResponse> http_get(const std::string& url, std::chrono::milliseconds timeout) {
  HttpRequest request;
  request.url = url;
  request.timeout = timeout;
  return http_request(request);
}

Result<HttpResponse> http_get(const std::string& url, const std::string& ca_file) {
  HttpRequest request;
  request.url = url;
  request.ca_file = ca_file;
  return http_request(request);
}

std::string form_urlencode(std::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~') {
      out += static_cast<char>(c);
    } else if (c == ' ') {
      out += '+';
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

}  // namespace authrpc::testing
