// AVX2 quantized panels: the int8 dot products by maddubs (see matmul_quant_panels_x86.h).
#define PTN_PANEL_DOT 0
#define PTN_PANEL_ENTRY qpanel_range_avx2
#include "kernels/matmul_quant_panels_x86.h"
