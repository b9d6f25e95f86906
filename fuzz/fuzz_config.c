/* libFuzzer target: the config.json reader over arbitrary bytes. An accepted configuration
 * must pass validation and survive format -> parse unchanged. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "tern/gpt2_config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    tern_gpt2_config c;
    tern_error *e = tern_gpt2_config_parse((const char *)data, size, "fuzz.json", &c);
    if (e) {
        tern_error_free(e);
        return 0;
    }
    if (tern_gpt2_config_validate(&c)) __builtin_trap();
    char *json;
    size_t len;
    if (tern_gpt2_config_format(&c, &json, &len)) __builtin_trap();
    tern_gpt2_config back;
    if (tern_gpt2_config_parse(json, len, "formatted", &back)) __builtin_trap();
    if (back.vocab_size != c.vocab_size || back.max_seq != c.max_seq || back.n_layer != c.n_layer ||
        back.n_head != c.n_head || back.n_embd != c.n_embd || back.ln_eps != c.ln_eps)
        __builtin_trap();
    free(json);
    return 0;
}
