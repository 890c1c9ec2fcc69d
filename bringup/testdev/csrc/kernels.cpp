// testdev kernels: the ops a backend must have (empty, copy, views, resize, set_), a few native compute
// kernels, a fused attention kernel (SDPA's overrideable backend), the global boxed CPU fallback for everything
// else, and autocast registrations.
//
// Native compute kernels see device memory as CPU tensors (from_blob over the same host memory) and
// write their results into testdev memory: no transfer happens, which is what a native kernel means.
#include "testdev.h"
#include "lazy.h"

#include <ATen/ATen.h>
#include <ATen/EmptyTensor.h>
#include <ATen/ExpandUtils.h>
#include <ATen/autocast_mode.h>
#include <ATen/SDPBackend.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/native/transformers/attention.h>
#include <ATen/native/transformers/sdp_utils_cpp.h>
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

// ---- fused attention ------------------------------------------------------------------------------
// Like a real backend's flash kernel: SDPA asks the device which backend serves an input (_fused_sdp_choice);
// testdev answers `overrideable` where its kernel can take the input and `math` elsewhere (float64, dropout,
// a mask that needs a gradient, ...: the decomposed path every op of which testdev has), and serves
// `_scaled_dot_product_fused_attention_overrideable` (+ backward) with cpu's flash-attention kernels on the device
// memory. Grouped-query attention (fewer key / value heads) is native to those kernels.
bool fused_attention_fits(const Tensor& q, const Tensor& k, const Tensor& v, const std::optional<Tensor>& mask,
                          double dropout_p, bool is_causal, bool enable_gqa) {
  if (!at::globalContext().userEnabledOverrideableSDP()) return false;  // sdpa_kernel() without OVERRIDEABLE
  if (q.is_nested() || k.is_nested() || v.is_nested()) return false;
  const auto dt = q.scalar_type();
  if (dt != at::kFloat && dt != at::kBFloat16 && dt != at::kHalf) return false;  // no float64 kernel
  if (k.scalar_type() != dt || v.scalar_type() != dt) return false;
  if (dropout_p > 0.0) return false;  // the math path draws the dropout
  const bool with_mask = mask.has_value() && mask->defined();
  if (with_mask && is_causal) return false;  // the math path raises its error
  if (with_mask && mask->scalar_type() != at::kBool && mask->scalar_type() != dt) return false;
  const sdp::sdp_params params{q, k, v, with_mask ? mask : std::nullopt, dropout_p, is_causal, enable_gqa};
  if (!sdp::check_tensor_shapes(params, false)) return false;  // 4-D (B, H, S, D)
  if (!sdp::check_batch_size_and_num_heads_dense<true>(params, false)) return false;  // GQA with enable_gqa
  if (!sdp::check_attn_mask_shape(params, false)) return false;  // 2-D or 4-D, broadcastable; no gradient
  if (!sdp::check_nonzero_sequence_lengths_dense(params, false)) return false;
  if (!(q.sym_size(-1) == k.sym_size(-1) && q.sym_size(-1) == v.sym_size(-1))) return false;
  return q.sym_stride(-1) == 1 && k.sym_stride(-1) == 1 && v.sym_stride(-1) == 1;
}

int64_t fused_sdp_choice(const Tensor& query, const Tensor& key, const Tensor& value,
                         const std::optional<Tensor>& attn_mask, double dropout_p, bool is_causal,
                         std::optional<double> /*scale*/, bool enable_gqa) {
  const bool fits = fused_attention_fits(query, key, value, attn_mask, dropout_p, is_causal, enable_gqa);
  return static_cast<int64_t>(fits ? at::SDPBackend::overrideable : at::SDPBackend::math);
}

// The mask and causality the kernel runs with. Fault sdpa_mask_as_causal: an explicit mask is served by the causal
// kernel (the mask ignored), forward and backward alike.
std::pair<std::optional<Tensor>, bool> attention_masking(const Tensor& attn_bias, bool is_causal) {
  if (!attn_bias.defined()) return {std::nullopt, is_causal};
  if (faults_active() && faults().sdpa_mask_as_causal) return {std::nullopt, true};
  return {as_cpu(attn_bias), is_causal};
}

std::optional<double> attention_scale(std::optional<double> scale) {
  return drop_scale_on() ? std::optional<double>(1.0) : scale;  // fault drop_scale: scores left unscaled
}

// A device tensor shaped and laid out like `like` holding `cpu`.
Tensor device_like(const Tensor& cpu, const Tensor& like) {
  Tensor out = at::empty_like(like);
  as_cpu(out).copy_(cpu);
  return out;
}

std::tuple<Tensor, Tensor, Tensor, Tensor, c10::SymInt, c10::SymInt, Tensor, Tensor, Tensor>
fused_attention(const Tensor& query, const Tensor& key, const Tensor& value, const std::optional<Tensor>& attn_bias,
                double dropout_p, bool is_causal, bool return_debug_mask, std::optional<double> scale) {
  lazy::flush();  // reads device memory: what is queued runs first
  TORCH_CHECK(dropout_p == 0.0, "testdev fused attention: dropout_p must be 0, got ", dropout_p,
              " (SDPA takes the math path for dropout)");
  TORCH_CHECK(!return_debug_mask, "testdev fused attention: return_debug_mask is not supported");
  const Tensor bias = attn_bias.value_or(Tensor());
  const auto dev = common_device({&query, &key, &value, &bias}, "fused attention");
  TORCH_CHECK(query.dim() == 4 && key.dim() == 4 && value.dim() == 4,
              "testdev fused attention: expected 4-D (batch, heads, seq, head_dim) query, key and value");
  const c10::DeviceGuard guard(dev);
  const auto [mask, causal] = attention_masking(bias, is_causal);
  auto [out, lse] = at::_scaled_dot_product_flash_attention_for_cpu(as_cpu(query), as_cpu(key), as_cpu(value), 0.0,
                                                                    causal, mask, attention_scale(scale));
  Tensor o = device_like(out, query);  // the layout the op's meta kernel gives (query's)
  Tensor l = at::empty(lse.sizes(), lse.options().device(dev));
  as_cpu(l).copy_(lse);
  apply_scale("aten::_scaled_dot_product_fused_attention_overrideable", o);
  const auto ids = query.options().dtype(at::kLong);
  return {o,   l, Tensor(), Tensor(), c10::SymInt(query.size(2)), c10::SymInt(key.size(2)), at::zeros({}, ids),
          at::zeros({}, ids), Tensor()};
}

std::tuple<Tensor, Tensor, Tensor, Tensor> fused_attention_backward(
    const Tensor& grad_out, const Tensor& query, const Tensor& key, const Tensor& value, const Tensor& attn_bias,
    std::array<bool, 4> grad_input_mask, const Tensor& out, const Tensor& logsumexp, const Tensor& /*cum_seq_q*/,
    const Tensor& /*cum_seq_k*/, c10::SymInt /*max_q*/, c10::SymInt /*max_k*/, double dropout_p, bool is_causal,
    const Tensor& /*philox_seed*/, const Tensor& /*philox_offset*/, std::optional<double> scale) {
  lazy::flush();  // reads device memory: what is queued runs first
  TORCH_CHECK(dropout_p == 0.0, "testdev fused attention backward: dropout_p must be 0, got ", dropout_p);
  TORCH_CHECK(!grad_input_mask[3], "testdev fused attention: no gradient for attn_mask (SDPA takes the math path)");
  const auto dev = common_device({&grad_out, &query, &key, &value, &out, &logsumexp, &attn_bias},
                                 "fused attention backward");
  const c10::DeviceGuard guard(dev);
  const auto [mask, causal] = attention_masking(attn_bias, is_causal);
  auto [gq, gk, gv] = at::_scaled_dot_product_flash_attention_for_cpu_backward(
      as_cpu(grad_out), as_cpu(query), as_cpu(key), as_cpu(value), as_cpu(out), as_cpu(logsumexp), 0.0, causal, mask,
      attention_scale(scale));
  std::tuple<Tensor, Tensor, Tensor, Tensor> grads{device_like(gq, query), device_like(gk, key),
                                                   device_like(gv, value), Tensor()};
  for (const Tensor& g : {std::get<0>(grads), std::get<1>(grads), std::get<2>(grads)}) {
    apply_scale("aten::_scaled_dot_product_fused_attention_overrideable_backward", g);
  }
  return grads;
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

// ---- faults only real inputs expose --------------------------------------------------------------
// The positions among `n` writes to `targets` (1-D int64, in the order a serial kernel makes them) that a later
// write to the same target overwrites: all but the last write of each target.
Tensor overwritten_writes(const Tensor& targets) {
  const int64_t n = targets.numel();
  Tensor lost = at::zeros({n}, targets.options().dtype(at::kBool));
  if (n < 2) return lost;
  const auto sorted = targets.sort(/*stable=*/true, /*dim=*/0, /*descending=*/false);  // equal targets in order
  const Tensor& keys = std::get<0>(sorted);
  const Tensor& perm = std::get<1>(sorted);
  lost.index_put_({perm.narrow(0, 0, n - 1)}, keys.narrow(0, 0, n - 1).eq(keys.narrow(0, 1, n - 1)));
  return lost;
}

c10::IValue& argument(const c10::OperatorHandle& op, torch::jit::Stack* stack, size_t i) {
  return (*stack)[stack->size() - op.schema().arguments().size() + i];
}

int64_t int_argument(const c10::OperatorHandle& op, torch::jit::Stack* stack, size_t i) {
  const c10::IValue& v = argument(op, stack, i);
  return v.isInt() ? v.toInt() : v.toSymInt().expect_int();
}

// Fault lastwrite:OP on an index-accumulating op: a duplicate index keeps only its last write (a scatter-add whose
// read-add-write races, the last writer winning: self[i] + v_last instead of self[i] + the sum of every v). Done by
// zeroing the values of the writes a later one overwrites before the exact kernel runs: with no repeated index
// nothing changes, bit for bit.
//   embedding_dense_backward(grad_output, indices, num_weights, padding_idx, scale_grad_by_freq): a repeated token
//     id's gradient row is its last occurrence's (padding_idx still gets none; scale_grad_by_freq still divides by
//     the id's count)
//   _index_put_impl_(self, indices, values, accumulate, unsafe) with accumulate=True (index_put_(accumulate=True),
//     the backward of x[idx]); index_add.out(self, dim, index, source, alpha); scatter_add.out(self, dim, index, src)
void lose_repeated_writes(const c10::OperatorHandle& op, const std::string& name, torch::jit::Stack* stack) {
  const std::string base = name.substr(0, name.find('.'));
  if (base == "aten::embedding_dense_backward") {
    const Tensor grad = argument(op, stack, 0).toTensor();
    const Tensor ids = as_cpu(argument(op, stack, 1).toTensor()).reshape(-1).to(at::kLong);
    const Tensor lost = overwritten_writes(ids);
    if (!lost.any().item<bool>()) return;
    const Tensor rows = as_cpu(grad).reshape({ids.numel(), -1}).masked_fill(lost.unsqueeze(1), 0);
    argument(op, stack, 0) = c10::IValue(to_device(rows.reshape(grad.sizes()), grad.device()));
  } else if (base == "aten::_index_put_impl_") {
    if (!argument(op, stack, 3).toBool()) return;  // accumulate=False: a plain store already keeps one write
    const Tensor self = argument(op, stack, 0).toTensor();
    c10::List<std::optional<Tensor>> indices;
    for (const auto& t : argument(op, stack, 1).toOptionalTensorList().vec()) {
      indices.push_back(t ? std::optional<Tensor>(as_cpu(*t)) : std::nullopt);
    }
    // the flat position in `self` each written value lands on, in the indexing result's (row-major) order
    const Tensor targets = at::arange(self.numel(), at::kLong).view(self.sizes()).index(indices);
    const Tensor lost = overwritten_writes(targets.reshape(-1));
    if (!lost.any().item<bool>()) return;
    const Tensor values = argument(op, stack, 2).toTensor();
    const Tensor kept = as_cpu(values).expand(targets.sizes()).masked_fill(lost.view(targets.sizes()), 0);
    argument(op, stack, 2) = c10::IValue(to_device(kept.contiguous(), values.device()));
  } else if (base == "aten::index_add") {
    const Tensor source = argument(op, stack, 3).toTensor();
    if (source.dim() == 0) return;
    const int64_t dim = at::maybe_wrap_dim(int_argument(op, stack, 1), source.dim());
    const Tensor lost = overwritten_writes(as_cpu(argument(op, stack, 2).toTensor()).reshape(-1).to(at::kLong));
    if (!lost.any().item<bool>()) return;
    const Tensor kept = as_cpu(source).index_fill(dim, lost.nonzero().reshape(-1), 0);
    argument(op, stack, 3) = c10::IValue(to_device(kept, source.device()));
  } else if (base == "aten::scatter_add") {
    const Tensor self = argument(op, stack, 0).toTensor();
    const Tensor index = as_cpu(argument(op, stack, 2).toTensor()).to(at::kLong);
    const Tensor src = argument(op, stack, 3).toTensor();
    if (index.dim() == 0 || index.numel() == 0) return;
    const int64_t dim = at::maybe_wrap_dim(int_argument(op, stack, 1), index.dim());
    // target of index[p]: p with its `dim` coordinate replaced by index[p], flattened over self's (row-major) shape
    std::vector<int64_t> strides(self.dim(), 1);
    for (int64_t d = self.dim() - 2; d >= 0; --d) strides[d] = strides[d + 1] * self.size(d + 1);
    Tensor targets = index * strides[dim];
    for (int64_t d = 0; d < index.dim(); ++d) {
      if (d == dim) continue;
      std::vector<int64_t> shape(index.dim(), 1);
      shape[d] = index.size(d);
      targets = targets + at::arange(index.size(d), at::kLong).mul(strides[d]).view(shape);
    }
    const Tensor lost = overwritten_writes(targets.reshape(-1));
    if (!lost.any().item<bool>()) return;
    Tensor kept = as_cpu(src).clone();
    Tensor part = kept;  // the elements of src the index reads
    for (int64_t d = 0; d < index.dim(); ++d) part = part.narrow(d, 0, index.size(d));
    part.masked_fill_(lost.view(index.sizes()), 0);
    argument(op, stack, 3) = c10::IValue(to_device(kept, src.device()));
  }
}

// Fault count_ignored:nll_loss on nll_loss_forward (and nll_loss2d_forward), reduction mean: the mean divides by
// every target, the ignored ones (ignore_index) counted too, each with weight 1. The kernel runs with
// reduction=sum; `count_ignored_after` divides and returns that count as total_weight, which the backward
// (nll_loss_backward divides by the total_weight the forward returned) then uses too. Returns the number of ignored
// targets (0: nothing changed).
int64_t count_ignored_before(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  if (int_argument(op, stack, 3) != at::Reduction::Mean) return 0;
  const Tensor target = as_cpu(argument(op, stack, 1).toTensor());
  const int64_t ignored = target.eq(int_argument(op, stack, 4)).sum().item<int64_t>();
  if (ignored > 0) argument(op, stack, 3) = c10::IValue(static_cast<int64_t>(at::Reduction::Sum));
  return ignored;
}

void count_ignored_after(int64_t ignored, torch::jit::Stack* stack) {
  const Tensor output = as_cpu((*stack)[stack->size() - 2].toTensor());
  const Tensor total_weight = as_cpu((*stack)[stack->size() - 1].toTensor());
  total_weight.add_(static_cast<double>(ignored));
  output.div_(total_weight);
}

// Fault blockscan:cumsum=N: the scan restarts every N elements along its dim (a blocked parallel scan that drops
// the carry between blocks): out[k] = sum of x over k's block up to k. Where every carry is 0 (a scan of zeros
// up to each block's start: unpacked rows' document flags) nothing changes.
struct ScanInput {
  Tensor x;  // a host copy of the input (cumsum_ overwrites it)
  int64_t dim = 0;
  int64_t block = 0;
};

ScanInput blockscan_before(const c10::OperatorHandle& op, const std::string& name, torch::jit::Stack* stack) {
  const int64_t block = blockscan_fault(name);
  if (block <= 0) return {};
  const Tensor x = argument(op, stack, 0).toTensor();
  if (x.dim() == 0) return {};
  const int64_t dim = at::maybe_wrap_dim(int_argument(op, stack, 1), x.dim());
  if (x.size(dim) <= block) return {};
  return {as_cpu(x).clone(), dim, block};
}

void blockscan_after(const ScanInput& in, const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  if (!in.x.defined()) return;
  const Tensor out = as_cpu(torch::jit::last(*stack, op.schema().returns().size())[0].toTensor());
  const int64_t n = in.x.size(in.dim);
  for (int64_t start = in.block; start < n; start += in.block) {
    const int64_t len = std::min(in.block, n - start);
    out.narrow(in.dim, start, len).copy_(at::cumsum(in.x.narrow(in.dim, start, len), in.dim, out.scalar_type()));
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
  if (faulty && lastwrite_fault(name)) lose_repeated_writes(op, name, stack);
  const int64_t ignored = faulty && count_ignored_fault(name) ? count_ignored_before(op, stack) : 0;
  const ScanInput scan = faulty ? blockscan_before(op, name, stack) : ScanInput{};
  int64_t to_host = 0;
  for (const auto& v : torch::jit::last(*stack, op.schema().arguments().size())) to_host += device_bytes(v);
  at::native::cpu_fallback(op, stack);
  int64_t to_device = 0;
  for (const auto& v : torch::jit::last(*stack, op.schema().returns().size())) to_device += device_bytes(v);
  if (ignored > 0) count_ignored_after(ignored, stack);
  blockscan_after(scan, op, stack);
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
  m.impl("_fused_sdp_choice", TORCH_FN(bt::fused_sdp_choice));
  m.impl("_scaled_dot_product_fused_attention_overrideable", TORCH_FN(bt::fused_attention));
  m.impl("_scaled_dot_product_fused_attention_overrideable_backward", TORCH_FN(bt::fused_attention_backward));
}

// scaled_dot_product_attention asks the device's _fused_sdp_choice_stub (not the dispatcher op) for a backend.
namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(_fused_sdp_choice_stub, &bt::fused_sdp_choice)
}  // namespace at::native

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
