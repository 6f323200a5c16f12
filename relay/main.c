/* main.c - subcommand dispatch and the process-wide library set-up every command shares
 * (jansson's allocator, curl's global state), done before any thread starts.
 * runs on: main thread. */
#include "relay/commands.h"
#include "relay/common/util.h"

#include <curl/curl.h>
#include <jansson.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#ifndef STATUSRELAY_VERSION
#define STATUSRELAY_VERSION "0.1.0"
#endif

static const struct {
    const char *name;
    const char *summary;
} commands[] = {
    {"serve", "run the daemon"},
    {"sim", "run the upstream simulator (websocket, status/requests/chains, faults, load)"},
    {"track", "track request ids: track ID..."},
    {"untrack", "stop tracking request ids: untrack ID..."},
    {"status", "one request: state, tx hashes with explorer links, deposit, watch, timeline"},
    {"find", "find requests by id, wallet or tx hash: status, facts, explorer links"},
    {"requests", "list known requests (--status S, --stuck, --limit N, --all)"},
    {"events", "one read of the event stream (--request ID, --since T, --limit N)"},
    {"webhooks", "manage webhook endpoints: list|add|update|show|rm|rotate-secret|"
                 "reveal-secret|test|enable|disable"},
    {"deliveries", "list deliveries of an endpoint by state, with attempts"},
    {"replay", "re-deliver events or dead deliveries (--dry-run counts)"},
    {"tail", "follow events live until interrupted"},
    {"partitions", "where the data lives: partition -> Redis Cluster slot -> master"},
    {"backfill", "read a window of the changes feed again (progress lines until done)"},
    {"version", "print the version"},
};

static void usage(FILE *f)
{
    fprintf(f, "usage: statusrelay COMMAND [--help] [options]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
        fprintf(f, "  %-11s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\nEvery setting is an environment variable STATUSRELAY_FOO_BAR and a flag "
               "--foo-bar;\nflags win. `statusrelay serve --help` lists the daemon's settings.\n"
               "`statusrelay COMMAND --help` (or `statusrelay help COMMAND`) shows a command's "
               "own options.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return EXIT_USAGE;
    }
    const char *cmd = argv[1];
    char *help_argv[64];
    if (strcmp(cmd, "help") == 0 && argc > 2 && argc < 63) {
        /* `statusrelay help CMD [SUB]` is `statusrelay CMD [SUB] --help` */
        for (int i = 2; i < argc; i++)
            help_argv[i - 1] = argv[i];
        help_argv[0] = argv[0];
        help_argv[argc - 1] = (char *)"--help";
        help_argv[argc] = NULL;
        argv = help_argv;
        cmd = argv[1];
    }
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(cmd, "version") == 0 || strcmp(cmd, "--version") == 0) {
        printf("statusrelay %s\n", STATUSRELAY_VERSION);
        return 0;
    }
    /* Every jansson allocation goes through xmalloc: out of memory is logged and aborts, the
     * rule of relay/ and store/ (util.h), instead of a NULL from deep inside a JSON call that
     * each caller would have to tell apart from bad input. The hooks are process-wide, so they
     * are set here, before the first JSON value and before any thread starts (serve's lws
     * thread decodes upstream frames and dashboard messages with jansson too); every command
     * gets them (serve, sim and the CLI). protocol/ keeps its PROTO_ENOMEM paths: its unit
     * tests run without main, under their own chaos allocator. */
    json_set_alloc_funcs(xmalloc, free);
    /* before any thread starts: curl's global state is not thread-safe to initialise */
    curl_global_init(CURL_GLOBAL_DEFAULT);
    if (strcmp(cmd, "serve") == 0)
        return serve_main(argc - 2, argv + 2);
    if (strcmp(cmd, "sim") == 0)
        return sim_main(argc - 2, argv + 2);
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
        if (strcmp(cmd, commands[i].name) == 0)
            return cli_main(cmd, argc - 2, argv + 2);
    fprintf(stderr, "statusrelay: unknown command \"%s\" (try statusrelay --help)\n", cmd);
    return EXIT_USAGE;
}
