// auth/authz/default_realm.h: krb5's default realm read through a libkrb5
// loaded on first use. This program links the authorization layer alone
// (authrpc::auth, tests/CMakeLists.txt), as a program with no Kerberos
// mechanism does, and still reads exactly what krb5.conf says.
#include "authrpc/auth/authz/default_realm.h"

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace authrpc {
namespace {

TEST(DefaultRealm, ReadsKrb5ConfWithoutLinkingLibkrb5) {
  // Before the first lookup: the program does not link libkrb5.
  EXPECT_EQ(::dlopen("libkrb5.so.3", RTLD_NOW | RTLD_NOLOAD), nullptr)
      << "a program on authrpc::auth alone must not link libkrb5";

  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("default-realm-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "included.conf") << "[libdefaults]\n  default_realm = R.TEST\n";
  struct Case {
    const char* name;
    const char* krb5_conf;  // null: no such file
    std::string realm;
  };
  const Case cases[] = {
      {"a default realm", "[libdefaults]\n  default_realm = EXAMPLE.COM\n", "EXAMPLE.COM"},
      // krb5's own profile syntax: a file included by the one KRB5_CONFIG names.
      {"an included file", "include @DIR@/included.conf\n", "R.TEST"},
      {"no default realm", "[libdefaults]\n  rdns = false\n  dns_lookup_realm = false\n", ""},
      {"no file", nullptr, ""},
  };
  int n = 0;
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const auto conf = dir / ("krb5-" + std::to_string(n++) + ".conf");
    if (c.krb5_conf != nullptr) {
      std::string text = c.krb5_conf;
      if (const auto at = text.find("@DIR@"); at != std::string::npos) text.replace(at, 5, dir.string());
      std::ofstream(conf) << text;
    }
    ASSERT_EQ(::setenv("KRB5_CONFIG", conf.c_str(), 1), 0);
    EXPECT_EQ(krb5_default_realm(), c.realm);
  }
  ::unsetenv("KRB5_CONFIG");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace authrpc
