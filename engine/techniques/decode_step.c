// One batch-1 decode step of a Llama-family model (no biases): every layer and the head in ONE OpenMP parallel
// region, so the step's ~120 matrix-vector products stream the weights back to back with a barrier between
// dependent parts instead of a library call (and a fork/join of the threads) each. Weights and KV cache in float32
// or bfloat16 (`bf16`: widened to float32 as they are read, the cache's new entries rounded to bfloat16 as torch
// rounds); everything between them in float32.
// Built and loaded by c_decode.py (gcc -O3 -march=native -fopenmp -ffast-math: no infinity or NaN is made here,
// the softmax starts from -FLT_MAX); the same maths as Transformer.decode_rows, in another order of additions
// (float32: logits within ~1e-5 relative; tests check).
#include <float.h>
#include <math.h>
#include <omp.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define INLINE static inline __attribute__((always_inline))  // called with a constant `bf16`: one loop per type

typedef struct {
  const float *n1;                                     // (C) float32
  const void *wqkv, *wout;                             // (QKV, C) (C, H*D), float32 or bfloat16
  const float *n2;                                     // (C) float32
  const void *wgu, *wdown;                             // (2F, C) (C, F)
  void *k, *v;                                         // this layer's cache, its first row: (KH, smax, D) each
} Layer;

typedef struct {
  int L, C, H, KH, D, F, bf16;  // bf16: weights and cache in bfloat16 (else float32)
  long V, smax;
  float eps;
  const Layer *layers;
  const float *nfinal;  // (C) float32
  const void *whead;    // (V, C)
  // scratch, (sizes): x (C), h (threads, C), qkv (QKV), scores (H, smax), part (KH * threads, G, D + 2),
  // att (H * D), gu (2F), act (F)
  float *x, *h, *qkv, *scores, *part, *att, *gu, *act;
} Model;

INLINE float widen(uint16_t v) {  // bfloat16 -> float32: the upper half of its bits
  uint32_t u = (uint32_t)v << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

INLINE uint16_t narrow(float f) {  // float32 -> bfloat16, rounded to nearest even (torch's rounding)
  uint32_t u;
  memcpy(&u, &f, 4);
  return (uint16_t)((u + 0x7FFF + ((u >> 16) & 1)) >> 16);
}

INLINE float ld(const void *p, long i, const int bf16) {
  return bf16 ? widen(((const uint16_t *)p)[i]) : ((const float *)p)[i];
}

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define VEC 1
INLINE __m256 ld8(const void *p, long i, const int bf16) {  // eight numbers from p + i, as float32
  if (bf16)
    return _mm256_castsi256_ps(_mm256_slli_epi32(
        _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)((const uint16_t *)p + i))), 16));
  return _mm256_loadu_ps((const float *)p + i);
}

// w . x over K numbers: one row read front to back with four sums in flight (measured: a row at a time streams
// ~10 % faster than four rows side by side, whose four streams 2.3 KB apart the prefetcher follows less well)
INLINE float dot(const void *w, const float *x, long K, const int bf16) {
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  long k = 0;
  for (; k + 32 <= K; k += 32) {
    a0 = _mm256_fmadd_ps(ld8(w, k, bf16), _mm256_loadu_ps(x + k), a0);
    a1 = _mm256_fmadd_ps(ld8(w, k + 8, bf16), _mm256_loadu_ps(x + k + 8), a1);
    a2 = _mm256_fmadd_ps(ld8(w, k + 16, bf16), _mm256_loadu_ps(x + k + 16), a2);
    a3 = _mm256_fmadd_ps(ld8(w, k + 24, bf16), _mm256_loadu_ps(x + k + 24), a3);
  }
  __m256 a = _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3));
  __m128 v = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  v = _mm_hadd_ps(v, v);
  v = _mm_hadd_ps(v, v);
  float sum = _mm_cvtss_f32(v);
  for (; k < K; k++) sum += ld(w, k, bf16) * x[k];
  return sum;
}
#else
#define VEC 0
INLINE float dot(const void *w, const float *x, long K, const int bf16) {  // other instruction sets: the compiler's
  float a = 0;
  #pragma omp simd reduction(+:a)
  for (long k = 0; k < K; k++) a += ld(w, k, bf16) * x[k];
  return a;
}
#endif

// y[n] (+)= W[n, :] . x for n in [0, N): the rows shared among the threads in contiguous parts
INLINE void gemv_t(const void *W, const float *x, float *y, long N, long K, int add, const int bf16) {
  #pragma omp for schedule(static)
  for (long n = 0; n < N; n++) {
    float a = dot(bf16 ? (const void *)((const uint16_t *)W + n * K) : (const void *)((const float *)W + n * K), x, K,
                  bf16);
    y[n] = add ? y[n] + a : a;
  }
}

static void gemv(const void *W, const float *x, float *y, long N, long K, int add, int bf16) {
  if (bf16) gemv_t(W, x, y, N, K, add, 1);  // every thread takes the same branch: one worksharing loop
  else gemv_t(W, x, y, N, K, add, 0);
}

// out (C) = x / sqrt(mean(x^2) + eps) * w: each thread its own copy (no barrier needed before the product)
static void rmsnorm(const float *x, const float *w, float *out, int C, float eps) {
  float ss = 0;
  #pragma omp simd reduction(+:ss)
  for (int i = 0; i < C; i++) ss += x[i] * x[i];
  float r = 1.0f / sqrtf(ss / C + eps);
  #pragma omp simd
  for (int i = 0; i < C; i++) out[i] = x[i] * r * w[i];
}

// sc[g, s] = q[g] . K[s, :] * scale for the G queries and s in [s0, s1): four keys at a time, read from memory
// once for all G queries, their four sums reduced together (one dot product at a time spent most of its time in
// each sum's horizontal reduction, and a pass per query left the memory idle in the later passes)
INLINE void score_keys(const float *q, const void *K, float *sc, long stride, long s0, long s1, int G, int D,
                       float scale, const int bf16) {
  long s = s0;
#if VEC
  if (D % 8 == 0)
    for (; s + 4 <= s1; s += 4) {
      const long k0 = s * D, k1 = k0 + D, k2 = k1 + D, k3 = k2 + D;
      for (int g = 0; g < G; g++) {
        const float *qg = q + (long)g * D;
        __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        for (int d = 0; d < D; d += 8) {
          __m256 qv = _mm256_loadu_ps(qg + d);
          a0 = _mm256_fmadd_ps(qv, ld8(K, k0 + d, bf16), a0); a1 = _mm256_fmadd_ps(qv, ld8(K, k1 + d, bf16), a1);
          a2 = _mm256_fmadd_ps(qv, ld8(K, k2 + d, bf16), a2); a3 = _mm256_fmadd_ps(qv, ld8(K, k3 + d, bf16), a3);
        }
        // [a0 a1 a2 a3] each summed over its eight lanes: two rounds of pairwise sums, then the two halves
        __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(a0, a1), _mm256_hadd_ps(a2, a3));
        __m128 r = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
        _mm_storeu_ps(sc + g * stride + s, _mm_mul_ps(r, _mm_set1_ps(scale)));
      }
    }
#endif
  for (; s < s1; s++)
    for (int g = 0; g < G; g++) {
      float a = 0;
      for (int d = 0; d < D; d++) a += q[(long)g * D + d] * ld(K, s * D + d, bf16);
      sc[g * stride + s] = a * scale;
    }
}

// acc (D) = sum over s in [s0, s1) of e[s] * V[s, :]: the part's values weighed by its softmax numerators
INLINE void weigh_values(const float *e, const void *V, long s0, long s1, int D, float *acc, const int bf16) {
  int d0 = 0;
#if VEC
  for (; d0 + 64 <= D; d0 += 64) {  // 64 dims in eight registers for the whole part: no load or store of acc
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
    for (long s = s0; s < s1; s++) {
      const long v = s * D + d0;
      __m256 w = _mm256_broadcast_ss(e + s);
      a0 = _mm256_fmadd_ps(w, ld8(V, v, bf16), a0); a1 = _mm256_fmadd_ps(w, ld8(V, v + 8, bf16), a1);
      a2 = _mm256_fmadd_ps(w, ld8(V, v + 16, bf16), a2); a3 = _mm256_fmadd_ps(w, ld8(V, v + 24, bf16), a3);
      a4 = _mm256_fmadd_ps(w, ld8(V, v + 32, bf16), a4); a5 = _mm256_fmadd_ps(w, ld8(V, v + 40, bf16), a5);
      a6 = _mm256_fmadd_ps(w, ld8(V, v + 48, bf16), a6); a7 = _mm256_fmadd_ps(w, ld8(V, v + 56, bf16), a7);
    }
    _mm256_storeu_ps(acc + d0, a0); _mm256_storeu_ps(acc + d0 + 8, a1);
    _mm256_storeu_ps(acc + d0 + 16, a2); _mm256_storeu_ps(acc + d0 + 24, a3);
    _mm256_storeu_ps(acc + d0 + 32, a4); _mm256_storeu_ps(acc + d0 + 40, a5);
    _mm256_storeu_ps(acc + d0 + 48, a6); _mm256_storeu_ps(acc + d0 + 56, a7);
  }
  for (; d0 + 8 <= D; d0 += 8) {
    __m256 a = _mm256_setzero_ps();
    for (long s = s0; s < s1; s++) a = _mm256_fmadd_ps(_mm256_broadcast_ss(e + s), ld8(V, s * D + d0, bf16), a);
    _mm256_storeu_ps(acc + d0, a);
  }
#endif
  for (; d0 < D; d0++) {
    float a = 0;
    for (long s = s0; s < s1; s++) a += e[s] * ld(V, s * D + d0, bf16);
    acc[d0] = a;
  }
}

// Attention of one KV head's G queries over positions [s0, s1): softmax's max and sum of this part and the
// unnormalised weighted sum of V, kept in part (G, D + 2) to be joined with the other parts'
INLINE void attend_part_t(const float *q, const void *K, const void *V, float *sc, long stride, long s0, long s1,
                          int G, int D, float scale, float *part, const int bf16) {
  score_keys(q, K, sc, stride, s0, s1, G, D, scale, bf16);
  for (int g = 0; g < G; g++) {
    float *row = sc + g * stride, mx = -FLT_MAX, sum = 0;
    for (long s = s0; s < s1; s++) mx = row[s] > mx ? row[s] : mx;
    #pragma omp simd reduction(+:sum)
    for (long s = s0; s < s1; s++) { row[s] = expf(row[s] - mx); sum += row[s]; }
    part[(long)g * (D + 2) + D] = mx;
    part[(long)g * (D + 2) + D + 1] = sum;
  }
  for (int g = 0; g < G; g++) weigh_values(sc + g * stride, V, s0, s1, D, part + (long)g * (D + 2), bf16);
}

static void attend_part(const float *q, const void *K, const void *V, float *sc, long stride, long s0, long s1,
                        int G, int D, float scale, float *part, int bf16) {
  if (bf16) attend_part_t(q, K, V, sc, stride, s0, s1, G, D, scale, part, 1);
  else attend_part_t(q, K, V, sc, stride, s0, s1, G, D, scale, part, 0);
}

// One decode step: x (C) holds this token's embedding on entry; the token's K and V are written at `pos`, attention
// reads positions [0, S); logits (V) out. cos, sin_signed (D): this position's RoPE (sin's first half negated).
void decode_step(const Model *m, const float *cos, const float *sin_signed, long pos, long S, float *logits,
                 int threads) {
  const int C = m->C, H = m->H, KH = m->KH, D = m->D, F = m->F, G = H / KH, half = D / 2;
  const long QKV = (long)(H + 2 * KH) * D;
  const int bf16 = m->bf16, size = bf16 ? 2 : 4;  // bytes per weight and cache number
  const float scale = 1.0f / sqrtf((float)D);
  #pragma omp parallel num_threads(threads)
  {
    const int P = omp_get_num_threads(), me = omp_get_thread_num();  // P: parts of the positions per KV head
    float *h = m->h + (long)me * C;
    for (int l = 0; l < m->L; l++) {
      const Layer *ly = &m->layers[l];
      rmsnorm(m->x, ly->n1, h, C, m->eps);
      gemv(ly->wqkv, h, m->qkv, QKV, C, 0, bf16);  // (QKV): [q (H, D), k (KH, D), v (KH, D)]
      #pragma omp single
      {  // RoPE on the queries and keys; this token's K and V into the cache
        for (int j = 0; j < H + KH; j++) {
          float *r = m->qkv + (long)j * D, t[512];
          for (int d = 0; d < D; d++) t[d] = r[d] * cos[d] + r[d < half ? d + half : d - half] * sin_signed[d];
          for (int d = 0; d < D; d++) r[d] = t[d];
        }
        for (int g = 0; g < KH; g++)
          for (int d = 0; d < D; d++) {
            long at = ((long)g * m->smax + pos) * D + d;
            float k = m->qkv[(long)(H + g) * D + d], v = m->qkv[(long)(H + KH + g) * D + d];
            if (bf16) {  // as the eager step stores them; attention below reads them back from the cache
              ((uint16_t *)ly->k)[at] = narrow(k);
              ((uint16_t *)ly->v)[at] = narrow(v);
            } else {
              ((float *)ly->k)[at] = k;
              ((float *)ly->v)[at] = v;
            }
          }
      }
      #pragma omp for schedule(static)
      for (int item = 0; item < KH * P; item++) {  // (KV head, part of the positions): flash-decoding's split
        int g = item / P, p = item % P;
        const long head = (long)g * m->smax * D * size;  // bytes to this KV head's rows
        attend_part(m->qkv + (long)g * G * D, (const char *)ly->k + head, (const char *)ly->v + head,
                    m->scores + (long)g * G * m->smax, m->smax, S * p / P, S * (p + 1) / P, G, D, scale,
                    m->part + (long)item * G * (D + 2), bf16);
      }
      #pragma omp for schedule(static)
      for (int hq = 0; hq < H; hq++) {  // the parts joined: softmax over all S positions
        int g = hq / G, q = hq % G;
        float M = -FLT_MAX, L = 0, *out = m->att + (long)hq * D;
        for (int p = 0; p < P; p++) {
          const float *a = m->part + ((long)(g * P + p) * G + q) * (D + 2);
          if (a[D + 1] > 0 && a[D] > M) M = a[D];
        }
        for (int d = 0; d < D; d++) out[d] = 0;
        for (int p = 0; p < P; p++) {
          const float *a = m->part + ((long)(g * P + p) * G + q) * (D + 2);
          if (a[D + 1] == 0) continue;  // an empty part (fewer positions than threads)
          float w = expf(a[D] - M);
          L += w * a[D + 1];
          for (int d = 0; d < D; d++) out[d] += w * a[d];
        }
        for (int d = 0; d < D; d++) out[d] /= L;
      }
      gemv(ly->wout, m->att, m->x, C, (long)H * D, 1, bf16);  // x += att @ Wout^T
      rmsnorm(m->x, ly->n2, h, C, m->eps);
      gemv(ly->wgu, h, m->gu, 2L * F, C, 0, bf16);  // (2F): [gate, up]
      #pragma omp for schedule(static)
      for (int f = 0; f < F; f++) {
        float gt = m->gu[f];
        m->act[f] = gt / (1.0f + expf(-gt)) * m->gu[F + f];  // SiLU(gate) * up
      }
      gemv(ly->wdown, m->act, m->x, C, F, 1, bf16);  // x += act @ Wdown^T
    }
    rmsnorm(m->x, m->nfinal, h, C, m->eps);
    gemv(m->whead, h, logits, m->V, C, 0, bf16);
  }
}

int decode_step_abi(void) { return 3; }  // the Model/Layer layout c_decode.py's ctypes structures were written for

// sizeof(Layer) and each field's offset, then the same for Model, into out (at most n numbers); returns how many:
// c_decode.py compares them with its ctypes structures before it calls decode_step
int decode_step_layout(long *out, int n) {
  const long v[] = {
      sizeof(Layer), offsetof(Layer, n1), offsetof(Layer, wqkv), offsetof(Layer, wout), offsetof(Layer, n2),
      offsetof(Layer, wgu), offsetof(Layer, wdown), offsetof(Layer, k), offsetof(Layer, v),
      sizeof(Model), offsetof(Model, L), offsetof(Model, C), offsetof(Model, H), offsetof(Model, KH),
      offsetof(Model, D), offsetof(Model, F), offsetof(Model, bf16), offsetof(Model, V), offsetof(Model, smax),
      offsetof(Model, eps), offsetof(Model, layers), offsetof(Model, nfinal), offsetof(Model, whead),
      offsetof(Model, x), offsetof(Model, h), offsetof(Model, qkv), offsetof(Model, scores), offsetof(Model, part),
      offsetof(Model, att), offsetof(Model, gu), offsetof(Model, act)};
  const int count = (int)(sizeof(v) / sizeof(v[0]));
  for (int i = 0; i < count && i < n; i++) out[i] = v[i];
  return count;
}
