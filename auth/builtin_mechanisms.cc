// MechanismRegistry::with_builtins(): the mechanisms authrpc ships, with the
// options each reads from JSON. Kept apart from the registry itself so that a
// program that builds its own registry does not link every mechanism.
#include "auth/mechanism_registry.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "auth/kerberos.h"
#include "auth/kerberos_sasl.h"
#include "auth/simple.h"
#include "auth/token_mechanism.h"
#include "auth/token_sasl.h"
#include "auth/x509.h"

namespace authrpc {
namespace {

// Reads a mechanism's options object: only the listed keys, with the right
// types, so that a typo is an error rather than a silent default.
class Options {
 public:
  Options(std::string_view mechanism, const nlohmann::json& json)
      : mechanism_(mechanism), json_(json) {}

  Status check(std::initializer_list<std::string_view> allowed) const {
    if (json_.is_null()) return {};
    if (!json_.is_object()) return error("options must be an object");
    for (const auto& [key, _] : json_.items()) {
      if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
        return error("unknown option '" + key + "'");
      }
    }
    return {};
  }
  Status read(const char* key, std::string& out) const {
    if (!json_.is_object() || !json_.contains(key)) return {};
    if (!json_[key].is_string()) return error(std::string("'") + key + "' must be a string");
    out = json_[key].get<std::string>();
    return {};
  }
  Status read(const char* key, bool& out) const {
    if (!json_.is_object() || !json_.contains(key)) return {};
    if (!json_[key].is_boolean()) return error(std::string("'") + key + "' must be true or false");
    out = json_[key].get<bool>();
    return {};
  }

 private:
  Status error(const std::string& message) const {
    return {Errc::kConfigError, std::string(mechanism_) + ": " + message};
  }
  std::string_view mechanism_;
  const nlohmann::json& json_;
};

// `kerberos` and `kerberos-sasl` take the same options.
template <typename Mechanism>
Result<std::shared_ptr<ServerMechanism>> make_kerberos_server(std::string_view name,
                                                              const nlohmann::json& json) {
  Options o(name, json);
  KerberosServerOptions k;
  for (Status s : {o.check({"keytab", "principal", "service", "host", "replay_cache",
                            "replay_cache_dir"}),
                   o.read("keytab", k.keytab), o.read("principal", k.principal),
                   o.read("service", k.service), o.read("host", k.host),
                   o.read("replay_cache", k.replay_cache),
                   o.read("replay_cache_dir", k.replay_cache_dir)}) {
    if (!s.ok()) return s;
  }
  auto mechanism = Mechanism::create(k);
  if (!mechanism.ok()) return mechanism.status();
  return std::shared_ptr<ServerMechanism>(*mechanism);
}

template <typename Mechanism>
Result<std::shared_ptr<ClientMechanism>> make_kerberos_client(std::string_view name,
                                                              const nlohmann::json& json) {
  Options o(name, json);
  KerberosClientOptions k;
  for (Status s : {o.check({"ccache", "principal", "keytab", "service_principal", "service"}),
                   o.read("ccache", k.ccache), o.read("principal", k.principal),
                   o.read("keytab", k.keytab), o.read("service_principal", k.service_principal),
                   o.read("service", k.service)}) {
    if (!s.ok()) return s;
  }
  auto mechanism = Mechanism::create(k);
  if (!mechanism.ok()) return mechanism.status();
  return std::shared_ptr<ClientMechanism>(*mechanism);
}

}  // namespace

MechanismRegistry MechanismRegistry::with_builtins() {
  MechanismRegistry r;
  r.register_server(std::string(kSimpleMechanism),
                    [](const nlohmann::json&) -> Result<std::shared_ptr<ServerMechanism>> {
                      return std::shared_ptr<ServerMechanism>(
                          std::make_shared<SimpleServerMechanism>());
                    });
  r.register_client(
      std::string(kSimpleMechanism),
      [](const nlohmann::json& options) -> Result<std::shared_ptr<ClientMechanism>> {
        std::string user;
        if (options.is_object() && options.contains("user")) {
          if (!options["user"].is_string()) return Status(Errc::kConfigError, "simple: 'user' must be a string");
          user = options["user"].get<std::string>();
        }
        if (!user.empty()) {
          if (auto refused = check_simple_user_name(user); !refused.ok()) {
            return Status(Errc::kConfigError, "simple: " + refused.message);
          }
        }
        return std::shared_ptr<ClientMechanism>(std::make_shared<SimpleClientMechanism>(user));
      });
  r.register_server(std::string(kKerberosMechanism), [](const nlohmann::json& options) {
    return make_kerberos_server<KerberosServerMechanism>(kKerberosMechanism, options);
  });
  r.register_client(std::string(kKerberosMechanism), [](const nlohmann::json& options) {
    return make_kerberos_client<KerberosClientMechanism>(kKerberosMechanism, options);
  });
  r.register_server(std::string(kKerberosSaslMechanism), [](const nlohmann::json& options) {
    return make_kerberos_server<KerberosSaslServerMechanism>(kKerberosSaslMechanism, options);
  });
  r.register_client(std::string(kKerberosSaslMechanism), [](const nlohmann::json& options) {
    return make_kerberos_client<KerberosSaslClientMechanism>(kKerberosSaslMechanism, options);
  });
  register_token_builtins(r);
  r.register_server(std::string(kX509Mechanism),
                    [](const nlohmann::json& options) -> Result<std::shared_ptr<ServerMechanism>> {
                      auto rule = security::X509UserFrom::kCommonName;
                      if (options.is_object()) {
                        for (const auto& [key, value] : options.items()) {
                          if (key != "user_from") return Status(Errc::kConfigError, "x509: unknown option '" + key + "'");
                          if (!value.is_string() || !security::parse_x509_user_from(value.get<std::string>(), &rule)) {
                            return Status(Errc::kConfigError,
                                          "x509: 'user_from' must be cn, san-email, san-email-local or san-dns");
                          }
                        }
                      }
                      return std::shared_ptr<ServerMechanism>(std::make_shared<X509ServerMechanism>(rule));
                    });
  r.register_client(std::string(kX509Mechanism),
                    [](const nlohmann::json&) -> Result<std::shared_ptr<ClientMechanism>> {
                      return std::shared_ptr<ClientMechanism>(std::make_shared<X509ClientMechanism>());
                    });
  return r;
}

// `token`: the client half reads a credentials file; the server half needs
// the server's token service (server/token_service.h), which replaces this
// placeholder with a factory sharing its SecretManager.
void MechanismRegistry::register_token_builtins(MechanismRegistry& r) {
  r.register_server(std::string(kTokenMechanism),
                    [](const nlohmann::json&) -> Result<std::shared_ptr<ServerMechanism>> {
                      return Status(Errc::kConfigError,
                                    "token: enable the token service (the 'tokens' section) to "
                                    "use the token mechanism");
                    });
  r.register_client(std::string(kTokenMechanism),
                    [](const nlohmann::json& json) -> Result<std::shared_ptr<ClientMechanism>> {
                      Options o(kTokenMechanism, json);
                      TokenClientOptions t;
                      for (Status s : {o.check({"token_file", "service"}),
                                       o.read("token_file", t.token_file),
                                       o.read("service", t.service)}) {
                        if (!s.ok()) return s;
                      }
                      return std::shared_ptr<ClientMechanism>(
                          std::make_shared<TokenClientMechanism>(std::move(t)));
                    });
  // The interop mechanisms (auth/token_sasl.h): the same tokens through
  // Cyrus DIGEST-MD5 and SCRAM-SHA-256; their server halves come from the
  // token service too, which binds the token-server factories below to its
  // SecretManager.
  for (std::string_view name : {kTokenDigestMechanism, kTokenScramMechanism}) {
    r.register_server(std::string(name),
                      [name](const nlohmann::json&) -> Result<std::shared_ptr<ServerMechanism>> {
                        return Status(Errc::kConfigError,
                                      std::string(name) +
                                          ": enable the token service (the 'tokens' section)");
                      });
    r.register_client(
        std::string(name),
        [name](const nlohmann::json& json) -> Result<std::shared_ptr<ClientMechanism>> {
          Options o(name, json);
          TokenClientOptions t;
          TokenSaslServerOptions n;
          for (Status s : {o.check({"token_file", "service", "sasl_service", "server_fqdn"}),
                           o.read("token_file", t.token_file), o.read("service", t.service),
                           o.read("sasl_service", n.service), o.read("server_fqdn", n.server_fqdn)}) {
            if (!s.ok()) return s;
          }
          return std::shared_ptr<ClientMechanism>(
              std::make_shared<TokenSaslClientMechanism>(name, std::move(t), std::move(n)));
        });
    r.register_token_server(
        std::string(name),
        [name](const nlohmann::json& json, std::shared_ptr<const security::SecretManager> secrets)
            -> Result<std::shared_ptr<ServerMechanism>> {
          TokenSaslServerOptions o;
          if (json.is_object()) {
            for (const auto& [key, value] : json.items()) {
              if (key == "scram_verifier_cache" && name == kTokenScramMechanism) {
                if (!value.is_number_unsigned() || value.get<std::uint64_t>() > (1u << 26)) {
                  return Status(Errc::kConfigError,
                                std::string(name) + ": 'scram_verifier_cache' must be an integer 0 … 2^26");
                }
                o.scram_verifier_cache = value.get<std::size_t>();
                continue;
              }
              std::string* field = key == "sasl_service"  ? &o.service
                                   : key == "server_fqdn" ? &o.server_fqdn
                                                          : nullptr;
              if (field == nullptr || !value.is_string()) {
                return Status(Errc::kConfigError, std::string(name) + ": unknown or non-string option '" +
                                                      key + "' (sasl_service, server_fqdn" +
                                                      (name == kTokenScramMechanism ? ", scram_verifier_cache)" : ")"));
              }
              *field = value.get<std::string>();
            }
          }
          return std::shared_ptr<ServerMechanism>(
              std::make_shared<TokenSaslServerMechanism>(name, std::move(secrets), std::move(o)));
        });
  }
}

}  // namespace authrpc
