/* Greedy and top-k / temperature sampling, one threadgroup per row of logits, following the
 * contract of include/tern/effect.h: candidates are the k largest logits in descending
 * order (ties: lower index first), weighted by exp((l - max) / temperature); with
 * u = tern_uniform(seed, counter * rows + r), the first candidate whose cumulative weight
 * exceeds u * total is taken (the last one otherwise). Weights are f32 here (the cpu
 * handler uses double), so the two agree except when u * total falls within rounding of a
 * cumulative boundary.
 *
 * Threshold search instead of a sort:
 *  1. One pass: the max M, the argmax (lowest index), the min, NaN detection.
 *  2. Candidates are restricted to l >= M + tail (tail = temperature ln(2^-26 / V), from the
 *     host): everything below weighs less than 2^-26 of the max all together, so it can
 *     change the pick only at rounding level.
 *  3. When k <= GK_SAMPLE_CAP: a 256-bin histogram of the remaining values (and, if the
 *     crossing bin is crowded, a second one inside it) finds a bin boundary above which at
 *     least k and at most GK_SAMPLE_CAP values lie.
 *  4. Those candidates are compacted into threadgroup memory, ranked by comparison
 *     counting (value descending, index ascending), the first k kept; a prefix sum of
 *     their weights picks the sample.
 *  5. Otherwise (large k, or values too crowded for the histograms): an exact radix search
 *     over the order keys of the whole row, 4 bits per pass with per-thread counters:
 *     first the k-th largest (count search), then the key and index where the cumulative
 *     weight crosses u * total (weight search). Slower (some 30 passes over the row), but
 *     only taken for large k.
 *
 * Three kernels, by n[3]: 0 greedy (step 1 only); 1 top-k (steps 1-4; a row whose values
 * are too crowded gets -1); 2 exact (steps 1, 5), either alone (k > GK_SAMPLE_CAP) or after
 * top-k (the parameter after = 1), when it redoes only the rows marked -1. Smaller kernels
 * than one that does it all: fewer registers, no spills on the common paths.
 * The counter and `after` are runtime values, not build constants, and the exact kernel's
 * two radix searches (count, then weight) are one loop over the two phases: each build
 * constant or traced copy of the search is another kernel or twice the code for an OpenCL
 * compiler, and PoCL took some 30 s of CPU per exact-search kernel (docs/PERFORMANCE.md).
 * On a GPU the cost is a load of the counter (a zero buffer when the caller has none), a
 * uniform branch per element in the searches, and one pass that is now taken in both
 * phases (the row's total weight); the exact kernel runs only for large k or crowded rows.
 * Spec: t[0] logits; n[1] = G, threads per group (a multiple of 32); n[3] the kernel.
 * Parameters: out (i32), logits, counter (i32, one element; zeros when the caller passes
 * none), fault, V, Vp, rows, temperature, k (resolved: V when top_k <= 0 or >= V), tail,
 * seed_hash (u32: the first half of tern_random_bits, hash32(hash32(seed_lo) ^ seed_hi)),
 * ipasses (the index digits of V - 1), after (i32: 1 when only the rows marked -1 are
 * redone). */
#include <math.h>
#include <stdint.h>

#include "kernels/kutil.h"

enum { SAMPLE_GREEDY, SAMPLE_TOPK, SAMPLE_EXACT };

typedef struct sctx {
    tern_kb *kb;
    int G, SG;
    tern_v logits, base, V, tid;
    tern_v red_f, red_i, red16, tot16; /* threadgroup scratch */
} sctx;

static tern_v group_f(sctx *c, ku_reduce op, tern_v x) {
    return ku_group_reduce(c->kb, op, x, c->red_f, c->SG);
}

static tern_v group_i(sctx *c, ku_reduce op, tern_v x) {
    return ku_group_reduce(c->kb, op, x, c->red_i, c->SG);
}

/* Sums 16 per-thread f32 values over the group into out[16] (every thread gets them).
 * One SIMD sum in a loop over the 16, not 16 traced copies: on OpenCL each SIMD sum is an
 * emulation with barriers, and 16 copies per search pass made the exact kernel some 30 s
 * of PoCL CPU to compile; on a GPU the loop costs 15 selects per value summed. */
static void group_sum16(sctx *c, const tern_v *acc, tern_v *out) {
    tern_kb *kb = c->kb;
    tern_v lane = tern_simd_lane(kb), sg = tern_simd_group(kb);
    TERN_FOR(kb, q, tern_int(0), tern_int(16), tern_int(1)) {
        tern_v v = acc[0];
        for (int r = 1; r < 16; r++) v = tern_select(tern_eq(q, tern_int(r)), acc[r], v);
        tern_v s = tern_simd_sum(v);
        TERN_IF(kb, tern_eq(lane, tern_int(0))) { tern_store(c->red16, tern_add(tern_mul(sg, tern_int(16)), q), s); }
    }
    tern_barrier(kb);
    TERN_IF(kb, tern_lt(c->tid, tern_int(16))) {
        tern_v t = tern_load(c->red16, c->tid);
        for (int g = 1; g < c->SG; g++) t = tern_add(t, tern_load(c->red16, tern_add(c->tid, tern_int(16 * g))));
        tern_store(c->tot16, c->tid, t);
    }
    tern_barrier(kb);
    for (int q = 0; q < 16; q++) out[q] = tern_load(c->tot16, tern_int(q));
    tern_barrier(kb);
}

/* What the radix searches sum per element: 1 (count) or its weight when it is a
 * candidate. */
typedef struct sweight {
    tern_v weights;    /* bool, threadgroup-uniform: sum weights, else count */
    tern_v M, inv_t;   /* weights: exp((x - M) * inv_t) */
    tern_v tau, itau;  /* candidates: key > tau, or key == tau and index <= itau */
} sweight;

/* The weight sits behind a uniform branch: no exp in the count phase. */
static tern_v element_value(tern_kb *kb, const sweight *w, tern_v x, tern_v key, tern_v j) {
    tern_v f = tern_var(kb, "f", tern_f32(1.0f));
    TERN_IF(kb, w->weights) {
        tern_v cand = tern_lor(tern_gt(key, w->tau), tern_land(tern_eq(key, w->tau), tern_le(j, w->itau)));
        tern_assign(f, tern_select(cand, tern_exp(tern_mul(tern_sub(x, w->M), w->inv_t)), tern_f32(0.0f)));
    }
    return f;
}

/* The largest key K such that above(K) + (sum over key == K) > target, where above(K) sums
 * the elements with larger keys; then the smallest index I among key == K with
 * above(K) + (sum over key == K, index <= I) > target. Sets *key_out, *index_out, and
 * *none (i32 1 when even the whole sum does not exceed target). */
static void radix_search(sctx *c, const sweight *w, tern_v target, tern_v ipasses, tern_v *key_out,
                         tern_v *index_out, tern_v *none) {
    tern_kb *kb = c->kb;
    tern_v prefix = tern_var(kb, "prefix", tern_u32(0));
    tern_v mask = tern_var(kb, "mask", tern_u32(0));
    tern_v above = tern_var(kb, "above", tern_f32(0.0f));
    tern_v missed = tern_var(kb, "missed", tern_i32(0));
    /* keys: 8 passes of 4 bits from the top, digits taken from 15 down */
    TERN_FOR(kb, pass, tern_int(0), tern_int(8), tern_int(1)) {
        tern_v shift = tern_cast(tern_sub(tern_int(28), tern_mul(pass, tern_int(4))), TERN_T_U32);
        tern_v acc[16];
        for (int q = 0; q < 16; q++) acc[q] = tern_var(kb, "acc", tern_f32(0.0f));
        TERN_FOR(kb, j, c->tid, c->V, tern_int(c->G)) {
            tern_v x = tern_load(c->logits, tern_add(c->base, j));
            tern_v key = ku_order_key(x);
            tern_v f = element_value(kb, w, x, key, j);
            tern_v inb = tern_eq(tern_and(key, mask), prefix);
            tern_v d = tern_and(tern_shr(key, shift), tern_u32(15));
            for (int q = 0; q < 16; q++)
                tern_assign(acc[q], tern_add(acc[q], tern_select(tern_land(inb, tern_eq(d, tern_u32((uint32_t)q))),
                                                                 f, tern_f32(0.0f))));
        }
        tern_v tot[16];
        group_sum16(c, acc, tot);
        tern_v run = above, chosen = tern_i32(-1), new_above = above;
        for (int q = 15; q >= 0; q--) {
            tern_v next = tern_add(run, tot[q]);
            tern_v take = tern_land(tern_lt(chosen, tern_int(0)), tern_gt(next, target));
            chosen = tern_select(take, tern_i32(q), chosen);
            new_above = tern_select(take, run, new_above);
            run = next;
        }
        tern_assign(missed, tern_select(tern_lt(chosen, tern_int(0)), tern_i32(1), missed));
        tern_v digit = tern_cast(tern_max(chosen, tern_int(0)), TERN_T_U32);
        tern_assign(prefix, tern_or(prefix, tern_shl(digit, shift)));
        tern_assign(mask, tern_or(mask, tern_shl(tern_u32(15), shift)));
        tern_assign(above, new_above);
    }
    tern_v kstar = tern_name(tern_add(prefix, tern_u32(0)), "kstar");
    /* indices among key == kstar: ascending, digits from 0 up */
    tern_v iprefix = tern_var(kb, "iprefix", tern_i32(0));
    tern_v imask = tern_var(kb, "imask", tern_i32(0));
    TERN_FOR(kb, pass, tern_int(0), ipasses, tern_int(1)) {
        tern_v shift = tern_mul(tern_sub(tern_sub(ipasses, tern_int(1)), pass), tern_int(4));
        tern_v acc[16];
        for (int q = 0; q < 16; q++) acc[q] = tern_var(kb, "acc", tern_f32(0.0f));
        TERN_FOR(kb, j, c->tid, c->V, tern_int(c->G)) {
            tern_v x = tern_load(c->logits, tern_add(c->base, j));
            tern_v key = ku_order_key(x);
            tern_v f = element_value(kb, w, x, key, j);
            tern_v inb = tern_land(tern_eq(key, kstar), tern_eq(tern_and(j, imask), iprefix));
            tern_v d = tern_and(tern_shr(j, shift), tern_i32(15));
            for (int q = 0; q < 16; q++)
                tern_assign(acc[q], tern_add(acc[q], tern_select(tern_land(inb, tern_eq(d, tern_i32(q))),
                                                                 f, tern_f32(0.0f))));
        }
        tern_v tot[16];
        group_sum16(c, acc, tot);
        tern_v run = above, chosen = tern_i32(-1), new_above = above;
        for (int q = 0; q < 16; q++) {
            tern_v next = tern_add(run, tot[q]);
            tern_v take = tern_land(tern_lt(chosen, tern_int(0)), tern_gt(next, target));
            chosen = tern_select(take, tern_i32(q), chosen);
            new_above = tern_select(take, run, new_above);
            run = next;
        }
        tern_assign(missed, tern_select(tern_lt(chosen, tern_int(0)), tern_i32(1), missed));
        tern_v digit = tern_max(chosen, tern_int(0));
        tern_assign(iprefix, tern_or(iprefix, tern_shl(digit, shift)));
        tern_assign(imask, tern_or(imask, tern_shl(tern_i32(15), shift)));
        tern_assign(above, new_above);
    }
    *key_out = kstar;
    *index_out = tern_name(tern_add(iprefix, tern_i32(0)), "istar");
    *none = tern_name(tern_add(missed, tern_i32(0)), "none");
}

/* One histogram level: bins of the values with x >= lo, bin(x) = clamp(floor(f(x)), 0, 255)
 * where f is given by `binf`; counts only elements passing `in_level`. Returns the highest
 * bin b such that at least `need` counted elements have bin >= b (0 when fewer than `need`
 * are counted at all), the count above b, and the count at or above b. */
typedef struct shist {
    tern_v hist; /* i32 [GK_SAMPLE_BINS] threadgroup */
} shist;

typedef tern_v (*bin_fn)(void *ctx, tern_v x); /* the bin of x (i32), meaningful in-level */
typedef tern_v (*level_fn)(void *ctx, tern_v x); /* whether x takes part (bool) */

static void histogram_level(sctx *c, shist *h, bin_fn bin, level_fn in_level, void *ctx, tern_v need,
                            tern_v *b_out, tern_v *above_out, tern_v *at_out) {
    tern_kb *kb = c->kb;
    TERN_FOR(kb, q, c->tid, tern_int(GK_SAMPLE_BINS), tern_int(c->G)) { tern_store(h->hist, q, tern_i32(0)); }
    tern_barrier(kb);
    TERN_FOR(kb, j, c->tid, c->V, tern_int(c->G)) {
        tern_v x = tern_load(c->logits, tern_add(c->base, j));
        TERN_IF(kb, in_level(ctx, x)) { tern_atomic_add(h->hist, bin(ctx, x), tern_i32(1)); }
    }
    tern_barrier(kb);
    /* every SIMD group scans the 256 bins, lane l holding bins 8l .. 8l + 7 */
    tern_v lane = tern_simd_lane(kb);
    const int per = GK_SAMPLE_BINS / 32;
    tern_v cnt[GK_SAMPLE_BINS / 32];
    tern_v own = tern_i32(0);
    for (int q = 0; q < per; q++) {
        cnt[q] = tern_load(h->hist, tern_add(tern_mul(lane, tern_int(per)), tern_int(q)));
        own = tern_add(own, cnt[q]);
    }
    tern_v total = tern_simd_sum(own);
    tern_v run = tern_sub(tern_sub(total, tern_simd_prefix_sum(own)), own); /* bins above mine */
    tern_v found = tern_i32(-1), above = tern_i32(0), at = tern_i32(0);
    for (int q = per - 1; q >= 0; q--) {
        tern_v next = tern_add(run, cnt[q]);
        /* the crossing: the first bin from the top where the count reaches need (exactly one
         * lane finds it) */
        tern_v take = tern_land(tern_land(tern_lt(found, tern_int(0)), tern_ge(next, need)), tern_lt(run, need));
        found = tern_select(take, tern_add(tern_mul(lane, tern_int(per)), tern_int(q)), found);
        above = tern_select(take, run, above);
        at = tern_select(take, next, at);
        run = next;
    }
    tern_v b = tern_simd_max(found);
    tern_v have = tern_ge(b, tern_int(0));
    *b_out = tern_select(have, b, tern_i32(0));
    *above_out = tern_select(have, tern_simd_max(tern_select(tern_ge(found, tern_int(0)), above, tern_i32(-1))),
                             tern_i32(0));
    *at_out = tern_select(have, tern_simd_max(tern_select(tern_ge(found, tern_int(0)), at, tern_i32(-1))),
                          total);
    tern_barrier(kb); /* the histogram may be reused */
}

typedef struct binctx {
    tern_v lo, sc, b0;
} binctx;

/* f(x) = (x - lo) * sc, level 0: floor(f); level 1: floor((f - b0) * 256) */
static tern_v bin_f(const binctx *b, tern_v x) { return tern_mul(tern_sub(x, b->lo), b->sc); }
static tern_v clamp_bin(tern_v f) {
    tern_v cl = tern_min(tern_max(tern_floor(f), tern_f32(0.0f)), tern_f32((float)(GK_SAMPLE_BINS - 1)));
    return tern_cast(tern_select(tern_isnan(cl), tern_f32(0.0f), cl), TERN_T_I32);
}
static tern_v bin0(void *p, tern_v x) { return clamp_bin(bin_f(p, x)); }
static tern_v bin1(void *p, tern_v x) {
    const binctx *b = p;
    return clamp_bin(tern_mul(tern_sub(bin_f(b, x), tern_cast(b->b0, TERN_T_F32)), tern_f32((float)GK_SAMPLE_BINS)));
}
static tern_v in0(void *p, tern_v x) { return tern_ge(x, ((const binctx *)p)->lo); }
static tern_v in1(void *p, tern_v x) { return tern_land(in0(p, x), tern_eq(bin0(p, x), ((const binctx *)p)->b0)); }

void gk_trace_sample(tern_kb *kb, void *spec) {
    const gk_spec *s = spec;
    sctx c = {.kb = kb, .G = s->n[1], .SG = s->n[1] / 32};
    int mode = s->n[3]; /* SAMPLE_GREEDY, SAMPLE_TOPK or SAMPLE_EXACT */
    tern_v out = tern_param_buf(kb, "out", TERN_T_I32, TERN_READ_WRITE);
    c.logits = ku_buf(kb, "logits", s->t[0], TERN_READ);
    tern_v counter = tern_param_buf(kb, "counter", TERN_T_I32, TERN_READ);
    tern_v fault = tern_param_buf(kb, "fault", TERN_T_I32, TERN_READ_WRITE);
    c.V = tern_param_scalar(kb, "V", TERN_T_I32);
    tern_v Vp = tern_param_scalar(kb, "Vp", TERN_T_I32);
    tern_v rows = tern_param_scalar(kb, "rows", TERN_T_I32);
    tern_v temperature = tern_param_scalar(kb, "temperature", TERN_T_F32);
    tern_v k = tern_param_scalar(kb, "k", TERN_T_I32);
    tern_v tail = tern_param_scalar(kb, "tail", TERN_T_F32);
    tern_v seed_hash = tern_param_scalar(kb, "seed_hash", TERN_T_U32);
    tern_v ipasses = tern_param_scalar(kb, "ipasses", TERN_T_I32);
    tern_v after = tern_param_scalar(kb, "after", TERN_T_I32); /* exact after top-k: only rows marked -1 */
    c.red_f = tern_shared(kb, "red_f", TERN_T_F32, (size_t)c.SG);
    c.red_i = tern_shared(kb, "red_i", TERN_T_I32, (size_t)c.SG);
    c.red16 = tern_shared(kb, "red16", TERN_T_F32, (size_t)c.SG * 16);
    c.tot16 = tern_shared(kb, "tot16", TERN_T_F32, 16);
    shist h = {.hist = tern_shared(kb, "hist", TERN_T_I32, GK_SAMPLE_BINS)};
    tern_v cand_v = tern_shared(kb, "cand_v", TERN_T_F32, GK_SAMPLE_CAP);
    tern_v cand_i = tern_shared(kb, "cand_i", TERN_T_I32, GK_SAMPLE_CAP);
    tern_v sort_v = tern_shared(kb, "sort_v", TERN_T_F32, GK_SAMPLE_CAP);
    tern_v sort_i = tern_shared(kb, "sort_i", TERN_T_I32, GK_SAMPLE_CAP);
    tern_v ncand = tern_shared(kb, "ncand", TERN_T_I32, 1);
    tern_wait_previous(kb); /* launched early (CUDA); everything it reads comes after */

    tern_v row = tern_group_id(kb, 0);
    c.tid = tern_local_id(kb, 0);
    c.base = tern_mul(row, Vp);
    tern_v big = tern_i32(INT32_MAX);
    /* the condition is uniform over the group (one row per group) */
    tern_if(kb, tern_lor(tern_eq(after, tern_int(0)), tern_lt(tern_load(out, row), tern_int(0))));

    /* 1: max, argmax, min, first NaN */
    tern_v best = tern_var(kb, "best", tern_f32(-INFINITY));
    tern_v best_i = tern_var(kb, "best_i", big);
    tern_v mn = tern_var(kb, "mn", tern_f32(INFINITY));
    tern_v nan_i = tern_var(kb, "nan_i", big);
    TERN_FOR(kb, j, c.tid, c.V, tern_int(c.G)) {
        tern_v x = tern_load(c.logits, tern_add(c.base, j));
        tern_v isn = ku_argmax_take(x, j, NULL, best, best_i, nan_i, big);
        tern_assign(mn, tern_select(isn, mn, tern_min(mn, x)));
    }
    tern_v first_nan = group_i(&c, KU_MIN, nan_i);
    tern_v M = group_f(&c, KU_MAX, best);
    tern_v arg = group_i(&c, KU_MIN, tern_select(tern_eq(best, M), best_i, big));
    tern_v lowest = group_f(&c, KU_MIN, mn);
    tern_v is_first = tern_eq(c.tid, tern_int(0));

    TERN_IF(kb, tern_ne(first_nan, big)) {
        TERN_IF(kb, is_first) {
            tern_store(out, row, tern_i32(0));
            ku_fault(kb, fault, GK_FAULT_SAMPLE_NAN, row, first_nan, c.V);
        }
    }
    TERN_ELSE(kb) {
        if (mode == SAMPLE_GREEDY) {
            TERN_IF(kb, is_first) { tern_store(out, row, tern_select(tern_lt(arg, c.V), arg, tern_i32(0))); }
        } else {
            tern_v inv_t = tern_div(tern_f32(1.0f), temperature);
            /* u = tern_uniform(seed, counter * rows + row) */
            tern_v draw = tern_add(tern_mul(tern_cast(tern_load(counter, tern_int(0)), TERN_T_U32),
                                            tern_cast(rows, TERN_T_U32)),
                                   tern_cast(row, TERN_T_U32));
            tern_v bits = ku_hash32(tern_xor(seed_hash, ku_hash32(draw)));
            tern_v u = tern_mul(tern_cast(tern_shr(bits, tern_u32(8)), TERN_T_F32), tern_f32(1.0f / 16777216.0f));
            tern_v result = tern_var(kb, "result", tern_i32(-1));

            /* 2, 3: the candidate threshold */
            binctx bc;
            bc.lo = tern_max(lowest, tern_add(M, tail));
            tern_v range = tern_sub(M, bc.lo);
            bc.sc = tern_select(tern_gt(range, tern_f32(0.0f)), tern_div(tern_f32((float)GK_SAMPLE_BINS), range),
                                tern_f32(0.0f));
            bc.sc = tern_select(tern_isinf(bc.sc), tern_f32(0.0f), bc.sc);
            bc.b0 = tern_i32(0);
            tern_v use_fast = tern_var(kb, "use_fast", tern_bool(false));
            tern_v b0v = tern_var(kb, "b0", tern_i32(0));
            tern_v b1v = tern_var(kb, "b1", tern_i32(0));
            tern_v level1 = tern_var(kb, "level1", tern_bool(false));
            if (mode == SAMPLE_TOPK) {
                tern_v b0, above0, at0;
                histogram_level(&c, &h, bin0, in0, &bc, k, &b0, &above0, &at0);
                tern_assign(b0v, b0);
                TERN_IF(kb, tern_le(at0, tern_int(GK_SAMPLE_CAP))) { tern_assign(use_fast, tern_bool(true)); }
                TERN_ELSE(kb) {
                    binctx bc1 = bc;
                    bc1.b0 = b0;
                    tern_v b1, above1, at1;
                    histogram_level(&c, &h, bin1, in1, &bc1, tern_sub(k, above0), &b1, &above1, &at1);
                    tern_assign(b1v, b1);
                    tern_assign(level1, tern_bool(true));
                    TERN_IF(kb, tern_le(tern_add(above0, at1), tern_int(GK_SAMPLE_CAP))) {
                        tern_assign(use_fast, tern_bool(true));
                    }
                }
            }
            if (mode == SAMPLE_TOPK) TERN_IF(kb, use_fast) {
                /* 4: compact, rank, prefix-sum the weights (result stays -1 without) */
                TERN_IF(kb, is_first) { tern_store(ncand, tern_int(0), tern_i32(0)); }
                tern_barrier(kb);
                binctx bcb = bc;
                bcb.b0 = b0v;
                TERN_FOR(kb, j, c.tid, c.V, tern_int(c.G)) {
                    tern_v x = tern_load(c.logits, tern_add(c.base, j));
                    tern_v b = bin0(&bcb, x);
                    tern_v deeper = tern_land(tern_eq(b, b0v), tern_lor(tern_lnot(level1), tern_ge(bin1(&bcb, x), b1v)));
                    tern_v is_cand = tern_land(in0(&bcb, x), tern_lor(tern_gt(b, b0v), deeper));
                    TERN_IF(kb, is_cand) {
                        tern_v at = tern_atomic_add(ncand, tern_int(0), tern_i32(1));
                        TERN_IF(kb, tern_lt(at, tern_int(GK_SAMPLE_CAP))) {
                            tern_store(cand_v, at, x);
                            tern_store(cand_i, at, j);
                        }
                    }
                }
                tern_barrier(kb);
                tern_v n = tern_min(tern_load(ncand, tern_int(0)), tern_int(GK_SAMPLE_CAP));
                tern_v kk = tern_min(k, n);
                TERN_FOR(kb, q, c.tid, n, tern_int(c.G)) {
                    tern_v v = tern_load(cand_v, q), vi = tern_load(cand_i, q);
                    tern_v rank = tern_var(kb, "rank", tern_i32(0));
                    TERN_FOR(kb, o, tern_int(0), n, tern_int(1)) {
                        tern_v ov = tern_load(cand_v, o);
                        tern_v before = tern_lor(tern_gt(ov, v), tern_land(tern_eq(ov, v), tern_lt(tern_load(cand_i, o), vi)));
                        tern_assign(rank, tern_add(rank, tern_select(before, tern_i32(1), tern_i32(0))));
                    }
                    TERN_IF(kb, tern_lt(rank, kk)) {
                        tern_store(sort_v, rank, v);
                        tern_store(sort_i, rank, vi);
                    }
                }
                tern_barrier(kb);
                /* thread t owns ranks [t per, (t + 1) per) */
                tern_v per = tern_div(tern_add(kk, tern_int(c.G - 1)), tern_int(c.G));
                tern_v r0 = tern_mul(c.tid, per);
                tern_v r1 = tern_min(kk, tern_add(r0, per));
                tern_v mine = tern_var(kb, "mine", tern_f32(0.0f));
                TERN_FOR(kb, r, r0, r1, tern_int(1)) {
                    tern_v wr = tern_exp(tern_mul(tern_sub(tern_load(sort_v, r), M), inv_t));
                    tern_store(sort_v, r, wr); /* the value is not needed any more */
                    tern_assign(mine, tern_add(mine, wr));
                }
                /* exclusive prefix over threads: SIMD prefix, then the groups before mine */
                tern_v lane_pre = tern_simd_prefix_sum(mine);
                tern_v sg_total = tern_simd_sum(mine);
                TERN_IF(kb, tern_eq(tern_simd_lane(kb), tern_int(0))) { tern_store(c.red_f, tern_simd_group(kb), sg_total); }
                tern_barrier(kb);
                tern_v offset = tern_var(kb, "offset", tern_f32(0.0f));
                tern_v total = tern_f32(0.0f);
                for (int g = 0; g < c.SG; g++) {
                    tern_v part = tern_load(c.red_f, tern_int(g));
                    TERN_IF(kb, tern_lt(tern_int(g), tern_simd_group(kb))) { tern_assign(offset, tern_add(offset, part)); }
                    total = g ? tern_add(total, part) : part;
                }
                tern_barrier(kb);
                tern_v thr = tern_mul(u, total);
                tern_v cum = tern_var(kb, "cum", tern_add(offset, lane_pre));
                tern_v pick = tern_var(kb, "pick", big);
                TERN_FOR(kb, r, r0, r1, tern_int(1)) {
                    tern_assign(cum, tern_add(cum, tern_load(sort_v, r)));
                    tern_assign(pick, tern_select(tern_land(tern_eq(pick, big), tern_gt(cum, thr)), r, pick));
                }
                tern_v first = group_i(&c, KU_MIN, pick);
                tern_v chosen = tern_select(tern_eq(first, big), tern_sub(kk, tern_int(1)), first);
                TERN_IF(kb, is_first) { tern_assign(result, tern_load(sort_i, chosen)); }
            }
            if (mode == SAMPLE_EXACT) {
                /* 5: exact radix searches over the whole row, one loop over two phases:
                 * 0 counts to the k-th largest (key tau, index itau: the last candidate),
                 * 1 sums the candidates' weights to where they cross u * total */
                tern_v tau = tern_var(kb, "tau", tern_u32(0));
                tern_v itau = tern_var(kb, "itau", c.V);
                tern_v all_cand = tern_ge(k, c.V);
                TERN_IF(kb, all_cand) {
                    /* every element is a candidate: the last is the smallest key, highest index */
                    tern_v kmin = tern_var(kb, "kmin", tern_u32(UINT32_MAX));
                    TERN_FOR(kb, j, c.tid, c.V, tern_int(c.G)) {
                        tern_assign(kmin, tern_min(kmin, ku_order_key(tern_load(c.logits, tern_add(c.base, j)))));
                    }
                    tern_v kmin_all = tern_bitcast(group_i(&c, KU_MIN, tern_bitcast(tern_xor(kmin, tern_u32(0x80000000u)),
                                                                                    TERN_T_I32)), TERN_T_U32);
                    kmin_all = tern_xor(kmin_all, tern_u32(0x80000000u));
                    tern_v imax = tern_var(kb, "imax", tern_i32(-1));
                    TERN_FOR(kb, j, c.tid, c.V, tern_int(c.G)) {
                        tern_v key = ku_order_key(tern_load(c.logits, tern_add(c.base, j)));
                        tern_assign(imax, tern_select(tern_eq(key, kmin_all), j, imax));
                    }
                    tern_assign(tau, kmin_all);
                    tern_assign(itau, group_i(&c, KU_MAX, imax));
                }
                tern_v first_phase = tern_select(all_cand, tern_i32(1), tern_i32(0));
                TERN_FOR(kb, phase, first_phase, tern_int(2), tern_int(1)) {
                    tern_v weighing = tern_eq(phase, tern_int(1));
                    sweight w = {.weights = weighing, .M = M, .inv_t = inv_t, .tau = tau, .itau = itau};
                    /* the candidates' total weight (phase 1; phase 0 counts, needing none) */
                    tern_v tot = tern_var(kb, "tot", tern_f32(0.0f));
                    TERN_IF(kb, weighing) {
                        TERN_FOR(kb, j, c.tid, c.V, tern_int(c.G)) {
                            tern_v x = tern_load(c.logits, tern_add(c.base, j));
                            tern_assign(tot, tern_add(tot, element_value(kb, &w, x, ku_order_key(x), j)));
                        }
                    }
                    tern_v total = group_f(&c, KU_SUM, tot);
                    tern_v target = tern_select(weighing, tern_mul(u, total), tern_cast(tern_sub(k, tern_int(1)), TERN_T_F32));
                    tern_v ks, is, none;
                    radix_search(&c, &w, target, ipasses, &ks, &is, &none);
                    TERN_IF(kb, weighing) {
                        TERN_IF(kb, is_first) { tern_assign(result, tern_select(tern_ne(none, tern_int(0)), itau, is)); }
                    }
                    TERN_ELSE(kb) {
                        tern_assign(tau, ks);
                        tern_assign(itau, is);
                    }
                }
            }
            TERN_IF(kb, is_first) { tern_store(out, row, result); }
        }
    }
    tern_end(kb);
}
