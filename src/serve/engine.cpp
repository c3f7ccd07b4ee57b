#include "serve/engine.h"

#include <algorithm>

#include "core/error.h"
#include "kvcache/factory.h"
#include "kvcache/paged_cache.h"
#include "kvcache/prefix_index.h"
#include "runtime/kv_state.h"
#include "serve/kv_tier.h"
#include "grammar/token_mask.h"

namespace ptn::serve {

void Channel::push(Event e) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    events_.push_back(std::move(e));
  }
  cv_.notify_all();
}

bool Channel::pop(Event* e, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!cv_.wait_for(lock, timeout, [&] { return !events_.empty(); })) return false;
  *e = std::move(events_.front());
  events_.pop_front();
  return true;
}

// What the inputs of one embedding request share (engine thread only).
struct Engine::EmbedJob {
  Pooling pooling = Pooling::Last;
  int64_t remaining = 0;  // inputs not yet pooled
  int64_t tokens = 0;     // token ids over all inputs (usage)
};

struct Engine::Seq {
  SeqId id = 0;
  GenRequest req;
  std::shared_ptr<Channel> ch;
  std::vector<int32_t> tokens;  // prompt + generated
  int64_t computed = 0;         // tokens held in the cache
  int64_t generated = 0;
  int64_t cached = -1;          // prompt tokens reused at first admission (-1: not yet admitted)
  bool in_cache = false;
  std::unique_ptr<gen::Generator> gen;  // sampling, stop rules, text (made at first admission)
  std::unique_ptr<grammar::GrammarProcessor> constraint;  // the request's grammar, if any
  std::vector<TokenOut> pending;
  Clock::time_point first_token, last_token;
  int index = 0;  // the choice this sequence generates
  int forks = 0;  // choices still to fork from it when its prompt is done
  std::shared_ptr<EmbedJob> embed;  // set: an embedding input (prefill only, pooled, no sampling)
  std::vector<double> pooled;       // embedding: the running sum (mean) or the pooled row (last, cls)
  std::shared_ptr<const KvTier::Fetch> tier_read;  // the shared tier's read of its prefix, while in flight
  bool tier_checked = false;                        // the tier was asked (or had nothing to give)
  int slot = -1;                                    // the slot it runs in (choice 0 of a generation)
  int64_t drafted = 0, accepted = 0;                // speculative decoding
};

struct Engine::SlotJob {
  SlotOp op = SlotOp::Save;
  int slot = 0;
  std::shared_ptr<const kv::KvRecord> record;  // restore
  std::shared_ptr<std::atomic<bool>> abandoned;
  std::promise<SlotResult> done;
};

Engine::Engine(std::shared_ptr<const Program> program, const Tokenizer& tokenizer, const EngineOptions& options,
               ThreadPool* threads, Metrics* metrics)
    : program_(std::move(program)), tok_(tokenizer), opt_(options), metrics_(metrics) {
  const ProgramMeta& meta = program_->meta();
  if (meta.static_cache)
    ptn::fail(ErrorKind::Unsupported, "serve",
              "the program bakes in a static cache; export it with the off-graph cache to serve it");
  vocab_ = meta.spec.vocab_size;
  if (tok_.vocab_size() > vocab_)
    ptn::fail(ErrorKind::Corrupt, "serve", "the tokenizer has more tokens than the model's vocabulary");
  if (opt_.max_batch_tokens == 0) opt_.max_batch_tokens = meta.max_seq_length;
  PTN_CHECK(opt_.max_batch_tokens >= 1 && opt_.max_batch_tokens <= 65536, ErrorKind::InvalidArgument,
            "--max-batch-tokens", "must be 1..65536");
  PTN_CHECK(opt_.max_running >= 1 && opt_.max_running <= 4096, ErrorKind::InvalidArgument, "--parallel",
            "must be 1..4096");
  PTN_CHECK(opt_.max_queue >= 0 && opt_.max_queue <= 1000000, ErrorKind::InvalidArgument, "--max-queue",
            "must be 0..1000000");
  // Every running sequence needs a decode row in each step.
  opt_.max_running = std::min(opt_.max_running, opt_.max_batch_tokens);
  int64_t model_ctx = meta.cache_spec.max_positions > 0 ? meta.cache_spec.max_positions : meta.spec.max_position_embeddings;
  if (model_ctx <= 0) model_ctx = 4096;

  CacheOptions co;
  co.dtype = opt_.cache_dtype;
  co.block_size = opt_.block_size;
  co.capacity_tokens = opt_.capacity_tokens;
  co.capacity_bytes = opt_.capacity_bytes;
  if (co.capacity_tokens == 0 && co.capacity_bytes == 0) co.capacity_tokens = model_ctx * 16;
  exec_ = std::make_unique<Executor>(program_, ExecMode::Optimized, opt_.max_batch_tokens, threads);
  cache_ = make_cache("paged", meta.cache_spec, co, threads);
  scope_ = std::make_unique<CacheScope>(*exec_, *cache_);
  auto* paged = dynamic_cast<PagedCache*>(cache_.get());
  const int64_t cache_tokens = paged ? paged->token_capacity() : co.capacity_tokens;
  context_ = std::min(model_ctx, cache_tokens);
  PTN_CHECK(context_ >= 2, ErrorKind::InvalidArgument, "--kv-memory", "the KV cache holds fewer than 2 tokens");
  if (!opt_.kv_store.empty()) {
    KvTierOptions to = parse_kv_store_url(opt_.kv_store, "--kv-store");
    to.timeout_ms = opt_.kv_store_timeout_ms;
    to.ttl_seconds = opt_.kv_store_ttl_seconds;
    tier_ = std::make_unique<KvTier>(to, paged->identity(program_kv_id(*program_)), metrics_);
  }
  try {
    identity_ = std::make_unique<kv::KvIdentity>(paged->identity(program_kv_id(*program_)));
  } catch (const Error& e) {
    identity_error_ = e.what();
  }
  slots_.resize(static_cast<size_t>(opt_.max_running));
  if (opt_.lookup.draft_tokens > 0) {
    gen::check_lookup_options(opt_.lookup, "--lookup-draft/--lookup-ngram");
    // A rejected draft is rewound; a window or chunk layer may have released the blocks the
    // rewound position needs.
    for (const LayerCacheSpec& l : meta.cache_spec.layers)
      if (l.kind != AttnKind::Full)
        ptn::fail(ErrorKind::Unsupported, "--lookup-draft",
                  "speculative decoding in the server needs full-attention layers; this model has window or chunk layers");
  }
  publish_gauges();
  thread_ = std::thread([this] { run(); });
}

Engine::~Engine() {
  stop();
  tier_.reset();  // its reader thread calls back into mu_ and cv_, which go before it
}

bool Engine::tier_ready(Seq& s) {
  if (s.tier_checked) return true;
  auto* pc = static_cast<PagedCache*>(cache_.get());
  if (!s.tier_read) {
    const std::vector<int32_t>& tokens = s.tokens;
    const int64_t bs = pc->block_size();
    const int64_t kmax = (static_cast<int64_t>(tokens.size()) - 1) / bs;  // reuse leaves the last token
    std::vector<uint64_t> hash(static_cast<size_t>(std::max<int64_t>(kmax, 0))), parent(hash.size());
    int64_t first_missing = -1;
    for (int64_t i = 0; i < kmax; ++i) {
      parent[i] = i == 0 ? kv::prefix_root() : hash[i - 1];
      hash[i] = kv::hash_block(parent[i], tokens.data() + i * bs, bs);
      if (first_missing < 0 && !pc->find_block(hash[i], parent[i], tokens.data() + i * bs, nullptr)) first_missing = i;
    }
    if (first_missing < 0) {  // the local cache has the whole prefix (or there is none)
      s.tier_checked = true;
      return true;
    }
    s.tier_read = tier_->fetch_async(std::vector<uint64_t>(hash.begin() + first_missing, hash.end()),
                                     std::vector<uint64_t>(parent.begin() + first_missing, parent.end()),
                                     tokens.data() + first_missing * bs, [this] {
                                       {
                                         std::lock_guard<std::mutex> lock(mu_);
                                         tier_signal_ = true;
                                       }
                                       cv_.notify_all();
                                     });
  }
  if (!s.tier_read->done) return false;
  for (const kv::BlockData& b : s.tier_read->blocks)
    if (!pc->restore_block(b)) break;
  s.tier_read.reset();
  s.tier_checked = true;
  return true;
}

void Engine::tier_store(const Seq& s) {
  auto* pc = static_cast<PagedCache*>(cache_.get());
  const int64_t prompt_blocks = static_cast<int64_t>(s.req.prompt.size()) / pc->block_size();
  const int64_t n = std::min(pc->saveable_blocks(s.id), prompt_blocks);
  for (int64_t i = std::max<int64_t>(s.cached, 0) / pc->block_size(); i < n; ++i) tier_->store(pc->save_block(s.id, i));
}

std::shared_ptr<Channel> Engine::submit(GenRequest request) {
  auto s = std::make_unique<Seq>();
  s->req = std::move(request);
  s->ch = std::make_shared<Channel>();
  s->tokens = s->req.prompt;
  if (s->req.slot < -1 || s->req.slot >= opt_.max_running)
    ptn::fail(ErrorKind::InvalidArgument, "id_slot", "must be -1 (any) or a slot 0.." + std::to_string(opt_.max_running - 1) +
                                                         " (--parallel)");
  if (s->req.n < 1 || s->req.n > opt_.max_running)
    ptn::fail(ErrorKind::InvalidArgument, "n", "must be 1.." + std::to_string(opt_.max_running) +
                                                   " (the sequences this server runs at once, --parallel)");
  s->forks = s->req.n - 1;
  auto ch = s->ch;
  std::vector<std::unique_ptr<Seq>> one;
  one.push_back(std::move(s));
  enqueue(std::move(one));
  return ch;
}

std::shared_ptr<Channel> Engine::submit_embed(EmbedRequest request) {
  if (hidden_size() == 0)
    ptn::fail(ErrorKind::Unsupported, program_->name(),
              "the program has no 'hidden' output (exported before ptn computed embeddings); export it again");
  if (request.inputs.empty()) ptn::fail(ErrorKind::InvalidArgument, "input", "no inputs");
  auto ch = std::make_shared<Channel>();
  auto job = std::make_shared<EmbedJob>();
  job->pooling = request.pooling;
  job->remaining = static_cast<int64_t>(request.inputs.size());
  std::vector<std::unique_ptr<Seq>> seqs;
  for (size_t i = 0; i < request.inputs.size(); ++i) {
    const int64_t n = static_cast<int64_t>(request.inputs[i].size());
    if (n < 1 || n > context_)
      ptn::fail(ErrorKind::InvalidArgument, "input[" + std::to_string(i) + "]",
                "needs 1.." + std::to_string(context_) + " tokens, has " + std::to_string(n));
    auto s = std::make_unique<Seq>();
    s->req.prompt = std::move(request.inputs[i]);
    s->req.arrival = request.arrival;
    s->tokens = s->req.prompt;
    s->ch = ch;
    s->index = static_cast<int>(i);
    s->embed = job;
    job->tokens += n;
    seqs.push_back(std::move(s));
  }
  enqueue(std::move(seqs));
  return ch;
}

// Queues the sequences of one request together: the queue limit counts requests, so a request
// is refused only when the queue already holds max_queue sequences.
void Engine::enqueue(std::vector<std::unique_ptr<Seq>> seqs) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_ || draining_) ptn::fail(ErrorKind::Capacity, "server", "the server is shutting down");
    if (queued_ >= opt_.max_queue)
      ptn::fail(ErrorKind::Capacity, "server",
                "too many requests waiting (" + std::to_string(opt_.max_queue) + "); retry later");
    for (auto& s : seqs) {
      s->id = next_id_;
      next_id_ = next_id_ == INT32_MAX ? 1 : next_id_ + 1;
      incoming_.push_back(std::move(s));
      ++queued_;
      ++active_;
    }
  }
  cv_.notify_all();
}

bool Engine::idle() const { return active_ == 0; }

void Engine::drain(std::chrono::milliseconds deadline) {
  draining_ = true;
  const auto end = Clock::now() + deadline;
  while (!idle() && Clock::now() < end) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  stop();
}

void Engine::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Engine::run() {
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      // A queue whose front waits for the shared tier wakes the loop when the read is in.
      cv_.wait_for(lock, std::chrono::milliseconds(100), [&] {
        return stop_ || !incoming_.empty() || !running_.empty() || !slot_incoming_.empty() ||
               (!waiting_.empty() && (!tier_wait_ || tier_signal_));
      });
      tier_signal_ = false;
      while (!incoming_.empty()) {
        waiting_.push_back(std::move(incoming_.front()));
        incoming_.pop_front();
      }
      while (!slot_incoming_.empty()) {
        slot_pending_.push_back(std::move(slot_incoming_.front()));
        slot_incoming_.pop_front();
      }
      if (stop_) break;
    }
    try {
      drop_cancelled();
      run_slot_jobs();  // before admission, so that a busy server still gets to an idle slot
      admit();
      if (!running_.empty()) step_once();
      run_slot_jobs();
    } catch (const std::exception& e) {
      // A broken invariant: fail what is in flight, keep serving.
      for (auto& s : running_) fail(*s, 500, "server_error", std::string("engine error: ") + e.what());
      running_.clear();
    }
    publish_gauges();
  }
  for (auto& s : running_) fail(*s, 503, "server_error", "the server is shutting down");
  for (auto& s : waiting_) fail(*s, 503, "server_error", "the server is shutting down");
  running_.clear();
  waiting_.clear();
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& j : slot_incoming_) slot_pending_.push_back(std::move(j));
    slot_incoming_.clear();
  }
  for (auto& j : slot_pending_)
    j->done.set_exception(std::make_exception_ptr(Error(ErrorKind::Capacity, "server", "the server is shutting down")));
  slot_pending_.clear();
  publish_gauges();
}

void Engine::drop_cancelled() {
  for (size_t i = 0; i < running_.size();) {
    if (running_[i]->ch->cancelled()) {
      release_slot(*running_[i]);
      if (running_[i]->in_cache) cache_->clear(running_[i]->id);
      running_.erase(running_.begin() + static_cast<std::ptrdiff_t>(i));
      --active_;
    } else {
      ++i;
    }
  }
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    if ((*it)->ch->cancelled()) {
      release_slot(**it);
      it = waiting_.erase(it);
      --queued_;
      --active_;
    } else {
      ++it;
    }
  }
}

void Engine::admit() {
  tier_wait_ = false;
  auto* paged = dynamic_cast<PagedCache*>(cache_.get());
  // Sequences running, and those the n-choice requests among them will fork when their prompt is done.
  int64_t taken = static_cast<int64_t>(running_.size());
  for (const auto& r : running_) taken += r->forks;
  while (!waiting_.empty() && taken < opt_.max_running) {
    Seq& s = *waiting_.front();
    // A request for n choices runs n sequences once its prompt is done: room for all of them.
    if (taken + 1 + s.forks > opt_.max_running) return;
    // Mean and cls pooling need the hidden state of every token (or the first): computed, not
    // reused. Last-token pooling recomputes the last token anyway.
    const bool reuse = !s.embed || s.embed->pooling == Pooling::Last;
    // Choice 0 of a generation runs in a slot: the one it names waits until it is idle.
    if (!s.embed && s.index == 0 && s.slot < 0 && take_slot(s) < 0) return;
    try {
      // The shared tier is read off this thread: until the read is in, the running sequences go
      // on and the queue waits (first come, first served).
      tier_wait_ = tier_ && reuse && !tier_ready(s);
      if (tier_wait_) return;
      cache_->add_sequence(s.id);
      const int64_t reused = reuse ? cache_->reuse_prefix(s.id, s.tokens) : 0;
      const int64_t rest = static_cast<int64_t>(s.tokens.size()) - reused;
      // Headroom: a block for every running sequence's next decode rows, so that admitting
      // does not immediately force a preemption.
      const int64_t headroom = paged ? paged->block_size() * static_cast<int64_t>(running_.size()) : 0;
      if (!cache_->can_extend(s.id, rest + headroom)) {
        const bool fits_alone = running_.empty() && cache_->can_extend(s.id, rest);
        if (!fits_alone) {
          cache_->clear(s.id);
          if (!running_.empty()) return;  // wait for running sequences to free blocks
          fail(s, 400, "invalid_request_error",
               std::string(s.embed ? "input[" + std::to_string(s.index) + "]" : "the prompt") +
                   " needs more KV cache than this server has (" + std::to_string(s.tokens.size()) + " tokens)");
          waiting_.pop_front();
          --queued_;
          continue;
        }
      }
      s.in_cache = true;
      s.computed = reused;
      if (s.cached < 0) {
        s.cached = reused;
        metrics_->add_prompt_tokens(static_cast<int64_t>(s.req.prompt.size()));
        metrics_->add_cached_tokens(reused);
      }
      if (!s.embed && !s.gen) {  // an embedding samples nothing
        s.gen = std::make_unique<gen::Generator>(tok_, vocab_, s.req.params(),
                                                 context_ - static_cast<int64_t>(s.req.prompt.size()));
        if (s.req.grammar) {
          if (!trie_) trie_ = std::make_shared<grammar::TokenTrie>(tok_);
          s.constraint = std::make_unique<grammar::GrammarProcessor>(s.req.grammar, trie_, tok_);
          s.gen->set_logit_processor(s.constraint.get());
        }
      }
    } catch (const std::exception& e) {
      if (cache_->has_sequence(s.id)) cache_->clear(s.id);
      s.in_cache = false;
      fail(s, 500, "server_error", std::string("admission failed: ") + e.what());
      waiting_.pop_front();
      --queued_;
      continue;
    }
    taken += 1 + s.forks;
    running_.push_back(std::move(waiting_.front()));
    waiting_.pop_front();
    --queued_;
  }
}

void Engine::step_once() {
  StepBatch batch;
  std::vector<std::vector<int32_t>> drafts;      // per entry of `order`: its drafted tokens
  bool use_drafts = opt_.lookup.draft_tokens > 0;
  std::vector<std::pair<Seq*, int64_t>> order;  // sequence, rows in this step (first-appearance order)
  std::vector<int32_t> selected;                // the rows whose outputs the step keeps
  std::vector<int64_t> first_out;               // per entry of `order`: its first selected row
  for (;;) {
    batch.rows.clear();
    order.clear();
    selected.clear();
    first_out.clear();
    bool want_logits = false;
    int64_t budget = opt_.max_batch_tokens;
    drafts.clear();
    auto add = [&](Seq& s, int64_t n, std::vector<int32_t> draft = {}) {
      for (int64_t i = 0; i < n; ++i) {  // a decode row's draft follows its drawn token
        const int64_t p = s.computed + i;
        const int32_t t = i == 0 || draft.empty() ? s.tokens[static_cast<size_t>(p)] : draft[static_cast<size_t>(i - 1)];
        batch.rows.push_back({s.id, static_cast<int32_t>(p), t});
      }
      // Generation keeps its last row's logits; mean pooling keeps every row's hidden state,
      // cls the first one's, last pooling the last one's.
      const int32_t end = static_cast<int32_t>(batch.rows.size());
      first_out.push_back(static_cast<int64_t>(selected.size()));
      if ((s.embed && s.embed->pooling == Pooling::Mean) || !draft.empty()) {  // a draft: logits of every row
        for (int32_t r = end - static_cast<int32_t>(n); r < end; ++r) selected.push_back(r);
      } else if (s.embed && s.embed->pooling == Pooling::Cls) {
        selected.push_back(end - static_cast<int32_t>(n));
      } else {
        selected.push_back(end - 1);
      }
      want_logits = want_logits || !s.embed;
      order.push_back({&s, n});
      drafts.push_back(std::move(draft));
      budget -= n;
    };
    // Decode rows first: every generating sequence advances each step. Drafts take only the rows
    // the decode rows leave.
    int64_t spare = budget;
    for (auto& s : running_)
      if (static_cast<int64_t>(s->tokens.size()) - s->computed == 1) --spare;
    for (auto& s : running_)
      if (budget > 0 && static_cast<int64_t>(s->tokens.size()) - s->computed == 1) {
        std::vector<int32_t> draft;
        if (use_drafts && spare > 0 && s->gen && s->generated > 0 && !s->gen->done()) {
          draft = gen::lookup_draft(s->tokens, opt_.lookup);
          // Positions stay below the context; no draft past the request's last token.
          const int64_t room = std::min(context_ - static_cast<int64_t>(s->tokens.size()),
                                        s->req.max_tokens - s->generated - 1);
          const int64_t keep = std::max<int64_t>(0, std::min({static_cast<int64_t>(draft.size()), room, spare}));
          draft.resize(static_cast<size_t>(keep));
          spare -= keep;
        }
        const int64_t rows = 1 + static_cast<int64_t>(draft.size());  // before the draft is moved
        add(*s, rows, std::move(draft));
      }
    for (auto& s : running_) {
      const int64_t n = static_cast<int64_t>(s->tokens.size()) - s->computed;
      if (budget > 0 && n > 1) add(*s, std::min(n, budget));
    }
    if (batch.rows.empty()) return;
    int64_t n_out = 0;
    const float* logits = nullptr;
    try {
      logits = exec_->step_rows(batch, selected, want_logits, &n_out);
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::Capacity) throw;
      bool drafted = false;
      for (const auto& d : drafts) drafted = drafted || !d.empty();
      if (drafted) {  // first the same step without drafts
        use_drafts = false;
        continue;
      }
      // Out of blocks: preempt the youngest sequence (recomputed later), or end the only one.
      std::unique_ptr<Seq> victim = std::move(running_.back());
      running_.pop_back();
      cache_->clear(victim->id);
      victim->in_cache = false;
      victim->computed = 0;
      if (running_.empty()) {
        if (victim->embed)  // an input that does not fit the cache by itself
          fail(*victim, 400, "invalid_request_error",
               "input[" + std::to_string(victim->index) + "] needs more KV cache than this server has");
        else
          finish(*victim, "length", "");
        return;
      }
      metrics_->add_preemption();
      waiting_.push_front(std::move(victim));
      ++queued_;
      continue;
    }
    if (n_out != static_cast<int64_t>(selected.size()))
      ptn::fail(ErrorKind::Internal, "serve", "the step returned " + std::to_string(n_out) + " rows for " +
                                                  std::to_string(selected.size()) + " selected");
    bool any_done = false;
    std::vector<std::unique_ptr<Seq>> forked;
    for (size_t i = 0; i < order.size(); ++i) {
      Seq& s = *order[i].first;
      if (s.embed) {
        const int64_t rows = s.embed->pooling == Pooling::Mean ? order[i].second : 1;
        pool_rows(s, exec_->hidden(), first_out[i], rows, s.computed);
        s.computed += order[i].second;
        if (s.computed == static_cast<int64_t>(s.tokens.size())) finish_embedding(s);
        any_done = any_done || s.ch == nullptr;
        continue;
      }
      if (!drafts[i].empty()) {
        const int64_t drawn_pos = s.computed;
        s.computed += order[i].second;
        verify_draft(s, drafts[i], logits + first_out[i] * vocab_, drawn_pos);
        any_done = any_done || s.ch == nullptr;
        continue;
      }
      s.computed += order[i].second;
      if (s.computed == static_cast<int64_t>(s.tokens.size())) {
        const float* row = logits + first_out[i] * vocab_;
        try {
          // The prompt of an n-choice request is done: its other choices start from here.
          std::vector<std::unique_ptr<Seq>> kids;
          if (tier_ && s.generated == 0 && s.index == 0) tier_store(s);  // the prompt's blocks, behind the request
          if (s.forks > 0) kids = fork_choices(s);
          sample(s, row);
          for (auto& k : kids) {
            sample(*k, row);
            if (k->ch) forked.push_back(std::move(k));
          }
        } catch (const std::exception& e) {  // this request fails; the others go on
          fail(s, 500, "server_error", std::string("generation failed: ") + e.what());
        }
        any_done = any_done || s.ch == nullptr;
      }
    }
    if (any_done)
      running_.erase(std::remove_if(running_.begin(), running_.end(), [](const auto& s) { return s->ch == nullptr; }),
                     running_.end());
    for (auto& k : forked) running_.push_back(std::move(k));
    return;
  }
}

// Pools `rows` selected hidden rows of embedding input `s` from row `first_row` of this step's
// hidden states; `start_pos` is the position of the step's first row of s.
void Engine::pool_rows(Seq& s, const float* hidden, int64_t first_row, int64_t rows, int64_t start_pos) {
  const int64_t H = exec_->hidden_size();
  if (start_pos == 0 || s.pooled.empty()) s.pooled.assign(static_cast<size_t>(H), 0.0);  // a (re)computation starts
  const float* h = hidden + first_row * H;
  switch (s.embed->pooling) {
    case Pooling::Mean:
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < H; ++c) s.pooled[static_cast<size_t>(c)] += h[r * H + c];
      break;
    case Pooling::Cls:
      if (start_pos == 0)
        for (int64_t c = 0; c < H; ++c) s.pooled[static_cast<size_t>(c)] = h[c];
      break;
    case Pooling::Last:  // every step's last row; the final step's stays
      for (int64_t c = 0; c < H; ++c) s.pooled[static_cast<size_t>(c)] = h[c];
      break;
  }
}

void Engine::finish_embedding(Seq& s) {
  Event e;
  e.kind = Event::Kind::Embedding;
  e.index = s.index;
  const double scale = s.embed->pooling == Pooling::Mean ? 1.0 / static_cast<double>(s.tokens.size()) : 1.0;
  e.embedding.resize(s.pooled.size());
  for (size_t c = 0; c < s.pooled.size(); ++c) e.embedding[c] = static_cast<float>(s.pooled[c] * scale);
  s.ch->push(std::move(e));
  if (--s.embed->remaining == 0) {
    Event d;
    d.kind = Event::Kind::Done;
    d.prompt_tokens = s.embed->tokens;
    s.ch->push(std::move(d));
  }
  if (s.in_cache) cache_->clear(s.id);
  s.in_cache = false;
  s.ch = nullptr;  // marks it finished for step_once
  --active_;
}

std::vector<std::unique_ptr<Engine::Seq>> Engine::fork_choices(Seq& parent) {
  std::vector<std::unique_ptr<Seq>> kids;
  for (int i = 1; i <= parent.forks; ++i) {
    auto k = std::make_unique<Seq>();
    {
      std::lock_guard<std::mutex> lock(mu_);
      k->id = next_id_;
      next_id_ = next_id_ == INT32_MAX ? 1 : next_id_ + 1;
    }
    k->req = parent.req;
    k->req.sampling.seed = parent.req.sampling.seed + static_cast<uint64_t>(i);
    k->index = i;
    k->ch = parent.ch;
    k->tokens = parent.tokens;
    k->computed = parent.computed;
    k->cached = parent.cached;
    k->last_token = parent.last_token;
    k->gen = std::make_unique<gen::Generator>(tok_, vocab_, k->req.params(),
                                              context_ - static_cast<int64_t>(k->req.prompt.size()));
    if (k->req.grammar) {
      k->constraint = std::make_unique<grammar::GrammarProcessor>(k->req.grammar, trie_, tok_);
      k->gen->set_logit_processor(k->constraint.get());
    }
    try {
      cache_->fork(parent.id, k->id);  // shares the prompt's blocks
    } catch (...) {
      for (auto& done : kids) {  // undo the forks made so far; the caller fails the request
        cache_->clear(done->id);
        --active_;
      }
      throw;
    }
    k->in_cache = true;
    ++active_;
    kids.push_back(std::move(k));
  }
  parent.forks = 0;
  return kids;
}

void Engine::sample(Seq& s, const float* logits) {
  gen::StepResult st;
  try {
    st = s.gen->next(logits);
  } catch (const Error& e) {
    fail(s, 400, "invalid_request_error", std::string("sampling failed: ") + e.what());
    return;
  }
  take_step(s, std::move(st));
}

void Engine::verify_draft(Seq& s, const std::vector<int32_t>& draft, const float* rows, int64_t drawn_pos) {
  std::vector<gen::StepResult> steps;
  try {
    steps = s.gen->verify(draft, rows);
  } catch (const Error& e) {
    fail(s, 400, "invalid_request_error", std::string("sampling failed: ") + e.what());
    return;
  }
  // The cache keeps the drawn token and the accepted draft tokens: each step but the last drew
  // a draft token; the last one's token is new (it replaces a rejected draft token, or follows
  // the whole draft) and is fed by the next step.
  const int64_t accepted = static_cast<int64_t>(steps.size()) - 1;
  const int64_t keep = drawn_pos + 1 + accepted;
  if (keep < s.computed) cache_->rewind(s.id, keep);
  s.computed = keep;
  s.drafted += static_cast<int64_t>(draft.size());
  s.accepted += accepted;
  metrics_->add_speculation(static_cast<int64_t>(draft.size()), accepted);
  for (auto& st : steps) {
    take_step(s, std::move(st));
    if (s.ch == nullptr) return;  // finished (or failed)
  }
}

void Engine::take_step(Seq& s, gen::StepResult st) {
  s.tokens.push_back(st.token.id);
  ++s.generated;
  metrics_->add_generated_tokens(1);
  const auto now = Clock::now();
  if (s.generated == 1) {
    s.first_token = now;
    metrics_->observe_ttft(std::chrono::duration<double>(now - s.req.arrival).count());
  } else
    metrics_->observe_itl(std::chrono::duration<double>(now - s.last_token).count());
  s.last_token = now;

  TokenOut out;
  out.id = st.token.id;
  out.logprob = st.token.logprob;
  out.top = std::move(st.token.top);
  s.pending.push_back(std::move(out));
  if (st.finish != gen::Finish::None)
    finish(s, gen::openai_finish_reason(st.finish), st.text);
  else
    emit(s, st.text);
}

void Engine::emit(Seq& s, const std::string& text) {
  Event e;
  e.kind = Event::Kind::Delta;
  e.index = s.index;
  e.text = text;
  e.tokens = std::move(s.pending);
  s.pending.clear();
  if (!e.text.empty() || !e.tokens.empty()) s.ch->push(std::move(e));
}

void Engine::finish(Seq& s, const std::string& reason, const std::string& last_text) {
  emit(s, last_text);
  release_slot(s);
  Event d;
  d.kind = Event::Kind::Done;
  d.index = s.index;
  d.finish_reason = reason;
  if (s.gen) d.stop_string = s.gen->stop_string();
  d.prompt_tokens = static_cast<int64_t>(s.req.prompt.size());
  d.completion_tokens = s.generated;
  d.cached_tokens = std::max<int64_t>(s.cached, 0);
  d.drafted_tokens = s.drafted;
  d.accepted_tokens = s.accepted;
  if (s.generated > 0) {
    d.prompt_seconds = std::chrono::duration<double>(s.first_token - s.req.arrival).count();
    d.generate_seconds = std::chrono::duration<double>(s.last_token - s.first_token).count();
  } else {
    d.prompt_seconds = std::chrono::duration<double>(Clock::now() - s.req.arrival).count();
  }
  s.ch->push(std::move(d));
  if (s.in_cache) cache_->clear(s.id);
  s.in_cache = false;
  s.ch = nullptr;  // marks it finished for step_once
  --active_;
}

void Engine::fail(Seq& s, int status, const std::string& type, const std::string& message) {
  if (s.ch == nullptr) return;
  release_slot(s);
  Event e;
  e.kind = Event::Kind::Error;
  e.index = s.index;
  e.status = status;
  e.error_type = type;
  e.message = message;
  s.ch->push(std::move(e));
  if (s.in_cache) {
    try {
      cache_->clear(s.id);
    } catch (const std::exception&) {
    }
    s.in_cache = false;
  }
  --active_;
  s.ch = nullptr;
}

void Engine::publish_gauges() {
  EngineGauges g;
  g.queue_length = queued_;
  g.running = static_cast<int64_t>(running_.size());
  if (auto* paged = dynamic_cast<PagedCache*>(cache_.get())) {
    const BlockStats st = paged->stats();
    g.kv_blocks_total = st.total;
    g.kv_blocks_used = st.used;
    g.kv_blocks_cached = st.cached;
    g.kv_blocks_free = st.free;
  }
  g.kv_bytes_used = cache_->bytes_used();
  peak_bytes_ = std::max<uint64_t>(peak_bytes_, g.kv_bytes_used);
  g.kv_bytes_peak = peak_bytes_;
  metrics_->set_gauges(g);
}

}  // namespace ptn::serve

namespace ptn::serve {

// --- slots -------------------------------------------------------------------------------------

std::vector<SlotView> Engine::slots() const {
  std::lock_guard<std::mutex> lock(slots_mu_);
  std::vector<SlotView> v;
  for (size_t i = 0; i < slots_.size(); ++i)
    v.push_back({static_cast<int>(i), slots_[i].busy, static_cast<int64_t>(slots_[i].tokens.size())});
  return v;
}

const kv::KvIdentity& Engine::kv_identity() const {
  if (!identity_) ptn::fail(ErrorKind::Unsupported, "slots", identity_error_);
  return *identity_;
}

int Engine::take_slot(Seq& s) {
  std::lock_guard<std::mutex> lock(slots_mu_);
  int pick = s.req.slot;
  if (pick >= 0) {
    if (slots_[static_cast<size_t>(pick)].busy) return -1;
  } else {
    for (size_t i = 0; i < slots_.size() && pick < 0; ++i)
      if (!slots_[i].busy) pick = static_cast<int>(i);
    if (pick < 0) return -1;  // preempted requests hold the others: they run first
  }
  slots_[static_cast<size_t>(pick)].busy = true;
  s.slot = pick;
  return pick;
}

void Engine::release_slot(Seq& s) {
  if (s.slot < 0) return;
  std::lock_guard<std::mutex> lock(slots_mu_);
  Slot& sl = slots_[static_cast<size_t>(s.slot)];
  sl.busy = false;
  // The tokens whose K/V the request computed (its blocks stay cached when it is cleared). A
  // request preempted and then cancelled computed nothing it still holds: the slot keeps its
  // earlier tokens only if the request never got to compute.
  if (s.computed > 0)
    sl.tokens.assign(s.tokens.begin(), s.tokens.begin() + static_cast<std::ptrdiff_t>(s.computed));
  s.slot = -1;
}

std::future<SlotResult> Engine::slot_action(SlotOp op, int slot, std::shared_ptr<const kv::KvRecord> record,
                                            std::shared_ptr<std::atomic<bool>> abandoned) {
  if (slot < 0 || slot >= opt_.max_running)
    ptn::fail(ErrorKind::InvalidArgument, "id_slot", "no slot " + std::to_string(slot) + " (this server has 0.." +
                                                         std::to_string(opt_.max_running - 1) + ", --parallel)");
  if ((op == SlotOp::Restore) != (record != nullptr))
    ptn::fail(ErrorKind::Internal, "slots", "a record goes with a restore, and only with it");
  auto job = std::make_shared<SlotJob>();
  job->op = op;
  job->slot = slot;
  job->record = std::move(record);
  job->abandoned = abandoned ? std::move(abandoned) : std::make_shared<std::atomic<bool>>(false);
  std::future<SlotResult> f = job->done.get_future();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_ || draining_) ptn::fail(ErrorKind::Capacity, "server", "the server is shutting down");
    slot_incoming_.push_back(std::move(job));
  }
  cv_.notify_all();
  return f;
}

void Engine::run_slot_jobs() {
  for (auto it = slot_pending_.begin(); it != slot_pending_.end();) {
    SlotJob& j = **it;
    if (j.abandoned->load()) {
      it = slot_pending_.erase(it);
      continue;
    }
    bool busy;
    {
      std::lock_guard<std::mutex> lock(slots_mu_);
      busy = slots_[static_cast<size_t>(j.slot)].busy;
    }
    if (busy) {  // it runs once the request in the slot is done
      ++it;
      continue;
    }
    try {
      j.done.set_value(run_slot_job(j));
    } catch (...) {
      j.done.set_exception(std::current_exception());
    }
    it = slot_pending_.erase(it);
  }
}

SlotResult Engine::run_slot_job(SlotJob& j) {
  auto* pc = static_cast<PagedCache*>(cache_.get());
  const int64_t bs = pc->block_size();
  const std::string where = "slot " + std::to_string(j.slot);
  std::vector<int32_t> tokens;
  {
    std::lock_guard<std::mutex> lock(slots_mu_);
    tokens = slots_[static_cast<size_t>(j.slot)].tokens;
  }
  SlotResult r;
  // The chained hashes of the slot's full blocks, as the cache names them.
  auto for_each_block = [&](const std::vector<int32_t>& toks, auto&& fn) {
    uint64_t parent = kv::prefix_root();
    for (int64_t i = 0; (i + 1) * bs <= static_cast<int64_t>(toks.size()); ++i) {
      const int32_t* t = toks.data() + i * bs;
      const uint64_t h = kv::hash_block(parent, t, bs);
      if (!fn(h, parent, t)) break;
      parent = h;
    }
  };
  switch (j.op) {
    case SlotOp::Save: {
      if (tokens.empty()) ptn::fail(ErrorKind::InvalidArgument, where, "holds no tokens: no request has run in it");
      auto rec = std::make_shared<kv::KvRecord>();
      rec->id = kv_identity();
      rec->tokens = tokens;
      // The leading full blocks the cache still holds (an evicted one ends the record: what
      // follows it could not be attached without it).
      for_each_block(tokens, [&](uint64_t h, uint64_t parent, const int32_t* t) {
        kv::BlockData b;
        if (!pc->find_block(h, parent, t, &b)) return false;
        rec->blocks.push_back(std::move(b));
        return true;
      });
      r.tokens = static_cast<int64_t>(tokens.size());
      r.kv_tokens = static_cast<int64_t>(rec->blocks.size()) * bs;
      r.record = std::move(rec);
      return r;
    }
    case SlotOp::Restore: {
      const kv::KvRecord& rec = *j.record;
      if (rec.tokens.empty()) ptn::fail(ErrorKind::InvalidArgument, where, "the record holds no tokens");
      if (static_cast<int64_t>(rec.tokens.size()) > context_)
        ptn::fail(ErrorKind::InvalidArgument, where,
                  "the record's " + std::to_string(rec.tokens.size()) + " tokens do not fit this server's context of " +
                      std::to_string(context_));
      for (size_t i = 0; i < rec.tokens.size(); ++i)
        if (rec.tokens[i] < 0 || rec.tokens[i] >= vocab_)
          ptn::fail(ErrorKind::InvalidArgument, where,
                    "the record's token " + std::to_string(i) + " (id " + std::to_string(rec.tokens[i]) +
                        ") is outside the vocabulary of " + std::to_string(vocab_));
      int64_t restored = 0;
      for (const kv::BlockData& b : rec.blocks) {
        if (!pc->restore_block(b)) break;  // no room (or a collision): the rest is recomputed
        ++restored;
      }
      {
        std::lock_guard<std::mutex> lock(slots_mu_);
        slots_[static_cast<size_t>(j.slot)].tokens = rec.tokens;
      }
      r.tokens = static_cast<int64_t>(rec.tokens.size());
      r.kv_tokens = restored * bs;
      return r;
    }
    case SlotOp::Erase: {
      int64_t freed = 0;
      for_each_block(tokens, [&](uint64_t h, uint64_t parent, const int32_t* t) {
        if (pc->drop_cached_block(h, parent, t) > 0) ++freed;
        return true;
      });
      {
        std::lock_guard<std::mutex> lock(slots_mu_);
        slots_[static_cast<size_t>(j.slot)].tokens.clear();
      }
      r.tokens = static_cast<int64_t>(tokens.size());
      r.kv_tokens = freed * bs;
      publish_gauges();
      return r;
    }
  }
  return r;
}

}  // namespace ptn::serve
