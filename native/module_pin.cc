#include "module_pin.h"

#include <dlfcn.h>

#include <mutex>

namespace giul {

void PinThisModule() {
  static std::once_flag once;
  std::call_once(once, [] {
    Dl_info info{};
    if (dladdr(reinterpret_cast<void*>(&PinThisModule), &info) == 0 || info.dli_fname == nullptr) {
      return;
    }
    // RTLD_NOLOAD: no second copy, just the flag on the copy that is loaded. The handle is kept on
    // purpose (never dlclose'd): it holds one more reference to the library.
    (void)dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD | RTLD_NODELETE);
  });
}

}  // namespace giul
