#include "minibench/methods.h"

#include <algorithm>
#include <cstdio>

#include "minibench/sessions.h"

namespace minibench {
namespace {

using authrpc::Status;

// How a method's rows are set up follows from what its mechanism declares
// (auth/mechanism_traits.h), never from its name: one that may be issued
// delegation tokens logs in from the bench realm; a delegation-token one
// authenticates with a token fetched first, over token_issuer() (so it
// needs the realm too, unless --token-file gives the token).
const authrpc::MechanismTraits* traits_of(const authrpc::MechanismRegistry& registry,
                                          const std::string& name) {
  const auto* entry = registry.server(name);
  return entry == nullptr ? nullptr : &entry->traits;
}

}  // namespace

// The rows that authenticate with a delegation token fetched first.
bool is_token_method(const authrpc::MechanismRegistry& registry, const std::string& name) {
  const auto* t = traits_of(registry, name);
  return t != nullptr && t->delegation_token;
}

// The rows that carry a bearer secret: +tls rows only (MethodPlan::tls_only).
bool carries_bearer_secret(const authrpc::MechanismRegistry& registry, const std::string& name) {
  const auto* t = traits_of(registry, name);
  return t != nullptr && t->bearer_secret;
}

// The rows that need the bench realm (Kerberos credentials).
bool needs_realm(const authrpc::MechanismRegistry& registry, const std::string& name) {
  const auto* t = traits_of(registry, name);
  return t != nullptr && (t->may_be_issued_tokens || t->delegation_token);
}

namespace {

// What "all" measures, in this order: each registered method with both
// halves that minibench can run (no client certificate, no TLS: the TLS rows
// are --tls), those without a proof first, then those that prove an
// identity, then the delegation-token ones; by name within each.
std::vector<std::string> measurable_methods(const authrpc::MechanismRegistry& registry) {
  std::vector<std::string> out;
  for (int group = 0; group < 3; ++group) {
    for (const auto& name : registry.server_names()) {
      const auto* t = traits_of(registry, name);
      if (registry.client(name) == nullptr || t->needs_client_certificate || t->needs_tls) continue;
      if ((t->delegation_token ? 2 : t->proves_identity ? 1 : 0) == group) out.push_back(name);
    }
  }
  return out;
}


constexpr RowLabel kRowLabels[] = {
    {"simple", FloorKind::kBare, kSessionTarget, 0.9},                // names: row label
    {"kerberos", FloorKind::kGss, kKerberosSessionTarget, 0.95},      // names: row label
    {"kerberos-sasl", FloorKind::kGss, std::nullopt},                 // names: row label
    // Session tickets over plaintext tcp (the spawned server issues them).
    {"token", FloorKind::kBare, std::nullopt, 0.8, false, R"({"tickets": true})"},  // names: row label
    {"token-digest", FloorKind::kBare, std::nullopt},                 // names: row label
    {"token-scram", FloorKind::kBare, std::nullopt},                  // names: row label
    {"jwt", FloorKind::kBare, std::nullopt, std::nullopt, true},      // names: row label
};

// The method the calls rows and single-method runs use: the first that
// "all" measures, one without a proof when there is one (the cheapest).
std::string baseline_method(const authrpc::MechanismRegistry& registry) {
  const auto all = measurable_methods(registry);
  return all.empty() ? std::string() : all.front();
}

}  // namespace

const RowLabel* row_label(const std::string& name) {
  for (const auto& m : kRowLabels) {
    if (name == m.method) return &m;
  }
  return nullptr;
}

bool registered(const authrpc::MechanismRegistry& registry, const std::string& name) {
  const auto clients = registry.client_names();
  const auto servers = registry.server_names();
  return std::find(clients.begin(), clients.end(), name) != clients.end() &&
         std::find(servers.begin(), servers.end(), name) != servers.end();
}

authrpc::Result<Selection> select_methods(const Args& args) {
  const auto registry = authrpc::MechanismRegistry::with_builtins();
  const std::string baseline = baseline_method(registry);
  std::vector<std::string> names = args.methods;
  if (!args.methods_given) {
    names.clear();
    if (!args.server.empty() || !args.sessions) {
      names.push_back(baseline);
    } else {
      names = measurable_methods(registry);
    }
  } else if (!args.sessions) {
    // The calls rows run over plaintext tcp:// and unix:.
    std::erase_if(names, [&registry](const std::string& name) {
      return carries_bearer_secret(registry, name);
    });
    if (names.empty()) {
      return Status(authrpc::Errc::kInvalidArgument,
                    "calls run over plaintext tcp:// and unix:, where a bearer secret is never "
                    "sent: --method names no method for them");
    }
    const bool has_baseline = std::find(names.begin(), names.end(), baseline) != names.end();
    names = {has_baseline ? baseline : names.front()};
  }
  std::vector<std::string> kept;
  for (const auto& name : names) {
    if (registered(registry, name)) {
      kept.push_back(name);
    } else {
      std::fprintf(stderr,
                   "minibench: the %s mechanism is not registered in this build: its rows are "
                   "skipped\n",
                   name.c_str());
    }
  }
  // A bearer secret has its +tls row only (MethodPlan::tls_only), and a
  // token minibench issues is trusted by the server it spawns only. Left out
  // quietly when not asked for by name (--tls off asked for no TLS row).
  for (auto it = kept.begin(); it != kept.end();) {
    const RowLabel* label = row_label(*it);
    std::string why;
    if (carries_bearer_secret(registry, *it) && !tls_rows(args)) {
      why = "it carries a bearer secret, sent over TLS only, and this run has no TLS rows (--tls "
            "off, or --transport unix without --tls on)";
    } else if (label != nullptr && label->issued_jwt && !args.server.empty()) {
      why = "minibench issues its access token itself, which only the server it spawns trusts";
    }
    if (why.empty()) {
      ++it;
      continue;
    }
    if (args.methods_given) {
      return Status(authrpc::Errc::kInvalidArgument, "--method " + *it + ": " + why);
    }
    it = kept.erase(it);
  }
  // Kerberos rows, and token rows that fetch their token over Kerberos
  // (not with --token-file).
  auto is_kerberos = [&args, &registry](const std::string& name) {
    return needs_realm(registry, name) &&
           (args.token_file.empty() || !is_token_method(registry, name));
  };
  Selection selection;
  if (std::any_of(kept.begin(), kept.end(), is_kerberos)) {
    if (!args.server.empty() && !args.realm.names_realm()) {
      return Status(authrpc::Errc::kInvalidArgument,
                    "Kerberos rows against --server need its realm: --service-principal (and "
                    "--krb5-conf, --principal/--client-keytab or KRB5CCNAME as needed)");
    }
    auto realm = BenchRealm::open(args.realm);
    if (realm.ok()) {
      selection.realm = std::move(*realm);
    } else if (realm.code() == authrpc::Errc::kNotFound && !args.methods_given) {
      std::fprintf(stderr, "minibench: the Kerberos rows are skipped: %s\n",
                   realm.status().message.c_str());
      std::erase_if(kept, is_kerberos);
    } else {
      return Status(realm.code(), "Kerberos realm: " + realm.status().message);
    }
  }
  if (kept.empty()) return Status(authrpc::Errc::kInvalidArgument, "no method left to measure");

  for (const auto& name : kept) {
    MethodPlan m;
    m.name = name;
    m.target = kSessionTarget;
    if (const RowLabel* label = row_label(name)) {
      m.floor = label->floor;
      m.target = label->target;
      m.rate_target = label->rate_target;
      m.issued_jwt = label->issued_jwt;
    }
    m.tls_only = carries_bearer_secret(registry, name);
    m.kerberos = needs_realm(registry, name) && selection.realm != nullptr;
    if (m.kerberos) m.client_options = selection.realm->setup().client_options();
    m.optional = !args.methods_given;
    selection.methods.push_back(std::move(m));
  }
  // The calls rows run over plaintext: with the baseline, or the first
  // method that may; the spawned server always enables the baseline.
  const bool has_baseline = std::find(kept.begin(), kept.end(), baseline) != kept.end();
  const auto plaintext = std::find_if(kept.begin(), kept.end(), [&registry](const std::string& n) {
    return !carries_bearer_secret(registry, n);
  });
  selection.calls_method = has_baseline || plaintext == kept.end() ? baseline : *plaintext;
  return selection;
}

}  // namespace minibench
