// testdev's lazy mode (lazy.h): a queue of native kernel calls, run in order on synchronize or a read;
// a queued call whose outputs were all freed before the queue ran is skipped.
#include "lazy.h"

#include <ATen/ATen.h>
#include <c10/core/StorageImpl.h>
#include <c10/core/TensorImpl.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <vector>

namespace bringup_testdev::lazy {
namespace {

std::atomic<bool>& flag() {
  static std::atomic<bool> on([] {
    const char* env = std::getenv("BRINGUP_TESTDEV_LAZY");
    return env && (std::strcmp(env, "1") == 0 || std::strcmp(env, "true") == 0 || std::strcmp(env, "on") == 0);
  }());
  return on;
}

// A queued call: true when it ran, false when it was skipped (nobody holds its outputs).
using Item = std::function<bool()>;

// Never destroyed (runtime.cpp's g_allocator says why): a queued item holds tensors whose free calls the
// allocator, and the autograd engine's device thread may still queue at exit.
std::mutex& queue_mu() {
  static auto& mu = *new std::mutex;
  return mu;
}
std::deque<Item>& queue() {
  static auto& q = *new std::deque<Item>;
  return q;
}
std::atomic<int64_t> pending{0};
// One run of the queue at a time (the autograd engine's device thread queues too): items run in order.
std::mutex& run_mu() {
  static auto& mu = *new std::mutex;
  return mu;
}
thread_local bool tls_running = false;

std::atomic<int64_t> n_deferred{0}, n_executed{0}, n_skipped{0}, n_flushes{0};

void enqueue(Item item) {
  {
    std::lock_guard<std::mutex> g(queue_mu());
    queue().push_back(std::move(item));
  }
  pending.fetch_add(1);
  n_deferred.fetch_add(1);
}

// A device tensor's metadata, to rebuild it over its storage when the queue runs.
struct Meta {
  c10::weak_intrusive_ptr<c10::StorageImpl> storage;
  std::vector<int64_t> sizes, strides;
  int64_t offset = 0;
  c10::DispatchKeySet keys;
  caffe2::TypeMeta dtype;

  explicit Meta(const at::Tensor& t)
      : storage(t.storage().getWeakStorageImpl()),
        sizes(t.sizes().vec()),
        strides(t.strides().vec()),
        offset(t.storage_offset()),
        keys(t.key_set()),
        dtype(t.dtype()) {}

  // The tensor again, over its storage; undefined when every holder of that storage is gone.
  at::Tensor revive() const {
    auto st = storage.lock();
    if (!st) return at::Tensor();
    at::Tensor t = at::detail::make_tensor<c10::TensorImpl>(c10::Storage(std::move(st)), keys, dtype);
    t.unsafeGetTensorImpl()->set_sizes_and_strides(sizes, strides, offset);
    return t;
  }
};

at::Tensor host_view(const at::Tensor& t) {
  return at::from_blob(t.data_ptr(), t.sizes(), t.strides(), t.options().device(at::kCPU));
}

// Put a freshly computed result `got` into the output `out` handed out when the call was queued: its
// memory is taken over when the layouts agree (no copy), else copied.
void place(const at::Tensor& got, const at::Tensor& out) {
  if (!got.defined() || !out.defined() || got.numel() == 0) return;
  auto* gs = got.storage().unsafeGetStorageImpl();
  auto* os = out.storage().unsafeGetStorageImpl();
  if (got.storage_offset() == 0 && out.storage_offset() == 0 && got.sizes() == out.sizes() &&
      got.strides() == out.strides() && got.dtype() == out.dtype() && gs->nbytes() == os->nbytes() &&
      gs->nbytes() == static_cast<size_t>(got.numel()) * got.element_size()) {
    c10::DataPtr old = os->set_data_ptr(std::move(gs->mutable_data_ptr()));
    gs->set_nbytes(0);
    return;  // `old` (the placeholder memory) is freed here
  }
  host_view(out).copy_(host_view(got));
}

c10::IValue to_meta(const c10::IValue& v) {
  if (v.isTensor()) {
    const at::Tensor& t = v.toTensor();
    if (t.defined() && t.device().is_privateuseone()) {
      return at::empty_strided(t.sizes(), t.strides(), t.options().device(at::kMeta));
    }
  }
  return v;
}

std::optional<c10::Device> device_of(const std::vector<c10::IValue>& args) {
  for (const auto& v : args) {
    if (v.isTensor() && v.toTensor().defined() && v.toTensor().device().is_privateuseone()) {
      return v.toTensor().device();
    }
  }
  return std::nullopt;
}

bool writes_first_argument(const c10::FunctionSchema& schema) {
  const auto& args = schema.arguments();
  return !args.empty() && args[0].alias_info() != nullptr && args[0].alias_info()->isWrite();
}

class Deferrable final : public c10::OperatorKernel {
 public:
  explicit Deferrable(c10::KernelFunction eager) : eager_(std::move(eager)) {}

  void operator()(const c10::OperatorHandle& op, c10::DispatchKeySet ks, torch::jit::Stack* stack) {
    if (!enabled() || tls_running) {  // eager mode, or a kernel the queue's own run calls
      eager_.callBoxed(op, ks, stack);
      return;
    }
    const size_t n = op.schema().arguments().size();
    std::vector<c10::IValue> args(stack->end() - static_cast<std::ptrdiff_t>(n), stack->end());
    const auto dev = device_of(args);
    // the outputs' shapes and dtypes from the meta kernel (which also raises what a bad call would)
    std::vector<c10::IValue> meta;
    meta.reserve(n);
    for (const auto& v : args) meta.push_back(to_meta(v));
    bool shaped = dev.has_value();
    if (shaped) {
      try {
        op.callBoxed(&meta);
      } catch (const std::exception&) {
        shaped = false;  // no meta kernel: run it now, in order (the eager kernel raises what it raises)
      }
    }
    if (!shaped) {
      flush();
      eager_.callBoxed(op, ks, stack);
      return;
    }
    torch::jit::drop(*stack, n);
    const c10::KernelFunction* eager = &eager_;
    if (writes_first_argument(op.schema())) {
      const c10::IValue self = args[0];
      Meta target(self.toTensor());
      args[0] = c10::IValue();  // held weakly: the queued call must not keep what it writes alive
      enqueue([eager, op, ks, target = std::move(target), args = std::move(args)]() mutable -> bool {
        at::Tensor t = target.revive();
        if (!t.defined()) return false;
        torch::jit::Stack st(args.begin(), args.end());
        st[0] = t;
        eager->callBoxed(op, ks, &st);
        return true;
      });
      torch::jit::push(*stack, self);
      return;
    }
    std::vector<Meta> outs;
    for (const auto& r : meta) {
      TORCH_CHECK(r.isTensor(), "testdev lazy mode: ", op.schema().name(), " returns a non-tensor");
      const at::Tensor& m = r.toTensor();
      at::Tensor out = at::empty_strided(m.sizes(), m.strides(), m.options().device(*dev));
      outs.emplace_back(out);
      torch::jit::push(*stack, out);
    }
    enqueue([eager, op, ks, outs = std::move(outs), args = std::move(args)]() -> bool {
      std::vector<at::Tensor> live;
      bool any = false;
      for (const auto& o : outs) {
        live.push_back(o.revive());
        any = any || live.back().defined();
      }
      if (!any) return false;
      torch::jit::Stack st(args.begin(), args.end());
      eager->callBoxed(op, ks, &st);
      for (size_t i = 0; i < live.size() && i < st.size(); ++i) {
        if (live[i].defined() && st[i].isTensor()) place(st[i].toTensor(), live[i]);
      }
      return true;
    });
  }

 private:
  c10::KernelFunction eager_;
};

}  // namespace

bool enabled() { return flag().load(std::memory_order_relaxed); }

void set_enabled(bool on) {
  if (!on) flush();
  flag().store(on);
}

void flush() {
  if (tls_running || pending.load() == 0) return;
  std::lock_guard<std::mutex> run(run_mu());
  tls_running = true;
  struct Done {
    ~Done() { tls_running = false; }
  } done;
  bool ran = false;
  for (;;) {
    Item item;
    {
      std::lock_guard<std::mutex> g(queue_mu());
      if (queue().empty()) break;
      item = std::move(queue().front());
      queue().pop_front();
    }
    pending.fetch_sub(1);
    ran = true;
    (item() ? n_executed : n_skipped).fetch_add(1);
  }
  if (ran) n_flushes.fetch_add(1);
}

Stats stats() { return {n_deferred.load(), n_executed.load(), n_skipped.load(), n_flushes.load()}; }

void reset_stats() {
  n_deferred = 0;
  n_executed = 0;
  n_skipped = 0;
  n_flushes = 0;
}

torch::CppFunction deferrable(c10::KernelFunction eager) {
  return torch::CppFunction::makeFromBoxedFunctor(std::make_unique<Deferrable>(std::move(eager)));
}

}  // namespace bringup_testdev::lazy
