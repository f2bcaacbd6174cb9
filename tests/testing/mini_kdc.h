// MiniKdc: a real MIT krb5kdc in a throwaway realm, for tests and minibench
// (library authrpc_testing, tests/testing/). scripts/kdc is its shell twin
// (same configuration) for people. It runs the Kerberos tools as processes: no
// link dependency on libkrb5.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "tests/testing/kdc_log.h"
#include "authrpc/base/result.h"
#include "authrpc/base/status.h"

namespace authrpc::testing {

struct MiniKdcOptions {
  std::string realm = "AUTHRPC.TEST";
  // Upper bound the KDC grants (realm max_life) and the lifetime clients ask
  // for (krb5.conf ticket_lifetime); set_ticket_lifetime() can lower the latter.
  std::chrono::seconds ticket_lifetime{std::chrono::hours(1)};
  std::chrono::seconds renew_lifetime{std::chrono::hours(4)};
  // New principals need pre-authentication (as real KDCs do): kinit then
  // costs 2 AS requests (NEEDED_PREAUTH, then ISSUE) instead of 1.
  bool require_preauth = true;
  // Where the realm directory is created; empty: $TMPDIR, else /tmp.
  std::string parent_dir;
  // Keep the realm directory after destruction, to read kdc.log after a failure.
  bool keep_dir = false;
};

// The output of one finished command.
struct CommandResult {
  int exit_code = -1;  // 128 + signal number if it was killed by a signal
  std::string out;
  std::string err;
};

// Owns one throwaway Kerberos realm: a private directory (kdc.conf, krb5.conf,
// database, stash, keytabs, ccache, rcache/, kdc.log) and the krb5kdc child
// process serving it on a free 127.0.0.1 port. Tests and the minibench create
// one per test (or per run), add principals and keytabs, and point Kerberos
// clients and servers at it through env(). Admin tools (kdb5_util,
// kadmin.local, kinit, ...) run as child processes with env() passed
// explicitly; the calling process's environment is never modified except by
// set_env_for_process(). Not thread-safe: use it from one thread. The KDC gets
// SIGTERM if the thread that called start() exits (PR_SET_PDEATHSIG), so a
// crashed or killed test leaves no KDC behind.
class MiniKdc {
 public:
  explicit MiniKdc(MiniKdcOptions options = {});
  ~MiniKdc();  // stop(), then removes dir() unless options.keep_dir
  MiniKdc(const MiniKdc&) = delete;
  MiniKdc& operator=(const MiniKdc&) = delete;

  // True if the tools start() and the realm helpers run (krb5kdc, kdb5_util,
  // kadmin.local, kinit) are installed; names the first missing one otherwise.
  static bool tools_installed(std::string* missing = nullptr);

  // Creates the realm (first time only) and starts krb5kdc on a free port,
  // retrying with another port if it loses a race for it. After stop(),
  // start() again serves the same database, possibly on another port.
  authrpc::Status start();
  // SIGTERM, then SIGKILL after 2 s; waits for the process. OK if not running.
  authrpc::Status stop();
  bool running() const { return pid_ > 0; }

  // Adds NAME (e.g. "alice", "rpc/localhost") with a random key, or with
  // PASSWORD (given to kadmin.local on stdin, never on a command line).
  authrpc::Status add_principal(const std::string& name,
                                const std::optional<std::string>& password = std::nullopt);
  // Appends PRINCIPAL's current keys to the keytab at PATH; keytabs exported
  // earlier stay valid.
  authrpc::Status create_keytab(const std::string& principal, const std::string& path);
  // Adds PRINCIPAL (random key) if needed and appends its keys to
  // service_keytab(), the keytab KRB5_KTNAME names.
  authrpc::Status create_service_keytab(const std::string& principal);
  // Gives PRINCIPAL a new random key (kvno + 1): every keytab exported before
  // is now stale, as after a key rotation.
  authrpc::Status change_key(const std::string& principal);
  // PRINCIPAL's current key version number, from the database.
  authrpc::Result<int> key_version(const std::string& principal);

  // Gets PRINCIPAL a TGT into ccache(), with KEYTAB or with PASSWORD (stdin).
  authrpc::Status kinit(const std::string& principal, const std::string& keytab);
  authrpc::Status kinit_with_password(const std::string& principal, const std::string& password);

  // The lifetime clients request from now on (krb5.conf ticket_lifetime). At
  // most options.ticket_lifetime, the KDC's limit; kInvalidArgument otherwise.
  authrpc::Status set_ticket_lifetime(std::chrono::seconds lifetime);

  // KRB5_CONFIG, KRB5_KDC_PROFILE, KRB5CCNAME, KRB5_KTNAME,
  // KRB5_CLIENT_KTNAME, KRB5RCACHEDIR, AUTHRPC_REALM, AUTHRPC_KDC_PORT.
  std::map<std::string, std::string> env() const;
  // setenv()s env() in this process, for programs (tests, minibench) whose
  // Kerberos libraries read the environment; authrpc library code never
  // modifies the environment. Not thread-safe (setenv): call it before any
  // thread starts. Later MiniKdcs overwrite it.
  void set_env_for_process() const;

  // Runs ARGV (ARGV[0] looked up in PATH and the sbin directories) with
  // env(), STDIN_DATA on its stdin, and captures its output. Errors only when
  // it cannot be run or times out; a non-zero exit is in the result.
  authrpc::Result<CommandResult> run(const std::vector<std::string>& argv,
                                     const std::string& stdin_data = {}) const;

  // Requests handled so far (AS + TGS), parsed from kdc.log: lines like
  //   "... krb5kdc[1234](info): AS_REQ (2 etypes {...}) 127.0.0.1: ISSUE: ..."
  //   "... krb5kdc[1234](info): TGS_REQ (2 etypes {...}) 127.0.0.1: ISSUE: ..."
  int kdc_requests() const;
  KdcRequestCounts kdc_request_counts() const;

  const std::string& realm() const { return options_.realm; }
  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  const std::string& dir() const { return dir_; }  // empty before start()
  std::string krb5_conf() const { return dir_ + "/krb5.conf"; }
  std::string kdc_conf() const { return dir_ + "/kdc.conf"; }
  std::string kdc_log() const { return dir_ + "/kdc.log"; }
  std::string ccache() const { return "FILE:" + dir_ + "/ccache"; }
  std::string service_keytab() const { return dir_ + "/service.keytab"; }
  std::string client_keytab() const { return dir_ + "/client.keytab"; }
  std::string rcache_dir() const { return dir_ + "/rcache"; }

 private:
  authrpc::Status create_dir();
  authrpc::Status write_configs() const;
  std::string kdc_conf_text() const;
  std::string krb5_conf_text() const;
  authrpc::Status create_database();
  authrpc::Status start_on_port(int port);
  authrpc::Status wait_until_serving(int port);
  authrpc::Status kadmin(const std::string& query, const std::string& stdin_data = {});
  authrpc::Status check_command(const std::vector<std::string>& argv,
                                const std::string& stdin_data = {});

  MiniKdcOptions options_;
  std::chrono::seconds requested_lifetime_;
  std::string dir_;
  bool database_created_ = false;
  int port_ = 0;
  pid_t pid_ = -1;
};

// The principals most Kerberos tests need in a started realm: each of
// `clients` with its key in kdc.client_keytab(), and `service` with its key
// in kdc.service_keytab(). Stops at, and returns, the first failure.
authrpc::Status AddClientsAndService(MiniKdc& kdc, std::initializer_list<const char*> clients,
                                     const std::string& service = "rpc/localhost");

}  // namespace authrpc::testing
