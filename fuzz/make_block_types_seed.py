# Micro llama GGUFs (1 layer, n_embd 256) whose matrices use the block types Q2_K, Q3_K, IQ4_XS
# and MXFP4 (llama-micro-kquants-mxfp4.gguf), TQ1_0 and TQ2_0 (llama-micro-ternary.gguf), and the
# IQ1/IQ2/IQ3 codebook types (llama-micro-iq.gguf), random blocks with small finite scales: fuzz
# seeds that load all the way.
import struct, random
random.seed(11)
def s(x): b=x.encode(); return struct.pack('<Q',len(b))+b
kv=[]
def kv_u32(k,v): kv.append(s(k)+struct.pack('<II',4,v))
def kv_f32(k,v): kv.append(s(k)+struct.pack('<If',6,v))
def kv_str(k,v): kv.append(s(k)+struct.pack('<I',8)+s(v))
def kv_arr(k,et,items,pack): kv.append(s(k)+struct.pack('<IIQ',9,et,len(items))+b''.join(pack(i) for i in items))
V=260
toks=['<unk>','<s>','</s>']+['<0x%02X>'%i for i in range(256)]+['▁a']
kv_str('general.architecture','llama'); kv_str('general.name','ptn-fuzz-seed')
kv_u32('llama.context_length',64); kv_u32('llama.embedding_length',256); kv_u32('llama.block_count',1)
kv_u32('llama.feed_forward_length',32); kv_u32('llama.attention.head_count',2); kv_u32('llama.attention.head_count_kv',1)
kv_u32('llama.attention.key_length',16); kv_u32('llama.attention.value_length',16); kv_u32('llama.vocab_size',V)
kv_f32('llama.attention.layer_norm_rms_epsilon',1e-5); kv_f32('llama.rope.freq_base',10000.0); kv_u32('llama.rope.dimension_count',16)
kv_arr('tokenizer.ggml.tokens',8,toks,s)
kv_arr('tokenizer.ggml.scores',6,[0.0]*V,lambda x: struct.pack('<f',x))
kv_arr('tokenizer.ggml.token_type',5,[2,3,3]+[6]*256+[1],lambda x: struct.pack('<i',x))
kv_str('tokenizer.ggml.model','llama'); kv_u32('tokenizer.ggml.unknown_token_id',0)
kv_u32('tokenizer.ggml.bos_token_id',1); kv_u32('tokenizer.ggml.eos_token_id',2)
# (name, dims fastest first, type, block elems, block bytes, offsets of f16 scales in a block)
F32=(0,1,4,[]); Q2K=(10,256,84,[80,82]); Q3K=(11,256,110,[108]); IQ4XS=(23,256,136,[0]); MX=(39,32,17,[])
TQ1=(34,256,54,[52]); TQ2=(35,256,66,[64])
IQ2XXS=(16,256,66,[0]); IQ2XS=(17,256,74,[0]); IQ3XXS=(18,256,98,[0]); IQ1S=(19,256,50,[0])
IQ3S=(21,256,110,[0]); IQ2S=(22,256,82,[0]); IQ1M=(29,256,56,[])
def write(tensors, file):
    kvs=kv
    head=b'GGUF'+struct.pack('<IQQ',3,len(tensors),len(kvs))+b''.join(kvs)
    data=b''; infos=b''
    for name,dims,(t,be,bb,halfs) in tensors:
        n=1
        for d in dims: n*=d
        if t==0: blob=b''.join(struct.pack('<f',1.0) for _ in range(n))
        else:
            blob=bytearray()
            for _ in range(n//be):
                blk=bytearray(random.getrandbits(8) for _ in range(bb))
                for o in halfs: blk[o:o+2]=struct.pack('<e',0.01)
                if t==39: blk[0]=120  # E8M0 exponent: scale 2^-8
                if t==29:  # IQ1_M: d is the top nibbles of the 4 scale words; 0x2000 = 2^-7
                    for w,nib in enumerate((0,0,0,2)): blk[49+2*w]=(blk[49+2*w]&15)|(nib<<4)
                blob+=blk
            blob=bytes(blob)
        infos+=s(name)+struct.pack('<I',len(dims))+b''.join(struct.pack('<Q',d) for d in dims)+struct.pack('<IQ',t,len(data))
        data+=blob+b'\0'*((-len(blob))%32)
    out=head+infos; out+=b'\0'*((-len(out))%32)
    import os
    open(os.path.join(os.path.dirname(os.path.abspath(__file__)), 'corpus', 'gguf', file), 'wb').write(out+data)
    print(file, len(out+data))
tensors=[('token_embd.weight',[256,V],MX),('output_norm.weight',[256],F32),
 ('blk.0.attn_norm.weight',[256],F32),('blk.0.attn_q.weight',[256,32],Q2K),('blk.0.attn_k.weight',[256,16],Q3K),
 ('blk.0.attn_v.weight',[256,16],IQ4XS),('blk.0.attn_output.weight',[32,256],MX),('blk.0.ffn_norm.weight',[256],F32),
 ('blk.0.ffn_gate.weight',[256,32],Q3K),('blk.0.ffn_up.weight',[256,32],Q2K),('blk.0.ffn_down.weight',[32,256],MX)]
write(tensors, 'llama-micro-kquants-mxfp4.gguf')
random.seed(12)
write([('token_embd.weight',[256,V],TQ2),('output_norm.weight',[256],F32),
 ('blk.0.attn_norm.weight',[256],F32),('blk.0.attn_q.weight',[256,32],TQ1),('blk.0.attn_k.weight',[256,16],TQ2),
 ('blk.0.attn_v.weight',[256,16],TQ1),('blk.0.attn_output.weight',[32,256],MX),('blk.0.ffn_norm.weight',[256],F32),
 ('blk.0.ffn_gate.weight',[256,32],TQ1),('blk.0.ffn_up.weight',[256,32],TQ2),('blk.0.ffn_down.weight',[32,256],MX)],
 'llama-micro-ternary.gguf')
random.seed(13)
write([('token_embd.weight',[256,V],IQ2S),('output.weight',[256,V],IQ3S),('output_norm.weight',[256],F32),
 ('blk.0.attn_norm.weight',[256],F32),('blk.0.attn_q.weight',[256,32],IQ1S),('blk.0.attn_k.weight',[256,16],IQ1M),
 ('blk.0.attn_v.weight',[256,16],IQ2XXS),('blk.0.attn_output.weight',[32,256],MX),('blk.0.ffn_norm.weight',[256],F32),
 ('blk.0.ffn_gate.weight',[256,32],IQ2XS),('blk.0.ffn_up.weight',[256,32],IQ3XXS),('blk.0.ffn_down.weight',[32,256],MX)],
 'llama-micro-iq.gguf')
