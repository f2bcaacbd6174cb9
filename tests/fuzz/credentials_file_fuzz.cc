// Fuzz target: the client's credentials file (security/credentials_file.h),
// which the `token`, `token-digest` and `token-scram` clients and the
// `authrpc token` commands read. The input is written as the file; what reads
// must find each of its tokens by service, and must write out and read back
// as the same tokens.
#include <cstdint>
#include <string>
#include <string_view>

#include "authrpc/security/credentials_file.h"
#include "tests/fuzz/fuzz_support.h"

namespace authrpc::fuzz {
namespace {

const ScratchDir& scratch() {
  static const ScratchDir dir("credentials");
  return dir;
}

bool same(const security::Token& a, const security::Token& b) {
  return a.identifier == b.identifier && a.password.equals(b.password) && a.kind == b.kind &&
         a.service == b.service;
}

}  // namespace
}  // namespace authrpc::fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* bytes, std::size_t size) {
  using namespace authrpc;
  using namespace authrpc::fuzz;
  const ScratchDir& dir = scratch();
  dir.clear();
  const std::string path =
      dir.write("tokens.json", std::string_view(reinterpret_cast<const char*>(bytes), size));
  auto file = security::CredentialsFile::read(path);
  if (!file.ok()) return 0;
  for (const auto& token : file->tokens()) {
    auto found = file->find(token.service);
    if (!found.ok() || !same(*found, token)) fail("a token in the file is not found by its service");
  }
  const std::string copy = dir.path() + "/copy.json";
  if (!file->write(copy).ok()) fail("writing a credentials file that was read failed");
  auto again = security::CredentialsFile::read(copy);
  if (!again.ok() || again->tokens().size() != file->tokens().size()) {
    fail("a credentials file written back does not read the same");
  }
  for (std::size_t i = 0; i < file->tokens().size(); ++i) {
    if (!same(again->tokens()[i], file->tokens()[i])) fail("a token changed across write and read");
  }
  return 0;
}
