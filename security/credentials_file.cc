#include "authrpc/security/credentials_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <nlohmann/json.hpp>

namespace authrpc::security {
namespace {

// Wipes every string in a JSON value (token strings are secrets).
void cleanse_json(nlohmann::json& j) {
  if (j.is_string()) {
    auto& s = j.get_ref<std::string&>();
    cleanse(s.data(), s.size());
  } else if (j.is_structured()) {
    for (auto& child : j) cleanse_json(child);
  }
}

struct WipedJson {
  nlohmann::json j;
  ~WipedJson() { cleanse_json(j); }
};

struct WipedText {
  std::string s;
  ~WipedText() { cleanse(s.data(), s.size()); }
};

std::string dir_of(const std::string& path) {
  auto slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

}  // namespace

std::string CredentialsFile::locate(std::string_view flag) {
  if (!flag.empty()) return std::string(flag);
  const char* env = std::getenv(kTokenFileEnv);
  return env != nullptr ? std::string(env) : std::string();
}

Result<CredentialsFile> CredentialsFile::read(const std::string& path) {
  using R = Result<CredentialsFile>;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return io_error("cannot read credentials file " + path, errno);
  WipedText text;
  struct stat st {};
  if (::fstat(fd, &st) == 0 && st.st_size > 0) text.s.reserve(static_cast<std::size_t>(st.st_size));
  char buf[16 * 1024];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      ::close(fd);
      cleanse(buf, sizeof buf);
      return io_error("cannot read credentials file " + path, err);
    }
    if (n == 0) break;
    text.s.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  cleanse(buf, sizeof buf);

  WipedJson doc;
  doc.j = nlohmann::json::parse(text.s, nullptr, /*allow_exceptions=*/false);
  if (doc.j.is_discarded() || !doc.j.is_object()) {
    return R(TokenErrc::kMalformed, "credentials file " + path + " is not a JSON object");
  }
  auto version = doc.j.find("version");
  if (version == doc.j.end() || !version->is_number_integer()) {
    return R(TokenErrc::kMalformed, "credentials file " + path + " has no \"version\"");
  }
  if (version->get<long long>() != kVersion) {
    return R(TokenErrc::kUnsupportedVersion, "credentials file " + path + " has version " +
                                                 std::to_string(version->get<long long>()));
  }
  auto tokens = doc.j.find("tokens");
  if (tokens == doc.j.end() || !tokens->is_object()) {
    return R(TokenErrc::kMalformed, "credentials file " + path + " has no \"tokens\" object");
  }
  CredentialsFile file;
  for (auto it = tokens->begin(); it != tokens->end(); ++it) {
    if (!it->is_string()) {
      return R(TokenErrc::kMalformed, "credentials file " + path + ": the entry for service '" +
                                          it.key() + "' is not a string");
    }
    auto token = Token::from_string(it->get_ref<const std::string&>());
    if (!token.ok()) {
      return R(TokenErrc::kMalformed, "credentials file " + path + ": the token for service '" +
                                          it.key() + "': " + token.status().to_string());
    }
    if (token->service != it.key()) {
      return R(TokenErrc::kMalformed, "credentials file " + path + ": the token filed under '" +
                                          it.key() + "' is for service '" + token->service + "'");
    }
    file.add(std::move(*token));
  }
  return file;
}

Status CredentialsFile::write(const std::string& path) const {
  WipedJson doc;
  doc.j = {{"version", kVersion}, {"tokens", nlohmann::json::object()}};
  for (const auto& token : tokens_) {
    auto text = token.to_string();
    if (!text.ok()) return text.status();
    doc.j["tokens"][token.service] = std::move(*text);
  }
  WipedText out;
  out.s = doc.j.dump(2) + "\n";

  const std::string temp = path + ".tmp";
  int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return io_error("create " + temp, errno);
  Status status;
  if (::fchmod(fd, 0600) != 0) status = io_error("chmod " + temp, errno);
  std::string_view rest(out.s);
  while (status.ok() && !rest.empty()) {
    ssize_t n = ::write(fd, rest.data(), rest.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      status = io_error("write " + temp, errno);
      break;
    }
    rest.remove_prefix(static_cast<std::size_t>(n));
  }
  if (status.ok() && ::fsync(fd) != 0) status = io_error("fsync " + temp, errno);
  ::close(fd);
  if (status.ok() && ::rename(temp.c_str(), path.c_str()) != 0) status = io_error("rename " + temp, errno);
  if (!status.ok()) {
    ::unlink(temp.c_str());
    return status;
  }
  int dfd = ::open(dir_of(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return {};
}

void CredentialsFile::add(Token token) {
  auto it = std::lower_bound(tokens_.begin(), tokens_.end(), token.service,
                             [](const Token& t, const std::string& s) { return t.service < s; });
  if (it != tokens_.end() && it->service == token.service) {
    *it = std::move(token);
  } else {
    tokens_.insert(it, std::move(token));
  }
}

Result<Token> CredentialsFile::find(std::string_view service) const {
  for (const auto& token : tokens_) {
    if (token.service == service) return token;
  }
  return Result<Token>(TokenErrc::kNotFound, "no token for service '" + std::string(service) + "'");
}

bool CredentialsFile::remove(std::string_view service) {
  auto it = std::find_if(tokens_.begin(), tokens_.end(), [&](const Token& t) { return t.service == service; });
  if (it == tokens_.end()) return false;
  tokens_.erase(it);
  return true;
}

}  // namespace authrpc::security
