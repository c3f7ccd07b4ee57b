// The AVX-VNNI quantized panels with AVX512-VNNI's EVEX vpdpbusd on ymm (AVX512VL), the same
// computation as the VEX form: the avx2-vnni level on CPUs with AVX-512 but no AVX-VNNI, which
// is how that level's kernels are tested there (see matmul_quant_panels_x86.h). Compiled with
// the AVX-512 flags, so it runs only where cpu_features() reports AVX512VL and AVX512-VNNI.
#define PTN_PANEL_DOT 2
#define PTN_PANEL_ENTRY qpanel_range_vnni_evex
#include "kernels/matmul_quant_panels_x86.h"
