// Fixture generator (not built by ptn): runs ggml's reference quantizers (ggml-quants.c, MIT,
// ggml-org/ggml commit d99724f2b141fed9e1a9f402213506c081433465) on deterministic data.
// Build: gcc -O2 -std=gnu11 -I<ggml>/include -I<ggml>/src make_fixtures.c <ggml>/src/ggml-quants.c -lm
// (x86-64 baseline flags, no -march: as llama.cpp builds ggml-base). token_embd.f32 is the raw
// f32 data of token_embd.weight in models/stories260K/stories260K.gguf (offset 14176, 32768 floats).
// The synthetic generator must stay identical to synthetic_input() in tests/core/test_quant.cpp.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <stdint.h>
#include "ggml-quants.h"
// Stubs for the symbols ggml-quants.c links against but the _ref quantizers never call.
void ggml_abort(const char*f,int l,const char*fmt,...){fprintf(stderr,"abort %s:%d\n",f,l);exit(1);}
size_t ggml_row_size(enum ggml_type t,int64_t n){return 0;}
const char* ggml_type_name(enum ggml_type t){return "?";}
size_t ggml_type_size(enum ggml_type t){return 0;}

static uint32_t st;
static uint32_t xs32(void){uint32_t x=st;x^=x<<13;x^=x>>17;x^=x<<5;return st=x;}
static float unif(void){return (float)(xs32()>>8)*(1.0f/16777216.0f);}
static float gauss(void){float s=0.0f;for(int i=0;i<12;++i)s+=unif();return s-6.0f;}
static void make_synthetic(float*x){
  static const float scales[5]={1.0f,0.02f,30.0f,0.001f,0.1f};
  st=0x12345678u;
  for(int r=0;r<64;++r){float*row=x+r*256;int kind=r%8;
    for(int i=0;i<256;++i){float g=gauss();float v;
      if(r==8) v=0.0f;
      else if(r==16) v=0.5f;
      else if(r==24) v=(i<32)?1e-20f*g:g;
      else if(r==32) v=-(fabsf(g)+0.25f);
      else if(r==40) v=g*20000.0f;
      else switch(kind){
        case 5: v=(i%37==0)?20.0f*g:g; break;
        case 6: v=fabsf(g)+0.25f; break;
        case 7: v=(i/32==3)?0.0f:((i%5==0)?g:0.0f); break;
        default: v=g*scales[kind]; break; }
      row[i]=v;}}
}
static void dump(const char*name,const void*p,size_t n){FILE*f=fopen(name,"wb");fwrite(p,1,n,f);fclose(f);}
static void run(const char*prefix,const float*x,int64_t n){
  char nm[256]; void*buf=calloc(1,n*2+4096);
#define DO(T,fn,bs,bb) memset(buf,0,n*2+4096); fn(x,buf,n); snprintf(nm,sizeof nm,"out/%s_%s.bin",prefix,T); dump(nm,buf,(size_t)(n/bs)*bb);
  DO("q4_0",quantize_row_q4_0_ref,32,18)
  DO("q5_0",quantize_row_q5_0_ref,32,22)
  DO("q8_0",quantize_row_q8_0_ref,32,34)
  DO("q4_k",quantize_row_q4_K_ref,256,144)
  DO("q5_k",quantize_row_q5_K_ref,256,176)
  DO("q6_k",quantize_row_q6_K_ref,256,210)
  DO("q8_k",quantize_row_q8_K_ref,256,292)
  free(buf);
}
int main(void){
  static float x[64*256]; make_synthetic(x);
  dump("out/synthetic_input.f32",x,sizeof x);
  run("synthetic",x,64*256);
  static float e[32768]; FILE*f=fopen("token_embd.f32","rb"); if(fread(e,4,32768,f)!=32768) return 1; fclose(f);
  run("token_embd",e,32768);
  return 0;
}
