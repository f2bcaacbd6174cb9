#include "tests/testing/scoped_temp_dir.h"

#include <filesystem>
#include <fstream>
#include <system_error>

#include "tests/testing/test_support.h"

namespace authrpc::testing {

ScopedTempDir::ScopedTempDir(const std::string& tag) : path_(TempDir(tag)) {}

ScopedTempDir::~ScopedTempDir() {
  std::error_code ignored;
  if (!path_.empty()) std::filesystem::remove_all(path_, ignored);
}

std::string ScopedTempDir::Write(const std::string& name, const std::string& content) const {
  const std::string path = file(name);
  std::ofstream(path, std::ios::binary | std::ios::trunc) << content;
  return path;
}

}  // namespace authrpc::testing
