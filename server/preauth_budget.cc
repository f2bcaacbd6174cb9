#include "authrpc/server/preauth_budget.h"

#include <arpa/inet.h>

#include <cstring>

namespace authrpc {

std::string PreauthBudget::address_key(std::string_view peer) {
  if (peer.empty() || peer.starts_with("unix")) return {};
  if (peer.front() != '[') return std::string(peer.substr(0, peer.rfind(':')));
  const std::size_t close = peer.find(']');
  if (close == std::string_view::npos) return std::string(peer);
  const std::string text(peer.substr(1, close - 1));
  in6_addr a{};
  if (inet_pton(AF_INET6, text.c_str(), &a) != 1) return text;
  static constexpr std::uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  char out[INET6_ADDRSTRLEN] = {};
  if (std::memcmp(a.s6_addr, kMapped, sizeof kMapped) == 0) {
    inet_ntop(AF_INET, a.s6_addr + 12, out, sizeof out);
    return out;
  }
  std::memset(a.s6_addr + 8, 0, 8);
  inet_ntop(AF_INET6, &a, out, sizeof out);
  return std::string(out) + "/64";
}

PreauthBudget::Admission PreauthBudget::admit(std::string_view peer,
                                              std::weak_ptr<ServerConnection> connection,
                                              Reactor* reactor) {
  std::string address = address_key(peer);
  Admission admission;
  std::lock_guard lock(mu_);
  if (authenticated_ >= limits_.connections) return admission;
  if (!address.empty() && limits_.per_address > 0) {
    const auto same = by_address_.find(address);
    if (same != by_address_.end() && same->second.size() >= limits_.per_address) {
      admission.shed = take(by_age_.find(*same->second.begin()), true);
    }
  }
  if (!admission.shed && !by_age_.empty() &&
      (by_age_.size() >= limits_.unauthenticated ||
       authenticated_ + by_age_.size() >= limits_.connections)) {
    admission.shed = take(by_age_.begin(), false);
  }
  admission.ticket = ++next_ticket_;
  if (!address.empty()) by_address_[address].insert(admission.ticket);
  by_age_.emplace_hint(by_age_.end(), admission.ticket,
                       Entry{std::move(address), reactor, std::move(connection)});
  return admission;
}

PreauthBudget::Victim PreauthBudget::take(std::map<std::uint64_t, Entry>::iterator it,
                                          bool same_address) {
  Victim victim{it->second.reactor, std::move(it->second.connection), same_address};
  if (!it->second.address.empty()) {
    const auto same = by_address_.find(it->second.address);
    same->second.erase(it->first);
    if (same->second.empty()) by_address_.erase(same);
  }
  by_age_.erase(it);
  return victim;
}

bool PreauthBudget::authenticate(std::uint64_t ticket) {
  std::lock_guard lock(mu_);
  const auto it = by_age_.find(ticket);
  if (it == by_age_.end()) return false;
  take(it, false);
  ++authenticated_;
  return true;
}

void PreauthBudget::release(std::uint64_t ticket, bool authenticated) {
  std::lock_guard lock(mu_);
  if (authenticated) {
    --authenticated_;
    return;
  }
  if (const auto it = by_age_.find(ticket); it != by_age_.end()) take(it, false);
}

std::size_t PreauthBudget::unauthenticated() const {
  std::lock_guard lock(mu_);
  return by_age_.size();
}

std::size_t PreauthBudget::authenticated() const {
  std::lock_guard lock(mu_);
  return authenticated_;
}

}  // namespace authrpc
