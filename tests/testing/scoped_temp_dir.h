// ScopedTempDir: a temporary directory (testing::TempDir, tests/testing/test_support.h)
// that its owner removes, with what is in it, when destroyed; for a test or
// fixture whose files need not outlive it (library authrpc_test_support).
#pragma once

#include <string>

namespace authrpc::testing {

class ScopedTempDir {
 public:
  // $TMPDIR/authrpc-<tag>-XXXXXX.
  explicit ScopedTempDir(const std::string& tag);
  ~ScopedTempDir();
  ScopedTempDir(const ScopedTempDir&) = delete;
  ScopedTempDir& operator=(const ScopedTempDir&) = delete;

  // Empty if the directory could not be made.
  const std::string& path() const { return path_; }
  bool ok() const { return !path_.empty(); }
  // <path>/<name>, not created.
  std::string file(const std::string& name) const { return path_ + "/" + name; }
  // Writes `content` to <path>/<name> (replacing it); returns that path.
  std::string Write(const std::string& name, const std::string& content) const;

 private:
  std::string path_;
};

}  // namespace authrpc::testing
