#include "minibench/gss_floor.h"

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/redirect_error.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/write.hpp>
#include <gssapi/gssapi_krb5.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <string_view>

#include "authrpc/components/kerberos/kerberos_errors.h"
#include "minibench/floor_sockets.h"

namespace minibench {
namespace {

using asio::redirect_error;
using asio::use_awaitable;
using authrpc::Endpoint;
using authrpc::Errc;
using authrpc::Result;
using authrpc::Status;
using authrpc::security::gss_status;
using authrpc::security::GssBuffer;
using authrpc::security::GssContext;
using authrpc::security::GssName;
using authrpc::security::KerberosCredentials;
using net::Local;
using net::Tcp;

constexpr std::size_t kMaxToken = 64 * 1024;
constexpr std::size_t kReadChunk = 4096;
// As components/kerberos/kerberos.cc asks for.
constexpr OM_uint32 kFlags = GSS_C_MUTUAL_FLAG | GSS_C_INTEG_FLAG;

gss_buffer_desc input_of(std::string_view bytes) {
  return {bytes.size(), const_cast<char*>(bytes.data())};
}

// A token GSSAPI wrote, in place (GssBuffer::str() would copy it).
std::string_view view(GssBuffer& token) {
  return {static_cast<const char*>(token.get()->value), token.get()->length};
}

// Writes `token` as one framed message (length + bytes) in one write.
template <typename Socket>
asio::awaitable<std::error_code> write_token(Socket& socket, std::string_view token) {
  const auto n = static_cast<std::uint32_t>(token.size());
  const std::array<unsigned char, 4> header{static_cast<unsigned char>(n >> 24),
                                            static_cast<unsigned char>(n >> 16),
                                            static_cast<unsigned char>(n >> 8),
                                            static_cast<unsigned char>(n)};
  const std::array<asio::const_buffer, 2> buffers{asio::buffer(header), asio::buffer(token)};
  std::error_code ec;
  co_await asio::async_write(socket, buffers, redirect_error(use_awaitable, ec));
  co_return ec;
}

// Reads one framed message into `in`; returns the token (a view into `in`).
template <typename Socket>
asio::awaitable<Result<std::string_view>> read_token(Socket& socket, std::string& in) {
  in.clear();
  for (;;) {
    if (in.size() >= 4) {
      const auto* p = reinterpret_cast<const unsigned char*>(in.data());
      const std::size_t n = std::size_t{p[0]} << 24 | std::size_t{p[1]} << 16 |
                            std::size_t{p[2]} << 8 | std::size_t{p[3]};
      if (n > kMaxToken) co_return Status(Errc::kProtocolError, "floor/gss: token too long");
      if (in.size() >= 4 + n) co_return std::string_view(in).substr(4, n);
    }
    const std::size_t had = in.size();
    in.resize(had + kReadChunk);
    std::error_code ec;
    const std::size_t got = co_await socket.async_read_some(
        asio::buffer(in.data() + had, kReadChunk), redirect_error(use_awaitable, ec));
    in.resize(had + got);
    if (ec == asio::error::eof) co_return Status(Errc::kUnavailable, "floor/gss: peer closed");
    if (ec) co_return Status(ec, "floor/gss read");
  }
}

// Says why the server refused a session, once per process (the client only
// sees the connection close).
void report_refusal(const std::string& why) {
  static std::atomic<bool> reported{false};
  if (!reported.exchange(true)) {
    std::fprintf(stderr, "minibench: floor/gss server: %s\n", why.c_str());
  }
}

template <typename Protocol>
class GssListener final : public net::AcceptLoop<Protocol, GssListener<Protocol>, FloorServer> {
 public:
  GssListener(typename Protocol::acceptor acceptor, Endpoint bound,
              std::shared_ptr<const KerberosCredentials> credentials)
      : net::AcceptLoop<Protocol, GssListener<Protocol>, FloorServer>(std::move(acceptor), std::move(bound)),
        credentials_(std::move(credentials)) {
    this->start();
  }

  asio::awaitable<void> serve(typename Protocol::socket socket) { return exchange(std::move(socket), credentials_); }

 private:
  // AP-REQ in, AP-REP out, then wait for the client to close.
  static asio::awaitable<void> exchange(typename Protocol::socket socket,
                                        std::shared_ptr<const KerberosCredentials> credentials) {
    std::string in;
    auto token = co_await read_token(socket, in);
    if (token.ok()) {
      GssContext context;
      GssBuffer output;
      gss_buffer_desc input = input_of(*token);
      gss_name_t source = GSS_C_NO_NAME;
      OM_uint32 minor = 0, flags = 0;
      const OM_uint32 major = gss_accept_sec_context(
          &minor, context.get(), credentials->handle(), &input, GSS_C_NO_CHANNEL_BINDINGS,
          &source, nullptr, output.get(), &flags, nullptr, nullptr);
      GssName client(source);  // released here; a real server would map it to a user
      if (major != GSS_S_COMPLETE || (flags & GSS_C_MUTUAL_FLAG) == 0) {
        report_refusal(GSS_ERROR(major) ? gss_status(major, minor, "accept").message
                                        : "not one token, or no mutual authentication");
      } else {
        co_await write_token(socket, view(output));
      }
    }
    for (std::error_code ec; !ec;) {  // until the client closes
      in.resize(kReadChunk);
      co_await socket.async_read_some(asio::buffer(in), redirect_error(use_awaitable, ec));
    }
    std::error_code ignored;
    socket.close(ignored);
  }

  std::shared_ptr<const KerberosCredentials> credentials_;
};

template <typename Protocol>
class GssClient final : public GssFloorClient {
 public:
  GssClient(typename Protocol::endpoint endpoint,
            std::shared_ptr<const KerberosCredentials> credentials, GssName target)
      : endpoint_(std::move(endpoint)), credentials_(std::move(credentials)),
        target_(std::move(target)) {}

  asio::awaitable<Result<Clock::duration>> session(asio::any_io_executor ex) override {
    std::error_code ec;
    const gss_cred_id_t cred = credentials_ ? credentials_->handle() : GSS_C_NO_CREDENTIAL;
    const auto mech = const_cast<gss_OID>(gss_mech_krb5);
    const auto start = Clock::now();
    typename Protocol::socket socket(ex);
    ec = co_await net::connect<Protocol>(socket, endpoint_);
    if (ec) co_return Status(ec, "floor/gss connect");

    GssContext context;
    OM_uint32 minor = 0, flags = 0;
    {
      GssBuffer ap_req;
      const OM_uint32 major =
          gss_init_sec_context(&minor, cred, context.get(), target_.get(), mech, kFlags, 0,
                               GSS_C_NO_CHANNEL_BINDINGS, GSS_C_NO_BUFFER, nullptr,
                               ap_req.get(), nullptr, nullptr);
      if (GSS_ERROR(major)) {
        co_return Status(Errc::kAuthenticationFailed,
                         "floor/gss: " + gss_status(major, minor, "init").message);
      }
      ec = co_await write_token(socket, view(ap_req));
      if (ec) co_return Status(ec, "floor/gss write");
    }
    // The read buffer, reused by the sessions of one thread (they never
    // overlap there; --concurrency runs sessions on several threads at once).
    thread_local std::string in;
    auto ap_rep = co_await read_token(socket, in);
    if (!ap_rep.ok()) {
      co_return Status(ap_rep.code(), ap_rep.status().message + " (see the server's message)");
    }
    gss_buffer_desc input = input_of(*ap_rep);
    GssBuffer none;
    const OM_uint32 major =
        gss_init_sec_context(&minor, cred, context.get(), target_.get(), mech, kFlags, 0,
                             GSS_C_NO_CHANNEL_BINDINGS, &input, nullptr, none.get(), &flags,
                             nullptr);
    const auto elapsed = Clock::now() - start;
    if (major != GSS_S_COMPLETE || (flags & GSS_C_MUTUAL_FLAG) == 0) {
      co_return Status(Errc::kAuthenticationFailed,
                       "floor/gss: " + gss_status(major, minor, "verify AP-REP").message);
    }
    socket.close(ec);
    co_return elapsed;
  }

 private:
  typename Protocol::endpoint endpoint_;
  std::shared_ptr<const KerberosCredentials> credentials_;
  GssName target_;
};

}  // namespace

Result<std::unique_ptr<FloorServer>> start_gss_floor_server(
    const asio::any_io_executor& ex, const Endpoint& endpoint,
    std::shared_ptr<const KerberosCredentials> acceptor) {
  return net::start_listener<GssListener, FloorServer>(ex, endpoint, std::move(acceptor));
}

Result<std::unique_ptr<GssFloorClient>> GssFloorClient::make(
    const Endpoint& endpoint, std::shared_ptr<const KerberosCredentials> initiator,
    const std::string& service_principal) {
  auto imported = GssName::principal(service_principal);
  if (!imported.ok()) return Status(Errc::kConfigError, "floor/gss: " + imported.status().message);
  // A mechanism name: given any other, every gss_init_sec_context imports it
  // into the krb5 mechanism again (2 of them per session: ~130k instructions,
  // ~30 µs here). Part of setting up, not of a session.
  auto target = imported->canonical();
  if (!target.ok()) {
    return Status(Errc::kConfigError, "floor/gss: " + service_principal + ": " + target.status().message);
  }
  if (endpoint.scheme == Endpoint::Scheme::kUnix) {
    return std::unique_ptr<GssFloorClient>(new GssClient<Local>(
        net::unix_native(endpoint), std::move(initiator), std::move(*target)));
  }
  auto native = net::tcp_native(endpoint);
  if (!native.ok()) return native.status();
  return std::unique_ptr<GssFloorClient>(
      new GssClient<Tcp>(*native, std::move(initiator), std::move(*target)));
}

}  // namespace minibench
