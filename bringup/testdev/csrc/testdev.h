// testdev: a small out-of-tree PrivateUse1 backend (renamed "testdev" from Python) for bringup's CI.
//
// Memory is ordinary host memory behind a device allocator with its own statistics; a handful of ops
// have native kernels (they compute in place on that memory); every other op goes through a global
// boxed CPU fallback (at::native::cpu_fallback), which can be switched off so those ops raise
// NotImplementedError instead, as Neuron's and Ascend's switches do.
#pragma once

#include <c10/core/Allocator.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace bringup_testdev {

// Devices (BRINGUP_TESTDEV_DEVICES, 1..16, default 1) and the thread's current device.
c10::DeviceIndex device_count();
c10::DeviceIndex current_device();
void set_device(c10::DeviceIndex index);
c10::DeviceIndex exchange_device(c10::DeviceIndex index);
void check_index(c10::DeviceIndex index);

// The device allocator (host memory, 64-byte aligned, counted per device).
c10::Allocator* allocator();

// CPU fallback switch (BRINGUP_TESTDEV_FALLBACK=0 at load time turns it off) and its call counter.
bool fallback_enabled();
void set_fallback_enabled(bool enabled);
// Per op: {calls, bytes of device tensors handed to the fallback (copied to host), bytes of device
// tensors it returned (copied back)}. The backend's own ground truth for bringup's detector tests.
struct FallbackStat {
  int64_t calls = 0;
  int64_t bytes_to_host = 0;
  int64_t bytes_to_device = 0;
};
std::map<std::string, FallbackStat> fallback_stats();
void reset_fallback_counts();
void count_fallback(const std::string& op, int64_t to_host, int64_t to_device);

// Numeric faults: a wrong device on demand, for proving that bringup's verdicts catch one. All off by
// default; set from Python (bringup.testdev.set_faults, or BRINGUP_TESTDEV_FAULTS read when the plugin
// loads, so workers inherit it). They act on native kernels and on ops routed through the CPU fallback.
struct Faults {
  // op pattern -> factor applied to the op's floating-point outputs. A pattern is a dispatcher name
  // "aten::gelu" (every overload of gelu / gelu_, incl. the structured gelu.out the fallback runs) or
  // one overload "aten::add.Tensor".
  std::map<std::string, double> scales;
  bool bf16_matmul = false;  // mm / bmm / addmm: inputs and every partial sum rounded to bf16
  bool drop_scale = false;   // scale arguments ignored: _scaled_mm scale_a/scale_b, sdpa `scale`, addmm alpha/beta
  // op pattern -> factor on the op's `self` / `input` argument before its (fallback-routed) kernel runs: a
  // wrong constant inside the function (arg:_softmax=1.01 is a softmax temperature, arg:silu=1.02 silu(1.02x),
  // arg:silu_backward=1.02 the gradient of silu taken at 1.02x: an error in the backward only)
  std::map<std::string, double> args;
  // op pattern -> amount added to that argument after `args` (shift:rsqrt=1e-5 is rsqrt(x + 1e-5): a norm's
  // epsilon off)
  std::map<std::string, double> shifts;
  // op patterns whose `approximate` argument "none" becomes "tanh" (approx:gelu: the tanh form where the exact
  // one was asked; approx:gelu_backward: in the backward only)
  std::vector<std::string> approx;
  // Faults only real inputs expose (repeated ids, explicit masks, ignored targets, packed rows):
  // op patterns whose duplicate writes lose all but the last (embedding_dense_backward, _index_put_impl_ with
  // accumulate=True, index_add, scatter_add): self[i] + v_last where the op asks self[i] + the sum of every v
  std::vector<std::string> lastwrite;
  // the fused attention kernel serves an explicit attn_mask with its causal kernel (the mask ignored)
  bool sdpa_mask_as_causal = false;
  // loss patterns ("aten::nll_loss", "aten::nll_loss2d") whose mean divides by every target, ignored ones too
  std::vector<std::string> count_ignored;
  // op pattern -> block: the scan (cumsum) restarts every `block` elements along its dim (the carry between
  // blocks dropped)
  std::map<std::string, int64_t> blockscan;
};
Faults faults();
void set_faults(const Faults& f);
bool faults_active();  // any fault on (a lock-free fast path for every op)
double fault_factor(const std::string& op);  // product of the matching scales (1.0: none)
double arg_factor(const std::string& op);    // product of the matching `args` factors (1.0: none)
double arg_shift(const std::string& op);     // sum of the matching `shifts` (0.0: none)
bool approx_fault(const std::string& op);    // a matching `approx` pattern
bool lastwrite_fault(const std::string& op);  // a matching `lastwrite` pattern
bool count_ignored_fault(const std::string& op);  // a `count_ignored` loss whose forward `op` is (nll_loss_forward)
int64_t blockscan_fault(const std::string& op);  // the matching `blockscan` block (0: none)

}  // namespace bringup_testdev
