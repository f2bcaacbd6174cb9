// CredentialsFile: the delegation tokens a client holds, one per service,
// in a JSON file created mode 0600 (docs/TOKENS.md shows the format):
//
//   {"version": 1, "tokens": {"tcp://db1:7000": "<token string>", ...}}
//
// Clients find it through a --token-file flag or, failing that, the
// AUTHRPC_TOKEN_FILE environment variable (locate()). The file holds token
// passwords: keep it private. A plain value; not synchronised.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "authrpc/security/token.h"
#include "authrpc/security/token_errors.h"

namespace authrpc::security {

inline constexpr const char* kTokenFileEnv = "AUTHRPC_TOKEN_FILE";

class CredentialsFile {
 public:
  static constexpr int kVersion = 1;

  // flag if not empty, else $AUTHRPC_TOKEN_FILE, else "" (no file).
  static std::string locate(std::string_view flag);

  // kIoError if unreadable (ENOENT included), kMalformed if it is not this
  // format or a token in it does not decode, kUnsupportedVersion.
  static Result<CredentialsFile> read(const std::string& path);
  // Replaces the file atomically (temp file, fsync, rename); mode 0600.
  Status write(const std::string& path) const;

  // Adds token, replacing one for the same service.
  void add(Token token);
  // kNotFound if there is none for service.
  Result<Token> find(std::string_view service) const;
  bool remove(std::string_view service);
  const std::vector<Token>& tokens() const noexcept { return tokens_; }

 private:
  std::vector<Token> tokens_;  // by service, ascending
};

}  // namespace authrpc::security
