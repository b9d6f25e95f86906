/* tokenizer.json that tern does not implement exactly, or that is garbled, is refused with a
 * one-line error naming the field and the value: never a different tokenization. Each case
 * is the llama-tiny-a fixture's tokenizer.json with one change. */
#include <cjson/cJSON.h>

#include "check.h"
#include "tern/tokenizer.h"
#include "tokenizer_test_util.h"

static cJSON *fixture;

/* Replaces (or with value NULL removes) the item at a dotted path, e.g. "model.type";
 * a number in the path indexes an array. */
static void set_path(cJSON *root, const char *path, cJSON *value) {
    char buf[256];
    snprintf(buf, sizeof buf, "%s", path);
    cJSON *obj = root;
    char *key = buf, *dot;
    while ((dot = strchr(key, '.'))) {
        *dot = '\0';
        obj = cJSON_IsArray(obj) ? cJSON_GetArrayItem(obj, atoi(key)) : cJSON_GetObjectItem(obj, key);
        key = dot + 1;
    }
    if (cJSON_IsArray(obj))
        cJSON_ReplaceItemInArray(obj, atoi(key), value);
    else if (!value)
        cJSON_DeleteItemFromObject(obj, key);
    else if (cJSON_GetObjectItem(obj, key))
        cJSON_ReplaceItemInObject(obj, key, value);
    else
        cJSON_AddItemToObject(obj, key, value);
}

/* The fixture with path set to the JSON text `value` ("" removes it) must fail with an
 * error containing needle, on one line. */
static void refused(const char *path, const char *value, const char *needle) {
    cJSON *json = cJSON_Duplicate(fixture, true);
    set_path(json, path, *value ? cJSON_Parse(value) : NULL);
    char *text = cJSON_PrintUnformatted(json);
    cJSON_Delete(json);
    tern_tokenizer *tok = NULL;
    tern_error *err = tern_tokenizer_load_json_memory(text, strlen(text), &tok);
    free(text);
    CHECKF(err && !tok, "%s = %s loaded", path, value);
    if (!err) {
        tern_tokenizer_free(tok);
        return;
    }
    const char *msg = tern_error_message(err);
    CHECKF(strstr(msg, needle) != NULL, "%s = %s: '%s' lacks '%s'", path, value, msg, needle);
    CHECKF(strstr(msg, "tokenizer.json: ") == msg && !strchr(msg, '\n'),
           "%s = %s: '%s' is not one line naming the file", path, value, msg);
    tern_error_free(err);
}

int main(void) {
    char path[4096];
    size_t len = 0;
    char *text = read_whole_file(shared_path("fixtures/llama-tiny-a/tokenizer.json", path, sizeof path), &len);
    fixture = text ? cJSON_ParseWithLength(text, len) : NULL;
    free(text);
    CHECK(fixture != NULL);
    if (!fixture) return check_summary("test_tokenizer_hf_errors");

    /* the unchanged file loads */
    char *json = cJSON_PrintUnformatted(fixture);
    tern_tokenizer *tok = NULL;
    CHECK_OK(tern_tokenizer_load_json_memory(json, strlen(json), &tok));
    tern_tokenizer_free(tok);
    free(json);

    /* other models and model options */
    refused("model.type", "\"Unigram\"", "model.type: 'Unigram' is not supported");
    refused("model.type", "\"WordPiece\"", "model.type: 'WordPiece' is not supported");
    refused("model.byte_fallback", "true", "model.byte_fallback: true is not supported");
    refused("model.dropout", "0.1", "model.dropout: only null");
    refused("model.continuing_subword_prefix", "\"##\"", "model.continuing_subword_prefix");
    refused("model.ignore_merges", "1", "model.ignore_merges: expected true or false");
    /* pre-tokenizers, normalizers, post-processors, decoders */
    refused("pre_tokenizer", "{\"type\": \"Metaspace\", \"replacement\": \"_\"}",
            "pre_tokenizer.type: 'Metaspace' is not supported");
    refused("pre_tokenizer.pretokenizers.0", "{\"type\": \"Whitespace\"}",
            "pre_tokenizer.pretokenizers[0].type: 'Whitespace' is not supported");
    refused("pre_tokenizer.pretokenizers.0", "{\"type\": \"Split\", \"pattern\": {\"Regex\": "
            "\"(\"}, \"behavior\": \"Isolated\", \"invert\": false}",
            "pre_tokenizer.pretokenizers[0].pattern: the regex does not compile");
    refused("pre_tokenizer.pretokenizers.0.behavior", "\"Sideways\"",
            "pre_tokenizer.pretokenizers[0].behavior: 'Sideways' is not supported");
    refused("pre_tokenizer", "null", "pre_tokenizer: has no ByteLevel");
    refused("pre_tokenizer", "{\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": "
            "\"ByteLevel\", \"use_regex\": false}, {\"type\": \"Digits\"}]}",
            "Digits after ByteLevel is not supported");
    refused("normalizer", "{\"type\": \"Lowercase\"}", "normalizer.type: 'Lowercase' is not supported");
    refused("normalizer", "{\"type\": \"NFKC\"}", "normalizer.type: 'NFKC' is not supported");
    refused("post_processor", "{\"type\": \"RobertaProcessing\"}",
            "post_processor.type: 'RobertaProcessing' is not supported");
    refused("decoder", "null", "decoder: null is not supported");
    refused("decoder", "{\"type\": \"Metaspace\"}", "decoder.type: 'Metaspace' is not supported");
    refused("truncation", "{\"max_length\": 8}", "truncation: only null");
    refused("added_tokens.0.single_word", "true", "added_tokens[0]: single_word true");
    /* garbled */
    refused("model.vocab.!", "5000", "ids go up to 5000");
    refused("model.vocab.!", "7", "model.vocab: id 7 is given to");
    refused("model.vocab.!", "\"x\"", "the id is not a whole number");
    refused("model.merges", "[[\"h\", \"e\"], [\"qqq\", \"e\"]]",
            "model.merges[1]: the token 'qqq' is not in the vocabulary");
    refused("model.merges", "[\"h e\", \"h e\"]", "model.merges[1]: the rule 'h' 'e' appears twice");
    refused("model.merges", "[\"h e x\"]", "model.merges[0]: expected");
    refused("model.merges", "[[\"Ċ\", \"a\"]]", "is not in the vocabulary"); /* "\\na" is no token */
    refused("added_tokens.0.id", "1", "id 1 is already added_tokens[0]'s");
    refused("added_tokens.1.content", "\"he\"", "which model.vocab gives to");
    refused("model", "[]", "model: expected an object");

    /* Not JSON at all */
    const char *junk = "{\"model\": ";
    CHECK_ERR(tern_tokenizer_load_json_memory(junk, strlen(junk), &tok), "tokenizer.json: not valid JSON");
    CHECK_ERR(tern_tokenizer_load_json("/nonexistent/tokenizer.json", &tok), "cannot open");
    CHECK_ERR(tern_tokenizer_load_json("/tmp", &tok), "not a regular file");
    cJSON_Delete(fixture);
    return check_summary("test_tokenizer_hf_errors");
}
