// testdev's lazy mode: ops queue until synchronize or a read, as on PyTorch/XLA; work whose result is
// dropped before anything reads it is never computed. Off by default (BRINGUP_TESTDEV_LAZY=1 at load,
// or bringup.testdev.set_lazy(True)). It exists so that CI proves no timer, calibration or check of
// bringup's can be fooled by a device that skips what nobody reads.
//
// What is deferred: the native compute kernels (kernels.cpp registers them through `deferrable`). Their
// outputs are allocated at once (shapes from the op's meta kernel) and filled when the queue runs; a
// queued op whose outputs are all freed by then is skipped. Everything that reads or writes device
// memory otherwise runs the queue first (copies, .item(), resize_, set_, the convolutions: a
// `lazy::flush()` at their top; the CPU fallback: registered through `flushing`), and so do synchronize
// and recording an event (runtime.cpp).
#pragma once

#include <ATen/core/boxing/KernelFunction.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <torch/library.h>

#include <cstdint>
#include <memory>

namespace bringup_testdev::lazy {

bool enabled();
void set_enabled(bool on);  // turning it off runs what is queued first
void flush();               // run the queue, in order (a no-op inside the queue's own run)

struct Stats {
  int64_t deferred = 0;  // ops queued
  int64_t executed = 0;  // queued ops that ran
  int64_t skipped = 0;   // queued ops dropped: every output freed before the queue ran
  int64_t flushes = 0;   // times a non-empty queue ran
};
Stats stats();
void reset_stats();

// A native kernel whose work may be queued: runs at once when lazy mode is off.
torch::CppFunction deferrable(c10::KernelFunction eager);
template <class FuncPtr>
torch::CppFunction deferrable(FuncPtr f) {
  return deferrable(c10::KernelFunction::makeFromUnboxedFunction(f));
}

// A boxed kernel (the CPU fallback) that runs the queue first.
template <void (*F)(const c10::OperatorHandle&, torch::jit::Stack*)>
void flushing(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  flush();
  F(op, stack);
}

}  // namespace bringup_testdev::lazy
