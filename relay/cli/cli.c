/* cli.c - operator commands: clients of the REST API (STATUSRELAY_ADMIN_URL,
 * STATUSRELAY_ADMIN_TOKEN, else STATUSRELAY_READ_TOKEN: the reading commands need no more).
 * Tables for people by default, --json for scripts. Exit codes: 0 ok, 1 failure (server
 * error, unreachable), 2 usage, 3 not found.
 *
 * This file holds the command table (one row per command: synopsis, its own options, an
 * example, its handler), the option parser and the help pages printed from the table; the
 * handlers are in requests.c and webhooks.c, the REST client in client.c.
 * runs on: main thread (blocking libcurl easy; no event loop). */
#include "relay/cli/internal.h"
#include "relay/commands.h"
#include "relay/common/util.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the command table ---------------------------------------------------------------- */

static const struct cli_opt no_opts[] = {{NULL, NULL, NULL, 0}};

static const struct cli_opt track_opts[] = {
    {"--metadata", "JSON", "a JSON object stored with the requests (your order or quote "
                           "reference); carried in webhooks and dashboard frames", 0},
    {NULL, NULL, NULL, 0},
};

static const struct cli_opt requests_opts[] = {
    {"--status", "S", "only requests whose last status is S (waiting, pending, success, ...)", 0},
    {"--stuck", NULL, "only stuck requests: active, not waiting, unchanged for "
                      "STATUSRELAY_STUCK_AFTER (longest unchanged first)", 0},
    {"--limit", "N", "requests per page, 1..500 (default 50)", 0},
    {"--cursor", "C", "continue after a previous page (its \"next page\" line)", 0},
    {"--all", NULL, "follow the cursor through every page", 0},
    {NULL, NULL, NULL, 0},
};

static const struct cli_opt events_opts[] = {
    {"--request", "ID", "only the events of one request (its timeline)", 0},
    {"--since", "TIME", "events after TIME: unix ms, an ISO time (2026-08-01T12:00:00Z) or a "
                        "duration ago (15m, 2h, 1d)", 0},
    {"--after", "STREAM_ID", "events after this stream id (the \"cursor\" of a previous read)", 0},
    {"--limit", "N", "events to read, 1..1000 (default 100)", 0},
    {NULL, NULL, NULL, 0},
};

static const struct cli_opt tail_opts[] = {
    {"--request", "ID", "only the events of one request", 0},
    {"--status", "S", "only events whose new status is S", 0},
    {NULL, NULL, NULL, 0},
};

/* The filter options after --status, the same for webhooks add and update. */
#define WH_FILTER_OPTS                                                                        \
    {"--request-ids", "ID,...", "filter: only these request ids", 0},                         \
    {"--origin-chains", "N,...", "filter: only these origin chain ids", 0},                   \
    {"--destination-chains", "N,...", "filter: only these destination chain ids", 0},         \
    {"--events", "TYPE,...", "filter: these event types (request.status.updated, "            \
                             "request.watch.ended, request.stuck, endpoint.disabled; "        \
                             "without it request.status.updated only)", 0},                   \
    {"--users", "W,...", "filter: only requests of these wallets (user, sender or "           \
                         "recipient; 0x addresses in any case)", 0},                          \
    {"--referrers", "R,...", "filter: only requests with these referrers", 0},                \
    {"--fail-reasons", "CODE,...", "filter: only these failReason codes (N/A: none)", 0},     \
    {"--refund-fail-reasons", "CODE,...",                                                     \
     "filter: only these refundFailReason codes (N/A: none)", 0},                             \
    {"--flags", "F,...", "filter: events carrying any of these flags (reversal, facts, "      \
                         "reorg, unconfirmedDeposit, ...)", 0},                               \
    {"--metadata", "JSON", "filter: a JSON object; every key must equal the request's "       \
                           "tracking metadata", 0}

static const struct cli_opt wh_add_opts[] = {
    {"--status", "S,...", "filter: only these statuses", 0},
    WH_FILTER_OPTS,
    {"--header", "NAME:VALUE", "a custom header sent with every delivery (repeatable)", 1},
    {"--scheme", "SCHEME", "signature headers: standard (default), upstream or both", 0},
    {"--ed25519", NULL, "sign with Ed25519 (the answer carries a public key, no secret)", 0},
    {"--latest", NULL, "mode latest: a newer state of a request supersedes pending deliveries", 0},
    {"--description", "TEXT", "free text shown in listings", 0},
    {"--rate-limit", "N|none", "at most N deliveries per second, across all processes "
                               "(1..10000; default none)", 0},
    {NULL, NULL, NULL, 0},
};

static const struct cli_opt wh_update_opts[] = {
    {"--url", "URL", "new target URL", 0},
    {"--enable", NULL, "enable the endpoint (clears an automatic disable)", 0},
    {"--disable", NULL, "disable the endpoint (deliveries stop)", 0},
    {"--status", "S,...", "filter: only these statuses (any filter option replaces the whole "
                          "filter set)", 0},
    WH_FILTER_OPTS,
    {"--no-filters", NULL, "remove every filter (receive every event)", 0},
    {"--header", "NAME:VALUE", "custom header (repeatable; replaces the whole header set)", 1},
    {"--no-headers", NULL, "remove every custom header", 0},
    {"--scheme", "SCHEME", "signature headers: standard, upstream or both", 0},
    {"--mode", "MODE", "all (every event) or latest (newest state only)", 0},
    {"--description", "TEXT", "free text shown in listings (\"\" clears it)", 0},
    {"--rate-limit", "N|none", "at most N deliveries per second (1..10000); none removes the "
                               "limit", 0},
    {NULL, NULL, NULL, 0},
};

static const struct cli_opt deliveries_opts[] = {
    {"--state", "STATE", "pending, delivered, dead, superseded or skipped", 0},
    {"--limit", "N", "deliveries per page", 0},
    {"--cursor", "C", "continue after a previous page (its \"next page\" line)", 0},
    {NULL, NULL, NULL, 0},
};

static const struct cli_opt replay_opts[] = {
    {"--since", "MS", "events created at or after this unix ms time", 0},
    {"--until", "MS", "events created before this unix ms time", 0},
    {"--request", "ID", "only the events of one request", 0},
    {"--webhook", "ID", "only towards one endpoint", 0},
    {"--dead", NULL, "re-deliver dead deliveries (instead of events by time)", 0},
    {"--dry-run", NULL, "only count what would be re-delivered", 0},
    {NULL, NULL, NULL, 0},
};

static const struct cli_opt backfill_opts[] = {
    {"--since", "WHEN", "start of the window: a duration back from now (2h) or unix ms", 0},
    {"--until", "WHEN", "end of the window (default: now), written like --since", 0},
    {"--no-wait", NULL, "start it and print its id; do not follow its progress", 0},
    {NULL, NULL, NULL, 0},
};

#define WH_ID_CMD(nm, verb, fn, ex)                                                            \
    {"webhooks " nm, "ID", 1, 1, verb, NULL, no_opts, "  statusrelay webhooks " nm " " ex "\n", \
     fn}

static const struct cli_cmd commands[] = {
    {"track", "ID...", 1, -1, "start tracking requests (POST /v1/requests)",
     "Tracked requests are followed through the upstream until their watch ends; see\n"
     "`statusrelay status ID` for where each one stands.\n",
     track_opts,
     "  statusrelay track 0xabc... 0xdef...\n"
     "  statusrelay track 0xabc... --metadata '{\"order\":\"A-1042\"}'\n",
     cli_track},
    {"untrack", "ID...", 1, -1, "stop tracking requests (DELETE /v1/requests/{id})",
     "The watch ends (no subscription, no polls); the last state stays readable. An unknown\n"
     "id is reported and makes the exit status 3; the others are still untracked.\n",
     no_opts, "  statusrelay untrack 0xabc...\n", cli_untrack},
    {"status", "ID", 1, 1, "one request: state, tx hashes, deposit address, watch, timeline",
     "Shows the last-known state, the in and out tx hashes (with explorer links when the\n"
     "daemon serves GET /v1/chains), the deposit address, the watch phase and its end\n"
     "(active, settled, ended), and the event timeline.\n",
     no_opts, "  statusrelay status 0xabc...\n  statusrelay status 0xabc... --json | jq .watch\n",
     cli_status},
    {"find", "TERM", 1, 1, "find requests by id, wallet or transaction hash (GET /v1/requests?q=)",
     "TERM is a request id, a wallet (user, sender or recipient; 0x addresses in any case), a\n"
     "deposit address or any transaction hash (in, out, deposit). Prints each request found\n"
     "with its status, facts and explorer links. A term the relay does not know is looked up\n"
     "once through the upstream (with an API key) and the request found is tracked. Nothing\n"
     "found: exit status 3.\n",
     no_opts, "  statusrelay find 0xabc...\n  statusrelay find 0xUserWallet --json\n", cli_find},
    {"requests", NULL, 0, 0, "list known requests (GET /v1/requests)",
     "Oldest first by first-seen time (stuck: longest unchanged first). A page ends with a\n"
     "\"next page\" line when more exist.\n",
     requests_opts,
     "  statusrelay requests --stuck\n  statusrelay requests --status pending --limit 100 "
     "--all\n",
     cli_requests},
    {"events", NULL, 0, 0, "one read of the event stream (GET /v1/events)",
     "Oldest first; prints the cursor to continue from with --after. For a live view use\n"
     "`statusrelay tail`.\n",
     events_opts,
     "  statusrelay events --since 15m\n  statusrelay events --request 0xabc... --json\n",
     cli_events},
    {"tail", NULL, 0, 0, "follow events live until Ctrl-C", NULL, tail_opts,
     "  statusrelay tail --status failure\n", cli_tail},
    {"webhooks list", NULL, 0, 0, "list webhook endpoints (also plain `statusrelay webhooks`)",
     NULL, no_opts, "  statusrelay webhooks list --json\n", cli_wh_list},
    {"webhooks add", "URL", 1, 1, "register a webhook endpoint (POST /v1/webhooks)",
     "The answer shows the signing secret (or public key) once; `webhooks reveal-secret`\n"
     "shows it again. Filter options combine with AND, the values of one with OR; lists are\n"
     "comma-separated (docs/webhooks.md \"Filters\": keys, limits, what each one matches).\n",
     wh_add_opts,
     "  statusrelay webhooks add https://example.com/hook --status success,refund "
     "--origin-chains 8453\n"
     "  statusrelay webhooks add https://example.com/final "
     "--events request.watch.ended,endpoint.disabled\n"
     "  statusrelay webhooks add https://example.com/merchant-7 --users 0xAbc...,0xDef... "
     "--referrers shop-7\n"
     "  statusrelay webhooks add https://example.com/ops --flags reversal "
     "--refund-fail-reasons UNKNOWN\n"
     "  statusrelay webhooks add https://example.com/orders --metadata '{\"tenant\":\"acme\"}'\n",
     cli_wh_add},
    {"webhooks update", "ID", 1, 1, "change a webhook endpoint (PATCH /v1/webhooks/{id})",
     "Only the fields given change. Filter options replace the endpoint's whole filter set,\n"
     "--header options its whole header set.\n",
     wh_update_opts,
     "  statusrelay webhooks update wh_123 --url https://example.com/new --status success\n"
     "  statusrelay webhooks update wh_123 --fail-reasons SLIPPAGE,UNKNOWN --flags reversal\n"
     "  statusrelay webhooks update wh_123 --disable\n",
     cli_wh_update},
    WH_ID_CMD("show", "one endpoint's settings and delivery state", cli_wh_show, "wh_123"),
    WH_ID_CMD("rm", "delete an endpoint (its pending deliveries are dropped)", cli_wh_rm,
              "wh_123"),
    WH_ID_CMD("rotate-secret", "new signing secret; the old one signs too for "
                               "STATUSRELAY_SECRET_GRACE",
              cli_wh_rotate, "wh_123"),
    WH_ID_CMD("reveal-secret", "show the endpoint's current signing secret", cli_wh_reveal,
              "wh_123"),
    WH_ID_CMD("test", "send a signed test event and show the receiver's answer", cli_wh_test,
              "wh_123"),
    WH_ID_CMD("enable", "enable an endpoint (same as update ID --enable)", cli_wh_enable,
              "wh_123"),
    WH_ID_CMD("disable", "disable an endpoint (same as update ID --disable)", cli_wh_disable,
              "wh_123"),
    {"deliveries", "WEBHOOK_ID", 1, 1, "deliveries of an endpoint with their attempts", NULL,
     deliveries_opts, "  statusrelay deliveries wh_123 --state dead\n", cli_deliveries},
    {"replay", NULL, 0, 0, "re-deliver events or dead deliveries (POST /v1/replay)",
     "Replayed deliveries carry `statusrelay-replay: 1` and the original event id. Count\n"
     "first with --dry-run.\n",
     replay_opts,
     "  statusrelay replay --dead --dry-run\n"
     "  statusrelay replay --since 1787000000000 --webhook wh_123\n",
     cli_replay},
    {"partitions", NULL, 0, 0,
     "where the data lives: partition -> slot -> master (GET /v1/partitions)",
     "Each partition's hash tag and, on a Redis Cluster, its slot and the master serving it\n"
     "now (as this daemon routes it), then the deployment tag's. Two busy partitions on one\n"
     "master: move a slot with `redis-cli --cluster reshard`.\n",
     no_opts, "  statusrelay partitions\n  statusrelay partitions --json\n", cli_partitions},
    {"backfill", NULL, 0, 0, "read a window of the changes feed again (POST /v1/backfill)",
     "Reads /requests/v3 of the API key for that window again, within the upstream budget:\n"
     "every request found is tracked and its state applied (requests never seen before\n"
     "too). Prints a progress line every 2 s until it is done.\n",
     backfill_opts, "  statusrelay backfill --since 2h\n  statusrelay backfill --since 1d --until 12h\n",
     cli_backfill},
};

#define NCOMMANDS (sizeof(commands) / sizeof(commands[0]))

/* ---- help pages ----------------------------------------------------------------------- */

static const char global_help[] =
    "global options:\n"
    "  --json                    the API's JSON instead of a table (for scripts)\n"
    "  --admin-url URL           REST API base URL (STATUSRELAY_ADMIN_URL, default\n"
    "                            http://127.0.0.1:8080)\n"
    "  --admin-token TOKEN       bearer token (STATUSRELAY_ADMIN_TOKEN)\n"
    "  --read-token TOKEN        the read-only token, used when no admin token is given\n"
    "                            (STATUSRELAY_READ_TOKEN): the reading commands only\n"
    "  -h, --help                this page\n"
    "exit status: 0 ok, 1 failure (server error, unreachable), 2 usage or refused input,\n"
    "3 not found.\n";

/* Print text word-wrapped to 80 columns, continuation lines indented by indent spaces; the
 * first line starts at column col (the caller printed that much already). */
static void print_wrapped(const char *text, int col, int indent)
{
    const char *p = text;
    while (*p) {
        int len = 0;
        while (p[len] && p[len] != ' ')
            len++;
        if (col > indent && col + 1 + len > 80) {
            printf("\n%*s", indent, "");
            col = indent;
        } else if (col > indent) {
            putchar(' ');
            col++;
        }
        printf("%.*s", len, p);
        col += len;
        p += len;
        while (*p == ' ')
            p++;
    }
    putchar('\n');
}

static void print_help(const struct cli_cmd *k)
{
    printf("usage: statusrelay %s%s%s%s\n\n%c%s.\n", k->name, k->args ? " " : "",
           k->args ? k->args : "", k->opts[0].name ? " [options]" : "",
           toupper((unsigned char)k->summary[0]), k->summary + 1);
    if (k->details)
        printf("%s", k->details);
    if (k->opts[0].name) {
        printf("\noptions:\n");
        for (const struct cli_opt *o = k->opts; o->name; o++) {
            char flag[64];
            snprintf(flag, sizeof(flag), "%s%s%s", o->name, o->arg ? " " : "",
                     o->arg ? o->arg : "");
            if (strlen(flag) <= 24)
                printf("  %-24s  ", flag);
            else
                printf("  %s\n  %-24s  ", flag, "");
            print_wrapped(o->help, 28, 28);
        }
    }
    printf("\nexample:\n%s\n%s", k->example, global_help);
}

/* `statusrelay webhooks --help`: the subcommands of the group. */
static void print_group_help(const char *group)
{
    size_t gl = strlen(group);
    printf("usage: statusrelay %s SUBCOMMAND [ARGS] [options]\n\nManage webhook endpoints "
           "(the REST routes under /v1/webhooks). Without a\nsubcommand: list.\n\n"
           "subcommands:\n",
           group);
    for (size_t i = 0; i < NCOMMANDS; i++) {
        const char *n = commands[i].name;
        if (strncmp(n, group, gl) != 0 || n[gl] != ' ')
            continue;
        char syn[64];
        snprintf(syn, sizeof(syn), "%s%s%s", n + gl + 1, commands[i].args ? " " : "",
                 commands[i].args ? commands[i].args : "");
        printf("  %-20s  %s\n", syn, commands[i].summary);
    }
    printf("\n`statusrelay %s SUBCOMMAND --help` lists the options of each.\n\nexample:\n"
           "  statusrelay %s add https://example.com/hook --status success\n"
           "  statusrelay %s update wh_123 --disable\n\n%s",
           group, group, group, global_help);
}

/* ---- arguments ------------------------------------------------------------------------ */

static int opt_index(const struct cli_cmd *k, const char *name)
{
    for (int i = 0; k->opts[i].name && i < CLI_MAX_OPTS; i++)
        if (strcmp(k->opts[i].name, name) == 0)
            return i;
    return -1;
}

const char *cli_opt(const struct cli_args *a, const char *name)
{
    int i = opt_index(a->cmd, name);
    return i < 0 || a->nval[i] == 0 ? NULL : a->val[i][a->nval[i] - 1];
}

int cli_opt_count(const struct cli_args *a, const char *name)
{
    int i = opt_index(a->cmd, name);
    return i < 0 ? 0 : a->nval[i];
}

const char *cli_opt_at(const struct cli_args *a, const char *name, int n)
{
    int i = opt_index(a->cmd, name);
    return i < 0 || n < 0 || n >= a->nval[i] ? NULL : a->val[i][n];
}

int cli_usage_error(const struct cli_args *a, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "statusrelay %s: ", a->cmd->name);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, " (see statusrelay %s --help)\n", a->cmd->name);
    return EXIT_USAGE;
}

int cli_opt_int(const struct cli_args *a, const char *name, long max, long *out)
{
    const char *v = cli_opt(a, name);
    *out = 0;
    if (v == NULL)
        return 0;
    char *end;
    long n = strtol(v, &end, 10);
    if (v[0] < '0' || v[0] > '9' || *end != '\0' || n < 1 || n > max)
        return cli_usage_error(a, "%s must be an integer from 1 to %ld, got \"%s\"", name, max,
                               v);
    *out = n;
    return 0;
}

static int is_global_with_value(const char *s)
{
    return strcmp(s, "--admin-url") == 0 || strcmp(s, "--admin-token") == 0 ||
           strcmp(s, "--read-token") == 0;
}

/* Split argv (after the command, and the subcommand of a group) into global options, the
 * command's options and positionals. Returns 0, 1 for --help, or EXIT_USAGE after one line. */
static int parse_args(struct cli *c, struct cli_args *a, int argc, char **argv)
{
    int help = 0, options_done = 0;
    for (int i = 0; i < argc; i++) {
        const char *s = argv[i];
        if (options_done || s[0] != '-' || s[1] == '\0') {
            a->pos[a->npos++] = s;
            continue;
        }
        if (strcmp(s, "--") == 0) {
            options_done = 1;
            continue;
        }
        if (strcmp(s, "--help") == 0 || strcmp(s, "-h") == 0) {
            help = 1;
            continue;
        }
        if (strcmp(s, "--json") == 0) {
            c->json = 1;
            continue;
        }
        const char *eq = strchr(s, '=');
        char name[64];
        snprintf(name, sizeof(name), "%.*s", eq ? (int)(eq - s) : (int)strlen(s), s);
        const char *v = eq ? eq + 1 : NULL;
        if (is_global_with_value(name)) {
            if (v == NULL && i + 1 >= argc)
                return cli_usage_error(a, "%s needs a value", name);
            v = v ? v : argv[++i];
            if (strcmp(name, "--admin-url") == 0)
                c->url = v;
            else if (strcmp(name, "--admin-token") == 0)
                c->admin_flag = v;
            else
                c->read_flag = v;
            continue;
        }
        int k = opt_index(a->cmd, name);
        if (k < 0)
            return cli_usage_error(a, "unknown option %s", name);
        const struct cli_opt *o = &a->cmd->opts[k];
        if (o->arg == NULL && v != NULL)
            return cli_usage_error(a, "%s takes no value", name);
        if (o->arg != NULL && v == NULL) {
            if (i + 1 >= argc)
                return cli_usage_error(a, "%s needs a value (%s)", name, o->arg);
            v = argv[++i];
        }
        if (a->nval[k] > 0 && !o->repeat)
            a->nval[k] = 0; /* given twice: the last wins */
        if (a->nval[k] == CLI_MAX_REPEAT)
            return cli_usage_error(a, "%s given more than %d times", name, CLI_MAX_REPEAT);
        a->val[k][a->nval[k]++] = v ? v : "";
    }
    if (help)
        return 1;
    const struct cli_cmd *k = a->cmd;
    if (a->npos < k->min_args || (k->max_args >= 0 && a->npos > k->max_args)) {
        if (a->npos > k->max_args && k->max_args >= 0)
            return cli_usage_error(a, "unexpected argument \"%s\"; usage: statusrelay %s%s%s",
                                   a->pos[k->max_args], k->name, k->args ? " " : "",
                                   k->args ? k->args : "");
        return cli_usage_error(a, "missing %s; usage: statusrelay %s %s", k->args, k->name,
                               k->args);
    }
    return 0;
}

static const struct cli_cmd *find_cmd(const char *name)
{
    for (size_t i = 0; i < NCOMMANDS; i++)
        if (strcmp(commands[i].name, name) == 0)
            return &commands[i];
    return NULL;
}

/* The index in argv of the first positional argument (skipping options and the values of the
 * global ones), -1 when there is none. */
static int first_positional(int argc, char **argv)
{
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0)
            return i + 1 < argc ? i + 1 : -1;
        if (argv[i][0] != '-')
            return i;
        if (is_global_with_value(argv[i]))
            i++;
    }
    return -1;
}

int cli_main(const char *cmd, int argc, char **argv)
{
    char name[64];
    const struct cli_cmd *k = find_cmd(cmd);
    char **args = argv;
    int nargs = argc;
    if (k == NULL && strcmp(cmd, "webhooks") == 0) {
        int sub = first_positional(argc, argv);
        int help = 0;
        for (int i = 0; i < argc; i++)
            help |= strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0;
        if (sub < 0 && help) {
            print_group_help(cmd);
            return 0;
        }
        snprintf(name, sizeof(name), "%s %s", cmd, sub < 0 ? "list" : argv[sub]);
        if ((k = find_cmd(name)) == NULL) {
            fprintf(stderr,
                    "statusrelay %s: unknown subcommand \"%s\" (see statusrelay %s --help)\n",
                    cmd, argv[sub], cmd);
            return EXIT_USAGE;
        }
        if (sub >= 0) { /* drop the subcommand word */
            args = xcalloc((size_t)argc, sizeof(*args));
            nargs = 0;
            for (int i = 0; i < argc; i++)
                if (i != sub)
                    args[nargs++] = argv[i];
        }
    }
    if (k == NULL) {
        fprintf(stderr, "statusrelay: unknown command %s (see statusrelay --help)\n", cmd);
        return EXIT_USAGE;
    }
    struct cli c = {0};
    struct cli_args *a = xcalloc(1, sizeof(*a));
    a->cmd = k;
    a->pos = xcalloc((size_t)nargs + 1, sizeof(*a->pos));
    c.url = getenv("STATUSRELAY_ADMIN_URL");
    int rc = parse_args(&c, a, nargs, args);
    /* the token: a flag before the environment, the admin token before the read token */
    const char *env_admin = getenv("STATUSRELAY_ADMIN_TOKEN");
    const char *env_read = getenv("STATUSRELAY_READ_TOKEN");
    c.token = c.admin_flag                        ? c.admin_flag
              : c.read_flag                       ? c.read_flag
              : env_admin != NULL && env_admin[0] ? env_admin
              : env_read != NULL && env_read[0]   ? env_read
                                                  : NULL;
    if (rc == 1) {
        print_help(k);
        rc = 0;
    } else if (rc == 0) {
        if (c.url == NULL || c.url[0] == '\0')
            c.url = "http://127.0.0.1:8080";
        char *base = xstrdup(c.url);
        for (size_t l = strlen(base); l > 0 && base[l - 1] == '/'; l--)
            base[l - 1] = '\0';
        c.url = base;
        curl_global_init(CURL_GLOBAL_DEFAULT);
        c.curl = curl_easy_init();
        rc = k->run(&c, a);
        curl_easy_cleanup(c.curl);
        curl_global_cleanup();
        free(base);
    }
    if (args != argv)
        free(args);
    free(a->pos);
    free(a);
    return rc;
}
