#include "dl_handle.h"

#include <dlfcn.h>

namespace giul {

DlHandle::DlHandle(const std::string& path) : handle_(dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL)) {
  if (handle_ == nullptr) {
    const char* message = dlerror();
    error_ = message != nullptr ? message : "unknown dlopen error";
  }
}

DlHandle::~DlHandle() {
  if (handle_ != nullptr) {
    dlclose(handle_);
  }
}

void* DlHandle::Symbol(const char* name) const {
  if (handle_ == nullptr) {
    return nullptr;
  }
  return dlsym(handle_, name);
}

}  // namespace giul
