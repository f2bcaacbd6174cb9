#include "authrpc/components/zookeeper/zk_session.h"

#include <zookeeper/zookeeper.h>

#include <cstdio>
#include <cstring>
#include <thread>

namespace authrpc::security {
namespace {

// The C client logs through this per handle. Its lines repeat every few
// milliseconds while a server is down and say nothing our statuses do not:
// they are dropped.
void log_errors(const char*) {}

// Waits for one asynchronous completion.
struct Waiter {
  std::mutex mu;
  std::condition_variable done_cv;
  int pending = 0;
  void finish() {
    std::lock_guard lock(mu);
    if (--pending == 0) done_cv.notify_all();
  }
  void wait() {
    std::unique_lock lock(mu);
    done_cv.wait(lock, [this] { return pending == 0; });
  }
};

struct GetSlot {
  Waiter* waiter;
  ZkSession::Node* node;
};

void on_data(int rc, const char* value, int value_len, const Stat* stat, const void* data) {
  auto* slot = static_cast<const GetSlot*>(data);
  slot->node->rc = rc;
  if (rc == ZOK) {
    if (value != nullptr && value_len > 0) slot->node->data.assign(value, static_cast<std::size_t>(value_len));
    if (stat != nullptr) slot->node->version = stat->version;
  }
  slot->waiter->finish();
}

struct RcSlot {
  Waiter waiter;
  int rc = 0;
};

void on_void(int rc, const void* data) {
  auto* slot = const_cast<RcSlot*>(static_cast<const RcSlot*>(data));
  slot->rc = rc;
  slot->waiter.finish();
}

void on_string(int rc, const char*, const void* data) { on_void(rc, data); }

}  // namespace

std::string zk_error_text(int rc) {
  const char* text = zerror(rc);
  std::string name = text != nullptr ? text : "unknown error";
  return name + " (" + std::to_string(rc) + ")";
}

ZkSession::ZkSession(ZkEventFn on_event) : on_event_(std::move(on_event)) {}

Result<std::unique_ptr<ZkSession>> ZkSession::connect(const ZkSessionOptions& options,
                                                           ZkEventFn on_event) {
  using R = Result<std::unique_ptr<ZkSession>>;
  if (options.connect.empty()) return R(TokenErrc::kInvalidArgument, "no ZooKeeper connect string");
  std::unique_ptr<ZkSession> session(new ZkSession(std::move(on_event)));
  session->zh_ = zookeeper_init2(options.connect.c_str(), &ZkSession::on_watch,
                                 static_cast<int>(options.session_timeout.count()), nullptr,
                                 session.get(), 0, &log_errors);
  if (session->zh_ == nullptr) {
    return R(TokenErrc::kInvalidArgument,
             "ZooKeeper connect string '" + options.connect + "' refused by the client: " +
                 std::strerror(errno));
  }
  {
    std::unique_lock lock(session->mu_);
    const bool up = session->changed_.wait_for(lock, options.connect_timeout, [&] {
      return session->state_ == ZOO_CONNECTED_STATE || session->state_ == ZOO_AUTH_FAILED_STATE ||
             session->state_ == ZOO_EXPIRED_SESSION_STATE;
    });
    if (!up || session->state_ != ZOO_CONNECTED_STATE) {
      return R(TokenErrc::kStoreUnavailable,
               "no ZooKeeper server at " + options.connect + " answered within " +
                   std::to_string(options.connect_timeout.count()) + " ms");
    }
  }
  if (!options.digest.empty()) {
    RcSlot slot;
    slot.waiter.pending = 1;
    int rc = zoo_add_auth(session->zh_, "digest", reinterpret_cast<const char*>(options.digest.data()),
                          static_cast<int>(options.digest.size()), &on_void, &slot);
    if (rc == ZOK) {
      slot.waiter.wait();
      rc = slot.rc;
    }
    if (rc != ZOK) {
      return R(rc == ZAUTHFAILED ? TokenErrc::kPermissionDenied : TokenErrc::kStoreUnavailable,
               "ZooKeeper refused the digest credential: " + zk_error_text(rc));
    }
    session->secured_ = true;
  }
  return session;
}

ZkSession::~ZkSession() {
  if (zh_ != nullptr) zookeeper_close(zh_);
}

void ZkSession::on_watch(_zhandle*, int type, int state, const char* path, void* context) {
  auto* self = static_cast<ZkSession*>(context);
  if (type == ZOO_SESSION_EVENT) {
    std::lock_guard lock(self->mu_);
    self->state_ = state;
    self->changed_.notify_all();
  }
  if (self->on_event_) self->on_event_(ZkEvent{type, state, path != nullptr ? path : ""});
}

int ZkSession::expire_for_testing(const std::string& connect) {
  const clientid_t* id = zoo_client_id(zh_);
  if (id == nullptr) return ZINVALIDSTATE;
  const clientid_t copy = *id;
  // The second handle takes the session over and closes it. Our handle,
  // dropped by the takeover, may reconnect first and take the session back:
  // then the close never reaches the server (seen under ThreadSanitizer's
  // slowness) and the session lives on. So: until this handle has heard
  // that its session expired, which it does when it next reconnects.
  const auto hear_within = std::chrono::milliseconds(zoo_recv_timeout(zh_)) + std::chrono::seconds(1);
  for (int attempt = 0; attempt < 5; ++attempt) {
    clientid_t other_id = copy;
    zhandle_t* other = zookeeper_init2(connect.c_str(), nullptr, 10000, &other_id, nullptr, 0, &log_errors);
    if (other == nullptr) return ZSYSTEMERROR;
    for (int i = 0; i < 200 && zoo_state(other) != ZOO_CONNECTED_STATE &&
                    zoo_state(other) != ZOO_EXPIRED_SESSION_STATE;
         ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    const int state = zoo_state(other);  // expired: an earlier attempt's close went through
    zookeeper_close(other);
    if (state != ZOO_CONNECTED_STATE && state != ZOO_EXPIRED_SESSION_STATE) continue;
    std::unique_lock lock(mu_);
    if (changed_.wait_for(lock, hear_within, [&] { return state_ == ZOO_EXPIRED_SESSION_STATE; })) return ZOK;
  }
  return ZOPERATIONTIMEOUT;
}

bool ZkSession::connected() const {
  std::lock_guard lock(mu_);
  return state_ == ZOO_CONNECTED_STATE;
}

bool ZkSession::expired() const {
  std::lock_guard lock(mu_);
  return state_ == ZOO_EXPIRED_SESSION_STATE || state_ == ZOO_AUTH_FAILED_STATE;
}

ZkSession::Node::~Node() { cleanse(data.data(), data.size()); }

ZkSession::Node& ZkSession::Node::operator=(Node&& other) noexcept {
  if (this == &other) return *this;
  cleanse(data.data(), data.size());
  rc = other.rc;
  data = std::move(other.data);
  version = other.version;
  return *this;
}

ZkSession::Node ZkSession::get(const std::string& path, bool watch) {
  return std::move(get_many({path}, watch).front());
}

std::vector<ZkSession::Node> ZkSession::get_many(const std::vector<std::string>& paths, bool watch) {
  std::vector<Node> nodes(paths.size());
  std::vector<GetSlot> slots(paths.size());
  Waiter waiter;
  for (std::size_t i = 0; i < paths.size(); ++i) {
    slots[i] = GetSlot{&waiter, &nodes[i]};
    {
      std::lock_guard lock(waiter.mu);
      ++waiter.pending;
    }
    const int rc = zoo_aget(zh_, paths[i].c_str(), watch ? 1 : 0, &on_data, &slots[i]);
    if (rc != ZOK) {
      nodes[i].rc = rc;
      waiter.finish();
    }
  }
  waiter.wait();
  return nodes;
}

int ZkSession::children(const std::string& path, bool watch, std::vector<std::string>* names) {
  String_vector list{};
  const int rc = zoo_get_children(zh_, path.c_str(), watch ? 1 : 0, &list);
  if (rc != ZOK) return rc;
  names->clear();
  names->reserve(static_cast<std::size_t>(list.count));
  for (std::int32_t i = 0; i < list.count; ++i) names->emplace_back(list.data[i]);
  deallocate_String_vector(&list);
  return ZOK;
}

int ZkSession::create(const std::string& path, const std::string& data) {
  return zoo_create(zh_, path.c_str(), data.data(), static_cast<int>(data.size()),
                    secured_ ? &ZOO_CREATOR_ALL_ACL : &ZOO_OPEN_ACL_UNSAFE, ZOO_PERSISTENT, nullptr, 0);
}

int ZkSession::set(const std::string& path, const std::string& data, std::int32_t version,
                   std::int32_t* new_version) {
  Stat stat{};
  const int rc = zoo_set2(zh_, path.c_str(), data.data(), static_cast<int>(data.size()), version, &stat);
  if (rc == ZOK && new_version != nullptr) *new_version = stat.version;
  return rc;
}

int ZkSession::remove(const std::string& path, std::int32_t version) {
  return zoo_delete(zh_, path.c_str(), version);
}

int ZkSession::create_and_set(const std::string& create_path, const std::string& create_data,
                              const std::string& set_path, const std::string& set_data,
                              std::int32_t set_version) {
  zoo_op_t ops[2];
  zoo_op_result_t results[2]{};
  Stat stat{};
  zoo_create_op_init(&ops[0], create_path.c_str(), create_data.data(), static_cast<int>(create_data.size()),
                     secured_ ? &ZOO_CREATOR_ALL_ACL : &ZOO_OPEN_ACL_UNSAFE, ZOO_PERSISTENT, nullptr, 0);
  zoo_set_op_init(&ops[1], set_path.c_str(), set_data.data(), static_cast<int>(set_data.size()),
                  set_version, &stat);
  const int rc = zoo_multi(zh_, 2, ops, results);
  if (rc != ZOK) {
    // The failing op's code says why (ZBADVERSION, ZNODEEXISTS).
    for (const auto& r : results) {
      if (r.err != ZOK && r.err != ZRUNTIMEINCONSISTENCY) return r.err;
    }
  }
  return rc;
}

int ZkSession::sync(const std::string& path) {
  RcSlot slot;
  slot.waiter.pending = 1;
  const int rc = zoo_async(zh_, path.c_str(), &on_string, &slot);
  if (rc != ZOK) return rc;
  slot.waiter.wait();
  return slot.rc;
}

int ZkSession::ensure_path(const std::string& path) {
  for (std::size_t at = path.find('/', 1);; at = path.find('/', at + 1)) {
    const bool last = at == std::string::npos;
    const std::string prefix = last ? path : path.substr(0, at);
    const int rc = zoo_create(zh_, prefix.c_str(), "", 0,
                              last && secured_ ? &ZOO_CREATOR_ALL_ACL : &ZOO_OPEN_ACL_UNSAFE,
                              ZOO_PERSISTENT, nullptr, 0);
    if (rc != ZOK && rc != ZNODEEXISTS) return rc;
    if (last) return ZOK;
  }
}

}  // namespace authrpc::security
