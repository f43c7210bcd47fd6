// One batch-1 float32 decode step of a Llama-family model (no biases): every layer and the head in ONE OpenMP
// parallel region, so the step's ~120 matrix-vector products stream the weights back to back with a barrier
// between dependent parts instead of a library call (and a fork/join of the threads) each.
// Built and loaded by c_decode.py (gcc -O3 -march=native -fopenmp -ffast-math); the same maths as
// Transformer.decode_rows, in another order of additions (logits within ~1e-5 relative; a test checks).
#include <float.h>
#include <math.h>
#include <omp.h>

typedef struct {
  const float *n1, *wqkv, *wout, *n2, *wgu, *wdown;  // (C) (QKV, C) (C, H*D) (C) (2F, C) (C, F)
  float *k, *v;                                        // this layer's cache, its first row: (KH, smax, D) each
} Layer;

typedef struct {
  int L, C, H, KH, D, F;
  long V, smax;
  float eps;
  const Layer *layers;
  const float *nfinal, *whead;  // (C) (V, C)
  // scratch, (sizes): x (C), h (threads, C), qkv (QKV), scores (H, smax), part (KH * threads, G, D + 2),
  // att (H * D), gu (2F), act (F)
  float *x, *h, *qkv, *scores, *part, *att, *gu, *act;
} Model;

// y[n] (+)= W[n, :] . x for n in [0, N): the rows shared among the threads in two contiguous halves, four
// rows at a time (four independent sums, one load of x for four rows of W)
static void gemv(const float *W, const float *x, float *y, long N, long K, int add) {
  long blocks = (N + 3) / 4;
  #pragma omp for schedule(static)
  for (long b = 0; b < blocks; b++) {
    long n = 4 * b;
    if (n + 4 <= N) {
      const float *w0 = W + n * K, *w1 = w0 + K, *w2 = w1 + K, *w3 = w2 + K;
      float a0 = 0, a1 = 0, a2 = 0, a3 = 0;
      #pragma omp simd reduction(+:a0, a1, a2, a3)
      for (long k = 0; k < K; k++) {
        float xk = x[k];
        a0 += w0[k] * xk; a1 += w1[k] * xk; a2 += w2[k] * xk; a3 += w3[k] * xk;
      }
      if (add) { y[n] += a0; y[n + 1] += a1; y[n + 2] += a2; y[n + 3] += a3; }
      else { y[n] = a0; y[n + 1] = a1; y[n + 2] = a2; y[n + 3] = a3; }
    } else {
      for (long r = n; r < N; r++) {
        float a = 0;
        #pragma omp simd reduction(+:a)
        for (long k = 0; k < K; k++) a += W[r * K + k] * x[k];
        y[r] = add ? y[r] + a : a;
      }
    }
  }
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

// Attention of one KV head's G queries over positions [s0, s1): softmax's max and sum of this part and the
// unnormalised weighted sum of V, kept in part (G, D + 2) to be joined with the other parts'
static void attend_part(const float *q, const float *K, const float *V, float *sc, long stride, long s0, long s1,
                        int G, int D, float scale, float *part) {
  for (int g = 0; g < G; g++) {  // scores: each key row read from memory once, for all G queries (cached after)
    const float *qg = q + (long)g * D;
    float *row = sc + g * stride;
    for (long s = s0; s < s1; s++) {
      const float *kr = K + s * D;
      float a = 0;
      #pragma omp simd reduction(+:a)
      for (int d = 0; d < D; d++) a += qg[d] * kr[d];
      row[s] = a * scale;
    }
  }
  for (int g = 0; g < G; g++) {
    float *row = sc + g * stride, mx = -FLT_MAX, sum = 0;
    for (long s = s0; s < s1; s++) mx = row[s] > mx ? row[s] : mx;
    #pragma omp simd reduction(+:sum)
    for (long s = s0; s < s1; s++) { row[s] = expf(row[s] - mx); sum += row[s]; }
    float *acc = part + (long)g * (D + 2);
    for (int d = 0; d < D; d++) acc[d] = 0;
    acc[D] = mx;
    acc[D + 1] = sum;
  }
  for (long s = s0; s < s1; s++) {  // V read row by row, each row once for the G queries
    const float *vr = V + s * D;
    for (int g = 0; g < G; g++) {
      float e = sc[g * stride + s], *acc = part + (long)g * (D + 2);
      #pragma omp simd
      for (int d = 0; d < D; d++) acc[d] += e * vr[d];
    }
  }
}

// One decode step: x (C) holds this token's embedding on entry; the token's K and V are written at `pos`, attention
// reads positions [0, S); logits (V) out. cos, sin_signed (D): this position's RoPE (sin's first half negated).
void decode_step(const Model *m, const float *cos, const float *sin_signed, long pos, long S, float *logits,
                 int threads) {
  const int C = m->C, H = m->H, KH = m->KH, D = m->D, F = m->F, G = H / KH, half = D / 2;
  const long QKV = (long)(H + 2 * KH) * D;
  const float scale = 1.0f / sqrtf((float)D);
  #pragma omp parallel num_threads(threads)
  {
    const int P = omp_get_num_threads(), me = omp_get_thread_num();  // P: parts of the positions per KV head
    float *h = m->h + (long)me * C;
    for (int l = 0; l < m->L; l++) {
      const Layer *ly = &m->layers[l];
      rmsnorm(m->x, ly->n1, h, C, m->eps);
      gemv(ly->wqkv, h, m->qkv, QKV, C, 0);  // (QKV): [q (H, D), k (KH, D), v (KH, D)]
      #pragma omp single
      {  // RoPE on the queries and keys; this token's K and V into the cache
        for (int j = 0; j < H + KH; j++) {
          float *r = m->qkv + (long)j * D, t[512];
          for (int d = 0; d < D; d++) t[d] = r[d] * cos[d] + r[d < half ? d + half : d - half] * sin_signed[d];
          for (int d = 0; d < D; d++) r[d] = t[d];
        }
        for (int g = 0; g < KH; g++)
          for (int d = 0; d < D; d++) {
            ly->k[((long)g * m->smax + pos) * D + d] = m->qkv[(long)(H + g) * D + d];
            ly->v[((long)g * m->smax + pos) * D + d] = m->qkv[(long)(H + KH + g) * D + d];
          }
      }
      #pragma omp for schedule(static)
      for (int item = 0; item < KH * P; item++) {  // (KV head, part of the positions): flash-decoding's split
        int g = item / P, p = item % P;
        attend_part(m->qkv + (long)g * G * D, ly->k + (long)g * m->smax * D, ly->v + (long)g * m->smax * D,
                    m->scores + (long)g * G * m->smax, m->smax, S * p / P, S * (p + 1) / P, G, D, scale,
                    m->part + (long)item * G * (D + 2));
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
      gemv(ly->wout, m->att, m->x, C, (long)H * D, 1);  // x += att @ Wout^T
      rmsnorm(m->x, ly->n2, h, C, m->eps);
      gemv(ly->wgu, h, m->gu, 2L * F, C, 0);  // (2F): [gate, up]
      #pragma omp for schedule(static)
      for (int f = 0; f < F; f++) {
        float gt = m->gu[f];
        m->act[f] = gt / (1.0f + expf(-gt)) * m->gu[F + f];  // SiLU(gate) * up
      }
      gemv(ly->wdown, m->act, m->x, C, F, 1);  // x += act @ Wdown^T
    }
    rmsnorm(m->x, m->nfinal, h, C, m->eps);
    gemv(m->whead, h, logits, m->V, C, 0);
  }
}

int decode_step_abi(void) { return 1; }  // the Model/Layer layout c_decode.py's ctypes structures were written for
