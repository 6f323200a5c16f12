/* backfill.c (cli) - `statusrelay backfill --since 2h [--until ...]`: read a window of the
 * changes feed again (POST /v1/backfill), then follow its progress (GET /v1/backfill/{id})
 * with one line every 2 s until it is done (--no-wait: only start it). See internal.h.
 * runs on: main thread. */
#include "relay/cli/internal.h"
#include "relay/commands.h"
#include "relay/common/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PROGRESS_EVERY_MS 2000

/* A time: a duration back from now ("2h", "90m") or unix ms (all digits). -1 when bad. */
static int64_t take_time(const char *s, int64_t now)
{
    if (s == NULL || *s == '\0')
        return -1;
    if (strspn(s, "0123456789") == strlen(s))
        return strtoll(s, NULL, 10);
    int64_t d;
    if (parse_duration_ms(s, &d) != 0 || d > now)
        return -1;
    return now - d;
}

static void progress_line(const char *id, json_t *o)
{
    json_t *err = json_object_get(o, "error");
    printf("backfill %s: pages=%lld items=%lld applied=%lld%s%s%s\n", id, cli_num(o, "pages"),
           cli_num(o, "items"), cli_num(o, "applied"),
           json_is_true(json_object_get(o, "done")) ? " done" : "",
           json_is_string(err) ? " error=" : "", json_is_string(err) ? json_string_value(err) : "");
    fflush(stdout);
}

int cli_backfill(struct cli *c, const struct cli_args *a)
{
    int64_t now = wall_ms();
    int64_t since = take_time(cli_opt(a, "--since"), now);
    if (since < 0)
        return cli_usage_error(a, "--since takes a duration back from now (2h) or unix ms");
    json_t *body = json_pack("{s:I}", "since", (json_int_t)since);
    if (cli_opt(a, "--until") != NULL) {
        int64_t until = take_time(cli_opt(a, "--until"), now);
        if (until < 0) {
            json_decref(body);
            return cli_usage_error(a, "--until takes a duration back from now (1h) or unix ms");
        }
        json_object_set_new(body, "until", json_integer(until));
    }
    json_t *out = NULL;
    long st = cli_call(c, "POST", "/v1/backfill", body, &out, 0);
    json_decref(body);
    if (st != 202) {
        json_decref(out);
        return cli_exit_for(st);
    }
    char id[64];
    snprintf(id, sizeof(id), "%s", cli_str(out, "backfillId"));
    if (c->json)
        cli_print_json_line(out);
    else
        printf("backfill %s started: since=%lld until=%s\n", id, cli_num(out, "since"),
               json_is_integer(json_object_get(out, "until")) ? "given" : "now");
    fflush(stdout);
    json_decref(out);
    if (cli_opt(a, "--no-wait") != NULL)
        return 0;
    char path[128];
    snprintf(path, sizeof(path), "/v1/backfill/%s", id);
    for (;;) {
        struct timespec ts = {PROGRESS_EVERY_MS / 1000, (PROGRESS_EVERY_MS % 1000) * 1000000L};
        nanosleep(&ts, NULL);
        out = NULL;
        st = cli_call(c, "GET", path, NULL, &out, 0);
        if (st != 200) {
            json_decref(out);
            return cli_exit_for(st);
        }
        if (c->json)
            cli_print_json_line(out);
        else
            progress_line(id, out);
        int done = json_is_true(json_object_get(out, "done"));
        int failed = json_is_string(json_object_get(out, "error"));
        json_decref(out);
        if (done)
            return failed ? EXIT_FAILURE : 0;
    }
}
