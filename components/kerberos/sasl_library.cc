#include "authrpc/components/kerberos/sasl_library.h"

#include <sasl/sasl.h>
#include <sasl/saslplug.h>

#include <cstring>
#include <mutex>

namespace authrpc::sasl {
namespace {

// --- mutex hooks: Cyrus and its plugins lock through these ---------------------

void* mutex_alloc() { return new (std::nothrow) std::mutex; }

int mutex_lock(void* m) {
  if (m == nullptr) return -1;
  static_cast<std::mutex*>(m)->lock();
  return 0;
}

int mutex_unlock(void* m) {
  if (m == nullptr) return -1;
  static_cast<std::mutex*>(m)->unlock();
  return 0;
}

void mutex_free(void* m) { delete static_cast<std::mutex*>(m); }

// --- global callbacks ----------------------------------------------------------

// Messages Cyrus logs while it loads plugins (a plugin that fails to load is
// only logged): kept for the error report of a failed initialisation instead
// of going to syslog. Connections have their own log callback.
std::mutex g_init_log_mu;
std::string g_init_log;

int global_log(void*, int level, const char* message) {
  if (level > SASL_LOG_ERR || message == nullptr) return SASL_OK;
  std::lock_guard lock(g_init_log_mu);
  if (g_init_log.size() < 1024) {
    if (!g_init_log.empty()) g_init_log += "; ";
    g_init_log += message;
  }
  return SASL_OK;
}

// Options Cyrus asks for before any connection exists, i.e. of plugins as
// they load. Pinned here so that an `authrpc.conf` cannot turn them into
// process-wide state: the GSSAPI plugin, given a "keytab", calls
// krb5_gss_register_acceptor_identity() — which would change the default
// keytab of every GSSAPI acceptor in the process, the `kerberos` mechanism's
// included. authrpc passes acceptor credentials per connection instead
// (SASL_GSS_CREDS). Everything else falls through to Cyrus's defaults.
int global_getopt(void*, const char* plugin_name, const char* option, const char** result,
                  unsigned* len) {
  if (plugin_name != nullptr && option != nullptr && std::strcmp(plugin_name, "GSSAPI") == 0 &&
      std::strcmp(option, "keytab") == 0) {
    *result = nullptr;
    if (len != nullptr) *len = 0;
    return SASL_OK;
  }
  return SASL_FAIL;
}

using Callback = int (*)();

// Cyrus stores every callback as int (*)(); the cast goes through void (*)(),
// the one function type casts to and from which are not type-punning warnings.
template <typename F>
Callback as_callback(F* f) {
  return reinterpret_cast<Callback>(reinterpret_cast<void (*)()>(f));
}

// Cyrus keeps a pointer to this list for the life of the process.
const sasl_callback_t g_global_callbacks[] = {
    {SASL_CB_GETOPT, as_callback(&global_getopt), nullptr},
    {SASL_CB_LOG, as_callback(&global_log), nullptr},
    {SASL_CB_LIST_END, nullptr, nullptr},
};

Status initialise() {
  sasl_set_mutex(&mutex_alloc, &mutex_lock, &mutex_unlock, &mutex_free);
  // Cyrus keeps the pointer to the application name: it must be static.
  int rc = sasl_server_init(g_global_callbacks, kAppName);
  const char* what = "sasl_server_init";
  if (rc == SASL_OK) {
    rc = sasl_client_init(g_global_callbacks);
    what = "sasl_client_init";
  }
  if (rc == SASL_OK) return {};
  std::string message = std::string("Cyrus SASL: ") + what + " failed: " +
                        sasl_errstring(rc, nullptr, nullptr);
  std::lock_guard lock(g_init_log_mu);
  if (!g_init_log.empty()) message += " (" + g_init_log + ")";
  return {Errc::kConfigError, std::move(message)};
}

void collect_server(server_sasl_mechanism_t* m, sasl_info_callback_stage_t stage, void* rock) {
  if (stage != SASL_INFO_LIST_MECH || m == nullptr || m->plug == nullptr) return;
  static_cast<std::vector<std::string>*>(rock)->emplace_back(m->plug->mech_name);
}

void collect_client(client_sasl_mechanism_t* m, sasl_info_callback_stage_t stage, void* rock) {
  if (stage != SASL_INFO_LIST_MECH || m == nullptr || m->plug == nullptr) return;
  static_cast<std::vector<std::string>*>(rock)->emplace_back(m->plug->mech_name);
}

}  // namespace

Status init_sasl_library() {
  static const Status status = initialise();  // thread-safe, once per process
  return status;
}

std::vector<std::string> server_plugin_mechanisms() {
  std::vector<std::string> names;
  if (!init_sasl_library().ok()) return names;
  sasl_server_plugin_info(nullptr, &collect_server, &names);
  return names;
}

std::vector<std::string> client_plugin_mechanisms() {
  std::vector<std::string> names;
  if (!init_sasl_library().ok()) return names;
  sasl_client_plugin_info(nullptr, &collect_client, &names);
  return names;
}

}  // namespace authrpc::sasl
