#include "kvcache/reference_cache.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"
#include "kvcache/kv_common.h"

namespace ptn {

// The state of a prepared step: where each sequence of the batch started, how many rows it
// adds, and which layers have been written. Writes go straight into the sequence's arrays
// (beyond its committed length); rollback truncates them back.
struct SequenceReferenceCache::Pending {
  std::map<SeqId, int64_t> old_length;
  std::map<SeqId, int64_t> n_new;
  std::vector<bool> layer_done;
};

SequenceReferenceCache::SequenceReferenceCache(CacheSpec spec, CacheOptions options)
    : KVCache(std::move(spec), options) {
  kv::validate_spec(spec_, options_, name());
  const int64_t m = options_.max_step_tokens;
  for (const LayerCacheSpec& L : spec_.layers) {
    token_bytes_ += static_cast<size_t>(L.n_kv_heads * (L.head_dim_k + L.head_dim_v)) * sizeof(float);
    Store st = Store::Dense;
    if (m > 0 && L.kind == AttnKind::Window) st = Store::Ring;
    if (m > 0 && L.kind == AttnKind::Chunk) st = Store::ChunkTail;
    store_.push_back(st);
    ring_.push_back(st == Store::Ring ? L.span + m - 1 : 0);
  }
  capacity_tokens_ = options_.capacity_tokens;
  if (capacity_tokens_ == 0 && options_.capacity_bytes > 0) {
    capacity_tokens_ = static_cast<int64_t>(options_.capacity_bytes / token_bytes_);
    if (capacity_tokens_ == 0)
      fail(ErrorKind::InvalidArgument, name(),
           "capacity_bytes " + std::to_string(options_.capacity_bytes) + " is less than one token (" +
               std::to_string(token_bytes_) + " bytes)");
  }
}

SequenceReferenceCache::Sequence& SequenceReferenceCache::seq_or_throw(SeqId seq, const char* what) {
  return kv::find_sequence(seqs_, seq, name(), what);
}
const SequenceReferenceCache::Sequence& SequenceReferenceCache::seq_or_throw(SeqId seq, const char* what) const {
  return kv::find_sequence(seqs_, seq, name(), what);
}

void SequenceReferenceCache::check_not_in_step(SeqId seq, const char* what) const {
  if (active_ && active_->old_length.count(seq)) kv::fail_sequence_in_step(name(), what, seq);
}

int64_t SequenceReferenceCache::total_tokens() const {
  int64_t n = 0;
  for (const auto& [id, s] : seqs_) n += s.length;
  return n;
}

int64_t SequenceReferenceCache::row_of(size_t layer, const Layer& l, int64_t pos) const {
  switch (store_[layer]) {
    case Store::Ring: return pos % ring_[layer];
    case Store::ChunkTail: return pos - l.base;
    case Store::Dense: break;
  }
  return pos;
}

int64_t SequenceReferenceCache::layer_floor(size_t layer, const Layer& l) const {
  switch (store_[layer]) {
    // Length n needs positions n - W + 1 .. n - 1: the first n with n - W + 1 >= base.
    case Store::Ring: return l.base == 0 ? 0 : l.base + spec_.layers[layer].span - 1;
    case Store::ChunkTail: return l.base;  // a chunk start: length base needs nothing below it
    case Store::Dense: break;
  }
  return 0;
}

int64_t SequenceReferenceCache::rewind_floor(SeqId seq) const {
  const Sequence& s = seq_or_throw(seq, "rewind_floor");
  int64_t floor = 0;
  for (size_t l = 0; l < s.layers.size(); ++l) floor = std::max(floor, layer_floor(l, s.layers[l]));
  return std::min(floor, s.length);
}

void SequenceReferenceCache::add_sequence(SeqId seq) {
  kv::check_no_sequence(seqs_, seq, name(), "add_sequence: sequence");
  Sequence s;
  s.layers.resize(spec_.layers.size());
  seqs_.emplace(seq, std::move(s));
}

void SequenceReferenceCache::fork(SeqId src, SeqId dst) {
  const Sequence& s = seq_or_throw(src, "fork");
  check_not_in_step(src, "fork");
  kv::check_no_sequence(seqs_, dst, name(), "fork: destination sequence");
  if (capacity_tokens_ > 0 && total_tokens() + s.length > capacity_tokens_)
    fail(ErrorKind::Capacity, name(),
         "fork of sequence " + std::to_string(src) + " needs " + std::to_string(s.length) +
             " more tokens than the capacity of " + std::to_string(capacity_tokens_) + " allows");
  seqs_.emplace(dst, s);  // a full copy: the reference shares nothing
}

void SequenceReferenceCache::clear(SeqId seq) {
  seq_or_throw(seq, "clear");
  check_not_in_step(seq, "clear");
  seqs_.erase(seq);
}

void SequenceReferenceCache::rewind(SeqId seq, int64_t length) {
  Sequence& s = seq_or_throw(seq, "rewind");
  check_not_in_step(seq, "rewind");
  kv::check_rewind_length(name(), seq, length, s.length);
  const int64_t floor = rewind_floor(seq);
  if (length < floor)
    fail(ErrorKind::InvalidArgument, name(),
         "rewind: sequence " + std::to_string(seq) + " cannot go back to length " + std::to_string(length) +
             ": its window/chunk layers no longer hold the positions that length needs (rewind_floor " +
             std::to_string(floor) + ")");
  for (size_t l = 0; l < s.layers.size(); ++l) {
    if (store_[l] == Store::Ring) continue;  // slots past the length are simply not read
    const LayerCacheSpec& L = spec_.layers[l];
    const int64_t rows = length - s.layers[l].base;
    s.layers[l].k.resize(static_cast<size_t>(rows * L.n_kv_heads * L.head_dim_k));
    s.layers[l].v.resize(static_cast<size_t>(rows * L.n_kv_heads * L.head_dim_v));
  }
  s.length = length;
}

bool SequenceReferenceCache::has_sequence(SeqId seq) const { return seqs_.count(seq) != 0; }

int64_t SequenceReferenceCache::length(SeqId seq) const { return seq_or_throw(seq, "length").length; }

bool SequenceReferenceCache::can_extend(SeqId seq, int64_t n_new) const {
  const Sequence& s = seq_or_throw(seq, "can_extend");
  if (!kv::within_extend_limits(*this, s.length, n_new)) return false;
  return capacity_tokens_ == 0 || total_tokens() + n_new <= capacity_tokens_;
}

size_t SequenceReferenceCache::bytes_used() const {
  size_t n = 0;
  for (const auto& [id, s] : seqs_)
    for (size_t l = 0; l < s.layers.size(); ++l) {
      const LayerCacheSpec& L = spec_.layers[l];
      const int64_t held = s.length - (store_[l] == Store::Dense ? 0 : s.layers[l].base);  // positions held
      n += static_cast<size_t>(held * L.n_kv_heads * (L.head_dim_k + L.head_dim_v)) * sizeof(float);
    }
  return n;
}

size_t SequenceReferenceCache::bytes_reserved() const {
  size_t n = 0;
  for (const auto& [id, s] : seqs_)
    for (const Layer& l : s.layers) n += (l.k.capacity() + l.v.capacity()) * sizeof(float);
  return n;
}

std::shared_ptr<void> SequenceReferenceCache::do_prepare(const StepBatch& batch) {
  if (active_) fail(ErrorKind::InvalidArgument, name(), "prepare: another step is prepared and not committed");
  auto p = std::make_shared<Pending>();
  for (const StepRow& r : batch.rows) {
    p->old_length.emplace(r.seq, seqs_.at(r.seq).length);
    ++p->n_new[r.seq];
  }
  const int64_t need = static_cast<int64_t>(batch.rows.size());
  if (capacity_tokens_ > 0 && total_tokens() + need > capacity_tokens_)
    fail(ErrorKind::Capacity, name(),
         "the step adds " + std::to_string(need) + " tokens to the " + std::to_string(total_tokens()) +
             " held, beyond the capacity of " + std::to_string(capacity_tokens_) + " tokens");
  p->layer_done.assign(spec_.layers.size(), false);
  active_ = p.get();
  return p;
}

void SequenceReferenceCache::update_and_attend(StepTxn& txn, int64_t layer, const float* q, const float* k,
                                               const float* v, int64_t n_q_heads, const AttentionParams& params,
                                               float* out) {
  auto* p = static_cast<Pending*>(txn_state(txn));
  const auto& rows = txn.batch().rows;
  const int64_t T = static_cast<int64_t>(rows.size());
  const LayerCacheSpec& L =
      kv::check_attend_args(*this, txn.active() && p != nullptr && p == active_, layer, n_q_heads, T, q, k, v, out, params.sinks);
  const int64_t hkv = L.n_kv_heads, dk = L.head_dim_k, dv = L.head_dim_v;
  const size_t li = static_cast<size_t>(layer);

  // 1. Store. Dense / ChunkTail: truncate to the committed length (a repeated call overwrites)
  //    and append rows. Ring: write each row at its slot; the position it replaces is gone.
  const Store mode = store_[li];
  if (mode != Store::Ring)
    for (const auto& [id, old] : p->old_length) {
      Layer& dst = seqs_.at(id).layers[li];
      dst.k.resize(static_cast<size_t>((old - dst.base) * hkv * dk));
      dst.v.resize(static_cast<size_t>((old - dst.base) * hkv * dv));
    }
  for (int64_t t = 0; t < T; ++t) {
    Layer& dst = seqs_.at(rows[static_cast<size_t>(t)].seq).layers[li];
    if (mode == Store::Ring) {
      const int64_t pos = rows[static_cast<size_t>(t)].pos, ring = ring_[li], slot = pos % ring;
      if (dst.k.size() < static_cast<size_t>((slot + 1) * hkv * dk)) {
        dst.k.resize(static_cast<size_t>((slot + 1) * hkv * dk));
        dst.v.resize(static_cast<size_t>((slot + 1) * hkv * dv));
      }
      std::copy(k + t * hkv * dk, k + (t + 1) * hkv * dk, dst.k.begin() + slot * hkv * dk);
      std::copy(v + t * hkv * dv, v + (t + 1) * hkv * dv, dst.v.begin() + slot * hkv * dv);
      dst.base = std::max(dst.base, pos - ring + 1);
    } else {
      dst.k.insert(dst.k.end(), k + t * hkv * dk, k + (t + 1) * hkv * dk);
      dst.v.insert(dst.v.end(), v + t * hkv * dv, v + (t + 1) * hkv * dv);
    }
  }
  p->layer_done[li] = true;

  // 2. Attend: row t at position p sees positions first_visible(p)..p of its sequence.
  const int64_t group = n_q_heads / hkv;
  std::vector<double> w;
  for (int64_t t = 0; t < T; ++t) {
    const StepRow& r = rows[static_cast<size_t>(t)];
    const Layer& src = seqs_.at(r.seq).layers[li];
    const int64_t pos = r.pos;
    const int64_t lo = kv::first_visible(L, pos);
    if (mode != Store::Dense && lo < src.base)
      fail(ErrorKind::Internal, name(),
           "row " + std::to_string(t) + " at position " + std::to_string(pos) + " needs position " +
               std::to_string(lo) + " of layer " + std::to_string(layer) + ", which is no longer held");
    for (int64_t h = 0; h < n_q_heads; ++h) {
      const int64_t kh = h / group;
      const float* qh = q + (t * n_q_heads + h) * dk;
      w.assign(static_cast<size_t>(pos - lo + 1), 0.0);
      double mx = -std::numeric_limits<double>::infinity();
      for (int64_t j = lo; j <= pos; ++j) {
        const float* kj = src.k.data() + (row_of(li, src, j) * hkv + kh) * dk;
        double dot = 0;
        for (int64_t d = 0; d < dk; ++d) dot += static_cast<double>(qh[d]) * kj[d];
        double s = dot * params.scale;
        if (params.softcap > 0) s = params.softcap * std::tanh(s / params.softcap);
        w[static_cast<size_t>(j - lo)] = s;
        mx = std::max(mx, s);
      }
      double sum = 0;
      if (params.sinks != nullptr) {  // one more score, with a zero value row
        const double sink = params.sinks[h];
        mx = std::max(mx, sink);
        sum = std::exp(sink - mx);
      }
      for (double& x : w) sum += (x = std::exp(x - mx));
      float* oh = out + (t * n_q_heads + h) * dv;
      for (int64_t d = 0; d < dv; ++d) {
        double acc = 0;
        for (int64_t j = lo; j <= pos; ++j)
          acc += w[static_cast<size_t>(j - lo)] * src.v[(row_of(li, src, j) * hkv + kh) * dv + d];
        oh[d] = static_cast<float>(acc / sum);
      }
    }
  }
}

void SequenceReferenceCache::do_commit(const StepBatch& batch, void* state) {
  auto* p = static_cast<Pending*>(state);
  kv::check_all_layers_updated(*this, batch, p->layer_done);
  for (const auto& [id, n] : p->n_new) {
    Sequence& s = seqs_.at(id);
    s.length += n;
    // ChunkTail layers drop the chunks the next query (at position length) no longer sees.
    for (size_t l = 0; l < s.layers.size(); ++l) {
      if (store_[l] != Store::ChunkTail) continue;
      const LayerCacheSpec& L = spec_.layers[l];
      Layer& dst = s.layers[l];
      const int64_t drop = kv::first_visible(L, s.length) - dst.base;  // whole chunks
      dst.k.erase(dst.k.begin(), dst.k.begin() + drop * L.n_kv_heads * L.head_dim_k);
      dst.v.erase(dst.v.begin(), dst.v.begin() + drop * L.n_kv_heads * L.head_dim_v);
      dst.base += drop;
    }
  }
  active_ = nullptr;
}

void SequenceReferenceCache::do_rollback(const StepBatch& batch, void* state) {
  auto* p = static_cast<Pending*>(state);
  if (p == nullptr) return;
  for (const auto& [id, old] : p->old_length) {
    auto it = seqs_.find(id);
    if (it == seqs_.end()) continue;
    for (size_t l = 0; l < it->second.layers.size(); ++l) {
      if (store_[l] == Store::Ring) continue;  // written slots lie past the length: not read
      const LayerCacheSpec& L = spec_.layers[l];
      Layer& dst = it->second.layers[l];
      dst.k.resize(static_cast<size_t>((old - dst.base) * L.n_kv_heads * L.head_dim_k));
      dst.v.resize(static_cast<size_t>((old - dst.base) * L.n_kv_heads * L.head_dim_v));
    }
  }
  if (active_ == p) active_ = nullptr;
}

}  // namespace ptn
