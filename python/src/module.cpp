// nexttok._nexttok: every C entry point over caller-allocated arrays. Outputs
// and device workspaces come from the caller's framework (the Python layer
// allocates them); `stream` is the caller's current stream as an integer.
#include <memory>

#ifdef NEXTTOK_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

#include "views.h"

namespace nb = nanobind;
using namespace ntpy;

namespace {

void* as_stream(uintptr_t s) { return reinterpret_cast<void*>(s); }

// Host workspaces are allocated here, device ones by `alloc(nbytes)`, which
// returns an array of the caller's framework (its stream-ordered allocator,
// which also serves CUDA-graph capture).
struct Workspace {
  std::unique_ptr<unsigned char[]> host;
  View device;
  nb::object owner;
  void* ptr = nullptr;

  Workspace(const char* op, size_t bytes, const nt_tensor& on, nb::handle alloc) {
    if (bytes == 0) return;
    if (on.device == NT_DEVICE_CPU) {
      host.reset(new unsigned char[bytes]);
      ptr = host.get();
      return;
    }
    if (alloc.is_none())
      raise_arg(PyExc_ValueError, op, "alloc", "is needed to allocate a device workspace");
    owner = alloc(bytes);
    device = view(op, "workspace", owner, true);
    ptr = device.t.data;
  }
};

// query(&bytes) asks for the workspace, run(workspace, bytes) runs the op
// without the GIL.
template <class Query, class Run>
void run_with_workspace(const char* op, const nt_tensor& on, nb::handle alloc, Query query,
                        Run run) {
  size_t bytes = 0;
  check(query(&bytes));
  Workspace ws(op, bytes, on, alloc);
  nt_status s;
  {
    nb::gil_scoped_release unlocked;
    s = run(ws.ptr, bytes);
  }
  check(s);
}

template <class Args>
void run_with_workspace(const char* op, const Args& a, const nt_tensor& on, nb::handle alloc,
                        uintptr_t stream, nt_status (*query)(const Args*, size_t*),
                        nt_status (*run)(const Args*, void*, size_t, void*)) {
  run_with_workspace(
      op, on, alloc, [&](size_t* bytes) { return query(&a, bytes); },
      [&](void* ws, size_t bytes) { return run(&a, ws, bytes, as_stream(stream)); });
}

// The sampling parameters of one call, each a scalar or a per-row array on the
// device of `rows` whose rows it follows; keep holds the arrays' views.
struct SamplingParams {
  View keep[6];
  nt_param_f32 temperature, top_p, min_p;
  nt_param_i32 top_k;
  nt_param_u64 seed, offset;
  uint32_t flags;
  SamplingParams(const char* op, const nt_tensor& rows, nb::handle t, nb::handle k, nb::handle p,
                 nb::handle mp, nb::handle sd, nb::handle of, bool joint) {
    temperature = param_f32(op, "temperature", t, rows, keep[0]);
    top_k = param_i32(op, "top_k", k, rows, keep[1]);
    top_p = param_f32(op, "top_p", p, rows, keep[2]);
    min_p = param_f32(op, "min_p", mp, rows, keep[3]);
    seed = param_u64(op, "seed", sd, rows, keep[4]);
    offset = param_u64(op, "offset", of, rows, keep[5]);
    flags = joint ? NT_SAMPLE_TOP_P_JOINT : 0;
  }
  // Into the fields of the same names of an op's arguments.
  template <class Args>
  void set(Args& a) const {
    a.temperature = temperature;
    a.top_k = top_k;
    a.top_p = top_p;
    a.min_p = min_p;
    a.seed = seed;
    a.offset = offset;
    a.flags = flags;
  }
};

template <class Args>
void run_plain(const Args& a, uintptr_t stream, nt_status (*run)(const Args*, void*),
               const char* c_arg = nullptr, const char* py_arg = nullptr) {
  nt_status s;
  {
    nb::gil_scoped_release unlocked;
    s = run(&a, as_stream(stream));
  }
  check(s, c_arg, py_arg);
}

void apply_token_bitmask(nb::handle logits, nb::handle bitmask, nb::handle indices,
                         uintptr_t stream) {
  const char* op = "apply_token_bitmask";
  View l = view(op, "logits", logits, true), m = view(op, "bitmask", bitmask),
       i = optional_view(op, "indices", indices);
  run_plain(nt_apply_token_bitmask_args{l.t, m.t, i.t}, stream, nt_apply_token_bitmask);
}

void bitmask_from_allowed(nb::handle allowed, nb::handle bitmask, uintptr_t stream) {
  const char* op = "bitmask_from_allowed";
  View a = view(op, "allowed", allowed), m = view(op, "bitmask", bitmask, true);
  run_plain(nt_bitmask_from_allowed_args{a.t, m.t}, stream, nt_bitmask_from_allowed);
}

void sample(nb::handle logits, nb::handle tokens, nb::handle temperature, nb::handle top_k,
            nb::handle top_p, nb::handle min_p, nb::handle seed, nb::handle offset,
            nb::handle uniform, bool joint, uintptr_t stream, nb::handle alloc) {
  const char* op = "sample";
  View l = view(op, "logits", logits), t = view(op, "tokens", tokens, true),
       u = optional_view(op, "uniform", uniform);
  SamplingParams sp(op, l.t, temperature, top_k, top_p, min_p, seed, offset, joint);
  nt_sample_args a{};
  a.logits = l.t;
  sp.set(a);
  a.uniform = u.t;
  a.tokens = t.t;
  run_with_workspace(op, a, l.t, alloc, stream, nt_sample_workspace_size, nt_sample);
}

void sample_logprobs(nb::handle logits, nb::handle tokens, nb::handle temperature,
                     nb::handle top_k, nb::handle top_p, nb::handle min_p, nb::handle seed,
                     nb::handle offset, nb::handle uniform, bool joint, int32_t num_logprobs,
                     bool processed, nb::handle logprob_ids, nb::handle logprobs,
                     nb::handle ranks, uintptr_t stream, nb::handle alloc) {
  const char* op = "sample_logprobs";
  View l = view(op, "logits", logits), t = view(op, "tokens", tokens, true),
       u = optional_view(op, "uniform", uniform), ids = view(op, "logprob_ids", logprob_ids, true),
       values = view(op, "logprobs", logprobs, true), r = view(op, "ranks", ranks, true);
  SamplingParams sp(op, l.t, temperature, top_k, top_p, min_p, seed, offset, joint);
  nt_sample_logprobs_args a{};
  nt_sample_args& s = a.sample;
  s.logits = l.t;
  sp.set(s);
  s.uniform = u.t;
  s.tokens = t.t;
  a.num_logprobs = num_logprobs;
  a.mode = processed ? NT_LOGPROBS_PROCESSED : NT_LOGPROBS_RAW;
  a.logprob_ids = ids.t;
  a.logprobs = values.t;
  a.ranks = r.t;
  run_with_workspace(op, a, l.t, alloc, stream, nt_sample_logprobs_workspace_size,
                     nt_sample_logprobs);
}

void lm_head_topk_dense(nb::handle hidden, nb::handle weight, nb::handle bias, int32_t k,
                        nb::handle values, nb::handle indices, uintptr_t stream,
                        nb::handle alloc) {
  const char* op = "lm_head_topk_dense";
  View h = view(op, "hidden", hidden), w = view(op, "weight", weight),
       b = optional_view(op, "bias", bias), v = view(op, "values", values, true),
       i = view(op, "indices", indices, true);
  nt_lm_head_dense_args a{h.t, w.t, b.t, k, v.t, i.t};
  run_with_workspace(op, a, w.t, alloc, stream, nt_lm_head_topk_dense_workspace_size,
                     nt_lm_head_topk_dense);
}

void lm_head_topk_binary(nb::handle act_q, nb::handle act_scale, nb::handle wq,
                         nb::handle wscale, nb::handle bias, int32_t group_size, int32_t k,
                         nb::handle values, nb::handle indices, uintptr_t stream,
                         nb::handle alloc) {
  const char* op = "lm_head_topk_binary";
  View q = view(op, "act_q", act_q), s = view(op, "act_scale", act_scale),
       w = view(op, "wq", wq), ws = view(op, "wscale", wscale),
       b = optional_view(op, "bias", bias), v = view(op, "values", values, true),
       i = view(op, "indices", indices, true);
  nt_lm_head_binary_args a{q.t, s.t, w.t, ws.t, b.t, group_size, k, v.t, i.t};
  run_with_workspace(op, a, w.t, alloc, stream, nt_lm_head_topk_binary_workspace_size,
                     nt_lm_head_topk_binary);
}

void pack_weights(nb::handle signs, nb::handle wq, uintptr_t stream) {
  const char* op = "pack_weights";
  View s = view(op, "w", signs), w = view(op, "wq", wq, true);
  run_plain(nt_pack_weights_args{s.t, w.t}, stream, nt_pack_weights, "signs", "w");
}

void quantize_activations(nb::handle x, nb::handle act_q, nb::handle act_scale,
                          uintptr_t stream) {
  const char* op = "quantize_activations";
  View xv = view(op, "x", x), q = view(op, "act_q", act_q, true),
       s = view(op, "act_scale", act_scale, true);
  run_plain(nt_quantize_activations_args{xv.t, q.t, s.t}, stream, nt_quantize_activations);
}

// The fused ops' optional logprobs request: absent when logprob_ids is None.
struct FusedLogprobsView {
  View ids, values, ranks;
  int32_t n;
  bool processed;
  FusedLogprobsView(const char* op, int32_t num_logprobs, bool processed_, nb::handle logprob_ids,
                    nb::handle logprobs, nb::handle ranks_)
      : ids(optional_view(op, "logprob_ids", logprob_ids, true)),
        values(optional_view(op, "logprobs", logprobs, true)),
        ranks(optional_view(op, "ranks", ranks_, true)), n(num_logprobs), processed(processed_) {}
  template <class Args>
  void set(Args& a) const {
    a.num_logprobs = n;
    a.logprobs_mode = processed ? NT_LOGPROBS_PROCESSED : NT_LOGPROBS_RAW;
    a.logprob_ids = ids.t;
    a.logprobs = values.t;
    a.ranks = ranks.t;
  }
};

// A shard call's extras, or nullptr for the single call (summary None). With
// `scores` (the shard's masked scores, written) the call carries the logprobs
// request (num_logprobs, processed) in the shard, not in the head's arguments.
struct ShardView {
  View summary, scores;
  nt_lm_head_shard shard{};
  ShardView(const char* op, nb::handle summary_arg, int64_t vocab_start, int64_t vocab_size,
            int64_t first_row, nb::handle scores_arg, int32_t num_logprobs, bool processed)
      : summary(optional_view(op, "summary", summary_arg, true)),
        scores(optional_view(op, "scores", scores_arg, true)) {
    shard.vocab_start = vocab_start;
    shard.vocab_size = vocab_size;
    shard.first_row = first_row;
    shard.summary = summary.t;
    if (scores.t.data && !summary.t.data)
      raise_arg(PyExc_ValueError, op, "scores", "is a shard call's output: it needs a summary");
    if (scores.t.data) {
      shard.num_logprobs = num_logprobs;
      shard.logprobs_mode = processed ? NT_LOGPROBS_PROCESSED : NT_LOGPROBS_RAW;
      shard.scores = scores.t;
    }
  }
  const nt_lm_head_shard* get() const { return summary.t.data ? &shard : nullptr; }
};

// A fused op: the single call (run), or the shard call (shard_run) when
// `sharded`; the workspace goes on the device of `on`.
template <class Args>
void run_fused(const char* op, const Args& a, bool sharded, const nt_lm_head_shard* shard,
               const nt_tensor& on,
               nb::handle alloc, uintptr_t stream, nt_status (*query)(const Args*, size_t*),
               nt_status (*run)(const Args*, void*, size_t, void*),
               nt_status (*shard_query)(const Args*, const nt_lm_head_shard*, size_t*),
               nt_status (*shard_run)(const Args*, const nt_lm_head_shard*, void*, size_t, void*)) {
  if (!sharded) return run_with_workspace(op, a, on, alloc, stream, query, run);
  run_with_workspace(
      op, on, alloc, [&](size_t* bytes) { return shard_query(&a, shard, bytes); },
      [&](void* ws, size_t bytes) { return shard_run(&a, shard, ws, bytes, as_stream(stream)); });
}

// lm_head_sample_dense (tokens given) or lm_head_shard_dense (summary given).
void lm_head_sample_dense(nb::handle hidden, nb::handle weight, nb::handle bias,
                          nb::handle bitmask, nb::handle tokens, nb::handle summary,
                          int64_t vocab_start, int64_t vocab_size, int64_t first_row,
                          nb::handle temperature, nb::handle top_k, nb::handle top_p,
                          nb::handle min_p, nb::handle seed, nb::handle offset, bool joint,
                          uintptr_t stream, nb::handle alloc, int32_t num_logprobs,
                          bool processed, nb::handle logprob_ids, nb::handle logprobs,
                          nb::handle ranks, nb::handle scores) {
  const bool sharded = !summary.is_none();
  const char* op = sharded ? "lm_head_shard_dense" : "lm_head_sample_dense";
  View h = view(op, "hidden", hidden), w = view(op, "weight", weight),
       b = optional_view(op, "bias", bias), m = optional_view(op, "bitmask", bitmask),
       t = optional_view(op, "tokens", tokens, true);
  ShardView sv(op, summary, vocab_start, vocab_size, first_row, scores, num_logprobs, processed);
  const FusedLogprobsView lp(op, num_logprobs, processed, logprob_ids, logprobs, ranks);
  nt_lm_head_sample_dense_args a{};
  a.hidden = h.t;
  a.weight = w.t;
  a.bias = b.t;
  a.bitmask = m.t;
  SamplingParams sp(op, h.t, temperature, top_k, top_p, min_p, seed, offset, joint);
  sp.set(a.sampling);
  a.tokens = t.t;
  lp.set(a);
  run_fused(op, a, sharded, sv.get(), w.t, alloc, stream, nt_lm_head_sample_dense_workspace_size,
            nt_lm_head_sample_dense, nt_lm_head_shard_dense_workspace_size, nt_lm_head_shard_dense);
}

void lm_head_sample_binary(nb::handle act_q, nb::handle act_scale, nb::handle wq,
                           nb::handle wscale, nb::handle bias, int32_t group_size,
                           nb::handle bitmask, nb::handle tokens, nb::handle summary,
                           int64_t vocab_start, int64_t vocab_size, int64_t first_row,
                           nb::handle temperature, nb::handle top_k, nb::handle top_p,
                           nb::handle min_p, nb::handle seed, nb::handle offset, bool joint,
                           uintptr_t stream, nb::handle alloc, int32_t num_logprobs,
                           bool processed, nb::handle logprob_ids, nb::handle logprobs,
                           nb::handle ranks, nb::handle scores) {
  const bool sharded = !summary.is_none();
  const char* op = sharded ? "lm_head_shard_binary" : "lm_head_sample_binary";
  View q = view(op, "act_q", act_q), s = view(op, "act_scale", act_scale),
       w = view(op, "wq", wq), ws_ = view(op, "wscale", wscale),
       b = optional_view(op, "bias", bias), m = optional_view(op, "bitmask", bitmask),
       t = optional_view(op, "tokens", tokens, true);
  ShardView sv(op, summary, vocab_start, vocab_size, first_row, scores, num_logprobs, processed);
  const FusedLogprobsView lp(op, num_logprobs, processed, logprob_ids, logprobs, ranks);
  nt_lm_head_sample_binary_args a{};
  a.act_q = q.t;
  a.act_scale = s.t;
  a.wq = w.t;
  a.wscale = ws_.t;
  a.bias = b.t;
  a.group_size = group_size;
  a.bitmask = m.t;
  SamplingParams sp(op, q.t, temperature, top_k, top_p, min_p, seed, offset, joint);
  sp.set(a.sampling);
  a.tokens = t.t;
  lp.set(a);
  run_fused(op, a, sharded, sv.get(), w.t, alloc, stream, nt_lm_head_sample_binary_workspace_size,
            nt_lm_head_sample_binary, nt_lm_head_shard_binary_workspace_size,
            nt_lm_head_shard_binary);
}

void lm_head_sample_combine(nb::handle summaries, int32_t shards, int64_t vocab_size,
                            int64_t first_row, nb::handle tokens, nb::handle temperature,
                            nb::handle top_k, nb::handle top_p, nb::handle min_p,
                            nb::handle seed, nb::handle offset, bool joint, int32_t num_logprobs,
                            bool processed, nb::handle logprob_ids, nb::handle logprobs,
                            nb::handle ranks, nb::handle rank_keys) {
  const char* op = "lm_head_sample_combine";
  View sm = view(op, "summaries", summaries), t = view(op, "tokens", tokens, true);
  SamplingParams sp(op, t.t, temperature, top_k, top_p, min_p, seed, offset, joint);
  const FusedLogprobsView lp(op, num_logprobs, processed, logprob_ids, logprobs, ranks);
  View keys = optional_view(op, "rank_keys", rank_keys, true);
  nt_lm_head_sample_combine_args a{};
  a.summaries = sm.t;
  a.shards = shards;
  a.vocab_size = vocab_size;
  a.first_row = first_row;
  sp.set(a.sampling);
  a.tokens = t.t;
  lp.set(a);
  a.rank_keys = keys.t;
  nt_status st;
  {
    nb::gil_scoped_release unlocked;
    st = nt_lm_head_sample_combine(&a);
  }
  check(st);
}

// A shard's part of the ranks (nt_lm_head_shard_ranks), arrays on the shard's device.
void lm_head_shard_ranks(nb::handle scores, nb::handle rank_keys, nb::handle counts, uintptr_t stream) {
  const char* op = "lm_head_shard_ranks";
  View sc = view(op, "scores", scores), k = view(op, "rank_keys", rank_keys),
       c = view(op, "counts", counts, true);
  nt_lm_head_shard_ranks_args a{sc.t, k.t, c.t};
  nt_status st;
  {
    nb::gil_scoped_release unlocked;
    st = nt_lm_head_shard_ranks(&a, reinterpret_cast<void*>(stream));
  }
  check(st);
}

// A CSR list of ids per row: offsets and ids, both None when the list is absent.
nt_token_lists token_lists(const char* op, const char* offsets_arg, const char* ids_arg,
                           nb::handle offsets, nb::handle ids, View& keep_offsets,
                           View& keep_ids) {
  keep_offsets = optional_view(op, offsets_arg, offsets);
  keep_ids = optional_view(op, ids_arg, ids);
  return nt_token_lists{keep_offsets.t, keep_ids.t};
}

void apply_penalties(nb::handle logits, nb::handle prompt_offsets, nb::handle prompt_ids,
                     nb::handle output_offsets, nb::handle output_ids, nb::handle repetition,
                     nb::handle presence, nb::handle frequency, uintptr_t stream,
                     nb::handle alloc) {
  const char* op = "apply_penalties";
  View l = view(op, "logits", logits, true);
  View keep[7];
  nt_apply_penalties_args a{};
  a.logits = l.t;
  a.prompt = token_lists(op, "prompt.offsets", "prompt.ids", prompt_offsets, prompt_ids, keep[0],
                         keep[1]);
  a.output = token_lists(op, "output.offsets", "output.ids", output_offsets, output_ids, keep[2],
                         keep[3]);
  a.repetition = param_f32(op, "repetition", repetition, l.t, keep[4]);
  a.presence = param_f32(op, "presence", presence, l.t, keep[5]);
  a.frequency = param_f32(op, "frequency", frequency, l.t, keep[6]);
  run_with_workspace(op, a, l.t, alloc, stream, nt_apply_penalties_workspace_size,
                     nt_apply_penalties);
}

void apply_logit_bias(nb::handle logits, nb::handle offsets, nb::handle ids, nb::handle values,
                      uintptr_t stream, nb::handle alloc) {
  const char* op = "apply_logit_bias";
  View l = view(op, "logits", logits, true), keep_offsets, keep_ids,
       v = view(op, "values", values);
  nt_apply_logit_bias_args a{};
  a.logits = l.t;
  a.tokens =
      token_lists(op, "tokens.offsets", "tokens.ids", offsets, ids, keep_offsets, keep_ids);
  a.values = v.t;
  run_with_workspace(op, a, l.t, alloc, stream, nt_apply_logit_bias_workspace_size,
                     nt_apply_logit_bias);
}

void verify_draft(nb::handle target_logits, nb::handle draft_ids, nb::handle cu_num_draft,
                  nb::handle draft_probs, nb::handle out_ids, nb::handle num_emitted,
                  nb::handle temperature, nb::handle top_k, nb::handle top_p, nb::handle min_p,
                  nb::handle seed, nb::handle offset, bool joint, uintptr_t stream,
                  nb::handle alloc) {
  const char* op = "verify_draft";
  View l = view(op, "target_logits", target_logits), d = view(op, "draft_ids", draft_ids),
       cu = view(op, "cu_num_draft", cu_num_draft),
       q = optional_view(op, "draft_probs", draft_probs),
       o = view(op, "out_ids", out_ids, true), n = view(op, "num_emitted", num_emitted, true);
  // Per-request parameters: arrays of B entries, checked against num_emitted.
  SamplingParams sp(op, n.t, temperature, top_k, top_p, min_p, seed, offset, joint);
  nt_verify_draft_args a{};
  a.target_logits = l.t;
  a.draft_ids = d.t;
  a.cu_num_draft = cu.t;
  a.draft_probs = q.t;
  sp.set(a);
  a.out_ids = o.t;
  a.num_emitted = n.t;
  run_with_workspace(op, a, l.t, alloc, stream, nt_verify_draft_workspace_size, nt_verify_draft);
}

void verify_tree(nb::handle target_logits, nb::handle candidates, nb::handle next_token,
                 nb::handle next_sibling, nb::handle out_ids, nb::handle out_nodes,
                 nb::handle num_emitted, nb::handle temperature, nb::handle top_k,
                 nb::handle top_p, nb::handle min_p, nb::handle seed, nb::handle offset,
                 bool joint, uintptr_t stream, nb::handle alloc) {
  const char* op = "verify_tree";
  View l = view(op, "target_logits", target_logits), c = view(op, "candidates", candidates),
       nx = view(op, "retrieve_next_token", next_token),
       sb = view(op, "retrieve_next_sibling", next_sibling),
       o = view(op, "out_ids", out_ids, true), on = optional_view(op, "out_nodes", out_nodes, true),
       n = view(op, "num_emitted", num_emitted, true);
  // Per-request parameters: arrays of B entries, checked against num_emitted.
  SamplingParams sp(op, n.t, temperature, top_k, top_p, min_p, seed, offset, joint);
  nt_verify_tree_args a{};
  a.target_logits = l.t;
  a.candidates = c.t;
  a.retrieve_next_token = nx.t;
  a.retrieve_next_sibling = sb.t;
  sp.set(a);
  a.out_ids = o.t;
  a.out_nodes = on.t;
  a.num_emitted = n.t;
  run_with_workspace(op, a, l.t, alloc, stream, nt_verify_tree_workspace_size, nt_verify_tree);
}

}  // namespace

NB_MODULE(_nexttok, m) {
  m.doc() = "nexttok C API over caller-allocated arrays (use the nexttok package instead)";
  // nanobind refuses None for a handle unless told: every optional is marked.
  using a = nb::arg;
  m.def("apply_token_bitmask", &apply_token_bitmask, a("logits"), a("bitmask"),
        a("indices").none(), a("stream"));
  m.def("bitmask_from_allowed", &bitmask_from_allowed);
  m.def("sample", &sample, a("logits"), a("tokens"), a("temperature"), a("top_k"), a("top_p"),
        a("min_p"), a("seed"), a("offset"), a("uniform").none(), a("joint"), a("stream"),
        a("alloc").none());
  m.def("sample_logprobs", &sample_logprobs, a("logits"), a("tokens"), a("temperature"),
        a("top_k"), a("top_p"), a("min_p"), a("seed"), a("offset"), a("uniform").none(),
        a("joint"), a("num_logprobs"), a("processed"), a("logprob_ids"), a("logprobs"),
        a("ranks"), a("stream"), a("alloc").none());
  m.def("lm_head_topk_dense", &lm_head_topk_dense, a("hidden"), a("weight"), a("bias").none(),
        a("k"), a("values"), a("indices"), a("stream"), a("alloc").none());
  m.def("lm_head_topk_binary", &lm_head_topk_binary, a("act_q"), a("act_scale"), a("wq"),
        a("wscale"), a("bias").none(), a("group_size"), a("k"), a("values"), a("indices"),
        a("stream"), a("alloc").none());
  m.def("lm_head_sample_dense", &lm_head_sample_dense, a("hidden"), a("weight"), a("bias").none(),
        a("bitmask").none(), a("tokens").none(), a("summary").none(), a("vocab_start"),
        a("vocab_size"), a("first_row"), a("temperature"), a("top_k"), a("top_p"), a("min_p"),
        a("seed"), a("offset"), a("joint"), a("stream"), a("alloc").none(),
        a("num_logprobs") = 0, a("processed") = false, a("logprob_ids").none() = nb::none(),
        a("logprobs").none() = nb::none(), a("ranks").none() = nb::none(),
        a("scores").none() = nb::none());
  m.def("lm_head_sample_binary", &lm_head_sample_binary, a("act_q"), a("act_scale"), a("wq"),
        a("wscale"), a("bias").none(), a("group_size"), a("bitmask").none(), a("tokens").none(),
        a("summary").none(), a("vocab_start"), a("vocab_size"), a("first_row"), a("temperature"),
        a("top_k"), a("top_p"), a("min_p"), a("seed"), a("offset"), a("joint"), a("stream"),
        a("alloc").none(), a("num_logprobs") = 0, a("processed") = false,
        a("logprob_ids").none() = nb::none(), a("logprobs").none() = nb::none(),
        a("ranks").none() = nb::none(), a("scores").none() = nb::none());
  m.def("lm_head_sample_combine", &lm_head_sample_combine, a("summaries"), a("shards"),
        a("vocab_size"), a("first_row"), a("tokens"), a("temperature"), a("top_k"), a("top_p"),
        a("min_p"), a("seed"), a("offset"), a("joint"), a("num_logprobs") = 0,
        a("processed") = false, a("logprob_ids").none() = nb::none(),
        a("logprobs").none() = nb::none(), a("ranks").none() = nb::none(),
        a("rank_keys").none() = nb::none());
  m.def("lm_head_shard_ranks", &lm_head_shard_ranks, a("scores"), a("rank_keys"), a("counts"),
        a("stream") = 0);
  m.attr("LM_HEAD_SUMMARY_WORDS") = NT_LM_HEAD_SUMMARY_WORDS;
  m.attr("LM_HEAD_LOGPROBS_WORDS") = NT_LM_HEAD_LOGPROBS_WORDS(0);
  m.attr("TOKEN_NEEDS_ALL_CANDIDATES") = NT_TOKEN_NEEDS_ALL_CANDIDATES;
  m.def("pack_weights", &pack_weights);
  m.def("quantize_activations", &quantize_activations);
  m.def("apply_penalties", &apply_penalties, a("logits"), a("prompt_offsets").none(),
        a("prompt_ids").none(), a("output_offsets").none(), a("output_ids").none(),
        a("repetition"), a("presence"), a("frequency"), a("stream"), a("alloc").none());
  m.def("apply_logit_bias", &apply_logit_bias, a("logits"), a("offsets").none(), a("ids").none(),
        a("values"), a("stream"), a("alloc").none());
  m.def("verify_draft", &verify_draft, a("target_logits"), a("draft_ids"), a("cu_num_draft"),
        a("draft_probs").none(), a("out_ids"), a("num_emitted"), a("temperature"), a("top_k"),
        a("top_p"), a("min_p"), a("seed"), a("offset"), a("joint"), a("stream"),
        a("alloc").none());
  m.def("verify_tree", &verify_tree, a("target_logits"), a("candidates"),
        a("retrieve_next_token"), a("retrieve_next_sibling"), a("out_ids"),
        a("out_nodes").none(), a("num_emitted"), a("temperature"), a("top_k"), a("top_p"),
        a("min_p"), a("seed"), a("offset"), a("joint"), a("stream"), a("alloc").none());
  m.def("version", [] { return nt_version_string(); });
  m.def("backend_available", [](int device) { return nt_backend_available(nt_device_type(device)) != 0; });
  m.def("cpu_num_threads", [] { return nt_cpu_num_threads(); });
  m.def("cpu_set_num_threads", [](int32_t n) { check(nt_cpu_set_num_threads(n)); });
#ifdef NEXTTOK_WITH_CUDA
  m.attr("cuda_compiled") = true;
  // jax exposes no stream: its calls run on the legacy stream and wait here.
  m.def("stream_synchronize", [](uintptr_t s) {
    cudaError_t e;
    {
      nb::gil_scoped_release unlocked;
      e = cudaStreamSynchronize(reinterpret_cast<cudaStream_t>(s));
    }
    if (e != cudaSuccess) throw std::runtime_error(cudaGetErrorString(e));
  });
#else
  m.attr("cuda_compiled") = false;
#endif
}
