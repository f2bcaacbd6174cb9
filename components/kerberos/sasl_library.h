// Cyrus SASL as a process-wide library: the one-time setup every SASL
// mechanism (kerberos-sasl now; DIGEST-MD5 and SCRAM for delegation tokens
// later) needs before it can open a connection. Owns nothing per connection:
// that is components/kerberos/sasl_session.h.
//
// Cyrus keeps global state (loaded plugins, the auxprop registry, its mutex
// hooks). init_sasl_library() sets it up once, from any thread:
// sasl_set_mutex() first (so that Cyrus and its plugins lock with real
// mutexes), then sasl_server_init() and sasl_client_init() with global
// callbacks that log nothing to syslog and keep plugin options out of
// process-wide state (see sasl_library.cc). It is never torn down: Cyrus
// cannot be re-initialised while connections may still exist, so the plugins
// stay loaded until the process exits.
//
// If another component of the process initialised Cyrus first, Cyrus keeps
// that component's mutex hooks and global callbacks; authrpc then relies on
// them being thread-safe.
#pragma once

#include <string>
#include <vector>

#include "authrpc/base/status.h"

namespace authrpc::sasl {

// The application name Cyrus reads its optional configuration file under
// (<plugin config dir>/authrpc.conf).
inline constexpr char kAppName[] = "authrpc";

// Initialises Cyrus SASL on the first call; every call returns the outcome of
// that one initialisation. kConfigError if Cyrus could not be initialised.
Status init_sasl_library();

// The mechanisms the loaded server / client plugins offer ("GSSAPI", ...),
// before any per-connection security policy is applied. Empty if the library
// could not be initialised.
std::vector<std::string> server_plugin_mechanisms();
std::vector<std::string> client_plugin_mechanisms();

}  // namespace authrpc::sasl
