// A prompt's work between its matrix products, for Llama-family models, batch 1, float32: three kernels a layer
// calls where torch runs several each (measured at 512 tokens: SiLU x up 67 ms, the norms 28 ms, attention 270 ms
// of a 750 ms prefill, torch's ops; README "The prompt's kernels in C").
//
// prompt_attention: RoPE on the new queries and keys, the new keys and values written into the KV cache, then
// flash attention (Dao et al. 2022: key blocks, running max and sum) over the cache, skipping the key blocks above
// the diagonal and reading each key and value once for all the query heads of its KV head (grouped-query
// attention). Why by hand: torch's CPU flash kernel takes keys in blocks of 512, so a 512-token prompt computes and
// then masks the whole upper half of every score matrix. Here blocks are BK keys, and a block is skipped when
// every query of the tile is before it.
// rms_norm: (x += add, in place, when given) then x / sqrt(mean(x^2) + eps) * w, a row per token.
// silu_mul: SwiGLU's SiLU(gate) * up from the fused gate/up projection's rows.
//
// Head dims a multiple of 16. Built and loaded by prompt_kernels.py (gcc -O3 -march=native -fopenmp
// -ffast-math: no infinity or NaN is made here, the running max starts from -FLT_MAX); the same maths as
// layers.apply_rope + KVCache.write + attention_fast, layers.rms_norm and SwiGLUMLP, in another order of additions
// (tests check the outputs close).
#include <float.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#define BQ 32   // query tokens of a tile (times G query heads: the tile's rows)
#define BK 64   // keys of a block: one row of the score tile, four 16-float vectors
#define INLINE static inline __attribute__((always_inline))

#if defined(__AVX512F__)  // 16-float vectors, 32 registers: a 4 x 64 tile of scores or outputs in 16 accumulators

typedef float v16 __attribute__((vector_size(64)));  // 16 floats
typedef float v16u __attribute__((vector_size(64), aligned(4), may_alias));  // the same, at any float's address

// through a pointer, not memcpy (see load8)
INLINE v16 load16(const float *p) { return *(const v16u *)p; }
INLINE void store16(float *p, v16 v) { *(v16u *)p = v; }
INLINE v16 splat(float a) { return (v16){a, a, a, a, a, a, a, a, a, a, a, a, a, a, a, a}; }

// s[r][0..BK) = q[r] . kt[:, 0..BK) for four rows r: kt is a block of BK keys transposed, (D, ld), zero past the last key
INLINE void scores4(const float *q0, const float *q1, const float *q2, const float *q3, const float *kt, long ld,
                    int D, float *s0, float *s1, float *s2, float *s3) {
  v16 a[4][4] = {{0}};
  for (int d = 0; d < D; d++) {
    const float *k = kt + d * ld;
    v16 k0 = load16(k), k1 = load16(k + 16), k2 = load16(k + 32), k3 = load16(k + 48);
    v16 b0 = splat(q0[d]), b1 = splat(q1[d]), b2 = splat(q2[d]), b3 = splat(q3[d]);
    a[0][0] += b0 * k0; a[0][1] += b0 * k1; a[0][2] += b0 * k2; a[0][3] += b0 * k3;
    a[1][0] += b1 * k0; a[1][1] += b1 * k1; a[1][2] += b1 * k2; a[1][3] += b1 * k3;
    a[2][0] += b2 * k0; a[2][1] += b2 * k1; a[2][2] += b2 * k2; a[2][3] += b2 * k3;
    a[3][0] += b3 * k0; a[3][1] += b3 * k1; a[3][2] += b3 * k2; a[3][3] += b3 * k3;
  }
  float *out[4] = {s0, s1, s2, s3};
  for (int r = 0; r < 4; r++)
    for (int c = 0; c < 4; c++) store16(out[r] + 16 * c, a[r][c]);
}

// o[r][0..16 nv) += sum_j p[r][j] v[j][0..16 nv) for four rows r over n keys (v rows D apart); nv is 4 or 1
// (a constant where it is called: the accumulators stay in registers)
INLINE void weigh4(const float *p0, const float *p1, const float *p2, const float *p3, const float *v, int n, int D,
                   float *o0, float *o1, float *o2, float *o3, const int nv) {
  float *o[4] = {o0, o1, o2, o3};
  const float *p[4] = {p0, p1, p2, p3};
  v16 a[4][4];
  for (int r = 0; r < 4; r++)
    for (int c = 0; c < nv; c++) a[r][c] = load16(o[r] + 16 * c);
  for (int j = 0; j < n; j++) {
    const float *vj = v + (long)j * D;
    v16 w[4];
    for (int c = 0; c < nv; c++) w[c] = load16(vj + 16 * c);
    for (int r = 0; r < 4; r++) {
      const v16 b = splat(p[r][j]);
      for (int c = 0; c < nv; c++) a[r][c] += b * w[c];
    }
  }
  for (int r = 0; r < 4; r++)
    for (int c = 0; c < nv; c++) store16(o[r] + 16 * c, a[r][c]);
}

#else  // 8-float vectors, 16 registers (AVX2): a 4 x 16 tile a pass in 8 named accumulators. The 16-float tile
        // above, built for AVX2, splits each vector in two: 32 accumulators for 16 registers, spilled every step
        // (measured 3-7x slower than this one, emulated AVX2, 128-1024 tokens)

typedef float v8 __attribute__((vector_size(32)));  // 8 floats
typedef float v8u __attribute__((vector_size(32), aligned(4), may_alias));  // the same, at any float's address

// loaded and stored through a pointer, not memcpy: under gcc's generic tuning (-mavx2 without -march=native) a
// memcpy'd vector went through the stack in two 16-byte halves, and the whole-vector read after them waited on both
// stores (perf: 40 % of the kernel's cycles on those two instructions; the attention 3x slower than torch's)
INLINE v8 load8(const float *p) { return *(const v8u *)p; }
INLINE void store8(float *p, v8 v) { *(v8u *)p = v; }
INLINE v8 splat8(float a) { return (v8){a, a, a, a, a, a, a, a}; }

// acc_r0/acc_r1 += x * (w0, w1) for the four rows r: the 4 x 16 step both products share
#define STEP4x16(x0, x1, x2, x3, w0, w1)                                     \
  do {                                                                      \
    v8 b_ = splat8(x0); a00 += b_ * (w0); a01 += b_ * (w1);                 \
    b_ = splat8(x1); a10 += b_ * (w0); a11 += b_ * (w1);                    \
    b_ = splat8(x2); a20 += b_ * (w0); a21 += b_ * (w1);                    \
    b_ = splat8(x3); a30 += b_ * (w0); a31 += b_ * (w1);                    \
  } while (0)

// s[r][0..BK) = q[r] . kt[:, 0..BK) for four rows r, 16 keys a pass (the same contract as the 16-float version)
INLINE void scores4(const float *q0, const float *q1, const float *q2, const float *q3, const float *kt, long ld,
                    int D, float *s0, float *s1, float *s2, float *s3) {
  for (int c = 0; c < BK; c += 16) {
    v8 a00 = {0}, a01 = {0}, a10 = {0}, a11 = {0}, a20 = {0}, a21 = {0}, a30 = {0}, a31 = {0};
    for (int d = 0; d < D; d++) {
      const float *k = kt + d * ld + c;
      const v8 k0 = load8(k), k1 = load8(k + 8);
      STEP4x16(q0[d], q1[d], q2[d], q3[d], k0, k1);
    }
    store8(s0 + c, a00); store8(s0 + c + 8, a01); store8(s1 + c, a10); store8(s1 + c + 8, a11);
    store8(s2 + c, a20); store8(s2 + c + 8, a21); store8(s3 + c, a30); store8(s3 + c + 8, a31);
  }
}

// o[r][0..16 nv) += sum_j p[r][j] v[j][0..16 nv) for four rows r over n keys, 16 dims a pass
INLINE void weigh4(const float *p0, const float *p1, const float *p2, const float *p3, const float *v, int n, int D,
                   float *o0, float *o1, float *o2, float *o3, const int nv) {
  for (int c = 0; c < 16 * nv; c += 16) {
    v8 a00 = load8(o0 + c), a01 = load8(o0 + c + 8), a10 = load8(o1 + c), a11 = load8(o1 + c + 8);
    v8 a20 = load8(o2 + c), a21 = load8(o2 + c + 8), a30 = load8(o3 + c), a31 = load8(o3 + c + 8);
    for (int j = 0; j < n; j++) {
      const float *vj = v + (long)j * D + c;
      const v8 w0 = load8(vj), w1 = load8(vj + 8);
      STEP4x16(p0[j], p1[j], p2[j], p3[j], w0, w1);
    }
    store8(o0 + c, a00); store8(o0 + c + 8, a01); store8(o1 + c, a10); store8(o1 + c + 8, a11);
    store8(o2 + c, a20); store8(o2 + c + 8, a21); store8(o3 + c, a30); store8(o3 + c + 8, a31);
  }
}

#endif

// One tile: the G query heads of KV head kh for query tokens [t0, t1), over keys [0, start + t1).
// q (T, H, D) roped and scaled; kt (KH, ld / BK, D, BK) the keys transposed block by block (each block's D x BK
// numbers in one piece: rows of the whole length, ld floats apart, would map to the same few cache sets when ld is a
// multiple of 1024); v (KH, smax, D) the cache; out (T, H * D).
static void tile(const float *q, const float *kt, long ld, const float *v, long smax, float *out, int H, int KH,
                 int D, long start, long t0, long t1, int kh, float *s, float *o, float *m, float *l) {
  const int G = H / KH, R = (int)(t1 - t0) * G, R4 = (R + 3) & ~3;  // rows: token-major, then head
  const float *rows[BQ * 8 + 4];  // G <= 8 (checked by the caller)
  for (int r = 0; r < R4; r++) {
    int rr = r < R ? r : R - 1;  // padding rows repeat the last one (computed, never written out)
    rows[r] = q + ((t0 + rr / G) * H + kh * G + rr % G) * (long)D;
    m[r] = -FLT_MAX;  // below every score: the first block's rescale is expf(-FLT_MAX - top) = 0
    l[r] = 0;
  }
  memset(o, 0, sizeof(float) * R4 * D);
  const long keys = start + t1;  // the last token of the tile sees keys [0, keys)
  const float *ktk = kt + (long)kh * D * ld, *vk = v + (long)kh * smax * D;
  for (long j0 = 0; j0 < keys; j0 += BK) {
    const int n = (int)(keys - j0 < BK ? keys - j0 : BK);
    for (int r = 0; r < R4; r += 4)
      scores4(rows[r], rows[r + 1], rows[r + 2], rows[r + 3], ktk + j0 * D, BK, D, s + r * BK, s + (r + 1) * BK,
              s + (r + 2) * BK, s + (r + 3) * BK);
    for (int r = 0; r < R4; r++) {
      float *sr = s + r * BK;
      const long pos = start + t0 + (r < R ? r : R - 1) / G;  // this row's position: keys <= pos are seen
      const int seen = pos - j0 + 1 < n ? (int)(pos - j0 + 1) : n;
      if (seen <= 0) {  // a block wholly after this row's position
        memset(sr, 0, sizeof(float) * BK);
        continue;
      }
      float top = m[r];
      for (int j = 0; j < seen; j++) top = sr[j] > top ? sr[j] : top;
      const float rescale = expf(m[r] - top);  // 0 on the first block (m = -FLT_MAX, a finite number)
      float sum = 0;
      #pragma omp simd reduction(+:sum)
      for (int j = 0; j < seen; j++) {
        sr[j] = expf(sr[j] - top);
        sum += sr[j];
      }
      for (int j = seen; j < BK; j++) sr[j] = 0;
      m[r] = top;
      l[r] = l[r] * rescale + sum;
      if (rescale != 1.0f) {
        float *orow = o + (long)r * D;
        #pragma omp simd
        for (int d = 0; d < D; d++) orow[d] *= rescale;
      }
    }
    for (int r = 0; r < R4; r += 4) {
      const float *p0 = s + r * BK, *p1 = p0 + BK, *p2 = p1 + BK, *p3 = p2 + BK, *vb = vk + j0 * D;
      float *o0 = o + (long)r * D, *o1 = o0 + D, *o2 = o1 + D, *o3 = o2 + D;
      int c = 0;
      for (; c + 64 <= D; c += 64) weigh4(p0, p1, p2, p3, vb + c, n, D, o0 + c, o1 + c, o2 + c, o3 + c, 4);
      for (; c < D; c += 16) weigh4(p0, p1, p2, p3, vb + c, n, D, o0 + c, o1 + c, o2 + c, o3 + c, 1);
    }
  }
  for (int r = 0; r < R; r++) {
    const float inv = 1.0f / l[r];
    float *dst = out + (t0 + r / G) * (long)H * D + (long)(kh * G + r % G) * D;
    #pragma omp simd
    for (int d = 0; d < D; d++) dst[d] = o[(long)r * D + d] * inv;
  }
}

// qkv (T, (H + 2 KH) D): the layer's fused projection for T new tokens at positions start..start+T-1.
// cos, sin (T, D): their rotations (the tables' rows, as apply_rope takes them). kc, vc: this layer's cache row,
// (KH, smax, D) each, holding `start` earlier tokens. out (T, H D). Returns 0, or -1 when scratch ran out.
int prompt_attention(const float *qkv, long T, int H, int KH, int D, const float *cos, const float *sin,
                      float *kc, float *vc, long smax, long start, float *out, int threads) {
  const long S = start + T, ld = (S + BK - 1) / BK * BK;  // keys; the transposed keys' row length (zero-padded)
  const int G = H / KH, QKV = (H + 2 * KH) * D, half = D / 2;
  const float scale = 1.0f / sqrtf((float)D);
  float *q = malloc(sizeof(float) * T * H * D), *kt = calloc((size_t)KH * D * ld, sizeof(float));
  if (!q || !kt) { free(q); free(kt); return -1; }
  const long tiles = (T + BQ - 1) / BQ;
  int failed = 0;
  #pragma omp parallel num_threads(threads)
  {
    // RoPE on the queries (scaled) and the new keys; new keys and values into the cache
    #pragma omp for schedule(static)
    for (long t = 0; t < T; t++) {
      const float *row = qkv + t * QKV, *c = cos + t * D, *sn = sin + t * D;
      for (int h = 0; h < H + KH; h++) {
        const float *x = row + (long)h * D;
        float *dst = h < H ? q + (t * H + h) * (long)D : kc + ((long)(h - H) * smax + start + t) * D;
        const float f = h < H ? scale : 1.0f;
        for (int d = 0; d < D; d++) dst[d] = (x[d] * c[d] + (d < half ? -x[d + half] : x[d - half]) * sn[d]) * f;
      }
      for (int h = 0; h < KH; h++)
        memcpy(vc + ((long)h * smax + start + t) * D, row + (long)(H + KH + h) * D, sizeof(float) * D);
    }
    // every key, earlier and new, transposed block by block: (KH, ld / BK, D, BK)
    #pragma omp for schedule(static) collapse(2)
    for (int h = 0; h < KH; h++)
      for (long s0 = 0; s0 < S; s0 += BK)
        for (long s = s0; s < (s0 + BK < S ? s0 + BK : S); s++)
          for (int d = 0; d < D; d++) kt[(long)h * D * ld + s0 * D + d * BK + (s - s0)] = kc[((long)h * smax + s) * D + d];
    const int R4 = BQ * G + 4;
    float *s = malloc(sizeof(float) * R4 * BK), *o = malloc(sizeof(float) * R4 * D);
    float *m = malloc(sizeof(float) * R4), *l = malloc(sizeof(float) * R4);
    if (!s || !o || !m || !l) {
      #pragma omp atomic write
      failed = 1;
    }
    #pragma omp barrier
    if (!failed) {
      // the longest tiles (the last queries) first: dynamic scheduling then evens the threads out
      #pragma omp for schedule(dynamic, 1)
      for (long i = 0; i < tiles * KH; i++) {
        const long tq = tiles - 1 - i / KH;
        const long t0 = tq * BQ, t1 = t0 + BQ < T ? t0 + BQ : T;
        tile(q, kt, ld, vc, smax, out, H, KH, D, start, t0, t1, (int)(i % KH), s, o, m, l);
      }
    }
    free(s); free(o); free(m); free(l);
  }
  free(q);
  free(kt);
  return failed ? -1 : 0;
}

// x (T, C): x += add (when add is not NULL), then out = x / sqrt(mean(x^2) + eps) * w, row by row
void rms_norm(float *x, const float *add, const float *w, float *out, long T, int C, float eps, int threads) {
  #pragma omp parallel for schedule(static) num_threads(threads)
  for (long t = 0; t < T; t++) {
    float *xt = x + t * C, *ot = out + t * C;
    if (add) {
      const float *at = add + t * C;
      #pragma omp simd
      for (int i = 0; i < C; i++) xt[i] += at[i];
    }
    float ss = 0;
    #pragma omp simd reduction(+:ss)
    for (int i = 0; i < C; i++) ss += xt[i] * xt[i];
    const float r = 1.0f / sqrtf(ss / C + eps);
    #pragma omp simd
    for (int i = 0; i < C; i++) ot[i] = xt[i] * r * w[i];
  }
}

// gu (T, 2F): each row's gate then up halves -> out (T, F) = SiLU(gate) * up = gate / (1 + exp(-gate)) * up
void silu_mul(const float *gu, float *out, long T, long F, int threads) {
  #pragma omp parallel for schedule(static) num_threads(threads)
  for (long t = 0; t < T; t++) {
    const float *g = gu + t * 2 * F, *u = g + F;
    float *o = out + t * F;
    #pragma omp simd
    for (long i = 0; i < F; i++) o[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
  }
}

// the functions and arguments prompt_kernels.py's ctypes calls were written for
int prompt_kernels_abi(void) { return 1; }
