// CPU sampling entry points: parameters, workspace, and the two ways of
// running rows (cpu/sample_row.h): one row per thread when there are at least
// as many rows as threads, otherwise every pass split over (row, chunk) items
// of all rows.
#include <algorithm>
#include <cstdint>
#include <new>

#include "core/check.h"
#include "cpu/ops.h"
#include "cpu/row_io.h"
#include "cpu/sample_row.h"
#include "cpu/thread_pool.h"

namespace nt::cpu {
namespace sampling {
namespace {

// ---- workspace ---------------------------------------------------------------
// Per slot (a row in flight, at most one per thread): the RowJob, per-chunk
// results and mass bins, and seven lists of V entries, since a candidate list
// can reach the whole row (top-k near V, a flat nucleus).

struct Layout {
  int64_t n_chunks, slots;
  size_t job_bytes, chunk_bytes, mass_bytes, count_bytes, list_bytes, slot_bytes, bytes;
  explicit Layout(const SampleCall& call)
      : n_chunks((call.vocab + kChunk - 1) / kChunk),
        slots(std::min<int64_t>(call.rows, num_threads())),
        job_bytes(align64(sizeof(RowJob))),
        chunk_bytes(align64(size_t(n_chunks) * sizeof(ChunkOut))),
        mass_bytes(align64(size_t(n_chunks) * kMassBins * sizeof(double))),
        count_bytes(align64(size_t(n_chunks) * kMassBins * sizeof(uint32_t))),
        list_bytes(align64(size_t(call.vocab) * 4)),
        slot_bytes(job_bytes + chunk_bytes + mass_bytes + count_bytes + 7 * list_bytes),
        bytes(size_t(slots) * slot_bytes + kWorkspaceSlack) {}
};

RowJob* bind_slot(char* base, const Layout& L) {
  char* p = base;
  auto take = [&p](size_t bytes) {
    char* piece = p;
    p += bytes;
    return piece;
  };
  RowJob* job = new (take(L.job_bytes)) RowJob;
  job->chunks = reinterpret_cast<ChunkOut*>(take(L.chunk_bytes));
  job->bin_mass = reinterpret_cast<double*>(take(L.mass_bytes));
  job->bin_count = reinterpret_cast<uint32_t*>(take(L.count_bytes));
  job->c_index = reinterpret_cast<int32_t*>(take(L.list_bytes));
  job->c_key = reinterpret_cast<uint32_t*>(take(L.list_bytes));
  job->c_score = reinterpret_cast<float*>(take(L.list_bytes));
  job->c_mass = reinterpret_cast<float*>(take(L.list_bytes));
  job->r_index = reinterpret_cast<int32_t*>(take(L.list_bytes));
  job->r_key = reinterpret_cast<uint32_t*>(take(L.list_bytes));
  job->r_val = reinterpret_cast<float*>(take(L.list_bytes));
  return job;
}

// ---- drivers -----------------------------------------------------------------

void init_job(RowJob& j, const SampleCall& call, int64_t r) {
  const nt_sample_args& a = call.args;
  j.x = Row{row_address(a.logits, r), a.logits.dtype};
  j.vocab = call.vocab;
  j.n_chunks = (j.vocab + kChunk - 1) / kChunk;
  j.p = call.per_row ? row_params(a, r, j.vocab) : call.scalar;
  j.joint = call.joint;
  j.seed = row_param(a.seed, r);
  j.offset = row_param(a.offset, r);
  j.tag = nt_row_tag(a.seed.per_row != nullptr, uint32_t(r));
  j.has_uniform = call.explicit_draw;
  j.uniform = j.has_uniform ? static_cast<const float*>(a.uniform.data)[r] : 0.0f;
}

void write_token(const SampleCall& call, int64_t r, int64_t token) {
  if (call.tokens_i32) static_cast<int32_t*>(call.args.tokens.data)[r] = int32_t(token);
  else static_cast<int64_t*>(call.args.tokens.data)[r] = token;
}

// Every pass runs over all (row, chunk) pairs of the rows at once (serially
// inside a pool task). A task takes several chunks of the cheap passes, which
// would otherwise cost less than waking a worker.
void run_rows(RowJob** jobs, int64_t rows) {
  const int64_t n_chunks = jobs[0]->n_chunks;
  auto each_row = [&](Next pass, void (*stage)(RowJob&)) {
    parallel_for(rows, 1, [&](int64_t begin, int64_t end, int) {
      for (int64_t r = begin; r < end; ++r)
        if (jobs[r]->next == pass) stage(*jobs[r]);
    });
  };
  auto each_chunk = [&](Next pass, void (*body)(RowJob&, int64_t), int64_t chunks_per_task) {
    bool any = false;
    for (int64_t r = 0; r < rows; ++r) any |= jobs[r]->next == pass;
    if (!any) return false;
    parallel_for(rows * n_chunks, chunks_per_task, [&](int64_t begin, int64_t end, int) {
      for (int64_t item = begin; item < end; ++item) {
        RowJob& j = *jobs[item / n_chunks];
        if (j.next == pass) body(j, item % n_chunks);
      }
    });
    return true;
  };
  for (int64_t r = 0; r < rows; ++r) stage_start(*jobs[r]);
  each_chunk(Next::kScan, &chunk_scan, 4);
  each_row(Next::kScan, &stage_after_scan);
  // The mass pass runs twice when the binned range was too short.
  while (each_chunk(Next::kMass, &chunk_mass, 2)) each_row(Next::kMass, &stage_after_mass);
  if (each_chunk(Next::kCompact, &chunk_compact, 4)) each_row(Next::kCompact, &stage_after_compact);
  if (each_chunk(Next::kDraw, &chunk_draw, 2)) each_row(Next::kDraw, &stage_after_draw);
}

}  // namespace

size_t sample_workspace_bytes(const SampleCall& call) {
  return call.rows == 0 ? 0 : Layout(call).bytes;
}

void sample_rows(const char* op, const SampleCall& call, void* workspace, size_t workspace_bytes,
                 RowDone done) {
  const int64_t rows = call.rows;
  if (rows == 0) return;
  const Layout layout(call);
  check_workspace(op, layout.bytes, workspace, workspace_bytes);
  char* base = align_workspace(workspace);
  auto slot = [&](int64_t s) { return bind_slot(base + size_t(s) * layout.slot_bytes, layout); };

  if (rows < num_threads() && layout.n_chunks > 1) {
    RowJob* jobs[256];
    for (int64_t done_rows = 0; done_rows < rows; done_rows += 256) {
      const int64_t n = std::min<int64_t>(256, rows - done_rows);
      for (int64_t r = 0; r < n; ++r) {
        jobs[r] = slot(r);
        init_job(*jobs[r], call, done_rows + r);
      }
      run_rows(jobs, n);
      for (int64_t r = 0; r < n; ++r) write_token(call, done_rows + r, jobs[r]->token);
      if (done.fn != nullptr)
        parallel_for(n, 1, [&](int64_t begin, int64_t end, int) {
          for (int64_t r = begin; r < end; ++r) done.fn(*jobs[r], done_rows + r, done.context);
        });
    }
    return;
  }
  // One slot per group of consecutive rows.
  const int64_t slots = layout.slots;
  parallel_for(slots, 1, [&](int64_t begin, int64_t end, int) {
    for (int64_t s = begin; s < end; ++s) {
      RowJob* j = slot(s);
      for (int64_t r = rows * s / slots; r < rows * (s + 1) / slots; ++r) {
        init_job(*j, call, r);
        run_rows(&j, 1);
        write_token(call, r, j->token);
        if (done.fn != nullptr) done.fn(*j, r, done.context);
      }
    }
  });
}

}  // namespace sampling

size_t CpuBackend::sample_workspace_size(const SampleCall& call) {
  return sampling::sample_workspace_bytes(call);
}

void CpuBackend::sample(const SampleCall& call, void* workspace, size_t workspace_bytes, void*) {
  sampling::sample_rows("sample", call, workspace, workspace_bytes,
                        sampling::RowDone{nullptr, nullptr});
}

}  // namespace nt::cpu
