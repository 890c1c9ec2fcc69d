// testdev runtime: devices, allocator (with statistics), device guard (streams, events), generator,
// PrivateUse1 hooks, and the Python bindings of the extension module.
#include "testdev.h"
#include "lazy.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Context.h>
#include <ATen/core/Generator.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/csrc/Generator.h>
// Not <torch/extension.h>: it pulls in torch's whole C++ frontend (nn, optim, serialization) that nothing
// here uses; with pybind11 alone (and lazy.cpp binding nothing) the build takes half the time.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

namespace bringup_testdev {

// ---- devices ---------------------------------------------------------------------------------
c10::DeviceIndex device_count() {
  static const c10::DeviceIndex n = [] {
    const char* env = std::getenv("BRINGUP_TESTDEV_DEVICES");
    int v = env ? std::atoi(env) : 1;
    return static_cast<c10::DeviceIndex>(std::clamp(v, 1, 16));
  }();
  return n;
}

namespace {
thread_local c10::DeviceIndex tls_device = 0;
}

void check_index(c10::DeviceIndex index) {
  TORCH_CHECK(index >= 0 && index < device_count(), "testdev: invalid device index ", static_cast<int>(index),
              " (", static_cast<int>(device_count()), " device(s))");
}

c10::DeviceIndex current_device() { return tls_device; }

void set_device(c10::DeviceIndex index) {
  if (index < 0) return;  // torch passes -1 for "no change"
  check_index(index);
  tls_device = index;
}

c10::DeviceIndex exchange_device(c10::DeviceIndex index) {
  auto old = tls_device;
  set_device(index);
  return old;
}

// ---- allocator -------------------------------------------------------------------------------
namespace {

using c10::CachingDeviceAllocator::DeviceStats;
constexpr size_t kAggregate = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);

struct Allocation {
  void* ptr;
  size_t size;
  c10::DeviceIndex device;
};

class TestdevAllocator final : public c10::DeviceAllocator {
 public:
  c10::DataPtr allocate(size_t n) override {
    const auto dev = current_device();
    const c10::Device device(c10::DeviceType::PrivateUse1, dev);
    if (n == 0) return c10::DataPtr(nullptr, device);
    void* p = nullptr;
    if (posix_memalign(&p, 64, n) != 0 || p == nullptr) {
      TORCH_CHECK_WITH(OutOfMemoryError, false, "testdev: out of memory allocating ", n, " bytes");
    }
    {
      std::lock_guard<std::mutex> g(mu_);
      auto& s = stats_at(dev);
      s.allocated_bytes[kAggregate].increase(n);
      s.reserved_bytes[kAggregate].increase(n);
      s.active_bytes[kAggregate].increase(n);
      s.requested_bytes[kAggregate].increase(n);
      s.allocation[kAggregate].increase(1);
      s.segment[kAggregate].increase(1);
      s.active[kAggregate].increase(1);
      s.num_device_alloc += 1;
    }
    return c10::DataPtr(p, new Allocation{p, n, dev}, &TestdevAllocator::release, device);
  }

  static void release(void* ctx);

  void free_stats(const Allocation& a) {
    std::lock_guard<std::mutex> g(mu_);
    auto& s = stats_at(a.device);
    s.allocated_bytes[kAggregate].decrease(a.size);
    s.reserved_bytes[kAggregate].decrease(a.size);
    s.active_bytes[kAggregate].decrease(a.size);
    s.requested_bytes[kAggregate].decrease(a.size);
    s.allocation[kAggregate].decrease(1);
    s.segment[kAggregate].decrease(1);
    s.active[kAggregate].decrease(1);
    s.num_device_free += 1;
  }

  void copy_data(void* dest, const void* src, std::size_t count) const override { std::memcpy(dest, src, count); }

  bool initialized() override { return true; }
  void emptyCache(c10::MempoolId_t) override {}  // no cache: every free returns memory at once
  void recordStream(const c10::DataPtr&, c10::Stream) override {}

  DeviceStats getDeviceStats(c10::DeviceIndex device) override {
    std::lock_guard<std::mutex> g(mu_);
    return stats_at(device < 0 ? current_device() : device);
  }
  void resetAccumulatedStats(c10::DeviceIndex device) override {
    std::lock_guard<std::mutex> g(mu_);
    auto& s = stats_at(device < 0 ? current_device() : device);
    for (auto* arr : {&s.allocated_bytes, &s.reserved_bytes, &s.active_bytes, &s.requested_bytes, &s.allocation,
                      &s.segment, &s.active}) {
      for (auto& st : *arr) st.reset_accumulated();
    }
    s.num_device_alloc = 0;
    s.num_device_free = 0;
  }
  void resetPeakStats(c10::DeviceIndex device) override {
    std::lock_guard<std::mutex> g(mu_);
    auto& s = stats_at(device < 0 ? current_device() : device);
    for (auto* arr : {&s.allocated_bytes, &s.reserved_bytes, &s.active_bytes, &s.requested_bytes, &s.allocation,
                      &s.segment, &s.active}) {
      for (auto& st : *arr) st.reset_peak();
    }
  }
  std::pair<size_t, size_t> getMemoryInfo(c10::DeviceIndex) override {
    const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    return {static_cast<size_t>(sysconf(_SC_AVPHYS_PAGES)) * page, static_cast<size_t>(sysconf(_SC_PHYS_PAGES)) * page};
  }

 private:
  DeviceStats& stats_at(c10::DeviceIndex device) {
    check_index(device);
    if (stats_.empty()) stats_.resize(device_count());
    return stats_[device];
  }
  std::mutex mu_;
  std::vector<DeviceStats> stats_;
};

// Never destroyed (as every static here that another thread or a late free may touch): at exit the
// autograd engine's device threads and tensors freed by other libraries' static destructors may still
// call in, after this library's statics would have been destroyed (in an unspecified order).
TestdevAllocator& g_allocator = *new TestdevAllocator;

void TestdevAllocator::release(void* ctx) {
  auto* a = static_cast<Allocation*>(ctx);
  g_allocator.free_stats(*a);
  std::free(a->ptr);
  delete a;
}

}  // namespace

c10::Allocator* allocator() { return &g_allocator; }

REGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, &g_allocator)

// ---- device guard: one synchronous default stream per device; events are host timestamps ----------
namespace {

struct Event {
  double ms = 0.0;
  bool timing = false;
};

double now_ms() {
  using namespace std::chrono;
  return duration<double, std::milli>(steady_clock::now().time_since_epoch()).count();
}

struct TestdevGuardImpl final : public c10::impl::DeviceGuardImplInterface {
  static constexpr c10::DeviceType kType = c10::DeviceType::PrivateUse1;
  TestdevGuardImpl() = default;
  explicit TestdevGuardImpl(c10::DeviceType t) { TORCH_CHECK(t == kType, "testdev guard for ", t); }

  c10::DeviceType type() const override { return kType; }
  c10::Device exchangeDevice(c10::Device d) const override {
    TORCH_CHECK(d.is_privateuseone(), "testdev: expected a testdev device, got ", d);
    return c10::Device(kType, bringup_testdev::exchange_device(d.index()));
  }
  c10::Device getDevice() const override { return c10::Device(kType, current_device()); }
  void setDevice(c10::Device d) const override {
    TORCH_CHECK(d.is_privateuseone(), "testdev: expected a testdev device, got ", d);
    bringup_testdev::set_device(d.index());
  }
  void uncheckedSetDevice(c10::Device d) const noexcept override {
    if (d.index() >= 0 && d.index() < device_count()) tls_device = d.index();
  }
  c10::Stream getStream(c10::Device d) const override { return default_stream(d); }
  c10::Stream getDefaultStream(c10::Device d) const override { return default_stream(d); }
  c10::Stream getStreamFromGlobalPool(c10::Device d, bool) const override { return default_stream(d); }
  c10::Stream getNewStream(c10::Device d, int) const override { return default_stream(d); }
  c10::Stream exchangeStream(c10::Stream s) const override { return default_stream(s.device()); }
  c10::DeviceIndex deviceCount() const noexcept override { return device_count(); }

  void record(void** event, const c10::Stream& stream, const c10::DeviceIndex device_index,
              const c10::EventFlag flag) const override {
    TORCH_CHECK(device_index == -1 || device_index == stream.device_index(), "testdev: event device ",
                static_cast<int>(device_index), " does not match stream device ", static_cast<int>(stream.device_index()));
    auto* e = static_cast<Event*>(*event);
    if (e == nullptr) {
      e = new Event();
      e->timing = flag == c10::EventFlag::BACKEND_DEFAULT;
      *event = e;
    }
    lazy::flush();     // lazy mode: an event marks the point where everything queued before it has run
    e->ms = now_ms();  // work is synchronous: everything before this call has finished
  }
  void destroyEvent(void* event, const c10::DeviceIndex) const noexcept override { delete static_cast<Event*>(event); }
  void block(void*, const c10::Stream&) const override {}
  bool queryEvent(void*) const override { return true; }
  bool queryStream(const c10::Stream&) const override { return true; }
  void synchronizeStream(const c10::Stream&) const override { lazy::flush(); }
  void synchronizeEvent(void*) const override { lazy::flush(); }
  void synchronizeDevice(const c10::DeviceIndex) const override { lazy::flush(); }
  double elapsedTime(void* event1, void* event2, const c10::DeviceIndex) const override {
    TORCH_CHECK(event1 && event2, "testdev: both events must be recorded before elapsed_time");
    auto* a = static_cast<Event*>(event1);
    auto* b = static_cast<Event*>(event2);
    TORCH_CHECK(a->timing && b->timing, "testdev: both events must be created with enable_timing=True");
    return b->ms - a->ms;
  }

 private:
  static c10::Stream default_stream(c10::Device d) {
    return c10::Stream(c10::Stream::DEFAULT, c10::Device(kType, d.index() < 0 ? current_device() : d.index()));
  }
};

C10_REGISTER_GUARD_IMPL(PrivateUse1, TestdevGuardImpl);

// ---- generator: the CPU Philox/MT generator, labelled as a testdev generator ------------------------
class TestdevGenerator final : public at::CPUGeneratorImpl {
 public:
  explicit TestdevGenerator(c10::DeviceIndex index) {
    device_ = c10::Device(c10::DeviceType::PrivateUse1, index);
    key_set_ = c10::DispatchKeySet(c10::DispatchKey::PrivateUse1);
  }
};

const at::Generator& default_generator(c10::DeviceIndex index) {
  static auto& gens = *new std::vector<at::Generator>([] {
    std::vector<at::Generator> v;
    for (c10::DeviceIndex i = 0; i < device_count(); ++i) {
      v.push_back(at::make_generator<TestdevGenerator>(i));
    }
    return v;
  }());
  const auto i = index < 0 ? current_device() : index;
  check_index(i);
  return gens[i];
}

// ---- PrivateUse1 hooks (what torch.accelerator and lazy device init ask) ----------------------------
struct TestdevHooks final : public at::PrivateUse1HooksInterface {
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return device_count() > 0; }
  bool hasPrimaryContext(c10::DeviceIndex) const override { return true; }
  c10::DeviceIndex deviceCount() const override { return device_count(); }
  void setCurrentDevice(c10::DeviceIndex d) const override { set_device(d); }
  c10::DeviceIndex getCurrentDevice() const override { return current_device(); }
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex d) const override { return exchange_device(d); }
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex d) const override {
    if (d < 0 || d >= device_count()) return current_device();
    return exchange_device(d);
  }
  const at::Generator& getDefaultGenerator(c10::DeviceIndex d) const override { return default_generator(d); }
  at::Generator getNewGenerator(c10::DeviceIndex d) const override {
    return at::make_generator<TestdevGenerator>(d < 0 ? current_device() : d);
  }
  at::Device getDeviceFromPtr(void*) const override { return at::Device(c10::DeviceType::PrivateUse1, current_device()); }
  bool isPinnedPtr(const void*) const override { return false; }
  // No page-locked memory: "pinned" host tensors are plain host tensors (is_pinned() stays False).
  at::Allocator* getPinnedMemoryAllocator() const override { return at::getCPUAllocator(); }
  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t newsize) const override {
    auto* impl = storage.unsafeGetStorageImpl();
    TORCH_CHECK(impl->resizable(), "testdev: trying to resize a storage that is not resizable");
    const size_t old = impl->nbytes();
    c10::DataPtr fresh = g_allocator.allocate(newsize);
    if (old > 0 && newsize > 0) std::memcpy(fresh.get(), impl->data(), std::min(old, newsize));
    impl->set_data_ptr_noswap(std::move(fresh));
    impl->set_nbytes(newsize);
  }
};

const bool hooks_registered [[maybe_unused]] = [] {
  at::RegisterPrivateUse1HooksInterface(new TestdevHooks());
  return true;
}();

// ---- fallback switch and counter ------------------------------------------------------------------
std::atomic<bool>& fallback_flag() {
  static std::atomic<bool> flag([] {
    const char* env = std::getenv("BRINGUP_TESTDEV_FALLBACK");
    return !(env && (std::strcmp(env, "0") == 0 || std::strcmp(env, "false") == 0 || std::strcmp(env, "off") == 0));
  }());
  return flag;
}

std::mutex& counts_mu() {
  static auto& mu = *new std::mutex;
  return mu;
}

std::map<std::string, FallbackStat>& counts() {
  static auto& c = *new std::map<std::string, FallbackStat>;
  return c;
}

}  // namespace

bool fallback_enabled() { return fallback_flag().load(); }
void set_fallback_enabled(bool enabled) { fallback_flag().store(enabled); }

std::map<std::string, FallbackStat> fallback_stats() {
  std::lock_guard<std::mutex> g(counts_mu());
  return counts();
}

void reset_fallback_counts() {
  std::lock_guard<std::mutex> g(counts_mu());
  counts().clear();
}

void count_fallback(const std::string& op, int64_t to_host, int64_t to_device) {
  std::lock_guard<std::mutex> g(counts_mu());
  auto& st = counts()[op];
  st.calls += 1;
  st.bytes_to_host += to_host;
  st.bytes_to_device += to_device;
}

// ---- numeric faults ------------------------------------------------------------------------------
namespace {
std::mutex& faults_mu() {
  static auto& mu = *new std::mutex;
  return mu;
}
Faults& faults_state() {
  static auto& f = *new Faults;
  return f;
}
std::atomic<bool>& faults_flag() {
  static std::atomic<bool> on(false);
  return on;
}

std::string op_base(const std::string& name) {
  std::string base = name.substr(0, name.find('.'));
  while (!base.empty() && base.back() == '_') base.pop_back();  // add_ is add in place
  return base;
}

bool op_matches(const std::string& pattern, const std::string& op) {
  if (pattern == op) return true;
  const auto colons = pattern.find("::");
  const bool has_overload = pattern.find('.', colons == std::string::npos ? 0 : colons) != std::string::npos;
  return !has_overload && op_base(pattern) == op_base(op);
}
}  // namespace

Faults faults() {
  std::lock_guard<std::mutex> g(faults_mu());
  return faults_state();
}

void set_faults(const Faults& f) {
  std::lock_guard<std::mutex> g(faults_mu());
  faults_state() = f;
  faults_flag().store(!f.scales.empty() || f.bf16_matmul || f.drop_scale || !f.args.empty() || !f.shifts.empty() ||
                      !f.approx.empty() || !f.lastwrite.empty() || f.sdpa_mask_as_causal ||
                      !f.count_ignored.empty() || !f.blockscan.empty());
}

bool faults_active() { return faults_flag().load(std::memory_order_relaxed); }

double fault_factor(const std::string& op) {
  if (!faults_active()) return 1.0;
  std::lock_guard<std::mutex> g(faults_mu());
  double factor = 1.0;
  for (const auto& [pattern, f] : faults_state().scales) {
    if (op_matches(pattern, op)) factor *= f;
  }
  return factor;
}

namespace {
bool arg_matches(const std::string& pattern, const std::string& op) {
  return pattern == op || (pattern.find('.') == std::string::npos && op_base(pattern) == op_base(op));
}
}  // namespace

double arg_factor(const std::string& op) {
  if (!faults_active()) return 1.0;
  std::lock_guard<std::mutex> g(faults_mu());
  double factor = 1.0;
  for (const auto& [pattern, f] : faults_state().args) {
    if (arg_matches(pattern, op)) factor *= f;
  }
  return factor;
}

double arg_shift(const std::string& op) {
  if (!faults_active()) return 0.0;
  std::lock_guard<std::mutex> g(faults_mu());
  double shift = 0.0;
  for (const auto& [pattern, b] : faults_state().shifts) {
    if (arg_matches(pattern, op)) shift += b;
  }
  return shift;
}

bool approx_fault(const std::string& op) {
  if (!faults_active()) return false;
  std::lock_guard<std::mutex> g(faults_mu());
  for (const auto& pattern : faults_state().approx) {
    if (arg_matches(pattern, op)) return true;
  }
  return false;
}

bool lastwrite_fault(const std::string& op) {
  if (!faults_active()) return false;
  std::lock_guard<std::mutex> g(faults_mu());
  for (const auto& pattern : faults_state().lastwrite) {
    if (arg_matches(pattern, op)) return true;
  }
  return false;
}

bool count_ignored_fault(const std::string& op) {
  if (!faults_active()) return false;
  std::lock_guard<std::mutex> g(faults_mu());
  for (const auto& pattern : faults_state().count_ignored) {
    if (op_base(pattern) + "_forward" == op_base(op)) return true;  // the loss "aten::nll_loss": its nll_loss_forward
  }
  return false;
}

int64_t blockscan_fault(const std::string& op) {
  if (!faults_active()) return 0;
  std::lock_guard<std::mutex> g(faults_mu());
  for (const auto& [pattern, block] : faults_state().blockscan) {
    if (arg_matches(pattern, op)) return block;
  }
  return 0;
}

}  // namespace bringup_testdev

namespace py = pybind11;

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  namespace bt = bringup_testdev;
  m.doc() = "bringup testdev: a PrivateUse1 test device on host memory";
  m.def("device_count", [] { return static_cast<int>(bt::device_count()); });
  m.def("current_device", [] { return static_cast<int>(bt::current_device()); });
  m.def("set_device", [](int i) { bt::set_device(static_cast<c10::DeviceIndex>(i)); });
  m.def("exchange_device", [](int i) { return static_cast<int>(bt::exchange_device(static_cast<c10::DeviceIndex>(i))); });
  m.def("fallback_enabled", &bt::fallback_enabled);
  m.def("set_fallback_enabled", &bt::set_fallback_enabled);
  m.def("fallback_stats", [] {
    std::map<std::string, std::tuple<int64_t, int64_t, int64_t>> out;
    for (const auto& [name, st] : bt::fallback_stats()) out[name] = {st.calls, st.bytes_to_host, st.bytes_to_device};
    return out;
  });
  m.def("reset_fallback_counts", &bt::reset_fallback_counts);
  m.def(
      "set_faults",
      [](const std::map<std::string, double>& scales, bool bf16_matmul, bool drop_scale,
         const std::map<std::string, double>& args, const std::map<std::string, double>& shifts,
         const std::vector<std::string>& approx, const std::vector<std::string>& lastwrite, bool sdpa_mask_as_causal,
         const std::vector<std::string>& count_ignored, const std::map<std::string, int64_t>& blockscan) {
        bt::Faults f;
        f.scales = scales;
        f.bf16_matmul = bf16_matmul;
        f.drop_scale = drop_scale;
        f.args = args;
        f.shifts = shifts;
        f.approx = approx;
        f.lastwrite = lastwrite;
        f.sdpa_mask_as_causal = sdpa_mask_as_causal;
        f.count_ignored = count_ignored;
        f.blockscan = blockscan;
        bt::set_faults(f);
      },
      py::arg("scales"), py::arg("bf16_matmul"), py::arg("drop_scale"),
      py::arg("args") = std::map<std::string, double>{}, py::arg("shifts") = std::map<std::string, double>{},
      py::arg("approx") = std::vector<std::string>{}, py::arg("lastwrite") = std::vector<std::string>{},
      py::arg("sdpa_mask_as_causal") = false, py::arg("count_ignored") = std::vector<std::string>{},
      py::arg("blockscan") = std::map<std::string, int64_t>{});
  m.def("faults", [] {
    const bt::Faults f = bt::faults();
    return py::make_tuple(f.scales, f.bf16_matmul, f.drop_scale, f.args, f.shifts, f.approx, f.lastwrite,
                          f.sdpa_mask_as_causal, f.count_ignored, f.blockscan);
  });
  m.def("fault_factor", &bt::fault_factor);
  m.def("set_lazy", &bt::lazy::set_enabled);
  m.def("lazy", &bt::lazy::enabled);
  m.def("flush", &bt::lazy::flush);
  m.def("lazy_stats", [] {
    const bt::lazy::Stats s = bt::lazy::stats();
    return std::make_tuple(s.deferred, s.executed, s.skipped, s.flushes);
  });
  m.def("reset_lazy_stats", &bt::lazy::reset_stats);
  m.def("arg_factor", &bt::arg_factor);
  m.def("arg_shift", &bt::arg_shift);
  m.def("default_generator", [](int i) {
    return py::reinterpret_steal<py::object>(
        THPGenerator_initDefaultGenerator(bt::default_generator(static_cast<c10::DeviceIndex>(i))));
  });
}
