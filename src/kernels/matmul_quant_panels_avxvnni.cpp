// AVX2 + AVX-VNNI quantized panels: VEX vpdpbusd on ymm (see matmul_quant_panels_x86.h).
#define PTN_PANEL_DOT 1
#define PTN_PANEL_ENTRY qpanel_range_avxvnni
#include "kernels/matmul_quant_panels_x86.h"
