/* The loss curve as a small self-contained SVG: training loss (and validation loss, where
 * measured) against the step, with labelled axes. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "tern/file.h"
#include "train_support.h"

#define PLOT_W 640.0
#define PLOT_H 400.0
#define MARGIN_L 60.0
#define MARGIN_R 20.0
#define MARGIN_T 30.0
#define MARGIN_B 45.0

typedef struct svg {
    char *text;
    size_t len, cap;
    int failed;
} svg;

static void put(svg *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(svg *s, const char *fmt, ...) {
    if (s->failed) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(s->text + s->len, s->cap - s->len, fmt, ap);
        va_end(ap);
        if (n < 0) {
            s->failed = 1;
            return;
        }
        if ((size_t)n < s->cap - s->len) {
            s->len += (size_t)n;
            return;
        }
        size_t cap = (s->cap + (size_t)n) * 2;
        char *t = realloc(s->text, cap);
        if (!t) {
            s->failed = 1;
            return;
        }
        s->text = t;
        s->cap = cap;
    }
}

static double px(double step, double lo, double hi) {
    return MARGIN_L + (hi > lo ? (step - lo) / (hi - lo) : 0.5) * (PLOT_W - MARGIN_L - MARGIN_R);
}

static double py(double loss, double lo, double hi) {
    return PLOT_H - MARGIN_B - (hi > lo ? (loss - lo) / (hi - lo) : 0.5) * (PLOT_H - MARGIN_T - MARGIN_B);
}

static void polyline(svg *s, const train_history *h, const float *values, const char *color,
                     double x0, double x1, double y0, double y1) {
    put(s, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" points=\"", color);
    for (int i = 0; i < h->n; i++)
        if (isfinite(values[i]))
            put(s, "%.1f,%.1f ", px(h->step[i], x0, x1), py(values[i], y0, y1));
    put(s, "\"/>\n");
}

tern_error *train_plot_svg(const train_history *h, const char *path) {
    double x0 = h->n ? h->step[0] : 0, x1 = h->n ? h->step[h->n - 1] : 1;
    double y0 = INFINITY, y1 = -INFINITY;
    int has_val = 0;
    for (int i = 0; i < h->n; i++) {
        if (isfinite(h->loss[i])) y0 = fmin(y0, h->loss[i]), y1 = fmax(y1, h->loss[i]);
        if (isfinite(h->val[i])) y0 = fmin(y0, h->val[i]), y1 = fmax(y1, h->val[i]), has_val = 1;
    }
    if (!(y0 <= y1)) y0 = 0, y1 = 1;
    svg s = {0};
    put(&s, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
            "font-family=\"sans-serif\" font-size=\"12\">\n", PLOT_W, PLOT_H);
    put(&s, "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n");
    put(&s, "<text x=\"%.0f\" y=\"18\" text-anchor=\"middle\">tern train: loss</text>\n", PLOT_W / 2);
    /* axes with five ticks each */
    put(&s, "<g stroke=\"#888\">\n<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n",
        MARGIN_L, PLOT_H - MARGIN_B, PLOT_W - MARGIN_R, PLOT_H - MARGIN_B);
    put(&s, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n</g>\n", MARGIN_L, MARGIN_T,
        MARGIN_L, PLOT_H - MARGIN_B);
    for (int t = 0; t <= 4; t++) {
        double step = x0 + (x1 - x0) * t / 4, loss = y0 + (y1 - y0) * t / 4;
        put(&s, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%.0f</text>\n",
            px(step, x0, x1), PLOT_H - MARGIN_B + 16, step);
        put(&s, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%.3f</text>\n", MARGIN_L - 6,
            py(loss, y0, y1) + 4, loss);
    }
    put(&s, "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"middle\">step</text>\n",
        (MARGIN_L + PLOT_W - MARGIN_R) / 2, PLOT_H - 8);
    polyline(&s, h, h->loss, "#1f77b4", x0, x1, y0, y1);
    put(&s, "<text x=\"%.0f\" y=\"%.0f\" fill=\"#1f77b4\">train</text>\n", PLOT_W - MARGIN_R - 90, MARGIN_T + 12);
    if (has_val) {
        polyline(&s, h, h->val, "#d62728", x0, x1, y0, y1);
        put(&s, "<text x=\"%.0f\" y=\"%.0f\" fill=\"#d62728\">validation</text>\n",
            PLOT_W - MARGIN_R - 90, MARGIN_T + 28);
    }
    put(&s, "</svg>\n");
    tern_error *err = s.failed ? tern_errorf("out of memory drawing %s", path)
                               : tern_write_file(path, s.text, s.len);
    free(s.text);
    return err;
}
