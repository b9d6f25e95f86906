/* Loading a Hugging Face tokenizer.json: a byte-level BPE model (vocab, merges,
 * ignore_merges), its added tokens, and the pipeline around the model (normalizer,
 * pre-tokenizers, post-processor, decoder). Everything the file says either is done exactly
 * as Hugging Face does it or is refused with a one-line error naming the field: a model
 * that loads tokenizes as AutoTokenizer does. docs/tokenizer.md lists what is supported. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/hf_pipeline.h"
#include "tokenizer/load_util.h"

/* GPT-2's pattern, as ByteLevel's use_regex has it: a Split with exactly this pattern is
 * run by the hand-written scanner. */
static const char gpt2_pattern[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

static const cJSON *field(const cJSON *obj, const char *name) {
    return cJSON_GetObjectItemCaseSensitive(obj, name);
}

static bool is_null(const cJSON *j) { return !j || cJSON_IsNull(j); }

/* A boolean field: absent or null gives dflt; anything but a boolean is an error. */
static tern_error *get_bool(const cJSON *obj, const char *name, const char *path, bool dflt,
                            bool *out) {
    const cJSON *j = field(obj, name);
    if (is_null(j)) {
        *out = dflt;
        return NULL;
    }
    if (!cJSON_IsBool(j)) return tern_errorf("%s.%s: expected true or false", path, name);
    *out = cJSON_IsTrue(j);
    return NULL;
}

/* obj's "type", or NULL with an error when it has none. */
static tern_error *get_type(const cJSON *obj, const char *path, const char **type) {
    const cJSON *t = cJSON_IsObject(obj) ? field(obj, "type") : NULL;
    if (!cJSON_IsString(t)) return tern_errorf("%s: expected an object with a \"type\"", path);
    *type = t->valuestring;
    return NULL;
}

static tern_error *unsupported(const char *path, const char *value, const char *why) {
    char q[64];
    return tern_errorf("%s: %s is not supported (%s)", path,
                       tern_tok_quote(value, strlen(value), q, sizeof q), why);
}

/* A whole number in [0, INT32_MAX). */
static bool get_id(const cJSON *j, int32_t *id) {
    if (!cJSON_IsNumber(j)) return false;
    double v = j->valuedouble;
    if (!(v >= 0 && v < (double)INT32_MAX) || v != floor(v)) return false;
    *id = (int32_t)v;
    return true;
}

/* ---- the model ---------------------------------------------------------------------- */

static tern_error *check_model_options(const cJSON *model, bool *ignore_merges) {
    if (!cJSON_IsObject(model)) return tern_errorf("model: expected an object");
    const cJSON *type = field(model, "type");
    if (type && !cJSON_IsString(type)) return tern_errorf("model.type: expected a string");
    if (type && strcmp(type->valuestring, "BPE"))
        return unsupported("model.type", type->valuestring,
                           "tern reads byte-level BPE models only");
    const cJSON *dropout = field(model, "dropout");
    if (!is_null(dropout) && !(cJSON_IsNumber(dropout) && dropout->valuedouble == 0))
        return tern_errorf("model.dropout: only null is supported (dropout makes encoding "
                           "random)");
    bool fallback = false;
    TERN_TRY(get_bool(model, "byte_fallback", "model", false, &fallback));
    if (fallback)
        return tern_errorf("model.byte_fallback: true is not supported (SentencePiece-style "
                           "byte fallback; tern reads byte-level BPE)");
    static const char *const affixes[] = {"continuing_subword_prefix", "end_of_word_suffix"};
    for (int i = 0; i < 2; i++) {
        const cJSON *a = field(model, affixes[i]);
        if (is_null(a) || (cJSON_IsString(a) && !a->valuestring[0])) continue;
        return tern_errorf("model.%s: only null is supported (byte-level BPE has none)",
                           affixes[i]);
    }
    TERN_TRY(get_bool(model, "ignore_merges", "model", false, ignore_merges));
    if (!cJSON_IsObject(field(model, "vocab")))
        return tern_errorf("model.vocab: expected an object mapping tokens to ids");
    if (!cJSON_IsArray(field(model, "merges"))) return tern_errorf("model.merges: expected an array");
    return NULL;
}

typedef struct {
    int32_t id;
    const char *content;
    size_t len;
    bool special, normalized, lstrip, rstrip;
} raw_added;

static tern_error *parse_added_tokens(const cJSON *root, raw_added **out, size_t *count) {
    *out = NULL;
    *count = 0;
    const cJSON *list = field(root, "added_tokens");
    if (is_null(list)) return NULL;
    if (!cJSON_IsArray(list)) return tern_errorf("added_tokens: expected an array");
    size_t n = (size_t)cJSON_GetArraySize(list);
    raw_added *a = calloc(n ? n : 1, sizeof *a);
    if (!a) return tern_errorf("out of memory for %zu added tokens", n);
    tern_error *err = NULL;
    size_t i = 0;
    char path[64];
    for (const cJSON *t = list->child; t && !err; t = t->next, i++) {
        snprintf(path, sizeof path, "added_tokens[%zu]", i);
        const cJSON *content = field(t, "content");
        if (!cJSON_IsObject(t) || !cJSON_IsString(content) || !content->valuestring[0]) {
            err = tern_errorf("%s: expected an object with a non-empty \"content\"", path);
            break;
        }
        if (!get_id(field(t, "id"), &a[i].id)) {
            err = tern_errorf("%s: \"id\" is not a whole number from 0", path);
            break;
        }
        a[i].content = content->valuestring;
        a[i].len = strlen(content->valuestring);
        bool single_word;
        err = get_bool(t, "special", path, false, &a[i].special);
        if (!err) err = get_bool(t, "normalized", path, !a[i].special, &a[i].normalized);
        if (!err) err = get_bool(t, "lstrip", path, false, &a[i].lstrip);
        if (!err) err = get_bool(t, "rstrip", path, false, &a[i].rstrip);
        if (!err) err = get_bool(t, "single_word", path, false, &single_word);
        if (!err && single_word)
            err = tern_errorf("%s: single_word true is not supported", path);
        for (size_t k = 0; !err && k < i; k++) {
            char q[64];
            if (a[k].id == a[i].id)
                err = tern_errorf("%s: id %d is already added_tokens[%zu]'s", path,
                                  (int)a[i].id, k);
            else if (a[k].len == a[i].len && !memcmp(a[k].content, a[i].content, a[i].len))
                err = tern_errorf("%s: %s is added twice", path,
                                  tern_tok_quote(a[i].content, a[i].len, q, sizeof q));
        }
    }
    if (err) {
        free(a);
        return err;
    }
    *out = a;
    *count = n;
    return NULL;
}

/* Lays out every id's bytes (the vocabulary's spelled in the byte alphabet; an added
 * token's are its content) in tok, and marks the ids of the model's own vocabulary. */
static tern_error *build_vocab(struct tern_tokenizer *tok, const cJSON *vocab,
                               const raw_added *added, size_t n_added, uint8_t **in_model) {
    char q[64];
    size_t n_vocab = 0, text_bytes = 0;
    int64_t max_id = -1;
    for (const cJSON *item = vocab->child; item; item = item->next) {
        int32_t id;
        size_t key_len = strlen(item->string);
        if (!get_id(item, &id))
            return tern_errorf("model.vocab: token %s: the id is not a whole number from 0",
                               tern_tok_quote(item->string, key_len, q, sizeof q));
        if (id > max_id) max_id = id;
        n_vocab++;
        text_bytes += key_len;
    }
    for (size_t i = 0; i < n_added; i++) {
        if (added[i].id > max_id) max_id = added[i].id;
        text_bytes += added[i].len;
    }
    if (max_id < 0) return tern_errorf("model.vocab: has no tokens");
    /* Ids must be exactly 0..n-1: more ids than tokens means some id has none. */
    if ((uint64_t)max_id >= n_vocab + n_added)
        return tern_errorf("model.vocab: ids go up to %lld but there are only %zu tokens",
                           (long long)max_id, n_vocab + n_added);
    size_t n = (size_t)max_id + 1;
    size_t *start = malloc(n * sizeof *start), *count = malloc(n * sizeof *count);
    int32_t *added_of = malloc(n * sizeof *added_of);
    uint8_t *model = calloc(n, 1), *scratch = malloc(text_bytes + 1);
    const char **vocab_key = calloc(n, sizeof *vocab_key);
    tern_error *err = NULL;
    if (!start || !count || !added_of || !model || !scratch || !vocab_key) {
        err = tern_errorf("out of memory for %zu tokens", n);
        goto done;
    }
    for (size_t id = 0; id < n; id++) {
        start[id] = SIZE_MAX;
        added_of[id] = -1;
    }
    size_t used = 0;
    for (size_t i = 0; i < n_added; i++) {
        size_t id = (size_t)added[i].id;
        added_of[id] = (int32_t)i;
        memcpy(scratch + used, added[i].content, added[i].len);
        start[id] = used;
        count[id] = added[i].len;
        used += added[i].len;
    }
    for (const cJSON *item = vocab->child; item; item = item->next) {
        const char *key = item->string;
        size_t key_len = strlen(key), id = (size_t)item->valuedouble;
        if (model[id]) {
            err = tern_errorf("model.vocab: id %zu is given to %s and %s", id,
                              tern_tok_quote(vocab_key[id], strlen(vocab_key[id]), q, 32),
                              tern_tok_quote(key, key_len, q + 32, 32));
            goto done;
        }
        model[id] = 1;
        vocab_key[id] = key;
        if (added_of[id] >= 0) {
            /* An added token the model has too: the same text, or the file is garbled. */
            const raw_added *a = &added[added_of[id]];
            if (a->len != key_len || memcmp(a->content, key, key_len)) {
                err = tern_errorf("added_tokens: %s has id %zu, which model.vocab gives to %s",
                                  tern_tok_quote(a->content, a->len, q, 32), id,
                                  tern_tok_quote(key, key_len, q + 32, 32));
                goto done;
            }
            continue;
        }
        size_t bytes = tern_tok_spelled_to_bytes(key, key_len, scratch + used);
        if (!bytes) {
            err = tern_errorf("model.vocab: the token %s is empty or not spelled in the "
                              "byte-level alphabet (tern reads byte-level BPE)",
                              tern_tok_quote(key, key_len, q, sizeof q));
            goto done;
        }
        start[id] = used;
        count[id] = bytes;
        used += bytes;
    }
    for (size_t id = 0; id < n; id++)
        if (start[id] == SIZE_MAX) {
            err = tern_errorf("model.vocab: id %zu has no token (in model.vocab or "
                              "added_tokens)", id);
            goto done;
        }
    tok->bytes = malloc(used ? used : 1);
    tok->offsets = malloc((n + 1) * sizeof *tok->offsets);
    if (!tok->bytes || !tok->offsets) {
        err = tern_errorf("out of memory for %zu tokens", n);
        goto done;
    }
    size_t at = 0;
    for (size_t id = 0; id < n; id++) {
        tok->offsets[id] = at;
        memcpy(tok->bytes + at, scratch + start[id], count[id]);
        at += count[id];
    }
    tok->offsets[n] = at;
    tok->vocab_size = n;
    *in_model = model;
    model = NULL;
done:
    free(start);
    free(count);
    free(added_of);
    free(model);
    free(scratch);
    free(vocab_key);
    return err;
}

/* The bytes of a token named in merges (spelled in the byte alphabet), and its id. */
static tern_error *merge_token(const tern_token_index *index, const char *text, size_t len,
                               size_t rule, uint8_t *bytes, size_t *n, int32_t *id) {
    char q[64];
    *n = tern_tok_spelled_to_bytes(text, len, bytes);
    if (!*n)
        return tern_errorf("model.merges[%zu]: %s is not spelled in the byte-level alphabet",
                           rule, tern_tok_quote(text, len, q, sizeof q));
    *id = tern_token_index_find(index, bytes, *n);
    if (*id < 0)
        return tern_errorf("model.merges[%zu]: the token %s is not in the vocabulary", rule,
                           tern_tok_quote(text, len, q, sizeof q));
    return NULL;
}

/* model.merges: rule k has rank k; each "a b" or ["a", "b"]. */
static tern_error *parse_merges(struct tern_tokenizer *tok, const tern_token_index *index,
                                const cJSON *merges) {
    size_t n = (size_t)cJSON_GetArraySize(merges);
    if (n > INT32_MAX) return tern_errorf("model.merges: too many (%zu)", n);
    TERN_TRY(tern_merge_table_init(&tok->merges, n));
    size_t longest = 0;
    for (const cJSON *m = merges->child; m; m = m->next) {
        size_t len = cJSON_IsString(m) ? strlen(m->valuestring) : 0;
        if (cJSON_IsArray(m))
            for (const cJSON *part = m->child; part; part = part->next)
                len += cJSON_IsString(part) ? strlen(part->valuestring) : 0;
        if (len > longest) longest = len;
    }
    uint8_t *scratch = malloc(longest + 1);
    if (!scratch) return tern_errorf("out of memory");
    tern_error *err = NULL;
    char q[64];
    size_t rank = 0;
    for (const cJSON *m = merges->child; m && !err; m = m->next, rank++) {
        const char *left = NULL, *right = NULL;
        size_t left_len = 0, right_len = 0;
        if (cJSON_IsString(m)) {
            const char *s = m->valuestring, *space = strchr(s, ' ');
            if (space && space > s && space[1] && !strchr(space + 1, ' ')) {
                left = s;
                left_len = (size_t)(space - s);
                right = space + 1;
                right_len = strlen(right);
            }
        } else if (cJSON_GetArraySize(m) == 2 && cJSON_IsString(m->child) &&
                   cJSON_IsString(m->child->next) && m->child->valuestring[0] &&
                   m->child->next->valuestring[0]) {
            left = m->child->valuestring;
            left_len = strlen(left);
            right = m->child->next->valuestring;
            right_len = strlen(right);
        }
        if (!left) {
            err = tern_errorf("model.merges[%zu]: expected \"a b\" or [\"a\", \"b\"]", rank);
            break;
        }
        size_t lb = 0, rb = 0;
        int32_t a = -1, b = -1;
        err = merge_token(index, left, left_len, rank, scratch, &lb, &a);
        if (!err) err = merge_token(index, right, right_len, rank, scratch + lb, &rb, &b);
        if (err) break;
        int32_t merged = tern_token_index_find(index, scratch, lb + rb);
        if (merged < 0) {
            err = tern_errorf("model.merges[%zu]: %s + %s is not in the vocabulary", rank,
                              tern_tok_quote(left, left_len, q, 32),
                              tern_tok_quote(right, right_len, q + 32, 32));
        } else if (!tern_merge_table_add(&tok->merges, a, b, (int32_t)rank, merged)) {
            err = tern_errorf("model.merges[%zu]: the rule %s %s appears twice", rank,
                              tern_tok_quote(left, left_len, q, 32),
                              tern_tok_quote(right, right_len, q + 32, 32));
        }
    }
    free(scratch);
    return err;
}

/* ---- the pipeline ------------------------------------------------------------------- */

static tern_error *parse_normalizer(const cJSON *j, const char *path, bool *nfc) {
    if (is_null(j)) return NULL;
    const char *type = NULL;
    TERN_TRY(get_type(j, path, &type));
    if (!strcmp(type, "NFC")) {
        *nfc = true;
        return NULL;
    }
    if (!strcmp(type, "Sequence")) {
        const cJSON *list = field(j, "normalizers");
        if (!cJSON_IsArray(list)) return tern_errorf("%s.normalizers: expected an array", path);
        size_t i = 0;
        for (const cJSON *n = list->child; n; n = n->next, i++) {
            char sub[128];
            snprintf(sub, sizeof sub, "%s.normalizers[%zu]", path, i);
            if (is_null(n)) return tern_errorf("%s: expected a normalizer", sub);
            TERN_TRY(parse_normalizer(n, sub, nfc)); /* NFC twice is NFC */
        }
        return NULL;
    }
    char sub[128];
    snprintf(sub, sizeof sub, "%s.type", path);
    return unsupported(sub, type, "the only normalizer is NFC");
}

static tern_error *add_step(struct tern_hf_pipeline *hf, tern_pretok_step step,
                            const char *path) {
    if (hf->n_steps == TERN_HF_MAX_STEPS) {
        tern_split_regex_free(step.regex);
        return tern_errorf("%s: more than %d pre-tokenizers", path, TERN_HF_MAX_STEPS);
    }
    hf->steps[hf->n_steps++] = step;
    return NULL;
}

static tern_error *parse_split(struct tern_hf_pipeline *hf, const cJSON *j, const char *path) {
    static const char *const behaviors[] = {"Removed", "Isolated", "MergedWithPrevious",
                                            "MergedWithNext", "Contiguous"};
    const cJSON *b = field(j, "behavior");
    int behavior = -1;
    for (int i = 0; i < 5 && cJSON_IsString(b); i++)
        if (!strcmp(b->valuestring, behaviors[i])) behavior = i;
    if (!cJSON_IsString(b)) return tern_errorf("%s.behavior: expected a string", path);
    if (behavior < 0) {
        char sub[128];
        snprintf(sub, sizeof sub, "%s.behavior", path);
        return unsupported(sub, b->valuestring, "not one of Hugging Face's behaviours");
    }
    bool invert = false;
    TERN_TRY(get_bool(j, "invert", path, false, &invert));
    const cJSON *pattern = field(j, "pattern");
    const cJSON *regex = cJSON_IsObject(pattern) ? field(pattern, "Regex") : NULL;
    const cJSON *string = cJSON_IsObject(pattern) ? field(pattern, "String") : NULL;
    if (!cJSON_IsString(regex) && !cJSON_IsString(string))
        return tern_errorf("%s.pattern: expected {\"Regex\": ...} or {\"String\": ...}", path);
    const char *text = cJSON_IsString(regex) ? regex->valuestring : string->valuestring;
    tern_pretok_step step = {.kind = TERN_PRETOK_REGEX, .behavior = (tern_split_behavior)behavior,
                             .invert = invert};
    if (cJSON_IsString(regex) && !strcmp(text, gpt2_pattern) && !invert &&
        behavior == TERN_SPLIT_ISOLATED) {
        step.kind = TERN_PRETOK_GPT2; /* GPT-2's pattern: the scanner does it exactly */
        return add_step(hf, step, path);
    }
    tern_error *err = tern_split_regex_new(text, strlen(text), cJSON_IsString(string), &step.regex);
    if (err) return tern_error_wrap(err, "%s.pattern", path);
    return add_step(hf, step, path);
}

static tern_error *parse_pre_tokenizer(struct tern_hf_pipeline *hf, const cJSON *j,
                                       const char *path, bool *byte_level) {
    if (is_null(j)) return NULL;
    const char *type = NULL;
    TERN_TRY(get_type(j, path, &type));
    if (!strcmp(type, "Sequence")) {
        const cJSON *list = field(j, "pretokenizers");
        if (!cJSON_IsArray(list)) return tern_errorf("%s.pretokenizers: expected an array", path);
        size_t i = 0;
        for (const cJSON *p = list->child; p; p = p->next, i++) {
            char sub[128];
            snprintf(sub, sizeof sub, "%s.pretokenizers[%zu]", path, i);
            if (is_null(p)) return tern_errorf("%s: expected a pre-tokenizer", sub);
            TERN_TRY(parse_pre_tokenizer(hf, p, sub, byte_level));
        }
        return NULL;
    }
    if (*byte_level)
        return tern_errorf("%s: %s after ByteLevel is not supported (it would see ByteLevel's "
                           "alphabet)", path, type);
    if (!strcmp(type, "ByteLevel")) {
        bool prefix = false, use_regex = false;
        TERN_TRY(get_bool(j, "add_prefix_space", path, true, &prefix));
        TERN_TRY(get_bool(j, "use_regex", path, true, &use_regex));
        if (prefix) TERN_TRY(add_step(hf, (tern_pretok_step){.kind = TERN_PRETOK_PREFIX_SPACE}, path));
        if (use_regex) TERN_TRY(add_step(hf, (tern_pretok_step){.kind = TERN_PRETOK_GPT2}, path));
        *byte_level = true;
        return NULL;
    }
    if (!strcmp(type, "Split")) return parse_split(hf, j, path);
    if (!strcmp(type, "Digits")) {
        bool individual = false;
        TERN_TRY(get_bool(j, "individual_digits", path, false, &individual));
        tern_pretok_step step = {.kind = TERN_PRETOK_DIGITS,
                                 .behavior = individual ? TERN_SPLIT_ISOLATED
                                                        : TERN_SPLIT_CONTIGUOUS};
        return add_step(hf, step, path);
    }
    char sub[128];
    snprintf(sub, sizeof sub, "%s.type", path);
    return unsupported(sub, type, "tern has Split, ByteLevel, Digits and Sequence");
}

/* One TemplateProcessing: the special tokens of "single" before and after the sequence. */
static tern_error *parse_template(struct tern_hf_pipeline *hf, const cJSON *j, const char *path,
                                  size_t vocab_size) {
    const cJSON *single = field(j, "single"), *specials = field(j, "special_tokens");
    if (!cJSON_IsArray(single)) return tern_errorf("%s.single: expected an array", path);
    if (hf->n_prefix || hf->n_suffix)
        return tern_errorf("%s: a second TemplateProcessing is not supported", path);
    size_t n_ids = 0;
    for (const cJSON *it = single->child; it; it = it->next) {
        const cJSON *st = field(it, "SpecialToken"), *ids;
        const cJSON *name = cJSON_IsObject(st) ? field(st, "id") : NULL;
        ids = cJSON_IsString(name) && cJSON_IsObject(specials)
                  ? field(field(specials, name->valuestring), "ids")
                  : NULL;
        if (cJSON_IsArray(ids)) n_ids += (size_t)cJSON_GetArraySize(ids);
    }
    int32_t *all = malloc((n_ids ? n_ids : 1) * sizeof *all);
    if (!all) return tern_errorf("out of memory");
    size_t at = 0, split = SIZE_MAX, i = 0;
    tern_error *err = NULL;
    for (const cJSON *it = single->child; it && !err; it = it->next, i++) {
        const cJSON *seq = field(it, "Sequence"), *st = field(it, "SpecialToken");
        if (cJSON_IsObject(seq)) {
            const cJSON *id = field(seq, "id");
            if (split != SIZE_MAX || !cJSON_IsString(id) || strcmp(id->valuestring, "A"))
                err = tern_errorf("%s.single[%zu]: only one sequence, \"A\", is supported",
                                  path, i);
            split = at;
            continue;
        }
        const cJSON *name = cJSON_IsObject(st) ? field(st, "id") : NULL;
        if (!cJSON_IsString(name)) {
            err = tern_errorf("%s.single[%zu]: expected a SpecialToken or a Sequence", path, i);
            break;
        }
        const cJSON *ids = cJSON_IsObject(specials)
                               ? field(field(specials, name->valuestring), "ids")
                               : NULL;
        if (!cJSON_IsArray(ids)) {
            err = tern_errorf("%s.special_tokens: no ids for \"%s\"", path, name->valuestring);
            break;
        }
        for (const cJSON *id = ids->child; id; id = id->next) {
            int32_t v;
            if (!get_id(id, &v) || (size_t)v >= vocab_size) {
                err = tern_errorf("%s.special_tokens[\"%s\"]: an id outside the vocabulary",
                                  path, name->valuestring);
                break;
            }
            all[at++] = v;
        }
    }
    if (!err && split == SIZE_MAX) err = tern_errorf("%s.single: has no sequence", path);
    if (!err) {
        hf->n_prefix = split;
        hf->n_suffix = at - split;
        hf->prefix_ids = malloc((split ? split : 1) * sizeof *all);
        hf->suffix_ids = malloc((at - split ? at - split : 1) * sizeof *all);
        if (!hf->prefix_ids || !hf->suffix_ids) {
            err = tern_errorf("out of memory");
        } else {
            memcpy(hf->prefix_ids, all, split * sizeof *all);
            memcpy(hf->suffix_ids, all + split, (at - split) * sizeof *all);
        }
    }
    free(all);
    return err;
}

static tern_error *parse_post_processor(struct tern_hf_pipeline *hf, const cJSON *j,
                                        const char *path, size_t vocab_size) {
    if (is_null(j)) return NULL;
    const char *type = NULL;
    TERN_TRY(get_type(j, path, &type));
    if (!strcmp(type, "ByteLevel")) return NULL; /* it only moves offsets */
    if (!strcmp(type, "TemplateProcessing")) return parse_template(hf, j, path, vocab_size);
    if (!strcmp(type, "Sequence")) {
        const cJSON *list = field(j, "processors");
        if (!cJSON_IsArray(list)) return tern_errorf("%s.processors: expected an array", path);
        size_t i = 0;
        for (const cJSON *p = list->child; p; p = p->next, i++) {
            char sub[128];
            snprintf(sub, sizeof sub, "%s.processors[%zu]", path, i);
            TERN_TRY(parse_post_processor(hf, p, sub, vocab_size));
        }
        return NULL;
    }
    char sub[128];
    snprintf(sub, sizeof sub, "%s.type", path);
    return unsupported(sub, type, "tern has TemplateProcessing, ByteLevel and Sequence");
}

static tern_error *check_decoder(const cJSON *j, const char *path) {
    if (is_null(j))
        return tern_errorf("%s: null is not supported (byte-level BPE decodes with ByteLevel)",
                           path);
    const char *type = NULL;
    TERN_TRY(get_type(j, path, &type));
    if (!strcmp(type, "ByteLevel")) return NULL;
    if (!strcmp(type, "Sequence")) {
        const cJSON *list = field(j, "decoders");
        if (!cJSON_IsArray(list) || !list->child)
            return tern_errorf("%s.decoders: expected a non-empty array", path);
        size_t i = 0;
        for (const cJSON *d = list->child; d; d = d->next, i++) {
            char sub[128];
            snprintf(sub, sizeof sub, "%s.decoders[%zu]", path, i);
            TERN_TRY(check_decoder(d, sub));
        }
        return NULL;
    }
    char sub[128];
    snprintf(sub, sizeof sub, "%s.type", path);
    return unsupported(sub, type, "byte-level BPE decodes with ByteLevel");
}

/* The added tokens, their match text (normalized when the token is `normalized` and the
 * normalizer is NFC) and the two matching sets. */
static tern_error *build_added(struct tern_hf_pipeline *hf, const raw_added *raw, size_t n) {
    size_t bytes = 0;
    for (size_t i = 0; i < n; i++) bytes += raw[i].len;
    hf->added = calloc(n ? n : 1, sizeof *hf->added);
    hf->added_text = malloc(bytes ? bytes : 1);
    hf->raw_set.order = malloc((n ? n : 1) * sizeof *hf->raw_set.order);
    hf->normalized_set.order = malloc((n ? n : 1) * sizeof *hf->normalized_set.order);
    if (!hf->added || !hf->added_text || !hf->raw_set.order || !hf->normalized_set.order)
        return tern_errorf("out of memory for %zu added tokens", n);
    hf->n_added = n;
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        tern_added_token *t = &hf->added[i];
        t->id = raw[i].id;
        t->special = raw[i].special;
        t->lstrip = raw[i].lstrip;
        t->rstrip = raw[i].rstrip;
        memcpy(hf->added_text + at, raw[i].content, raw[i].len);
        t->bytes = hf->added_text + at;
        t->len = raw[i].len;
        at += raw[i].len;
    }
    /* Normalized tokens are matched as the normalizer writes them. */
    for (size_t i = 0; i < n && hf->nfc; i++) {
        if (!raw[i].normalized) continue;
        uint8_t *normal = NULL;
        size_t normal_len = 0;
        TERN_TRY(tern_nfc(hf->added[i].bytes, hf->added[i].len, &normal, &normal_len));
        if (!normal) continue;
        if (normal_len <= hf->added[i].len) { /* NFC only shortens or keeps (composition) */
            memcpy((uint8_t *)hf->added[i].bytes, normal, normal_len);
            hf->added[i].len = normal_len;
        }
        free(normal);
    }
    for (int pass = 0; pass < 2; pass++) {
        tern_added_set *set = pass ? &hf->normalized_set : &hf->raw_set;
        size_t k = 0;
        for (int b = 0; b < 256; b++) {
            set->first[b] = (uint32_t)k;
            size_t from = k;
            for (size_t i = 0; i < n; i++)
                if (raw[i].normalized == (pass == 1) && hf->added[i].bytes[0] == b)
                    set->order[k++] = (uint32_t)i;
            /* longest first: insertion sort, the lists are short */
            for (size_t x = from + 1; x < k; x++)
                for (size_t y = x; y > from && hf->added[set->order[y]].len >
                                                   hf->added[set->order[y - 1]].len; y--) {
                    uint32_t tmp = set->order[y];
                    set->order[y] = set->order[y - 1];
                    set->order[y - 1] = tmp;
                }
        }
        set->first[256] = (uint32_t)k;
    }
    return NULL;
}

static int32_t find_special(const struct tern_hf_pipeline *hf, const char *text) {
    size_t len = strlen(text);
    for (size_t i = 0; i < hf->n_added; i++)
        if (hf->added[i].special && hf->added[i].len == len && !memcmp(hf->added[i].bytes, text, len))
            return hf->added[i].id;
    return -1;
}

static tern_error *load_root(struct tern_tokenizer *tok, const cJSON *root) {
    if (!cJSON_IsObject(root)) return tern_errorf("expected a JSON object");
    if (!is_null(field(root, "truncation")))
        return tern_errorf("truncation: only null is supported (tern never truncates)");
    if (!is_null(field(root, "padding")))
        return tern_errorf("padding: only null is supported (tern never pads)");
    const cJSON *model = field(root, "model");
    struct tern_hf_pipeline *hf = calloc(1, sizeof *hf);
    if (!hf) return tern_errorf("out of memory");
    tok->hf = hf;
    TERN_TRY(check_model_options(model, &hf->ignore_merges));

    raw_added *added = NULL;
    size_t n_added = 0;
    uint8_t *in_model = NULL;
    TERN_TRY(parse_added_tokens(root, &added, &n_added));
    tern_error *err = build_vocab(tok, field(model, "vocab"), added, n_added, &in_model);
    if (!err) err = tern_token_index_build_some(&hf->vocab_index, tok, in_model);
    for (int b = 0; b < 256 && !err; b++) {
        uint8_t byte = (uint8_t)b;
        tok->byte_token[b] = tern_token_index_find(&hf->vocab_index, &byte, 1);
        if (tok->byte_token[b] < 0)
            err = tern_errorf("model.vocab: no token for the byte 0x%02X (byte-level BPE has "
                              "all 256)", b);
    }
    if (!err) err = parse_merges(tok, &hf->vocab_index, field(model, "merges"));
    if (!err) err = parse_normalizer(field(root, "normalizer"), "normalizer", &hf->nfc);
    if (!err) err = build_added(hf, added, n_added);
    bool byte_level = false;
    if (!err) err = parse_pre_tokenizer(hf, field(root, "pre_tokenizer"), "pre_tokenizer",
                                        &byte_level);
    if (!err && !byte_level)
        err = tern_errorf("pre_tokenizer: has no ByteLevel (tern reads byte-level BPE)");
    if (!err) err = parse_post_processor(hf, field(root, "post_processor"), "post_processor",
                                         tok->vocab_size);
    if (!err) err = check_decoder(field(root, "decoder"), "decoder");
    if (!err) {
        tok->eot = find_special(hf, "<|endoftext|>");
        if (tok->eot < 0) tok->eot = find_special(hf, "<|end_of_text|>");
    }
    free(added);
    free(in_model);
    return err;
}

static tern_error *load_json_text(const char *text, size_t len, tern_tokenizer **out) {
    cJSON *root = cJSON_ParseWithLength(text, len);
    if (!root) {
        const char *at = cJSON_GetErrorPtr();
        if (at && at >= text && at <= text + len)
            return tern_errorf("not valid JSON (near byte %zu)", (size_t)(at - text));
        return tern_errorf("not valid JSON");
    }
    struct tern_tokenizer *tok = calloc(1, sizeof *tok);
    tern_error *err = tok ? load_root(tok, root) : tern_errorf("out of memory");
    cJSON_Delete(root);
    if (err) {
        tern_tokenizer_free(tok);
        return err;
    }
    *out = tok;
    return NULL;
}

tern_error *tern_tokenizer_load_json_memory(const char *json, size_t len, tern_tokenizer **out) {
    if (!out) return tern_errorf("tern_tokenizer_load_json_memory: no output pointer");
    *out = NULL;
    if (!json && len) return tern_errorf("tern_tokenizer_load_json_memory: no data");
    return tern_error_wrap(load_json_text(json ? json : "", len, out), "tokenizer.json");
}

tern_error *tern_tokenizer_load_json(const char *path, tern_tokenizer **out) {
    if (!out) return tern_errorf("tern_tokenizer_load_json: no output pointer");
    *out = NULL;
    if (!path) return tern_errorf("tern_tokenizer_load_json: no path");
    char *text = NULL;
    size_t len = 0;
    TERN_TRY(tern_tok_read_file(path, &text, &len));
    tern_error *err = tern_error_wrap(load_json_text(text, len, out), "%s", path);
    free(text);
    return err;
}

void tern_hf_pipeline_free(struct tern_hf_pipeline *hf) {
    if (!hf) return;
    tern_token_index_free(&hf->vocab_index);
    for (size_t i = 0; i < hf->n_steps; i++) tern_split_regex_free(hf->steps[i].regex);
    free(hf->added);
    free(hf->added_text);
    free(hf->raw_set.order);
    free(hf->normalized_set.order);
    free(hf->prefix_ids);
    free(hf->suffix_ids);
    free(hf);
}
