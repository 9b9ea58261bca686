// RAII owner of a dlopen handle.
#pragma once

#include <string>

namespace giul {

class DlHandle {
 public:
  /// dlopen(path, RTLD_NOW | RTLD_LOCAL); check valid(), and error() when it is not.
  explicit DlHandle(const std::string& path);
  ~DlHandle();

  DlHandle(const DlHandle&) = delete;
  DlHandle& operator=(const DlHandle&) = delete;
  DlHandle(DlHandle&&) = delete;
  DlHandle& operator=(DlHandle&&) = delete;

  bool valid() const { return handle_ != nullptr; }
  const std::string& error() const { return error_; }

  /// The address of a symbol, or nullptr when the library lacks it.
  void* Symbol(const char* name) const;

 private:
  void* handle_;
  std::string error_;
};

}  // namespace giul
