// Runs blocking NVML work on the addon's own threads (CallPool) and settles a promise with its
// result or its failure. The promise always resolves: failures are values (NativeFailure), never
// rejections. Not libuv's pool: a call stuck in the driver must not hold the process's exit.
//
// The result comes back through a thread-safe function, referenced (it keeps the event loop alive
// until the call answers, as libuv work would) unless the caller asks otherwise. Its lifetime has
// one trap: when its environment is torn down (a worker terminated) Node-API finalises and frees
// it even though the pool thread still holds it. So the thread and the finaliser share a small
// mailbox with a lock: the finaliser marks it closed, and the thread touches the thread-safe
// function only under the lock and only while it is open.
#pragma once

#include <napi.h>

#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "call_pool.h"
#include "failure.h"

namespace giul {

template <typename T>
class PromiseCall {
 public:
  using Work = std::function<Result<T>()>;
  using Convert = std::function<Napi::Value(Napi::Env, const T&)>;

  /// Queues the work and returns the promise it settles. `keep_alive`: whether the pending call
  /// keeps the event loop alive.
  static Napi::Promise Run(Napi::Env env, const char* name, Work work, Convert convert,
                           bool keep_alive) {
    auto deferred = Napi::Promise::Deferred::New(env);
    Napi::Promise promise = deferred.Promise();
    auto mailbox = std::make_shared<Mailbox>();
    auto* context = new Context{deferred, std::move(convert), mailbox};
    Tsfn tsfn;
    try {
      tsfn = Tsfn::New(env, name, 0, 1, context, &Finalize, static_cast<void*>(nullptr));
    } catch (...) {
      delete context;
      throw;
    }
    if (!keep_alive) {
      tsfn.Unref(env);
    }
    bool posted = CallPool::Instance().Post([tsfn, mailbox, work = std::move(work)]() mutable {
      auto result = std::make_unique<Result<T>>(Execute(work));
      if (CallPool::Exiting()) {
        // The process is exiting: no JS will run again, and the loop may be going away.
        (void)result.release();
        return;
      }
      std::lock_guard<std::mutex> lock(mailbox->mutex);
      if (mailbox->closed) {
        return;  // the environment went away; the thread-safe function is gone with it
      }
      if (tsfn.NonBlockingCall(result.get()) == napi_ok) {
        (void)result.release();  // CallJs owns it now
        tsfn.Release();
      }
      // napi_closing counts as released: the thread-safe function may not be used again.
    });
    if (!posted) {
      context->mailbox->closed = true;  // no thread holds it: settle here and let it go
      Settle(env, *context,
             Failure(Failure::Code::kCallFailed, std::nullopt,
                     std::string(name) +
                         ": NVML calls are not returning (every NVML thread of the addon is "
                         "busy and the queue is full)"));
      tsfn.Release();
    }
    return promise;
  }

 private:
  struct Mailbox {
    std::mutex mutex;
    bool closed = false;  // guarded by mutex: the thread-safe function was finalised
  };
  struct Context {
    Napi::Promise::Deferred deferred;
    Convert convert;
    std::shared_ptr<Mailbox> mailbox;
  };

  static Result<T> Execute(Work& work) {
    try {
      return work();
    } catch (const std::exception& error) {
      return Failure(Failure::Code::kCallFailed, std::nullopt, error.what());
    }
  }

  static void CallJs(Napi::Env env, Napi::Function /*callback*/, Context* context,
                     Result<T>* data) {
    std::unique_ptr<Result<T>> result(data);
    if (env == nullptr || context == nullptr || !result) {
      return;  // finalised with the call still queued: nobody can await it
    }
    Settle(env, *context, *result);
  }

  // Resolves the promise, and never lets a Napi::Error out: when the environment is being torn
  // down the resolution fails, nothing can await the promise, and there is nothing left to settle.
  static void Settle(Napi::Env env, Context& context, const Result<T>& result) {
    try {
      Napi::HandleScope scope(env);
      if (const T* value = std::get_if<T>(&result)) {
        context.deferred.Resolve(context.convert(env, *value));
      } else {
        context.deferred.Resolve(std::get<Failure>(result).ToObject(env));
      }
    } catch (const Napi::Error&) {
    }
  }

  static void Finalize(Napi::Env /*env*/, void* /*data*/, Context* context) {
    {
      std::lock_guard<std::mutex> lock(context->mailbox->mutex);
      context->mailbox->closed = true;
    }
    delete context;
  }

  using Tsfn = Napi::TypedThreadSafeFunction<Context, Result<T>, &PromiseCall::CallJs>;
};

}  // namespace giul
