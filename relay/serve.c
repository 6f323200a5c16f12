/* serve.c - `statusrelay serve`: settings, start-up order, shutdown. runs on: main thread. */
#include "relay/commands.h"
#include "relay/config.h"
#include "relay/core.h"
#include "relay/common/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void serve_usage(FILE *f)
{
    fprintf(f, "usage: statusrelay serve [--print-config] [--check-config] [settings]\n\n"
               "Runs the daemon. Settings (flag, environment variable, default):\n");
    settings_help(config_settings, "STATUSRELAY_", f);
}

int serve_main(int argc, char **argv)
{
    struct config cfg;
    const char **rest = calloc((size_t)argc + 1, sizeof(*rest));
    int nrest = 0, help = 0, print = 0, check = 0, rc = 0;
    if (config_load(&cfg, argc, argv, rest, &nrest, &help) != 0) {
        rc = EXIT_USAGE;
        goto out;
    }
    for (int i = 0; i < nrest; i++) {
        if (strcmp(rest[i], "--print-config") == 0)
            print = 1;
        else if (strcmp(rest[i], "--check-config") == 0)
            check = 1;
        else {
            fprintf(stderr, "statusrelay serve: unknown argument \"%s\"\n", rest[i]);
            rc = EXIT_USAGE;
            goto out;
        }
    }
    if (help) {
        serve_usage(stdout);
        goto out;
    }
    if (print) {
        config_print(&cfg, stdout);
        goto out;
    }
    if (check) {
        printf("configuration ok\n");
        goto out;
    }
    log_set_level(cfg.log_level);
    log_thread_name("core");
    if (cfg.log_file && log_open_file(cfg.log_file) != 0) {
        fprintf(stderr, "statusrelay: cannot open STATUSRELAY_LOG_FILE %s\n", cfg.log_file);
        rc = EXIT_USAGE;
        goto out;
    }
    log_route_libs();
    struct core *c = core_new(&cfg);
    if (c == NULL || core_start(c) != 0) {
        core_free(c);
        rc = 1;
        goto out;
    }
    rc = core_run(c);
    core_free(c);
    log_info("statusrelay stopped", "status=%d", rc);
out:
    config_free(&cfg);
    free(rest);
    return rc;
}
