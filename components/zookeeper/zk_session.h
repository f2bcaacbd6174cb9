// ZkSession: one ZooKeeper session through the official C client
// (libzookeeper_mt), owned as a RAII handle: the constructor's connect()
// waits until the session is established and authenticated, the destructor
// closes it (zookeeper_close joins the client's threads, so no callback runs
// after it returns). ZkTokenStore owns one at a time and replaces it when
// ZooKeeper expires the session.
//
// Calls are synchronous and block on a round trip to the ensemble; they may
// come from any thread (the C client serialises them on its IO thread).
// Results are the C client's codes (ZOK, ZNONODE, ...); zk_error_text()
// names them. Watch events (children, data, deleted) and session-state
// changes go to the EventFn given at connect, on the client's completion
// thread: it must not block or call back into the session.
//
// With a digest credential ("user:password"), nodes are created with the
// creator-only ACL (ZOO_CREATOR_ALL_ACL): only sessions authenticated as the
// same user read or change them. The credential is a secret: it is wiped
// once handed to the client and never appears in error text.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "authrpc/security/secret_bytes.h"
#include "authrpc/security/token_errors.h"

struct _zhandle;

namespace authrpc::security {

struct ZkSessionOptions {
  std::string connect;  // "host:port[,host:port...][/chroot]"
  std::chrono::milliseconds session_timeout{std::chrono::seconds(10)};
  std::chrono::milliseconds connect_timeout{std::chrono::seconds(5)};
  SecretBytes digest;  // "user:password"; empty: no authentication, open ACLs
};

// A watch or session event: ZOO_CHILD_EVENT, ZOO_CHANGED_EVENT,
// ZOO_DELETED_EVENT, ZOO_SESSION_EVENT (then `state` says which).
struct ZkEvent {
  int type = 0;
  int state = 0;
  std::string path;
};
using ZkEventFn = std::function<void(ZkEvent)>;

// "NONODE (-101)"
std::string zk_error_text(int rc);

class ZkSession {
 public:
  // kStoreUnavailable if no server answered within connect_timeout,
  // kPermissionDenied if the digest credential was refused.
  static Result<std::unique_ptr<ZkSession>> connect(const ZkSessionOptions& options,
                                                         ZkEventFn on_event);
  ~ZkSession();
  ZkSession(const ZkSession&) = delete;
  ZkSession& operator=(const ZkSession&) = delete;

  // A node read. Its data may be a key or a token's password: this copy is
  // wiped when the Node is freed, on every path (an error return included).
  struct Node {
    int rc = 0;
    std::string data;
    std::int32_t version = -1;
    Node() = default;
    Node(Node&&) noexcept = default;
    Node& operator=(Node&& other) noexcept;  // wipes what it replaces
    ~Node();
  };
  // With watch, a later change or deletion of the node is reported once.
  Node get(const std::string& path, bool watch);
  // Many reads pipelined (one round trip's latency for all of them).
  std::vector<Node> get_many(const std::vector<std::string>& paths, bool watch);
  int children(const std::string& path, bool watch, std::vector<std::string>* names);
  int create(const std::string& path, const std::string& data);
  // version -1: any version. *new_version gets the node's version after.
  int set(const std::string& path, const std::string& data, std::int32_t version,
          std::int32_t* new_version = nullptr);
  int remove(const std::string& path, std::int32_t version = -1);
  // Atomically (zoo_multi): creates `create_path` and sets `set_path` if it
  // still has `set_version`. ZBADVERSION if it changed: nothing was done.
  int create_and_set(const std::string& create_path, const std::string& create_data,
                     const std::string& set_path, const std::string& set_data,
                     std::int32_t set_version);
  // Waits until the server this session talks to has caught up with the
  // leader, so that a read after it sees every write committed before.
  int sync(const std::string& path);
  // Creates path and its missing parents (parents with open ACLs, the last
  // component with the session's ACL). Existing nodes are left as they are.
  int ensure_path(const std::string& path);

  bool connected() const;
  bool expired() const;

  // Fault injection for tests: closes this session from a second handle
  // that presents its id and password, so ZooKeeper expires it for us.
  // ZOK once this handle has heard that its session expired.
  int expire_for_testing(const std::string& connect);

 private:
  ZkSession(ZkEventFn on_event);
  static void on_watch(_zhandle* zh, int type, int state, const char* path, void* context);

  ZkEventFn on_event_;
  _zhandle* zh_ = nullptr;
  mutable std::mutex mu_;
  std::condition_variable changed_;
  int state_ = 0;
  bool secured_ = false;  // a digest credential was given: creator-only ACLs
};

}  // namespace authrpc::security
