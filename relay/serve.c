/* serve.c - `statusrelay serve`: settings, start-up order, shutdown. runs on: main thread. */
#include "relay/commands.h"
#include "relay/config.h"
#include "relay/core.h"
#include "relay/common/log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

/* Raise the soft descriptor limit to the hard one (allowed without privileges). Returns the
 * resulting soft limit; *raised_from is the old one when it was raised, else -1, and *err the
 * errno of a refused raise, else 0. Runs before anything opens descriptors that libraries size
 * their tables by (libwebsockets reads the limit when its context is created). */
static int64_t raise_nofile(int64_t *raised_from, int *err)
{
    struct rlimit rl;
    *raised_from = -1;
    *err = 0;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return 1024;
    if (rl.rlim_cur != RLIM_INFINITY &&
        (rl.rlim_max == RLIM_INFINITY || rl.rlim_cur < rl.rlim_max)) {
        struct rlimit want = rl;
        want.rlim_cur = rl.rlim_max;
        /* an unlimited hard limit: stay within what the kernel allows per process */
        if (want.rlim_cur == RLIM_INFINITY)
            want.rlim_cur = 1048576;
        if (setrlimit(RLIMIT_NOFILE, &want) == 0) {
            *raised_from = (int64_t)rl.rlim_cur;
            rl = want;
        } else {
            *err = errno;
        }
    }
    return rl.rlim_cur == RLIM_INFINITY ? INT64_MAX / 4 : (int64_t)rl.rlim_cur;
}

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
    int64_t raised_from;
    int rl_err;
    int64_t nofile = raise_nofile(&raised_from, &rl_err);
    if (config_fit_descriptors(&cfg, nofile) != 0) {
        rc = EXIT_USAGE;
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
    log_info("descriptor limit", "nofile=%lld raised_from=%lld%s%s http_max_connections=%lld "
             "ws_max_connections=%lld", (long long)nofile, (long long)raised_from,
             rl_err ? " raise_error=" : "", rl_err ? strerror(rl_err) : "",
             (long long)cfg.http_max_connections, (long long)cfg.ws_max_connections);
    if (cfg.http_max_connections + cfg.ws_max_connections + CONFIG_FD_RESERVE_BASE > nofile)
        log_warn("connection caps exceed the descriptor limit: accepting pauses when "
                 "descriptors run out", "nofile=%lld http_max_connections=%lld "
                 "ws_max_connections=%lld", (long long)nofile,
                 (long long)cfg.http_max_connections, (long long)cfg.ws_max_connections);
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
