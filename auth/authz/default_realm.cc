#include "authrpc/auth/authz/default_realm.h"

#include <dlfcn.h>
#include <krb5.h>  // the prototypes only: the functions come from dlopen()

namespace authrpc {
namespace {

// libkrb5's entry points, resolved once. When the program links libkrb5
// (a Kerberos mechanism), dlopen() returns the library already loaded.
struct Krb5 {
  decltype(&::krb5_init_context) init_context = nullptr;
  decltype(&::krb5_get_default_realm) get_default_realm = nullptr;
  decltype(&::krb5_free_default_realm) free_default_realm = nullptr;
  decltype(&::krb5_free_context) free_context = nullptr;

  Krb5() {
    // Never closed: the library stays for the life of the process, as a
    // linked one would.
    void* lib = ::dlopen("libkrb5.so.3", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) return;
    init_context = reinterpret_cast<decltype(init_context)>(::dlsym(lib, "krb5_init_context"));
    get_default_realm =
        reinterpret_cast<decltype(get_default_realm)>(::dlsym(lib, "krb5_get_default_realm"));
    free_default_realm =
        reinterpret_cast<decltype(free_default_realm)>(::dlsym(lib, "krb5_free_default_realm"));
    free_context = reinterpret_cast<decltype(free_context)>(::dlsym(lib, "krb5_free_context"));
  }
  bool loaded() const {
    return init_context && get_default_realm && free_default_realm && free_context;
  }
};

}  // namespace

std::string krb5_default_realm() {
  static const Krb5 krb5;
  if (!krb5.loaded()) return {};
  krb5_context ctx = nullptr;
  if (krb5.init_context(&ctx) != 0) return {};
  std::string out;
  char* realm = nullptr;
  if (krb5.get_default_realm(ctx, &realm) == 0) {
    out = realm;
    krb5.free_default_realm(ctx, realm);
  }
  krb5.free_context(ctx);
  return out;
}

}  // namespace authrpc
