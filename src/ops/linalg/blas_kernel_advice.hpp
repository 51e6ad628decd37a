// OpenBLAS picks its kernels by the CPU model it recognises. On a model it does not know (a
// virtual machine's generic "Intel Xeon Processor"), Debian's OpenBLAS runs its oldest x86-64
// kernels (Prescott, SSE3) even where the CPU has AVX-512: a float32 GEMM then takes about three
// times as long (a 784-256-256-10 MLP step, measured: 2.8 ms against 0.92 ms with
// OPENBLAS_CORETYPE=SkylakeX). OpenBLAS reads OPENBLAS_CORETYPE once, when it loads, so only
// the user can fix it; the first GEMM of a process says how, once.
#pragma once

#include <string>

namespace tapegrad::detail {

// What to tell the user when OpenBLAS runs `core`'s kernels (openblas_get_corename()) on a CPU
// with these features, or empty: kernels older than AVX2 on a CPU with AVX2 and FMA, and no
// OPENBLAS_CORETYPE set (`coretype_setting`, null when unset). The advice names the core type
// to set: SkylakeX with AVX-512 (F, VL, BW, DQ), else Haswell.
std::string blas_kernel_advice(const std::string& core, bool avx2_and_fma, bool avx512,
                               const char* coretype_setting);

// Warns once per process with blas_kernel_advice for this CPU and this OpenBLAS (stderr, as
// warn_once). Called before a GEMM; costs a flag's read after the first call.
void check_blas_kernels();

}  // namespace tapegrad::detail
