// Runs blocking work on the libuv pool and settles a promise with its result or its failure.
// The promise always resolves: failures are values (NativeFailure), never rejections.
#pragma once

#include <napi.h>

#include <exception>
#include <functional>
#include <optional>
#include <string>
#include <utility>

#include "failure.h"

namespace giul {

template <typename T>
class PromiseWorker : public Napi::AsyncWorker {
 public:
  using Work = std::function<Result<T>()>;
  using Convert = std::function<Napi::Value(Napi::Env, const T&)>;

  /// Queues the work and returns the promise it settles.
  static Napi::Promise Run(Napi::Env env, const char* name, Work work, Convert convert) {
    auto* worker = new PromiseWorker(env, name, std::move(work), std::move(convert));
    Napi::Promise promise = worker->deferred_.Promise();
    worker->Queue();  // the worker deletes itself once settled
    return promise;
  }

  PromiseWorker(const PromiseWorker&) = delete;
  PromiseWorker& operator=(const PromiseWorker&) = delete;
  PromiseWorker(PromiseWorker&&) = delete;
  PromiseWorker& operator=(PromiseWorker&&) = delete;

 protected:
  void Execute() override {
    try {
      result_.emplace(work_());
    } catch (const std::exception& error) {
      result_.emplace(Failure(Failure::Code::kCallFailed, std::nullopt, error.what()));
    }
  }

  void OnOK() override {
    Settle([this](Napi::Env env) -> Napi::Value {
      if (!result_) {
        return Failure(Failure::Code::kCallFailed, std::nullopt, "the work did not run")
            .ToObject(env);
      }
      if (const T* value = std::get_if<T>(&*result_)) {
        return convert_(env, *value);
      }
      return std::get<Failure>(*result_).ToObject(env);
    });
  }

  void OnError(const Napi::Error& error) override {
    std::string message = error.Message();
    Settle([&message](Napi::Env env) -> Napi::Value {
      return Failure(Failure::Code::kCallFailed, std::nullopt, message).ToObject(env);
    });
  }

 private:
  // Resolves the promise, and never lets a Napi::Error out: node-addon-api rethrows one that
  // escapes OnOK as a JS exception, and when the environment is being torn down (a worker
  // terminated while the work ran) that rethrow fails too, and its exception would reach libuv
  // and std::terminate the whole process. In that case no JS can run and nobody awaits the
  // promise, so there is nothing left to settle.
  template <typename Build>
  void Settle(Build build) {
    Napi::Env env = Env();
    try {
      Napi::HandleScope scope(env);
      deferred_.Resolve(build(env));
    } catch (const Napi::Error&) {
    }
  }

  PromiseWorker(Napi::Env env, const char* name, Work work, Convert convert)
      : Napi::AsyncWorker(env, name),
        deferred_(Napi::Promise::Deferred::New(env)),
        work_(std::move(work)),
        convert_(std::move(convert)) {}

  Napi::Promise::Deferred deferred_;
  Work work_;
  Convert convert_;
  std::optional<Result<T>> result_;
};

}  // namespace giul
