#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

static const struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} commands[] = {
    {"generate", tern_cmd_generate, "continue a prompt with a GPT-2 model"},
    {"eval", tern_cmd_eval, "mean loss of a model on a data file"},
    {"train", tern_cmd_train, "train or fine-tune a GPT-2 model"},
    {"tokenize", tern_cmd_tokenize, "text to GPT-2 token ids and back"},
    {"info", tern_cmd_info, "handlers built in, and a model's configuration"},
    {"bench", tern_cmd_bench, "timings for the benchmarks in bench/"},
};

static void usage(FILE *out) {
    fprintf(out, "usage: tern <command> [options]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(out, "  %-9s %s\n", commands[i].name, commands[i].summary);
    fprintf(out, "\n'tern <command> --help' describes a command's options.\n");
}

int main(int argc, char **argv) {
    /* Past a file-size limit (ulimit -f) a write then fails with EFBIG, which the writers
     * report naming the file (and remove their partial file), instead of SIGXFSZ killing
     * the process with a core dump. */
    signal(SIGXFSZ, SIG_IGN);
    if (argc < 2) {
        usage(stderr);
        return 1;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name)) return commands[i].run(argc - 1, argv + 1);
    return cli_fail(tern_errorf("unknown command '%s' (try 'tern --help')", argv[1]));
}
