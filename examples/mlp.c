/* The bundled example artifact: a 4 -> 8 -> 3 MLP classifier, as a graph compiler would emit
 * it. w1 is stored column-major (transposed), w2 in rows padded to 4 floats, both BOUND so
 * that weights are shared with the host without a copy; b2 is baked in (EMBEDDED).
 *   hidden = relu(x @ w1 + b1); logits = hidden @ w2 + b2; probs = softmax(logits)
 * -DBATCH=n builds it for n rows at once (x [n, 4], outputs [n, 3]): the batcher's variants. */
#include <math.h>
#include "zgc_fixture.h"

#ifndef BATCH
#define BATCH 1
#endif
static const size_t s_x[] = {BATCH, 4}, s_w1[] = {4, 8}, s_b1[] = {8}, s_w2[] = {8, 3}, s_b2[] = {3}, s_out[] = {BATCH, 3};
static const ptrdiff_t c_x[] = {4, 1}, t_w1[] = {1, 4}, c_b[] = {1}, p_w2[] = {4, 1}, c_out[] = {3, 1};

static const SourceDescriptor SOURCES[] = {
    {1, "x", INPUT, OWNED, {F32, 2, BATCH * 4, BATCH * 16, 0, s_x, c_x}},
    {2, "w1", PARAMETER, BOUND, {F32, 2, 32, 128, 0, s_w1, t_w1}},
    {3, "b1", PARAMETER, OWNED, {F32, 1, 8, 32, 0, s_b1, c_b}},
    {4, "w2", PARAMETER, BOUND, {F32, 2, 32, 96, 0, s_w2, p_w2}},
    {5, "b2", CONSTANT, EMBEDDED, {F32, 1, 3, 12, 0, s_b2, c_b}},
};
static const float B2[3] = {0.1f, -0.2f, 0.05f};
static const TensorDescriptor OUTPUTS[] = {
    {F32, 2, BATCH * 3, BATCH * 12, 0, s_out, c_out}, /* logits */
    {F32, 2, BATCH * 3, BATCH * 12, 0, s_out, c_out}, /* probs */
};
#define FINGERPRINT (0x4d4c50f4a8b3c201ull + (BATCH - 1))
#include "zgc_fixture_impl.h"

static int compute(zgc_rt *rt) {
    for (size_t r = 0; r < BATCH; r++) {
        float hidden[8], *logits = (float *)out_data(rt, 0) + r * 3, *probs = (float *)out_data(rt, 1) + r * 3;
        for (size_t j = 0; j < 8; j++) {
            float acc = get_f32(rt, 2, j);
            for (size_t i = 0; i < 4; i++) acc += get_f32(rt, 0, r * 4 + i) * get_f32(rt, 1, i * 8 + j);
            hidden[j] = acc > 0 ? acc : 0;
        }
        float top = -INFINITY, sum = 0;
        for (size_t k = 0; k < 3; k++) {
            float acc = B2[k];
            for (size_t j = 0; j < 8; j++) acc += hidden[j] * get_f32(rt, 3, j * 3 + k);
            logits[k] = acc;
            if (acc > top) top = acc;
        }
        for (size_t k = 0; k < 3; k++) sum += (probs[k] = expf(logits[k] - top));
        for (size_t k = 0; k < 3; k++) probs[k] /= sum;
    }
    return OK;
}
