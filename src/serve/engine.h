// The serving engine: one thread owns the executor and the paged KV cache and runs a
// continuous-batching loop; HTTP threads submit requests and read their results from a
// per-request Channel.
//
// Each iteration packs one decode row for every running sequence whose prompt is done, then
// prompt rows of the others (chunked prefill), within max_batch_tokens rows, runs one
// Executor::step, and samples one token for every sequence whose rows are all computed.
// Prompts reuse cached prefix blocks (KVCache::reuse_prefix). A request for n choices computes
// its prompt once: when the prompt is done its sequence is forked n - 1 times (the children share
// its KV blocks; a shared partial block is copied on the first write) and every choice samples
// its first token from the same logits. Admission waits while the cache
// cannot hold a new prompt; when a step does not fit, the youngest running sequence is
// preempted (its blocks freed, its tokens recomputed when it is admitted again).
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/threadpool.h"
#include "generate/generator.h"
#include "generate/lookup_draft.h"
#include "kvcache/kv_record.h"
#include "runtime/executor.h"
#include "sampling/logprobs.h"
#include "sampling/sampling_params.h"
#include "serve/metrics.h"
#include "tokenizer/tokenizer.h"

namespace ptn::grammar {
struct Grammar;
class TokenTrie;
}  // namespace ptn::grammar

namespace ptn::serve {

using Clock = std::chrono::steady_clock;

// A validated generation request (the HTTP layer parses and checks the fields).
struct GenRequest {
  std::vector<int32_t> prompt;    // token ids, 1..context-1 of them
  int64_t max_tokens = 16;        // >= 1, prompt + max_tokens <= context
  SamplingParams sampling;        // already validated against the vocabulary
  std::vector<std::string> stop;  // up to 4 non-empty strings, cut from the output
  int logprobs = -1;              // -1: none; else the number of top alternatives (0..20)
  std::shared_ptr<const grammar::Grammar> grammar;  // the output must follow it (nullptr: free)
  int n = 1;                      // choices sampled from the one prompt (1..max_running); choice i uses seed + i
  int slot = -1;                  // llama-server's id_slot: the slot it runs in (-1: the lowest idle one)
  bool keep_special = false;      // control tokens stay in the text (harmony replies are parsed by them)
  Clock::time_point arrival = Clock::now();

  // The generation it asks for; the stop rules are those of every front end (gen::Generator).
  gen::GenerationParams params() const {
    gen::GenerationParams p;
    p.sampling = sampling;
    p.stop.max_tokens = max_tokens;
    p.stop.stop = stop;
    p.logprobs = logprobs;
    p.keep_special = keep_special;
    return p;
  }
};

// How an embedding pools the final hidden states of its tokens.
enum class Pooling { Last, Mean, Cls };

// A validated embedding request: each input is computed as a prompt (prefill only, no sampling,
// its KV blocks freed when it is done) and pooled; the HTTP layer normalizes.
struct EmbedRequest {
  std::vector<std::vector<int32_t>> inputs;  // 1.. of them, each 1..context token ids
  Pooling pooling = Pooling::Last;
  Clock::time_point arrival = Clock::now();
};

struct TokenOut {
  int32_t id = 0;
  float logprob = 0.0f;            // when logprobs were requested
  std::vector<TokenLogprob> top;   // the requested number of alternatives
};

struct Event {
  enum class Kind { Delta, Done, Error, Embedding };
  Kind kind = Kind::Delta;
  int index = 0;                // the choice (0..n-1), or the embedding input, the event belongs to
  std::vector<float> embedding; // Embedding: the pooled hidden state (not normalized), [hidden]
  std::string text;             // Delta: new output text (stop strings held back and cut)
  std::vector<TokenOut> tokens; // Delta: the tokens generated since the last Delta
  // Done:
  std::string finish_reason;    // "stop" or "length"
  std::string stop_string;      // the stop string that ended the text ("" if none did)
  int64_t prompt_tokens = 0, completion_tokens = 0, cached_tokens = 0;
  int64_t drafted_tokens = 0, accepted_tokens = 0;  // speculative decoding (llama-server's draft_n, draft_n_accepted)
  double prompt_seconds = 0;    // arrival -> first token (queueing and prompt processing)
  double generate_seconds = 0;  // first token -> the last
  // Error:
  int status = 500;
  std::string error_type, message;
};

// One request's results, engine -> HTTP thread. cancel() is how the HTTP side says the
// client went away; the engine drops the request at its next iteration.
class Channel {
 public:
  void push(Event e);
  // Waits up to `timeout` for the next event; false on timeout.
  bool pop(Event* e, std::chrono::milliseconds timeout);
  void cancel() { cancelled_ = true; }
  bool cancelled() const { return cancelled_; }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Event> events_;
  std::atomic<bool> cancelled_{false};
};

struct EngineOptions {
  int64_t max_batch_tokens = 0;  // rows per step; 0: the program's max_seq_length
  int64_t max_running = 64;      // sequences generating at once (at most max_batch_tokens)
  int64_t max_queue = 256;       // requests waiting for admission before submit() refuses
  DType cache_dtype = DType::F32;
  int64_t capacity_tokens = 0;   // KV token slots in total (0: use capacity_bytes)
  size_t capacity_bytes = 0;     // alternatively a byte budget (0 and 0: 16 contexts' worth)
  int64_t block_size = 16;
  std::string kv_store;          // redis://HOST:PORT of a shared prefix tier ("": none; serve/kv_tier.h)
  int kv_store_timeout_ms = 50;  // a slower store is skipped
  int kv_store_ttl_seconds = 3600;
  // Speculative decoding with prompt-lookup drafts for every generation (draft_tokens 0: off):
  // a decode row carries the drawn token and up to draft_tokens drafted ones, all verified in
  // the same step; the cache is rewound past the rejected ones. Same tokens as without.
  gen::LookupOptions lookup;
};

class KvTier;

// Slots, as llama-server has them (/slots): max_running of them, each the place one request runs
// in. A request takes the lowest idle slot (or the one its id_slot names, waiting until it is
// idle) and, when it ends, leaves there the tokens whose K/V it computed. The K/V itself lives in
// the shared paged cache (its full blocks stay cached for any request with the same prefix): a
// slot only names a token sequence, which its save writes (the full blocks the cache still holds,
// kv_record.h), its restore puts back (blocks into the prefix index) and its erase drops from the
// cache (blocks no running request holds).
enum class SlotOp { Save, Restore, Erase };

struct SlotView {
  int id = 0;
  bool processing = false;  // a request runs in it (or waits, preempted, to run again)
  int64_t tokens = 0;       // the tokens it names (those of the last request that ran in it)
};

struct SlotResult {
  int64_t tokens = 0;     // the slot's tokens (save: saved; restore: restored; erase: forgotten)
  int64_t kv_tokens = 0;  // tokens whose K/V the record holds (save), went into the cache (restore),
                          // or left the cache (erase): full blocks x block size
  std::shared_ptr<kv::KvRecord> record;  // save: the slot's tokens and full blocks
};

class Engine {
 public:
  // The program must use the off-graph cache. `threads` runs the matmuls and attention.
  Engine(std::shared_ptr<const Program> program, const Tokenizer& tokenizer, const EngineOptions& options,
         ThreadPool* threads, Metrics* metrics);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Queues a request. Throws ptn::Error (Capacity) when the queue is full or the engine is
  // draining or stopped.
  std::shared_ptr<Channel> submit(GenRequest request);
  // Queues an embedding request: its inputs wait and run as sequences of their own (sharing the
  // batch, the cache and the limits with generation); the channel gets one Embedding event per
  // input (in any order, `index` says which), then a Done whose prompt_tokens counts them all.
  // Throws ptn::Error: Capacity as submit(), Unsupported when the program has no hidden output.
  std::shared_ptr<Channel> submit_embed(EmbedRequest request);
  // The width of the hidden states embeddings pool (0: the program does not expose them).
  int64_t hidden_size() const { return exec_->hidden_size(); }

  // The most tokens one sequence may hold (the model's context, capped by the cache size).
  int64_t context() const { return context_; }
  int64_t vocab_size() const { return vocab_; }
  // No request queued or running.
  bool idle() const;

  // --- slots (see SlotOp) ------------------------------------------------------------------
  int64_t n_slots() const { return opt_.max_running; }
  std::vector<SlotView> slots() const;
  // The identity a slot record must have (kv_record.h). Throws ptn::Error (Unsupported) when the
  // program was not loaded from a .ptn file, which names it.
  const kv::KvIdentity& kv_identity() const;
  // Queues a slot action; the engine thread runs it between steps once the slot is idle. The
  // future's get() throws ptn::Error: InvalidArgument (an empty slot to save, a record that does
  // not fit this server), Capacity (the engine stopped first). Restore takes a record whose
  // identity the caller checked; save returns the slot's record, which the caller writes.
  // `abandoned`, set by the caller, makes the engine drop the action if it has not run yet.
  std::future<SlotResult> slot_action(SlotOp op, int slot, std::shared_ptr<const kv::KvRecord> record,
                                      std::shared_ptr<std::atomic<bool>> abandoned);
  // Refuses new requests, waits until the accepted ones finish or `deadline` passes, then
  // stops (requests still running get an error event). Safe to call more than once.
  void drain(std::chrono::milliseconds deadline);
  void stop();

 private:
  struct Seq;
  struct EmbedJob;
  void enqueue(std::vector<std::unique_ptr<Seq>> seqs);
  void pool_rows(Seq& s, const float* hidden, int64_t first_row, int64_t rows, int64_t start_pos);
  void finish_embedding(Seq& s);
  void run();
  void drop_cancelled();
  void admit();
  void step_once();
  void sample(Seq& s, const float* logits);
  // A token drawn for s (by sample or by a verified draft): recorded, streamed, and the request
  // finished when it ends the generation.
  void take_step(Seq& s, gen::StepResult st);
  // s's decode row of this step carried `draft`: verify it against its rows of logits, keep the
  // accepted tokens in the cache (rewinding past the rest) and take every step drawn.
  void verify_draft(Seq& s, const std::vector<int32_t>& draft, const float* rows, int64_t drawn_pos);
  std::vector<std::unique_ptr<Seq>> fork_choices(Seq& parent);
  void emit(Seq& s, const std::string& text);
  void finish(Seq& s, const std::string& reason, const std::string& last_text);
  void fail(Seq& s, int status, const std::string& type, const std::string& message);
  void publish_gauges();
  struct SlotJob;
  int take_slot(Seq& s);         // -1 when the slot it needs is busy
  void release_slot(Seq& s);     // the request ended: its slot names the tokens it computed
  void run_slot_jobs();          // the queued slot actions whose slot is idle
  SlotResult run_slot_job(SlotJob& job);
  // The shared tier: before a prompt's prefix reuse, read the full blocks the cache misses (off
  // the engine thread: false while the read is in flight, true once its blocks are restored or
  // there was nothing to read); when a prompt is done, queue its full blocks for writing.
  bool tier_ready(Seq& s);
  void tier_store(const Seq& s);

  std::shared_ptr<const Program> program_;
  const Tokenizer& tok_;
  EngineOptions opt_;
  Metrics* metrics_;
  int64_t context_ = 0;
  int64_t vocab_ = 0;
  std::unique_ptr<Executor> exec_;
  std::unique_ptr<KVCache> cache_;
  std::shared_ptr<const grammar::TokenTrie> trie_;  // the vocabulary index of grammars (made at first use)
  std::unique_ptr<CacheScope> scope_;
  std::unique_ptr<KvTier> tier_;  // null without --kv-store
  std::unique_ptr<kv::KvIdentity> identity_;  // null when the program has no file identity
  std::string identity_error_;                // why, then

  struct Slot {
    bool busy = false;
    std::vector<int32_t> tokens;
  };
  mutable std::mutex slots_mu_;  // guards slots_ (written by the engine thread, read by slots())
  std::vector<Slot> slots_;
  std::deque<std::shared_ptr<SlotJob>> slot_incoming_;  // guarded by mu_
  std::deque<std::shared_ptr<SlotJob>> slot_pending_;   // engine thread

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::unique_ptr<Seq>> incoming_;  // guarded by mu_
  std::atomic<int64_t> queued_{0};             // incoming + waiting
  std::atomic<int64_t> active_{0};             // queued + running
  bool stop_ = false;                          // guarded by mu_
  bool tier_signal_ = false;                   // guarded by mu_: a tier read finished
  bool tier_wait_ = false;                     // engine thread: the queue's front waits for a tier read
  std::atomic<bool> draining_{false};
  SeqId next_id_ = 1;                          // guarded by mu_

  // Engine thread only:
  std::deque<std::unique_ptr<Seq>> waiting_;
  std::vector<std::unique_ptr<Seq>> running_;  // oldest admission first
  uint64_t peak_bytes_ = 0;
  std::thread thread_;
};

}  // namespace ptn::serve
