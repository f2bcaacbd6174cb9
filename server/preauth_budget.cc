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

namespace {

// Addresses kept with no connection in the budget (see by_address_): enough
// for the clients a server sees again and again, few enough to scan never.
constexpr std::size_t kKeptAddresses = 256;

}  // namespace

PreauthBudget::Admission PreauthBudget::admit(std::string_view peer,
                                              std::weak_ptr<ServerConnection> connection,
                                              Reactor* reactor) {
  std::string address = limits_.per_address > 0 ? address_key(peer) : std::string();
  Admission admission;
  std::lock_guard lock(mu_);
  if (authenticated_ >= limits_.connections) return admission;
  if (!address.empty()) {
    const auto same = by_address_.find(address);
    if (same != by_address_.end() && same->second.count >= limits_.per_address) {
      admission.shed = take(same->second.oldest, true);
    }
  }
  if (!admission.shed && unauthenticated_ > 0 &&
      (unauthenticated_ >= limits_.unauthenticated ||
       authenticated_ + unauthenticated_ >= limits_.connections)) {
    admission.shed = take(oldest_, false);
  }

  std::uint32_t index = free_;
  if (index != kNone) {
    free_ = slots_[index].newer;
  } else {
    index = static_cast<std::uint32_t>(slots_.size());
    slots_.emplace_back();
  }
  Slot& slot = slots_[index];
  slot.live = true;
  slot.reactor = reactor;
  slot.connection = std::move(connection);
  slot.older = newest_;
  slot.newer = kNone;
  if (newest_ != kNone) slots_[newest_].newer = index; else oldest_ = index;
  newest_ = index;
  slot.address = nullptr;
  if (!address.empty()) {
    auto& entry = *by_address_.try_emplace(std::move(address)).first;
    AddressList& list = entry.second;
    slot.address = &entry;
    slot.address_older = list.newest;
    slot.address_newer = kNone;
    if (list.newest != kNone) slots_[list.newest].address_newer = index; else list.oldest = index;
    list.newest = index;
    ++list.count;
  }
  ++unauthenticated_;
  admission.ticket = (std::uint64_t{slot.generation} << 32) | (std::uint64_t{index} + 1);
  return admission;
}

std::uint32_t PreauthBudget::slot_of(std::uint64_t ticket) const {
  const std::uint64_t low = ticket & 0xffffffffu;
  if (low == 0 || low > slots_.size()) return kNone;
  const auto index = static_cast<std::uint32_t>(low - 1);
  const Slot& slot = slots_[index];
  return slot.live && slot.generation == static_cast<std::uint32_t>(ticket >> 32) ? index : kNone;
}

PreauthBudget::Victim PreauthBudget::take(std::uint32_t index, bool same_address) {
  Slot& slot = slots_[index];
  Victim victim{slot.reactor, std::move(slot.connection), same_address};
  slot.connection.reset();
  if (slot.older != kNone) slots_[slot.older].newer = slot.newer; else oldest_ = slot.newer;
  if (slot.newer != kNone) slots_[slot.newer].older = slot.older; else newest_ = slot.older;
  if (auto* entry = slot.address) {
    AddressList& list = entry->second;
    if (slot.address_older != kNone) {
      slots_[slot.address_older].address_newer = slot.address_newer;
    } else {
      list.oldest = slot.address_newer;
    }
    if (slot.address_newer != kNone) {
      slots_[slot.address_newer].address_older = slot.address_older;
    } else {
      list.newest = slot.address_older;
    }
    if (--list.count == 0 && by_address_.size() > kKeptAddresses) {
      by_address_.erase(by_address_.find(entry->first));
    }
    slot.address = nullptr;
  }
  slot.live = false;
  ++slot.generation;
  slot.reactor = nullptr;
  slot.older = kNone;
  slot.newer = free_;
  free_ = index;
  --unauthenticated_;
  return victim;
}

bool PreauthBudget::authenticate(std::uint64_t ticket) {
  std::lock_guard lock(mu_);
  const std::uint32_t index = slot_of(ticket);
  if (index == kNone) return false;
  take(index, false);
  ++authenticated_;
  return true;
}

void PreauthBudget::release(std::uint64_t ticket, bool authenticated) {
  std::lock_guard lock(mu_);
  if (authenticated) {
    --authenticated_;
    return;
  }
  if (const std::uint32_t index = slot_of(ticket); index != kNone) take(index, false);
}

std::size_t PreauthBudget::unauthenticated() const {
  std::lock_guard lock(mu_);
  return unauthenticated_;
}

std::size_t PreauthBudget::authenticated() const {
  std::lock_guard lock(mu_);
  return authenticated_;
}

}  // namespace authrpc
