// testdev kernels: the ops a backend must have (empty, copy, views, resize, set_), a few native compute
// kernels, the global boxed CPU fallback for everything else, and autocast registrations.
//
// Native compute kernels see device memory as CPU tensors (from_blob over the same host memory) and
// write their results into testdev memory: no transfer happens, which is what a native kernel means.
#include "testdev.h"
#include "lazy.h"

#include <ATen/ATen.h>
#include <ATen/EmptyTensor.h>
#include <ATen/ExpandUtils.h>
#include <ATen/autocast_mode.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/ops/_local_scalar_dense_native.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/resize_native.h>
#include <ATen/ops/set_native.h>
#include <ATen/ops/unfold_native.h>
#include <ATen/ops/view_native.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <initializer_list>

namespace bringup_testdev {
namespace {

using at::Tensor;

constexpr c10::DispatchKeySet kKeys(c10::DispatchKey::PrivateUse1);

// A testdev tensor seen as a CPU tensor over the same memory (CPU tensors are returned as they are).
Tensor as_cpu(const Tensor& t) {
  if (!t.defined() || !t.device().is_privateuseone()) return t;
  Tensor r = t.numel() == 0 || t.data_ptr() == nullptr
                 ? at::empty_strided(t.sizes(), t.strides(), t.options().device(at::kCPU))
                 : at::from_blob(t.data_ptr(), t.sizes(), t.strides(), t.options().device(at::kCPU));
  if (t.is_conj()) r._set_conj(true);
  if (t.is_neg()) r._set_neg(true);
  return r;
}

// The device a native kernel runs on: that of its testdev tensors, which must agree; CPU tensors
// are allowed only as 0-dim scalars (as on other accelerators).
c10::Device common_device(std::initializer_list<const Tensor*> ts, const char* op) {
  std::optional<c10::Device> dev;
  for (const Tensor* t : ts) {
    if (!t->defined()) continue;
    if (t->device().is_privateuseone()) {
      TORCH_CHECK(!dev || *dev == t->device(), "testdev ", op, ": expected all tensors on one device, got ", *dev,
                  " and ", t->device());
      dev = t->device();
    } else {
      TORCH_CHECK(t->device().is_cpu() && t->dim() == 0, "testdev ", op,
                  ": expected all tensors to be on the same device, but found a ", t->device(), " tensor");
    }
  }
  TORCH_CHECK(dev, "testdev ", op, ": no testdev tensor among the arguments");
  return *dev;
}

// ---- memory, copies, views -----------------------------------------------------------------------
Tensor empty_memory_format(c10::IntArrayRef size, std::optional<c10::ScalarType> dtype,
                           std::optional<c10::Layout> layout, std::optional<c10::Device> device,
                           std::optional<bool> pin_memory, std::optional<c10::MemoryFormat> memory_format) {
  const auto dev = c10::device_or_default(device);
  TORCH_CHECK(dev.is_privateuseone(), "testdev empty: not a testdev device: ", dev);
  TORCH_CHECK(c10::layout_or_default(layout) == c10::Layout::Strided, "testdev: only strided tensors are supported");
  TORCH_CHECK(!c10::pinned_memory_or_default(pin_memory), "testdev: only CPU tensors can be pinned");
  const c10::DeviceGuard guard(dev);
  return at::detail::empty_generic(size, allocator(), kKeys, c10::dtype_or_default(dtype), memory_format);
}

Tensor empty_strided(c10::IntArrayRef size, c10::IntArrayRef stride, std::optional<c10::ScalarType> dtype,
                     std::optional<c10::Layout> layout, std::optional<c10::Device> device,
                     std::optional<bool> pin_memory) {
  const auto dev = c10::device_or_default(device);
  TORCH_CHECK(dev.is_privateuseone(), "testdev empty_strided: not a testdev device: ", dev);
  TORCH_CHECK(c10::layout_or_default(layout) == c10::Layout::Strided, "testdev: only strided tensors are supported");
  TORCH_CHECK(!c10::pinned_memory_or_default(pin_memory), "testdev: only CPU tensors can be pinned");
  const c10::DeviceGuard guard(dev);
  return at::detail::empty_strided_generic(size, stride, allocator(), kKeys, c10::dtype_or_default(dtype));
}

// copy_ lands here whenever one side is a testdev tensor: host<->device and device<->device.
Tensor copy_from(const Tensor& self, const Tensor& dst, bool non_blocking) {
  lazy::flush();  // reads or writes device memory: what is queued runs first
  TORCH_CHECK(self.defined() && dst.defined(), "testdev _copy_from: undefined tensor");
  Tensor dst_cpu = as_cpu(dst);
  dst_cpu.copy_(as_cpu(self), non_blocking);
  return dst;
}

Tensor _copy_from_and_resize(const Tensor& self, const Tensor& dst) {
  dst.resize_(self.sizes());
  return copy_from(self, dst, false);
}

at::Scalar _local_scalar_dense(const Tensor& self) {
  lazy::flush();  // a read: what is queued runs first
  return at::native::_local_scalar_dense_cpu(as_cpu(self));
}

Tensor as_strided(const Tensor& self, c10::SymIntArrayRef size, c10::SymIntArrayRef stride,
                  std::optional<c10::SymInt> storage_offset) {
  std::optional<int64_t> off;
  if (storage_offset) off = storage_offset->expect_int();
  return at::native::as_strided_tensorimpl(self, C10_AS_INTARRAYREF_SLOW(size), C10_AS_INTARRAYREF_SLOW(stride), off);
}

Tensor view(const Tensor& self, c10::SymIntArrayRef size) {
  return at::native::view(self, C10_AS_INTARRAYREF_SLOW(size));
}

Tensor _reshape_alias(const Tensor& self, c10::SymIntArrayRef size, c10::SymIntArrayRef stride) {
  return at::native::_reshape_alias(self, C10_AS_INTARRAYREF_SLOW(size), C10_AS_INTARRAYREF_SLOW(stride));
}

Tensor unfold(const Tensor& self, int64_t dimension, int64_t size, int64_t step) {
  return at::native::unfold(self, dimension, size, step);
}

const Tensor& resize_(const Tensor& self, c10::SymIntArrayRef size, std::optional<c10::MemoryFormat> memory_format) {
  lazy::flush();  // reads or writes device memory: what is queued runs first
  const c10::DeviceGuard guard(self.device());
  return at::native::resize_(self, C10_AS_INTARRAYREF_SLOW(size), memory_format);
}

Tensor& set_source_tensor(Tensor& self, const Tensor& source) {
  lazy::flush();
  return at::native::set_tensor_(self, source);
}

Tensor& set_source_storage(Tensor& self, at::Storage source) {
  lazy::flush();
  return at::native::set_(self, source);
}

Tensor& set_source_storage_offset(Tensor& self, at::Storage source, c10::SymInt storage_offset,
                                  c10::SymIntArrayRef size, c10::SymIntArrayRef stride) {
  lazy::flush();  // reads or writes device memory: what is queued runs first
  return at::native::set_storage_cpu_(self, source, storage_offset.expect_int(), C10_AS_INTARRAYREF_SLOW(size),
                                      C10_AS_INTARRAYREF_SLOW(stride));
}

// ---- numeric faults (all off unless set: testdev.h, bringup.testdev.set_faults) -------------------
// The `scale` faults matching `op`, applied to its (floating-point) result in place.
void apply_scale(const char* op, const Tensor& out) {
  if (!faults_active() || !out.defined() || !at::isFloatingType(out.scalar_type())) return;
  const double f = fault_factor(op);
  if (f != 1.0) as_cpu(out).mul_(f);
}

bool bf16_matmul_on(const Tensor& t) {
  return faults_active() && at::isFloatingType(t.scalar_type()) && faults().bf16_matmul;
}

bool drop_scale_on() { return faults_active() && faults().drop_scale; }

// a (.., M, K) @ b (.., K, N) (CPU tensors) accumulated in bf16: the inputs rounded to bf16, then the
// products added one k at a time with the running sum rounded to bf16 after every addition. Float32.
Tensor bf16_accumulated_matmul(const Tensor& a, const Tensor& b) {
  const Tensor a16 = a.to(at::kBFloat16).to(at::kFloat);
  const Tensor b16 = b.to(at::kBFloat16).to(at::kFloat);
  const int64_t k = a.size(-1);
  if (k == 0) return at::matmul(a16, b16);
  Tensor acc = at::matmul(a16.narrow(-1, 0, 1), b16.narrow(-2, 0, 1)).to(at::kBFloat16).to(at::kFloat);
  for (int64_t i = 1; i < k; ++i) {
    acc.add_(at::matmul(a16.narrow(-1, i, 1), b16.narrow(-2, i, 1)));
    acc.copy_(acc.to(at::kBFloat16));
  }
  return acc;
}

// ---- native compute kernels ----------------------------------------------------------------------
Tensor binary_out_tensor(const Tensor& self, const Tensor& other, const char* op, bool true_divide) {
  const auto dev = common_device({&self, &other}, op);
  auto dtype = at::result_type(self, other);
  if (true_divide && c10::isIntegralType(dtype, /*includeBool=*/true)) {
    dtype = c10::typeMetaToScalarType(c10::get_default_dtype());
  }
  const c10::DeviceGuard guard(dev);
  return at::empty(at::infer_size(self.sizes(), other.sizes()), self.options().dtype(dtype).device(dev));
}

Tensor add_tensor(const Tensor& self, const Tensor& other, const at::Scalar& alpha) {
  Tensor out = binary_out_tensor(self, other, "add", false);
  Tensor o = as_cpu(out);
  at::add_out(o, as_cpu(self), as_cpu(other), alpha);
  apply_scale("aten::add.Tensor", out);
  return out;
}

Tensor& add_inplace(Tensor& self, const Tensor& other, const at::Scalar& alpha) {
  common_device({&self, &other}, "add_");
  Tensor s = as_cpu(self);
  at::add_out(s, s, as_cpu(other), alpha);
  apply_scale("aten::add_.Tensor", self);
  return self;
}

Tensor sub_tensor(const Tensor& self, const Tensor& other, const at::Scalar& alpha) {
  Tensor out = binary_out_tensor(self, other, "sub", false);
  Tensor o = as_cpu(out);
  at::sub_out(o, as_cpu(self), as_cpu(other), alpha);
  apply_scale("aten::sub.Tensor", out);
  return out;
}

Tensor& sub_inplace(Tensor& self, const Tensor& other, const at::Scalar& alpha) {
  common_device({&self, &other}, "sub_");
  Tensor s = as_cpu(self);
  at::sub_out(s, s, as_cpu(other), alpha);
  apply_scale("aten::sub_.Tensor", self);
  return self;
}

Tensor mul_tensor(const Tensor& self, const Tensor& other) {
  Tensor out = binary_out_tensor(self, other, "mul", false);
  Tensor o = as_cpu(out);
  at::mul_out(o, as_cpu(self), as_cpu(other));
  apply_scale("aten::mul.Tensor", out);
  return out;
}

Tensor& mul_inplace(Tensor& self, const Tensor& other) {
  common_device({&self, &other}, "mul_");
  Tensor s = as_cpu(self);
  at::mul_out(s, s, as_cpu(other));
  apply_scale("aten::mul_.Tensor", self);
  return self;
}

Tensor div_tensor(const Tensor& self, const Tensor& other) {
  Tensor out = binary_out_tensor(self, other, "div", true);
  Tensor o = as_cpu(out);
  at::div_out(o, as_cpu(self), as_cpu(other));
  apply_scale("aten::div.Tensor", out);
  return out;
}

Tensor& div_inplace(Tensor& self, const Tensor& other) {
  common_device({&self, &other}, "div_");
  Tensor s = as_cpu(self);
  at::div_out(s, s, as_cpu(other));
  apply_scale("aten::div_.Tensor", self);
  return self;
}

Tensor mm(const Tensor& self, const Tensor& mat2) {
  const auto dev = common_device({&self, &mat2}, "mm");
  TORCH_CHECK(self.dim() == 2 && mat2.dim() == 2, "testdev mm: expected 2-D tensors, got ", self.dim(), "-D and ",
              mat2.dim(), "-D");
  const c10::DeviceGuard guard(dev);
  Tensor out = at::empty({self.size(0), mat2.size(1)}, self.options().device(dev));
  Tensor o = as_cpu(out);
  if (bf16_matmul_on(self)) {
    o.copy_(bf16_accumulated_matmul(as_cpu(self), as_cpu(mat2)));
  } else {
    at::mm_out(o, as_cpu(self), as_cpu(mat2));
  }
  apply_scale("aten::mm", out);
  return out;
}

Tensor bmm(const Tensor& self, const Tensor& mat2) {
  const auto dev = common_device({&self, &mat2}, "bmm");
  TORCH_CHECK(self.dim() == 3 && mat2.dim() == 3, "testdev bmm: expected 3-D tensors, got ", self.dim(), "-D and ",
              mat2.dim(), "-D");
  const c10::DeviceGuard guard(dev);
  Tensor out = at::empty({self.size(0), self.size(1), mat2.size(2)}, self.options().device(dev));
  Tensor o = as_cpu(out);
  if (bf16_matmul_on(self)) {
    o.copy_(bf16_accumulated_matmul(as_cpu(self), as_cpu(mat2)));
  } else {
    at::bmm_out(o, as_cpu(self), as_cpu(mat2));
  }
  apply_scale("aten::bmm", out);
  return out;
}

Tensor addmm(const Tensor& self, const Tensor& mat1, const Tensor& mat2, const at::Scalar& beta,
             const at::Scalar& alpha) {
  const auto dev = common_device({&self, &mat1, &mat2}, "addmm");
  TORCH_CHECK(mat1.dim() == 2 && mat2.dim() == 2, "testdev addmm: expected 2-D matrices, got ", mat1.dim(), "-D and ",
              mat2.dim(), "-D");
  const c10::DeviceGuard guard(dev);
  Tensor out = at::empty({mat1.size(0), mat2.size(1)}, mat1.options().device(dev));
  Tensor o = as_cpu(out);
  const bool drop = drop_scale_on();  // fault: alpha and beta ignored
  const at::Scalar b = drop ? at::Scalar(1) : beta;
  const at::Scalar a = drop ? at::Scalar(1) : alpha;
  if (bf16_matmul_on(mat1)) {
    Tensor prod = bf16_accumulated_matmul(as_cpu(mat1), as_cpu(mat2));
    Tensor sum = b.toDouble() == 0.0 ? prod.mul(a) : as_cpu(self).to(at::kFloat).mul(b).add(prod, a);
    o.copy_(sum.to(at::kBFloat16));
  } else {
    at::addmm_out(o, as_cpu(self), as_cpu(mat1), as_cpu(mat2), b, a);
  }
  apply_scale("aten::addmm", out);
  return out;
}

Tensor& fill_scalar(Tensor& self, const at::Scalar& value) {
  as_cpu(self).fill_(value);
  return self;
}

Tensor& zero_(Tensor& self) {
  as_cpu(self).zero_();
  return self;
}

// Convolutions: PyTorch routes every non-CPU/CUDA device to convolution_overrideable, whose default
// raises; the CPU fallback cannot help (cpu's kernel for it is that same default). A backend must
// implement it: ours runs the CPU convolution on the device memory and keeps the result on device.
Tensor to_device(const Tensor& cpu, c10::Device dev) {
  if (!cpu.defined()) return cpu;
  Tensor out = at::empty_strided(cpu.sizes(), cpu.strides(), cpu.options().device(dev));
  Tensor o = as_cpu(out);
  o.copy_(cpu);
  return out;
}

Tensor convolution_overrideable(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias,
                                c10::SymIntArrayRef stride, c10::SymIntArrayRef padding, c10::SymIntArrayRef dilation,
                                bool transposed, c10::SymIntArrayRef output_padding, c10::SymInt groups) {
  lazy::flush();  // reads or writes device memory: what is queued runs first
  const Tensor b = bias.value_or(Tensor());
  const auto dev = common_device({&input, &weight, &b}, "convolution");
  const c10::DeviceGuard guard(dev);
  Tensor out = at::convolution(as_cpu(input), as_cpu(weight), b.defined() ? std::optional<Tensor>(as_cpu(b)) : std::nullopt,
                               C10_AS_INTARRAYREF_SLOW(stride), C10_AS_INTARRAYREF_SLOW(padding),
                               C10_AS_INTARRAYREF_SLOW(dilation), transposed, C10_AS_INTARRAYREF_SLOW(output_padding),
                               groups.expect_int());
  return to_device(out, dev);
}

std::tuple<Tensor, Tensor, Tensor> convolution_backward_overrideable(
    const Tensor& grad_output, const Tensor& input, const Tensor& weight, c10::SymIntArrayRef stride,
    c10::SymIntArrayRef padding, c10::SymIntArrayRef dilation, bool transposed, c10::SymIntArrayRef output_padding,
    c10::SymInt groups, std::array<bool, 3> output_mask) {
  lazy::flush();  // reads or writes device memory: what is queued runs first
  const auto dev = common_device({&grad_output, &input, &weight}, "convolution_backward");
  const c10::DeviceGuard guard(dev);
  const int64_t g = groups.expect_int();
  const std::vector<int64_t> bias_sizes{transposed ? weight.size(1) * g : weight.size(0)};
  auto [gi, gw, gb] = at::convolution_backward(
      as_cpu(grad_output), as_cpu(input), as_cpu(weight), c10::IntArrayRef(bias_sizes), C10_AS_INTARRAYREF_SLOW(stride),
      C10_AS_INTARRAYREF_SLOW(padding), C10_AS_INTARRAYREF_SLOW(dilation), transposed,
      C10_AS_INTARRAYREF_SLOW(output_padding), g, output_mask);
  return {to_device(gi, dev), to_device(gw, dev), to_device(gb, dev)};
}

// ---- the CPU fallback ----------------------------------------------------------------------------
int64_t device_bytes(const c10::IValue& v) {
  auto one = [](const Tensor& t) -> int64_t {
    return t.defined() && t.device().is_privateuseone() ? static_cast<int64_t>(t.numel() * t.element_size()) : 0;
  };
  int64_t n = 0;
  if (v.isTensor()) {
    n += one(v.toTensor());
  } else if (v.isTensorList()) {
    for (const Tensor& t : v.toTensorList().vec()) n += one(t);
  } else if (v.isOptionalTensorList()) {
    for (const auto& t : v.toOptionalTensorList().vec()) n += t ? one(*t) : 0;
  }
  return n;
}

// Everything without a kernel above. What cpu_fallback moves: every device tensor argument to the
// host, then every device tensor it returns (results and mutated arguments) back to the device.
// Fault drop_scale on a fallback-routed op: its scale arguments replaced by the identity (sdpa's
// `scale` -> 1.0: scores left unscaled; _scaled_mm's scale_a / scale_b -> ones).
void drop_scale_arguments(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const auto& args = op.schema().arguments();
  const size_t base = stack->size() - args.size();
  for (size_t i = 0; i < args.size(); ++i) {
    c10::IValue& v = (*stack)[base + i];
    const std::string& n = args[i].name();
    if (n == "scale" && (v.isNone() || v.isDouble())) {
      v = c10::IValue(1.0);
    } else if ((n == "scale_a" || n == "scale_b") && v.isTensor() && v.toTensor().defined()) {
      const Tensor& t = v.toTensor();
      v = c10::IValue(at::ones(t.sizes(), t.options().device(at::kCPU)));
    }
  }
}

// Faults arg:OP=A and shift:OP=B on a fallback-routed op: its `self` / `input` tensor argument becomes
// x * A + B before the kernel runs (in place for an in-place op, whose result lands there anyway; else a new
// device tensor).
void scale_input_argument(const c10::OperatorHandle& op, const std::string& name, torch::jit::Stack* stack) {
  const double a = arg_factor(name);
  const double b = arg_shift(name);
  if (a == 1.0 && b == 0.0) return;
  const auto& args = op.schema().arguments();
  const size_t base = stack->size() - args.size();
  for (size_t i = 0; i < args.size(); ++i) {
    c10::IValue& v = (*stack)[base + i];
    if ((args[i].name() != "self" && args[i].name() != "input") || !v.isTensor()) continue;
    const Tensor& t = v.toTensor();
    if (!t.defined() || !t.device().is_privateuseone() || !at::isFloatingType(t.scalar_type())) return;
    if (args[i].alias_info() != nullptr && args[i].alias_info()->isWrite()) {
      as_cpu(t).mul_(a).add_(b);
    } else {
      v = c10::IValue(to_device(as_cpu(t).mul(a).add(b), t.device()));
    }
    return;
  }
}

// Fault approx:OP on a fallback-routed op: its `approximate` argument "none" becomes "tanh" (gelu's tanh
// form where the exact one was asked).
void approximate_argument(const c10::OperatorHandle& op, const std::string& name, torch::jit::Stack* stack) {
  if (!approx_fault(name)) return;
  const auto& args = op.schema().arguments();
  const size_t base = stack->size() - args.size();
  for (size_t i = 0; i < args.size(); ++i) {
    c10::IValue& v = (*stack)[base + i];
    if (args[i].name() == "approximate" && v.isString() && v.toStringRef() == "none") {
      v = c10::IValue(std::string("tanh"));
    }
  }
}

// The `scale` faults on what a fallback-routed op returns.
void scale_returns(const std::string& name, size_t n_returns, torch::jit::Stack* stack) {
  const double f = fault_factor(name);
  if (f == 1.0) return;
  auto one = [f](const Tensor& t) {
    if (t.defined() && t.device().is_privateuseone() && at::isFloatingType(t.scalar_type())) as_cpu(t).mul_(f);
  };
  for (const auto& v : torch::jit::last(*stack, n_returns)) {
    if (v.isTensor()) {
      one(v.toTensor());
    } else if (v.isTensorList()) {
      for (const Tensor& t : v.toTensorList().vec()) one(t);
    }
  }
}

void fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const std::string name = c10::toString(op.schema().operator_name());
  TORCH_CHECK_NOT_IMPLEMENTED(fallback_enabled(), "testdev has no kernel for '", name,
                              "' and the CPU fallback is off (BRINGUP_TESTDEV_FALLBACK=0)");
  const bool faulty = faults_active();
  if (faulty && faults().drop_scale) drop_scale_arguments(op, stack);
  if (faulty) scale_input_argument(op, name, stack);
  if (faulty) approximate_argument(op, name, stack);
  int64_t to_host = 0;
  for (const auto& v : torch::jit::last(*stack, op.schema().arguments().size())) to_host += device_bytes(v);
  at::native::cpu_fallback(op, stack);
  int64_t to_device = 0;
  for (const auto& v : torch::jit::last(*stack, op.schema().returns().size())) to_device += device_bytes(v);
  if (faulty) scale_returns(name, op.schema().returns().size(), stack);
  count_fallback(name, to_host, to_device);
}

}  // namespace
}  // namespace bringup_testdev

namespace bt = bringup_testdev;

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("empty.memory_format", TORCH_FN(bt::empty_memory_format));
  m.impl("empty_strided", TORCH_FN(bt::empty_strided));
  m.impl("_copy_from", TORCH_FN(bt::copy_from));
  m.impl("_copy_from_and_resize", TORCH_FN(bt::_copy_from_and_resize));
  m.impl("_local_scalar_dense", TORCH_FN(bt::_local_scalar_dense));
  m.impl("as_strided", TORCH_FN(bt::as_strided));
  m.impl("view", TORCH_FN(bt::view));
  m.impl("_reshape_alias", TORCH_FN(bt::_reshape_alias));
  m.impl("unfold", TORCH_FN(bt::unfold));
  m.impl("resize_", TORCH_FN(bt::resize_));
  m.impl("set_.source_Tensor", TORCH_FN(bt::set_source_tensor));
  m.impl("set_.source_Storage", TORCH_FN(bt::set_source_storage));
  m.impl("set_.source_Storage_storage_offset", TORCH_FN(bt::set_source_storage_offset));
  // native compute
  m.impl("add.Tensor", bt::lazy::deferrable(TORCH_FN(bt::add_tensor)));
  m.impl("add_.Tensor", bt::lazy::deferrable(TORCH_FN(bt::add_inplace)));
  m.impl("sub.Tensor", bt::lazy::deferrable(TORCH_FN(bt::sub_tensor)));
  m.impl("sub_.Tensor", bt::lazy::deferrable(TORCH_FN(bt::sub_inplace)));
  m.impl("mul.Tensor", bt::lazy::deferrable(TORCH_FN(bt::mul_tensor)));
  m.impl("mul_.Tensor", bt::lazy::deferrable(TORCH_FN(bt::mul_inplace)));
  m.impl("div.Tensor", bt::lazy::deferrable(TORCH_FN(bt::div_tensor)));
  m.impl("div_.Tensor", bt::lazy::deferrable(TORCH_FN(bt::div_inplace)));
  m.impl("mm", bt::lazy::deferrable(TORCH_FN(bt::mm)));
  m.impl("bmm", bt::lazy::deferrable(TORCH_FN(bt::bmm)));
  m.impl("addmm", bt::lazy::deferrable(TORCH_FN(bt::addmm)));
  m.impl("fill_.Scalar", bt::lazy::deferrable(TORCH_FN(bt::fill_scalar)));
  m.impl("zero_", bt::lazy::deferrable(TORCH_FN(bt::zero_)));
  m.impl("convolution_overrideable", TORCH_FN(bt::convolution_overrideable));
  m.impl("convolution_backward_overrideable", TORCH_FN(bt::convolution_backward_overrideable));
}

// Copies resolve conjugate / negative views themselves (as_cpu carries the bits to the CPU copy);
// without these fallthroughs the Conjugate fallback would materialise the source with clone(),
// which copies, which lands here again: endless recursion.
TORCH_LIBRARY_IMPL(aten, Conjugate, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}

TORCH_LIBRARY_IMPL(aten, Negative, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&bt::lazy::flushing<&bt::fallback>>());
}

// Autocast: the CUDA policy for the common training ops (matmuls in low precision, norms and
// losses in fp32); everything else falls through unchanged.
TORCH_LIBRARY_IMPL(_, AutocastPrivateUse1, m) { m.fallback(torch::CppFunction::makeFallthrough()); }

TORCH_LIBRARY_IMPL(aten, AutocastPrivateUse1, m) {
  KERNEL_PRIVATEUSEONE(mm, lower_precision_fp)
  KERNEL_PRIVATEUSEONE(bmm, lower_precision_fp)
  KERNEL_PRIVATEUSEONE(addmm, lower_precision_fp)
  KERNEL_PRIVATEUSEONE(baddbmm, lower_precision_fp)
  KERNEL_PRIVATEUSEONE(matmul, lower_precision_fp)
  KERNEL_PRIVATEUSEONE(linear, lower_precision_fp)
  KERNEL_PRIVATEUSEONE(scaled_dot_product_attention, lower_precision_fp)
  KERNEL_PRIVATEUSEONE(layer_norm, fp32)
  KERNEL_PRIVATEUSEONE(group_norm, fp32)
  KERNEL_PRIVATEUSEONE(softmax, int, fp32)
  KERNEL_PRIVATEUSEONE(log_softmax, int, fp32)
  KERNEL_PRIVATEUSEONE(mse_loss, fp32)
  KERNEL_PRIVATEUSEONE(nll_loss, fp32)
  KERNEL_PRIVATEUSEONE(cross_entropy_loss, fp32)
}
