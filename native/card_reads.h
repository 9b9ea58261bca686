// What one tick of a sampling thread asks a vendor's library about its card: take its handle,
// read its energy counter, read its power. NVML (nvml_reads.cc) and AMD SMI (amd_reads.cc) answer;
// the sampler (sampler_tick.cc) does the rest the same way for both: stamps, counter checks, the
// power integral, faults, the ring. Codes are the vendor's own (nvmlReturn_t, amdsmi_status_t).
#pragma once

#include <cstdint>
#include <limits>
#include <memory>

namespace giul {

class NvmlLibrary;
class AmdSmiLibrary;

enum class CardVendor { kNvidia, kAmd };

class CardReads {
 public:
  /// One power read: ok with mW, or the failure (`fault`: on a card that answered it before).
  struct Power {
    bool ok = false;
    bool fault = false;
    int error = 0;
    double mw = std::numeric_limits<double>::quiet_NaN();
    /// 1: instantaneous power, 2: a trailing average (the ring's power-source header).
    double source = 0;
    int64_t t = 0;        // CLOCK_MONOTONIC, middle of the call
    int64_t read_ns = 0;  // how long the call took
  };

  virtual ~CardReads() = default;
  /// Takes the card's handle when not held; 0 once held, else the library's code.
  virtual int Open() = 0;
  /// Drops the handle (a lost card): the next Open() asks anew.
  virtual void Forget() = 0;
  /// Whether the library has an energy counter call at all.
  virtual bool HasCounter() const = 0;
  /// The counter in its own unit (mJ for NVML, 2^-16 J for AMD); 0 or the library's code.
  virtual int ReadCounter(unsigned long long* count) = 0;
  /// mJ per unit of ReadCounter().
  virtual double MjPerCount() const = 0;
  /// Power, from the best source the card has; `ok == false && error == 0`: none this tick.
  virtual Power ReadPower() = 0;
  /// The code says the card lacks the quantity (not a fault).
  virtual bool Unsupported(int code) const = 0;
  /// The code says the card is gone: its handle is not trusted again.
  virtual bool Lost(int code) const = 0;
  /// The code recorded when nothing the card offers can be read.
  virtual int NothingReadable() const = 0;
  /// Whether this vendor's power readings are whole watts (AMD) rather than mW.
  virtual double PowerQuantumMw() const = 0;
};

std::unique_ptr<CardReads> MakeNvmlReads(std::shared_ptr<const NvmlLibrary> library,
                                         unsigned int index);
std::unique_ptr<CardReads> MakeAmdReads(std::shared_ptr<const AmdSmiLibrary> library,
                                        unsigned int index);

}  // namespace giul
