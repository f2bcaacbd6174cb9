#include "authrpc/server/preauth_budget.h"

#include <arpa/inet.h>

#include <algorithm>
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
  std::string key = address_key(peer);
  const bool exempt = key.empty();
  Admission admission;
  std::lock_guard lock(mu_);
  if (authenticated_ >= limits_.connections) {
    admission.refused = Refusal::kMaxConnections;
    return admission;
  }
  const auto found = by_address_.find(key);
  AddressEntry* own = found != by_address_.end() ? &*found : nullptr;
  if (own != nullptr && !exempt) {
    const Address& a = own->second;
    if (limits_.connections_per_address > 0 &&
        a.unauthenticated + a.authenticated >= limits_.connections_per_address) {
      if (a.unauthenticated == 0) {
        admission.refused = Refusal::kPerAddress;
        return admission;
      }
      admission.shed = take(a.oldest, true);
    } else if (limits_.per_address > 0 && a.unauthenticated >= limits_.per_address) {
      admission.shed = take(a.oldest, true);
    }
  }
  if (!admission.shed && unauthenticated_ > 0 &&
      (unauthenticated_ >= limits_.unauthenticated ||
       authenticated_ + unauthenticated_ >= limits_.connections)) {
    // The address holding the most gives way (with the new connection
    // counted, its own if it is among them): one with a single connection
    // is shed only when every address has a single one.
    const bool own_most = own != nullptr && own->second.unauthenticated >= most_;
    const AddressEntry& most = own_most ? *own : *buckets_[most_].first;
    admission.shed = take(most.second.oldest, false);
  }

  std::uint32_t index = free_;
  if (index != kNone) {
    free_ = slots_[index].next_free;
  } else {
    index = static_cast<std::uint32_t>(slots_.size());
    slots_.emplace_back();
  }
  Slot& slot = slots_[index];
  slot.state = SlotState::kNegotiating;
  slot.reactor = reactor;
  slot.connection = std::move(connection);
  // Looked up again: a shed above may have dropped the address's entry.
  auto& entry = *by_address_.try_emplace(std::move(key)).first;
  Address& address = entry.second;
  slot.address = &entry;
  slot.address_older = address.newest;
  slot.address_newer = kNone;
  if (address.newest != kNone) slots_[address.newest].address_newer = index; else address.oldest = index;
  address.newest = index;
  raise(entry);
  ++unauthenticated_;
  admission.ticket = (std::uint64_t{slot.generation} << 32) | (std::uint64_t{index} + 1);
  return admission;
}

std::uint32_t PreauthBudget::slot_of(std::uint64_t ticket) const {
  const std::uint64_t low = ticket & 0xffffffffu;
  if (low == 0 || low > slots_.size()) return kNone;
  const auto index = static_cast<std::uint32_t>(low - 1);
  const Slot& slot = slots_[index];
  return slot.state != SlotState::kFree &&
                 slot.generation == static_cast<std::uint32_t>(ticket >> 32)
             ? index
             : kNone;
}

void PreauthBudget::raise(AddressEntry& entry) {
  Address& a = entry.second;
  if (a.unauthenticated > 0) {
    Bucket& from = buckets_[a.unauthenticated];
    (a.bucket_prev != nullptr ? a.bucket_prev->second.bucket_next : from.first) = a.bucket_next;
    (a.bucket_next != nullptr ? a.bucket_next->second.bucket_prev : from.last) = a.bucket_prev;
  }
  ++a.unauthenticated;
  if (buckets_.size() <= a.unauthenticated) buckets_.resize(a.unauthenticated + 1);
  Bucket& to = buckets_[a.unauthenticated];
  a.bucket_prev = to.last;
  a.bucket_next = nullptr;
  (to.last != nullptr ? to.last->second.bucket_next : to.first) = &entry;
  to.last = &entry;
  most_ = std::max(most_, a.unauthenticated);
}

void PreauthBudget::lower(AddressEntry& entry) {
  Address& a = entry.second;
  Bucket& from = buckets_[a.unauthenticated];
  (a.bucket_prev != nullptr ? a.bucket_prev->second.bucket_next : from.first) = a.bucket_next;
  (a.bucket_next != nullptr ? a.bucket_next->second.bucket_prev : from.last) = a.bucket_prev;
  a.bucket_prev = a.bucket_next = nullptr;
  if (--a.unauthenticated > 0) {
    Bucket& to = buckets_[a.unauthenticated];
    a.bucket_prev = to.last;
    (to.last != nullptr ? to.last->second.bucket_next : to.first) = &entry;
    to.last = &entry;
  }
  while (most_ > 0 && buckets_[most_].first == nullptr) --most_;
}

void PreauthBudget::forget(AddressEntry& entry) {
  const Address& a = entry.second;
  if (a.unauthenticated == 0 && a.authenticated == 0 && by_address_.size() > kKeptAddresses) {
    by_address_.erase(by_address_.find(entry.first));
  }
}

void PreauthBudget::leave_negotiating(std::uint32_t index) {
  Slot& slot = slots_[index];
  AddressEntry& entry = *slot.address;
  Address& a = entry.second;
  if (slot.address_older != kNone) {
    slots_[slot.address_older].address_newer = slot.address_newer;
  } else {
    a.oldest = slot.address_newer;
  }
  if (slot.address_newer != kNone) {
    slots_[slot.address_newer].address_older = slot.address_older;
  } else {
    a.newest = slot.address_older;
  }
  slot.address_older = slot.address_newer = kNone;
  lower(entry);
  --unauthenticated_;
}

void PreauthBudget::free_slot(std::uint32_t index) {
  Slot& slot = slots_[index];
  slot.state = SlotState::kFree;
  ++slot.generation;
  slot.address = nullptr;
  slot.user = nullptr;
  slot.reactor = nullptr;
  slot.connection.reset();
  slot.next_free = free_;
  free_ = index;
}

PreauthBudget::Victim PreauthBudget::take(std::uint32_t index, bool same_address) {
  Slot& slot = slots_[index];
  Victim victim{slot.reactor, std::move(slot.connection), same_address};
  AddressEntry& entry = *slot.address;
  leave_negotiating(index);
  free_slot(index);
  forget(entry);
  return victim;
}

PreauthBudget::Authentication PreauthBudget::authenticate(std::uint64_t ticket,
                                                          std::string_view user) {
  std::lock_guard lock(mu_);
  const std::uint32_t index = slot_of(ticket);
  if (index == kNone || slots_[index].state != SlotState::kNegotiating) {
    return Authentication::kShed;
  }
  Slot& slot = slots_[index];
  if (limits_.connections_per_user > 0) {
    auto& counted = *by_user_.try_emplace(std::string(user), 0).first;
    if (counted.second >= limits_.connections_per_user) return Authentication::kTooManyForUser;
    ++counted.second;
    slot.user = &counted;
  }
  AddressEntry& entry = *slot.address;
  leave_negotiating(index);
  if (limits_.connections_per_address > 0 && !entry.first.empty()) {
    ++entry.second.authenticated;
  } else {
    slot.address = nullptr;
    forget(entry);
  }
  slot.state = SlotState::kAuthenticated;
  slot.reactor = nullptr;
  slot.connection.reset();
  ++authenticated_;
  return Authentication::kAccepted;
}

void PreauthBudget::release(std::uint64_t ticket) {
  std::lock_guard lock(mu_);
  const std::uint32_t index = slot_of(ticket);
  if (index == kNone) return;
  Slot& slot = slots_[index];
  if (slot.state == SlotState::kNegotiating) {
    take(index, false);
    return;
  }
  if (slot.user != nullptr && --slot.user->second == 0) {
    by_user_.erase(by_user_.find(slot.user->first));
  }
  AddressEntry* entry = slot.address;
  free_slot(index);
  if (entry != nullptr) {
    --entry->second.authenticated;
    forget(*entry);
  }
  --authenticated_;
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
