// MiniKdc: a real MIT krb5kdc in a throwaway realm, for tests. It is
// minibench's LocalKdc (minibench/local_kdc.h), which minibench uses to set up
// its own realm; the names here keep tests independent of where it lives.
// scripts/kdc is its shell twin (same configuration) for people.
#pragma once

#include <initializer_list>
#include <string>

#include "minibench/local_kdc.h"
#include "security/base/status.h"

namespace authrpc::testing {

using MiniKdc = minibench::LocalKdc;
using MiniKdcOptions = minibench::LocalKdcOptions;
using CommandResult = minibench::CommandResult;
using KdcRequestCounts = minibench::KdcRequestCounts;

// The principals most Kerberos tests need in a started realm: each of
// `clients` with its key in kdc.client_keytab(), and `service` with its key
// in kdc.service_keytab(). Stops at, and returns, the first failure.
inline Status AddClientsAndService(MiniKdc& kdc, std::initializer_list<const char*> clients,
                                   const std::string& service = "rpc/localhost") {
  for (const char* client : clients) {
    if (Status s = kdc.add_principal(client); !s.ok()) return s;
    if (Status s = kdc.create_keytab(client, kdc.client_keytab()); !s.ok()) return s;
  }
  return kdc.create_service_keytab(service);
}

}  // namespace authrpc::testing
