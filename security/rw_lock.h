// RwLock: a reader/writer lock that prefers writers (glibc's
// PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP). std::shared_mutex prefers
// readers on glibc, so a steady stream of readers (verify() on every IO
// thread) can starve a writer indefinitely. Not recursive: a thread must not
// take a read lock it already holds. Usable with std::shared_lock and
// std::unique_lock.
#pragma once

#include <pthread.h>

namespace authrpc::security {

class RwLock {
 public:
  RwLock() {
    pthread_rwlockattr_t attr;
    pthread_rwlockattr_init(&attr);
    pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    pthread_rwlock_init(&lock_, &attr);
    pthread_rwlockattr_destroy(&attr);
  }
  ~RwLock() { pthread_rwlock_destroy(&lock_); }
  RwLock(const RwLock&) = delete;
  RwLock& operator=(const RwLock&) = delete;

  void lock() { pthread_rwlock_wrlock(&lock_); }
  bool try_lock() { return pthread_rwlock_trywrlock(&lock_) == 0; }
  void unlock() { pthread_rwlock_unlock(&lock_); }
  void lock_shared() { pthread_rwlock_rdlock(&lock_); }
  bool try_lock_shared() { return pthread_rwlock_tryrdlock(&lock_) == 0; }
  void unlock_shared() { pthread_rwlock_unlock(&lock_); }

 private:
  pthread_rwlock_t lock_;
};

}  // namespace authrpc::security
