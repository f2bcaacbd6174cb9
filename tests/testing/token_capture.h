// What a passive observer of a `token` session records, and what it can do
// with it, for the replay tests (token_itest, zk_token_itest):
// CapturingClient wraps a real client mechanism and keeps every message its
// sessions send; ReplayingClient sends those bytes again, on another
// connection, answering a server challenge with the next recorded message
// whatever the challenge says (psk_mechanism_test replays a `psk` session
// with it). Test code only.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "authrpc/auth/mechanism.h"

namespace authrpc::testing {

class CapturingClient final : public ClientMechanism {
 public:
  explicit CapturingClient(std::shared_ptr<ClientMechanism> real) : real_(std::move(real)) {}
  std::string_view name() const noexcept override { return real_->name(); }
  std::unique_ptr<ClientAuthSession> start(const ChannelInfo& channel) override {
    return std::make_unique<Session>(real_->start(channel), this);
  }
  // The messages of the last session, in order.
  std::vector<std::string> sent() const {
    std::lock_guard lock(mu_);
    return sent_;
  }

 private:
  struct Session final : ClientAuthSession {
    Session(std::unique_ptr<ClientAuthSession> session, CapturingClient* capturing)
        : real(std::move(session)), owner(capturing) {
      std::lock_guard lock(owner->mu_);
      owner->sent_.clear();
    }
    asio::awaitable<ClientStep> initial() override { co_return record(co_await real->initial()); }
    asio::awaitable<ClientStep> challenge(std::string_view message) override {
      co_return record(co_await real->challenge(message));
    }
    asio::awaitable<Status> complete(std::string_view message) override {
      co_return co_await real->complete(message);
    }
    ClientStep record(ClientStep step) {
      if (step.kind == ClientStep::Kind::kSend) {
        std::lock_guard lock(owner->mu_);
        owner->sent_.push_back(step.message);
      }
      return step;
    }
    std::unique_ptr<ClientAuthSession> real;
    CapturingClient* owner;
  };

  std::shared_ptr<ClientMechanism> real_;
  mutable std::mutex mu_;
  std::vector<std::string> sent_;
};

class ReplayingClient final : public ClientMechanism {
 public:
  // `mechanism`: the name it offers the server (the `token` mechanism's by default).
  explicit ReplayingClient(std::vector<std::string> messages, std::string mechanism = "token")
      : messages_(std::move(messages)), mechanism_(std::move(mechanism)) {}
  std::string_view name() const noexcept override { return mechanism_; }
  std::unique_ptr<ClientAuthSession> start(const ChannelInfo&) override {
    return std::make_unique<Session>(messages_);
  }

 private:
  struct Session final : ClientAuthSession {
    explicit Session(std::vector<std::string> recorded) : messages(std::move(recorded)) {}
    asio::awaitable<ClientStep> initial() override { co_return next(); }
    asio::awaitable<ClientStep> challenge(std::string_view) override { co_return next(); }
    // An attacker has nothing to check the server's proof with.
    asio::awaitable<Status> complete(std::string_view) override { co_return Status(); }
    ClientStep next() {
      if (sent == messages.size()) {
        return ClientStep::failure({Errc::kProtocolError, "nothing more was recorded"});
      }
      ++sent;
      return ClientStep::send(messages[sent - 1], sent == messages.size());
    }
    std::vector<std::string> messages;
    std::size_t sent = 0;
  };

  std::vector<std::string> messages_;
  std::string mechanism_;
};

}  // namespace authrpc::testing
