// JwtCredentialSource: where the `jwt` mechanism's client half gets its
// credential, an access token (a JWT; DESIGN.md's Names keep "token" alone
// for delegation tokens): a file (re-read when it changes, as a token
// refresher such as a Kubernetes projected token or an oauth2 sidecar
// rewrites it), an environment variable, or an external command that prints
// one (like kubectl's exec credential plugins). Caches the token until
// shortly before its `exp`. Shared by every connection of a client
// (thread-safe: one mutex, held while the source is read, so that concurrent
// connects run a command once rather than once each). Never logs the token
// or puts it in an error message.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "authrpc/base/result.h"
#include "authrpc/security/secret_bytes.h"

namespace authrpc {

struct JwtCredentialSourceOptions {
  // Exactly one of the three.
  std::string file;     // a file holding the token (surrounding whitespace ignored)
  std::string env;      // the name of an environment variable holding it
  std::string command;  // run with /bin/sh -c; prints the token, or an OAuth 2.0
                        // token response / ExecCredential JSON (see token())
  // A cached token is replaced this long before its exp.
  std::chrono::seconds refresh_before{30};
  // The command is killed after this long (UNAVAILABLE).
  std::chrono::milliseconds command_timeout{10000};
};

class JwtCredentialSource {
 public:
  // The most a token file, variable or command output may hold.
  static constexpr std::size_t kMaxTokenBytes = 64 * 1024;

  // CONFIG_ERROR unless exactly one source is set (and refresh_before is
  // within [0, 365 days], command_timeout within (0, 24 h], env a name
  // without '=').
  static Result<std::shared_ptr<JwtCredentialSource>> make(JwtCredentialSourceOptions options);

  // The current token. From the cache while it is more than refresh_before
  // from its exp (a token with no readable exp is cached until the file
  // changes, for a file; never, for a command or variable — re-read each
  // time); otherwise read again. A file is re-read when its mtime, size or
  // inode changed. A command's stdout (at most 64 KiB) is the token, trimmed,
  // or a JSON object whose "access_token" (OAuth 2.0 token response) or
  // "status"."token" (Kubernetes ExecCredential) is. Errors:
  // CREDENTIALS_EXPIRED when the token read is already past its exp (the
  // message says so and when), UNAUTHENTICATED when the file or variable is
  // missing, unreadable or empty (no credentials: as for the other
  // mechanisms' credentials files), UNAVAILABLE when the command fails,
  // times out or prints nothing (its exit status and first stderr line,
  // escaped, in the message),
  // INVALID_ARGUMENT when what was read is not a compact JWS
  // (three base64url parts) — never quoting the token.
  Result<security::SecretBytes> token();

  // Its exp, read without verifying the signature (the server verifies);
  // nullopt when the payload has no numeric exp or cannot be read.
  static std::optional<std::chrono::system_clock::time_point> unverified_expiry(
      std::string_view compact_jws);

 private:
  using TimePoint = std::chrono::system_clock::time_point;

  // What tells a rewritten token file from the one read last without reading
  // it: a rename over it changes the inode, a rewrite in place the size or
  // mtime (ns), and ctime too even when mtime was set back.
  struct FileIdentity {
    std::uint64_t device = 0;
    std::uint64_t inode = 0;
    std::int64_t size = 0;
    std::int64_t mtime_ns = 0;
    std::int64_t ctime_ns = 0;
    bool operator==(const FileIdentity&) const = default;
  };

  // One reading of the source: the token (trimmed, a compact JWS), its
  // expiry (exp, or what the command's JSON said) and, for a file, which file.
  struct Fetched {
    security::SecretBytes token;
    std::optional<TimePoint> expiry;
    std::optional<FileIdentity> file;
  };

  explicit JwtCredentialSource(JwtCredentialSourceOptions options);

  Result<Fetched> fetch() const;
  bool cache_usable(TimePoint now, const std::optional<FileIdentity>& file_now) const;
  void drop_cache();

  const JwtCredentialSourceOptions options_;
  std::mutex mu_;
  security::SecretBytes cached_;       // guarded by mu_; empty: nothing cached
  std::optional<TimePoint> expiry_;    // of cached_
  std::optional<FileIdentity> file_;   // of the file cached_ was read from
};

}  // namespace authrpc
