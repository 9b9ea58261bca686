// Keeps the addon's code mapped for the life of the process.
#pragma once

namespace giul {

/// Marks this shared library RTLD_NODELETE (once; later calls do nothing). Node unloads an addon
/// that only worker_threads loaded when the last of them ends; a thread of the addon that is never
/// joined (an NVML call thread, a sampler abandoned mid-call) would then return into unmapped code.
void PinThisModule();

}  // namespace giul
