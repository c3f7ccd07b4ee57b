// Fixture generator (not built by ptn): runs ggml's reference quantizers and dequantizers
// (ggml-quants.c, MIT, ggml-org/ggml commit d99724f2b141fed9e1a9f402213506c081433465) on
// deterministic data. Build and run from a folder holding token_embd.f32 and out/:
//   gcc -O2 -std=gnu11 -I<ggml>/include -I<ggml>/src make_fixtures.c <ggml>/src/ggml-quants.c -lm
// (x86-64 baseline flags, no -march: as llama.cpp builds ggml-base). token_embd.f32 is the raw
// f32 data of token_embd.weight in models/stories260K/stories260K.gguf (offset 14176, 32768 floats);
// all_weights.f32 is every tensor of that file whose size is a multiple of 256, in name order.
// The generators must stay identical to synthetic_input() / random_blocks() in
// tests/core/test_quant.cpp.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <stdint.h>
#include "ggml-quants.h"
// Stubs for the symbols ggml-quants.c links against but the functions used here never call.
void ggml_abort(const char*f,int l,const char*fmt,...){fprintf(stderr,"abort %s:%d\n",f,l);exit(1);}
size_t ggml_row_size(enum ggml_type t,int64_t n){return 0;}
const char* ggml_type_name(enum ggml_type t){return "?";}
size_t ggml_type_size(enum ggml_type t){return 0;}

// llama-quantize's entry points for the IQ4 types (ggml_quantize_chunk without an importance
// matrix), as row functions.
static void q_iq4_nl(const float*x,void*y,int64_t n){quantize_iq4_nl(x,y,1,n,NULL);}
static void q_iq4_xs(const float*x,void*y,int64_t n){quantize_iq4_xs(x,y,1,n,NULL);}
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
  DO("q4_1",quantize_row_q4_1_ref,32,20)
  DO("q5_1",quantize_row_q5_1_ref,32,24)
  DO("q2_k",quantize_row_q2_K_ref,256,84)
  DO("q3_k",quantize_row_q3_K_ref,256,110)
  DO("mxfp4",quantize_row_mxfp4_ref,32,17)
  DO("tq1_0",quantize_row_tq1_0_ref,256,54)
  DO("tq2_0",quantize_row_tq2_0_ref,256,66)
  DO("iq4_nl",q_iq4_nl,32,18)
  DO("iq4_xs",q_iq4_xs,256,136)
  free(buf);
}
// FNV-1a 64 of a byte range.
static uint64_t fnv1a(const void*p,size_t n){const uint8_t*b=p;uint64_t h=0xcbf29ce484222325ull;for(size_t i=0;i<n;++i){h^=b[i];h*=0x100000001b3ull;}return h;}
// Random blocks (xorshift32 bytes) with their f16 scales forced finite (exponent 31 -> 15) and
// Q8_K's f32 d forced finite (exponent 255 -> 127): dequantized by ggml, hashed.
static void random_blocks(uint8_t*dst,int nblocks,int bb,uint32_t seed,const int*half_offs,int nhalf,int f32_off){
  st=seed; for(int i=0;i<nblocks*bb;++i) dst[i]=(uint8_t)(xs32()>>24);
  for(int b=0;b<nblocks;++b){uint8_t*blk=dst+b*bb;
    for(int k=0;k<nhalf;++k){uint16_t h;memcpy(&h,blk+half_offs[k],2); if(((h>>10)&31)==31) h&=(uint16_t)~0x4000u; memcpy(blk+half_offs[k],&h,2);}
    if(f32_off>=0){uint32_t u;memcpy(&u,blk+f32_off,4); if(((u>>23)&255)==255) u&=~0x40000000u; memcpy(blk+f32_off,&u,4);} }
}
static void dequant_hashes(void){
  FILE*f=fopen("out/dequant_fnv1a.txt","w");
  static uint8_t q[64*292]; static float y[64*256];
  const int o0[1]={0}, ok[2]={0,2}, o6[1]={208};  /* ok: also Q4_1 / Q5_1's d and m */
  const int o2[2]={80,82}, o3[1]={108};  /* Q2_K's d and dmin, Q3_K's d */
  const int ot1[1]={52}, ot2[1]={64};  /* TQ1_0's and TQ2_0's d */
#define H(T,fn,bs,bb,offs,nh,f32o,seed) random_blocks(q,64,bb,seed,offs,nh,f32o); fn((const void*)q,y,64*bs); fprintf(f,"%s %016llx\n",T,(unsigned long long)fnv1a(y,sizeof(float)*64*bs));
  H("q4_0",dequantize_row_q4_0,32,18,o0,1,-1,101u)
  H("q5_0",dequantize_row_q5_0,32,22,o0,1,-1,102u)
  H("q8_0",dequantize_row_q8_0,32,34,o0,1,-1,103u)
  H("q4_k",dequantize_row_q4_K,256,144,ok,2,-1,104u)
  H("q5_k",dequantize_row_q5_K,256,176,ok,2,-1,105u)
  H("q6_k",dequantize_row_q6_K,256,210,o6,1,-1,106u)
  H("q8_k",dequantize_row_q8_K,256,292,o0,0,0,107u)
  H("q4_1",dequantize_row_q4_1,32,20,ok,2,-1,108u)
  H("q5_1",dequantize_row_q5_1,32,24,ok,2,-1,109u)
  H("iq4_nl",dequantize_row_iq4_nl,32,18,o0,1,-1,110u)
  H("q2_k",dequantize_row_q2_K,256,84,o2,2,-1,111u)
  H("q3_k",dequantize_row_q3_K,256,110,o3,1,-1,112u)
  H("iq4_xs",dequantize_row_iq4_xs,256,136,o0,1,-1,113u)
  H("mxfp4",dequantize_row_mxfp4,32,17,o0,0,-1,114u)
  H("tq1_0",dequantize_row_tq1_0,256,54,ot1,1,-1,115u)
  H("tq2_0",dequantize_row_tq2_0,256,66,ot2,1,-1,116u)
  H("iq3_xxs",dequantize_row_iq3_xxs,256,98,o0,1,-1,117u)
  H("iq3_s",dequantize_row_iq3_s,256,110,o0,1,-1,118u)
  H("iq2_xxs",dequantize_row_iq2_xxs,256,66,o0,1,-1,119u)
  H("iq2_xs",dequantize_row_iq2_xs,256,74,o0,1,-1,120u)
  H("iq2_s",dequantize_row_iq2_s,256,82,o0,1,-1,121u)
  H("iq1_s",dequantize_row_iq1_s,256,50,o0,1,-1,122u)
  /* IQ1_M has no f16 at a fixed place: its d is the top nibbles of the four scale words; bit 6
     of byte 55 (d's exponent bit 14) is cleared so that d is finite. */
  random_blocks(q,64,56,123u,o0,0,-1); for(int b=0;b<64;++b) q[56*b+55]&=(uint8_t)~0x40u;
  dequantize_row_iq1_m((const void*)q,y,64*256); fprintf(f,"iq1_m %016llx\n",(unsigned long long)fnv1a(y,sizeof(float)*64*256));
  fclose(f);
}
// Every stories260K tensor whose size is a multiple of 256, concatenated in name order: FNV-1a of
// the bytes each reference quantizer writes.
static void model_hashes(void){
  FILE*in=fopen("all_weights.f32","rb"); if(!in) exit(1);
  fseek(in,0,SEEK_END); long nbytes=ftell(in); fseek(in,0,SEEK_SET);
  int64_t n=nbytes/4; float*x=malloc(nbytes); if(fread(x,4,n,in)!=(size_t)n) exit(1); fclose(in);
  void*buf=calloc(1,n*2+4096);
  FILE*f=fopen("out/model_fnv1a.txt","w");
#define M(T,fn,bs,bb) memset(buf,0,n*2+4096); fn(x,buf,n); fprintf(f,"%s %016llx\n",T,(unsigned long long)fnv1a(buf,(size_t)(n/bs)*bb));
  M("q4_0",quantize_row_q4_0_ref,32,18)
  M("q5_0",quantize_row_q5_0_ref,32,22)
  M("q8_0",quantize_row_q8_0_ref,32,34)
  M("q4_k",quantize_row_q4_K_ref,256,144)
  M("q5_k",quantize_row_q5_K_ref,256,176)
  M("q6_k",quantize_row_q6_K_ref,256,210)
  M("q8_k",quantize_row_q8_K_ref,256,292)
  M("q4_1",quantize_row_q4_1_ref,32,20)
  M("q5_1",quantize_row_q5_1_ref,32,24)
  M("q2_k",quantize_row_q2_K_ref,256,84)
  M("q3_k",quantize_row_q3_K_ref,256,110)
  M("mxfp4",quantize_row_mxfp4_ref,32,17)
  M("tq1_0",quantize_row_tq1_0_ref,256,54)
  M("tq2_0",quantize_row_tq2_0_ref,256,66)
  M("iq4_nl",q_iq4_nl,32,18)
  M("iq4_xs",q_iq4_xs,256,136)
  fclose(f); free(buf); free(x);
}
int main(void){
  dequant_hashes();
  model_hashes();
  static float x[64*256]; make_synthetic(x);
  dump("out/synthetic_input.f32",x,sizeof x);
  run("synthetic",x,64*256);
  static float e[32768]; FILE*f=fopen("token_embd.f32","rb"); if(fread(e,4,32768,f)!=32768) return 1; fclose(f);
  run("token_embd",e,32768);
  return 0;
}
