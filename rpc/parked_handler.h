// ParkedHandler: the completion handler (signature void()) of an operation
// that something else completes later, kept without an allocation until
// then. Who uses it: a unary call on the client parks its caller here
// (asio::async_initiate) until its response, failure or deadline comes,
// rather than a timer per call whose cancellation would do the waking
// (docs/DESIGN.md, "Threads and ownership").
//
// Not thread-safe: park, post and reset on the handler's executor.
#pragma once

#include <asio/any_io_executor.hpp>
#include <asio/associated_executor.hpp>
#include <asio/async_result.hpp>
#include <asio/awaitable.hpp>
#include <asio/post.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/version.hpp>
#include <cstddef>
#include <new>
#include <type_traits>
#include <utility>

namespace authrpc {

class ParkedHandler {
 public:
  ParkedHandler() = default;
  ParkedHandler(const ParkedHandler&) = delete;
  ParkedHandler& operator=(const ParkedHandler&) = delete;
  ~ParkedHandler() { reset(); }

  // Keeps `handler` (replacing none: the slot must be empty).
  template <typename Handler>
  void park(Handler&& handler) {
    using H = std::decay_t<Handler>;
    static_assert(sizeof(H) <= kCapacity && alignof(H) <= alignof(std::max_align_t),
                  "handler too large for ParkedHandler");
    ::new (static_cast<void*>(storage_)) H(std::forward<Handler>(handler));
    ops_ = &kOps<H>;
  }

  bool parked() const noexcept { return ops_ != nullptr; }

  // True if complete_here(current) would resume the waiter inside the call
  // (a handler is parked and its executor is `current`): the waiter may then
  // read what the completer's frame still holds, with no copy.
  bool runs_here(const asio::any_io_executor& current) const {
    return ops_ != nullptr && ops_->runs_here(storage_, current);
  }

  // Completes the handler exactly once: it is taken out of the slot, then
  // posted to its own executor (never run inline). No-op if empty.
  void post() {
    if (const Ops* ops = std::exchange(ops_, nullptr)) ops->post(storage_);
  }

  // Completes the handler exactly once, at once if its executor is
  // `current` (the caller is running on it: the waiter resumes inside this
  // call, before the event loop polls again), else as post() does. The
  // caller must expect the waiter to run, and perhaps end its own operation
  // or object, before this returns. No-op if empty.
  void complete_here(const asio::any_io_executor& current) {
    if (const Ops* ops = std::exchange(ops_, nullptr)) ops->complete_here(storage_, current);
  }

  // Completes the handler exactly once, at once: for a caller that has
  // just seen runs_here() (complete_here() would compare the executors
  // again). No-op if empty.
  void resume_here() {
    if (const Ops* ops = std::exchange(ops_, nullptr)) ops->resume(storage_);
  }

  // Drops the handler without running it (for an awaitable's handler, Asio
  // then unwinds the waiting coroutine through its executor). No-op if empty.
  void reset() noexcept {
    if (const Ops* ops = std::exchange(ops_, nullptr)) ops->destroy(storage_);
  }

 private:
  static constexpr std::size_t kCapacity = 64;

  struct Ops {
    void (*post)(void*);
    void (*complete_here)(void*, const asio::any_io_executor&);
    void (*destroy)(void*) noexcept;
    bool (*runs_here)(const void*, const asio::any_io_executor&);
    void (*resume)(void*);
  };

  template <typename H>
  static void post_and_destroy(void* p) {
    H& slot = *static_cast<H*>(p);
    H handler(std::move(slot));
    slot.~H();
    asio::post(std::move(handler));
  }
  template <typename H>
  static void complete_here(void* p, const asio::any_io_executor& current) {
    H& slot = *static_cast<H*>(p);
    H handler(std::move(slot));
    slot.~H();
    if (asio::get_associated_executor(handler) == current) {
      std::move(handler)();
    } else {
      asio::post(std::move(handler));
    }
  }
  template <typename H>
  static bool runs_here(const void* p, const asio::any_io_executor& current) {
    return asio::get_associated_executor(*static_cast<const H*>(p)) == current;
  }
  template <typename H>
  static void resume(void* p) {
    H& slot = *static_cast<H*>(p);
    H handler(std::move(slot));
    slot.~H();
    std::move(handler)();
  }
  template <typename H>
  static void destroy(void* p) noexcept {
    H& slot = *static_cast<H*>(p);
    H handler(std::move(slot));  // destroyed outside the slot
    slot.~H();
  }
  template <typename H>
  static constexpr Ops kOps{&post_and_destroy<H>, &complete_here<H>, &destroy<H>, &runs_here<H>,
                              &resume<H>};

  alignas(std::max_align_t) unsigned char storage_[kCapacity];
  const Ops* ops_ = nullptr;
};

namespace parked_handler_detail {
#if ASIO_VERSION >= 102200 && ASIO_VERSION < 102300
// Asio 1.22's coroutine "thread" (the stack of awaitable frames), taken from
// the frame that suspended; running it relaunches that frame, as the handler
// of a use_awaitable operation does once its initiation's frame is popped.
class ResumeCoroutine final : public asio::detail::awaitable_thread<asio::any_io_executor> {
 public:
  explicit ResumeCoroutine(asio::detail::awaitable_thread<asio::any_io_executor>* thread) noexcept
      : asio::detail::awaitable_thread<asio::any_io_executor>(std::move(*thread)) {}
  void operator()() { this->launch(); }
};
#endif
}  // namespace parked_handler_detail

// `co_await wait_in(slot)` in an asio::awaitable<T> coroutine (on an
// any_io_executor): suspends it and parks its continuation in `slot`, which
// resumes it when completed and unwinds it when reset. The same as awaiting
// asio::async_initiate<use_awaitable_t, void()> with an initiation that parks
// its handler in `slot`, but Asio 1.22 runs each use_awaitable initiation in
// a coroutine of its own: a frame allocated, resumed and freed per wait, ~150
// instructions of every client call (docs/DESIGN.md, "Calls").
// On that version the suspended frame's thread is parked directly (through
// Asio's awaitable internals, which the Asio version check guards); on any
// other, async_initiate.
inline auto wait_in(ParkedHandler& slot) {
#if ASIO_VERSION >= 102200 && ASIO_VERSION < 102300
  // Asio calls this once the coroutine has suspended (awaitable_frame_base's
  // await_transform of a function of the frame); nullptr: nothing to resume
  // now.
  return [&slot](asio::detail::awaitable_frame_base<asio::any_io_executor>* frame) {
    slot.park(parked_handler_detail::ResumeCoroutine(frame->detach_thread()));
    return static_cast<asio::detail::awaitable_thread<asio::any_io_executor>*>(nullptr);
  };
#else
  return asio::async_initiate<const asio::use_awaitable_t<>&, void()>(
      [&slot](auto handler) { slot.park(std::move(handler)); }, asio::use_awaitable);
#endif
}

}  // namespace authrpc
