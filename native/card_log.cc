#include "card_log.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <new>
#include <thread>

#include "monotonic_clock.h"

namespace giul {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr int64_t kLockWaitNs = 20'000'000;
constexpr int64_t kInitWaitNs = 200'000'000;
constexpr int64_t kReapEveryNs = 200'000'000;
constexpr double kMaxCount = 1e9;
constexpr double kMaxWeight = 1e15;
constexpr uint32_t kReady = 2;

bool ValidName(const std::string& s, bool may_be_empty) {
  if (s.size() > 96 || (s.empty() && !may_be_empty)) return false;
  for (char c : s) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '-' || c == '_' || c == '.';
    if (!ok) return false;
  }
  return true;
}

uint64_t RandomId() {
  uint64_t id = static_cast<uint64_t>(MonotonicNs()) * 0x9E3779B97F4A7C15ull ^
                (static_cast<uint64_t>(getpid()) << 32);
  const int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    uint64_t r = 0;
    if (read(fd, &r, sizeof r) == static_cast<ssize_t>(sizeof r)) id ^= r;
    close(fd);
  }
  return id == 0 ? 1 : id;
}

/// /proc/<pid>/stat's one line (empty when unreadable), without iostreams.
std::string ReadStat(int pid) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/stat", pid);
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  char buf[1024];
  const ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

}  // namespace

struct CardLog::Slot {
  uint64_t id;  // 0: free
  uint32_t pid;
  uint32_t reserved;
  uint64_t start_ticks;
  double weight;
  double count;
  double reserved2;
};

struct CardLog::Header {
  std::atomic<uint32_t> magic;
  std::atomic<uint32_t> version;
  std::atomic<uint32_t> state;  // 0 new, 1 initialising, 2 ready
  std::atomic<uint32_t> init_pid;
  std::atomic<uint32_t> lock;  // the holder's pid, 0 when free
  uint32_t reserved;
  int64_t epoch_ns;
  uint64_t segment_bytes;
  Slot slots[CardLogLayout::kParticipants];
};

static_assert(sizeof(CardLog::Header) <= CardLogLayout::kLogOffset);
static_assert(std::atomic<uint32_t>::is_always_lock_free);

uint64_t ProcessStartTicks(int pid) {
  const std::string stat = ReadStat(pid);
  if (stat.empty()) return 0;
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return 0;
  // Fields after the command: state (3), then 4 … ; starttime is field 22.
  const char* p = stat.c_str() + close + 1;
  for (int field = 3; field < 22 && *p != '\0'; field++) {
    while (*p == ' ') p++;
    while (*p != ' ' && *p != '\0') p++;
  }
  return std::strtoull(p, nullptr, 10);
}

bool ProcessAlive(int pid, uint64_t start_ticks) {
  if (pid <= 0) return false;
  const std::string stat = ReadStat(pid);
  if (stat.empty()) {
    // No procfs here: the pid alone.
    return kill(pid, 0) == 0 || errno == EPERM;
  }
  const size_t close = stat.rfind(')');
  if (close == std::string::npos || close + 2 >= stat.size()) return true;
  const char state = stat[close + 2];
  if (state == 'Z' || state == 'X' || state == 'x') return false;
  return start_ticks == 0 || ProcessStartTicks(pid) == start_ticks;
}

CardLog::CardLog(unsigned char* base, size_t bytes, Scope scope)
    : base_(base), bytes_(bytes), scope_(scope), pid_(static_cast<uint32_t>(getpid())) {}

CardLog::~CardLog() { munmap(base_, bytes_); }

std::atomic<uint32_t>& CardLog::generation() {
  return *std::launder(reinterpret_cast<std::atomic<uint32_t>*>(slots()));
}

namespace {

/// Writes a fresh header and log into a zeroed mapping, the magic last.
void Initialise(unsigned char* base) {
  auto* words = reinterpret_cast<std::atomic<uint32_t>*>(base);
  auto* header = reinterpret_cast<int64_t*>(base + 24);
  header[0] = MonotonicNs();  // epoch_ns
  header[1] = static_cast<int64_t>(CardLogLayout::SegmentBytes());
  auto* log = reinterpret_cast<double*>(base + CardLogLayout::kLogOffset);
  const uint32_t version = CardLogLayout::kVersion;
  std::memcpy(reinterpret_cast<unsigned char*>(log) + sizeof(uint32_t), &version, sizeof version);
  log[CardLogLayout::kCapacitySlot] = static_cast<double>(CardLogLayout::kCapacity);
  log[CardLogLayout::kIdleW] = kNaN;
  words[1].store(CardLogLayout::kVersion, std::memory_order_relaxed);
  words[0].store(CardLogLayout::kMagic, std::memory_order_relaxed);
  words[2].store(kReady, std::memory_order_release);
}

struct Mapped {
  unsigned char* base = nullptr;
  std::string reason;    // why not (empty: mapped)
  bool refused = false;  // another layout: do not fall back, refuse
};

uint32_t ReadWord(int fd, off_t at) {
  uint32_t w = 0;
  if (pread(fd, &w, sizeof w, at) != static_cast<ssize_t>(sizeof w)) return 0;
  return w;
}

/// Opens or creates the segment `name`, initialised and of this layout.
Mapped MapSegment(const std::string& name) {
  const size_t bytes = CardLogLayout::SegmentBytes();
  for (int attempt = 0; attempt < 2; attempt++) {
    int fd = shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd >= 0) {
      // Reserve the pages now: a full /dev/shm fails here, not with SIGBUS at a later store.
      const int err = posix_fallocate(fd, 0, static_cast<off_t>(bytes));
      void* m =
          err == 0 ? mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
      close(fd);
      if (m == MAP_FAILED) {
        shm_unlink(name.c_str());
        return {nullptr, std::string("cannot size the card's shared segment in /dev/shm: ") +
                             std::strerror(err != 0 ? err : errno)};
      }
      auto* base = static_cast<unsigned char*>(m);
      reinterpret_cast<std::atomic<uint32_t>*>(base)[3].store(static_cast<uint32_t>(getpid()));
      Initialise(base);
      return {base, ""};
    }
    if (errno != EEXIST) {
      return {nullptr, std::string("cannot create the card's shared segment in /dev/shm: ") +
                           std::strerror(errno)};
    }
    fd = shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0);
    if (fd < 0) {
      return {nullptr, std::string("cannot open the card's shared segment in /dev/shm: ") +
                           std::strerror(errno)};
    }
    struct stat st {};
    const int64_t deadline = MonotonicNs() + kInitWaitNs;
    bool stale = false;
    for (;;) {
      if (fstat(fd, &st) != 0 || st.st_uid != geteuid() || (st.st_mode & 077) != 0) {
        close(fd);
        return {nullptr, "the card's shared segment in /dev/shm is not this user's alone"};
      }
      const uint32_t magic = st.st_size >= 12 ? ReadWord(fd, 0) : 0;
      const uint32_t version = st.st_size >= 12 ? ReadWord(fd, 4) : 0;
      if (magic == CardLogLayout::kMagic && version != CardLogLayout::kVersion) {
        close(fd);
        return {nullptr,
                "the card is shared with processes that giul cannot account (their event log "
                "has layout " +
                    std::to_string(version) + ", this giul's is " +
                    std::to_string(CardLogLayout::kVersion) + ")",
                true};
      }
      if (magic == CardLogLayout::kMagic && ReadWord(fd, 8) == kReady) break;
      if (magic != 0 && magic != CardLogLayout::kMagic) {
        close(fd);
        return {nullptr, "the card's shared segment in /dev/shm holds no giul event log"};
      }
      if (MonotonicNs() > deadline) {
        // Never initialised: its creator died first (or is stuck). Gone, it is made again.
        const uint32_t creator = st.st_size >= 16 ? ReadWord(fd, 12) : 0;
        stale = creator == 0 || !ProcessAlive(static_cast<int>(creator), 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    if (stale) {
      close(fd);
      shm_unlink(name.c_str());
      continue;
    }
    if (static_cast<size_t>(st.st_size) < bytes) {
      close(fd);
      return {nullptr, "the card's shared segment in /dev/shm is truncated"};
    }
    void* m = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (m == MAP_FAILED) {
      return {nullptr,
              std::string("cannot map the card's shared segment: ") + std::strerror(errno)};
    }
    return {static_cast<unsigned char*>(m), ""};
  }
  return {nullptr, "the card's shared segment in /dev/shm was never initialised"};
}

}  // namespace

CardLog::Opened CardLog::Open(const std::string& key, const std::string& group, bool process_only) {
  if (!ValidName(key, false) || !ValidName(group, true)) {
    return {nullptr, "a card key and group are [A-Za-z0-9._-], at most 96 characters"};
  }
  static std::mutex mutex;
  static std::map<std::string, Opened>* cache = new std::map<std::string, Opened>();
  const std::string name = "/giul." + std::to_string(geteuid()) + "." + group + "." + key;
  std::lock_guard<std::mutex> lock(mutex);
  const std::string cached = (process_only ? "p" : "h") + name;
  if (auto it = cache->find(cached); it != cache->end()) return it->second;

  Opened opened;
  const size_t bytes = CardLogLayout::SegmentBytes();
  if (!process_only) {
    Mapped mapped = MapSegment(name);
    if (mapped.refused) {
      // Not cached: the other layout's processes may all be gone at the next try.
      return {nullptr, mapped.reason};
    }
    if (mapped.base != nullptr) {
      std::shared_ptr<CardLog> log(new CardLog(mapped.base, bytes, Scope::kHost));
      log->epoch_ns_ = log->header()->epoch_ns;
      if (log->HeaderSane() && log->Join()) {
        opened.log = std::move(log);
      } else {
        opened.reason = log->HeaderSane()
                            ? "more than 64 processes share the card's event log"
                            : "the card's shared event log holds values no giul wrote";
      }
    } else {
      opened.reason = mapped.reason;
    }
  } else {
    opened.reason = "host-wide sharing was turned off (GIUL_SHARING=process)";
  }
  if (opened.log == nullptr) {
    void* m = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) throw std::bad_alloc();
    auto* base = static_cast<unsigned char*>(m);
    Initialise(base);
    std::shared_ptr<CardLog> log(new CardLog(base, bytes, Scope::kProcess));
    log->epoch_ns_ = log->header()->epoch_ns;
    log->Join();
    opened.log = std::move(log);
  }
  (*cache)[cached] = opened;
  return opened;
}

bool CardLog::HeaderSane() {
  Header* h = header();
  if (h->magic.load(std::memory_order_acquire) != CardLogLayout::kMagic ||
      h->version.load() != CardLogLayout::kVersion || h->state.load() != kReady) {
    return false;
  }
  const double* s = slots();
  const double published = s[CardLogLayout::kPublished];
  if (!(published >= 0 && published < 9e15 && published == std::floor(published))) return false;
  for (const Slot& slot : h->slots) {
    if (slot.id == 0) continue;
    if (!(slot.count >= 0 && slot.count <= kMaxCount && slot.count == std::floor(slot.count))) {
      return false;
    }
    if (!(slot.weight >= 0 && slot.weight <= kMaxWeight)) return false;
  }
  return true;
}

bool CardLog::Lock() {
  const uint32_t me = pid_;
  std::atomic<uint32_t>& word = header()->lock;
  int64_t deadline = 0;  // taken at the first miss: an uncontended lock reads no clock
  for (uint32_t spins = 1;; spins++) {
    uint32_t expected = 0;
    if (word.compare_exchange_weak(expected, me, std::memory_order_acquire)) return true;
    if (deadline == 0) deadline = MonotonicNs() + kLockWaitNs;
    if (spins % 64 != 0) continue;
    sched_yield();
    if (spins % 1024 != 0) continue;
    const uint32_t holder = word.load(std::memory_order_relaxed);
    if (holder != 0 && holder != me && kill(static_cast<pid_t>(holder), 0) != 0 && errno == ESRCH) {
      uint32_t dead = holder;
      if (word.compare_exchange_strong(dead, me, std::memory_order_acquire)) {
        // The holder died inside its write: the entry it was writing is lost, not torn.
        std::atomic<uint32_t>& g = generation();
        const uint32_t gen = g.load(std::memory_order_relaxed);
        if ((gen & 1) != 0) {
          double* s = slots();
          const double published = s[CardLogLayout::kPublished];
          if (published >= 0 && published < 9e15) {
            const auto k = static_cast<uint64_t>(published);
            for (uint64_t j : {k == 0 ? k : k - 1, k}) {
              double* e = s + CardLogLayout::kHeaderSlots +
                          (j % CardLogLayout::kCapacity) * CardLogLayout::kEntrySlots;
              for (size_t i = 0; i < CardLogLayout::kEntrySlots; i++) e[i] = kNaN;
            }
          }
          g.store(gen + 1, std::memory_order_release);
        }
        return true;
      }
    }
    if (MonotonicNs() > deadline) return false;
  }
}

void CardLog::Unlock() { header()->lock.store(0, std::memory_order_release); }

bool CardLog::Join() {
  std::lock_guard<std::mutex> guard(mutex_);
  last_reap_ns_ = 0;
  const int me = static_cast<int>(pid_);
  const uint64_t start = ProcessStartTicks(me);
  // Free the slots of the dead first (their windows closed by an entry), then take a free one.
  ReapHeld();
  if (!Lock()) return false;
  Header* h = header();
  for (size_t i = 0; i < CardLogLayout::kParticipants; i++) {
    Slot& slot = h->slots[i];
    if (slot.id != 0) continue;
    id_ = RandomId();
    slot.pid = static_cast<uint32_t>(me);
    slot.start_ticks = start;
    slot.weight = 0;
    slot.count = 0;
    slot.id = id_;
    slot_ = static_cast<int>(i);
    Unlock();
    return true;
  }
  Unlock();
  return false;
}

int64_t CardLog::Append(double delta_weight, int64_t delta_count, double idle_w, double kind) {
  std::lock_guard<std::mutex> guard(mutex_);
  if (!Lock()) return kBusy;
  int64_t k = kCorrupt;
  if (HeaderSane() && header()->slots[slot_].id == id_) {
    k = AppendLocked(delta_weight, delta_count, idle_w, kind, slot_);
  }
  Unlock();
  return k;
}

int64_t CardLog::AppendLocked(double delta_weight, int64_t delta_count, double idle_w, double kind,
                              int slot_index) {
  Header* h = header();
  double* s = slots();
  double count_before = 0;
  double weight_before = 0;
  for (const Slot& slot : h->slots) {
    if (slot.id == 0) continue;
    count_before += slot.count;
    weight_before += slot.weight;
  }
  Slot& own = h->slots[slot_index];
  double count = own.count + static_cast<double>(delta_count);
  if (count < 0) count = 0;  // a close with none open: clamped, still appended
  // Floating sums drift: a participant (and a card) with nothing open has exactly no weight.
  double weight = count == 0 ? 0 : std::max(0.0, own.weight + delta_weight);
  const double count_after = count_before - own.count + count;
  const double weight_after = count_after == 0 ? 0 : weight_before - own.weight + weight;
  own.count = count;
  own.weight = weight;
  double idle = count_before == 0 ? kNaN : s[CardLogLayout::kIdleW];
  if (delta_count > 0 && std::isnan(idle)) idle = idle_w;
  if (count_after == 0) idle = kNaN;

  const auto k = static_cast<uint64_t>(s[CardLogLayout::kPublished]);
  const int64_t t = MonotonicNs() - epoch_ns_;
  auto& g = generation();
  // A release store, as the ring's: a reader that sees the odd generation sees every entry
  // appended before.
  g.store(g.load(std::memory_order_relaxed) + 1, std::memory_order_release);
  std::atomic_thread_fence(std::memory_order_release);
  double* e =
      s + CardLogLayout::kHeaderSlots + (k % CardLogLayout::kCapacity) * CardLogLayout::kEntrySlots;
  e[CardLogLayout::kT] = static_cast<double>(t);
  e[CardLogLayout::kWeightBefore] = weight_before;
  e[CardLogLayout::kWeightAfter] = weight_after;
  e[CardLogLayout::kCountAfter] = count_after;
  e[CardLogLayout::kIdleAfter] = idle;
  e[CardLogLayout::kPid] = static_cast<double>(own.pid);
  e[CardLogLayout::kSlot] = static_cast<double>(slot_index);
  e[CardLogLayout::kKind] = kind;
  s[CardLogLayout::kPublished] = static_cast<double>(k + 1);
  s[CardLogLayout::kIdleW] = idle;
  s[CardLogLayout::kOpen] = count_after;
  s[CardLogLayout::kWeight] = weight_after;
  g.store(g.load(std::memory_order_relaxed) + 1, std::memory_order_release);
  return static_cast<int64_t>(k);
}

int CardLog::Reap() {
  std::lock_guard<std::mutex> guard(mutex_);
  return ReapHeld();
}

int CardLog::ReapHeld() {
  const int64_t now = MonotonicNs();
  if (scope_ != Scope::kHost || (last_reap_ns_ != 0 && now - last_reap_ns_ < kReapEveryNs)) {
    return 0;
  }
  last_reap_ns_ = now;
  Header* h = header();
  struct Gone {
    size_t index;
    uint64_t id;
  };
  std::vector<Gone> gone;
  for (size_t i = 0; i < CardLogLayout::kParticipants; i++) {
    const Slot slot = h->slots[i];
    if (slot.id == 0 || slot.id == id_) continue;
    if (!ProcessAlive(static_cast<int>(slot.pid), slot.start_ticks)) gone.push_back({i, slot.id});
  }
  if (gone.empty() || !Lock()) return 0;
  int reaped = 0;
  const bool sane = HeaderSane();
  for (const Gone& g : gone) {
    Slot& slot = h->slots[g.index];
    if (slot.id != g.id) continue;  // reaped (and perhaps reused) by another process meanwhile
    if (sane && (slot.count > 0 || slot.weight > 0)) {
      AppendLocked(-slot.weight, -static_cast<int64_t>(slot.count), kNaN, CardLogLayout::kReapKind,
                   static_cast<int>(g.index));
    }
    slot.id = 0;
    reaped += 1;
  }
  Unlock();
  return reaped;
}

std::vector<int> CardLog::Pids() {
  std::vector<int> pids;
  for (const Slot& slot : header()->slots) {
    if (slot.id != 0) pids.push_back(static_cast<int>(slot.pid));
  }
  return pids;
}

}  // namespace giul
