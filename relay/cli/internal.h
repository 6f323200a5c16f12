/* internal.h (cli) - what the files of relay/cli/ share: the command table's types, the parsed
 * arguments, the REST client and the output helpers. Private to relay/cli/.
 *
 * Files: cli.c (entry point, the command table, option parsing, help pages), client.c (the
 * blocking REST client and output helpers), requests.c (track, untrack, status, find, requests,
 * events, tail), webhooks.c (webhooks *, deliveries, replay), partitions.c (partitions),
 * backfill.c (backfill).
 * Every command is one row of the table in cli.c: its synopsis, its own options, an example
 * and its handler; `--help` of a command is printed from its row, so a flag cannot be accepted
 * without being documented.
 * runs on: main thread (blocking libcurl easy; no event loop). */
#ifndef RELAY_CLI_INTERNAL_H
#define RELAY_CLI_INTERNAL_H

#include <curl/curl.h>
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#define CLI_MAX_OPTS 32   /* options of one command (a longer table overruns cli_args) */
#define CLI_MAX_REPEAT 32 /* values of one repeatable option */

/* One option of a command. */
struct cli_opt {
    const char *name; /* "--status" */
    const char *arg;  /* value placeholder ("S,..."), NULL for a bare flag */
    const char *help;
    int repeat;       /* may be given several times (all values kept) */
};

struct cli;
struct cli_args;

/* One command: a row of the table in cli.c. */
struct cli_cmd {
    const char *name;     /* "track", "webhooks add" */
    const char *args;     /* positional synopsis ("ID..."), NULL for none */
    int min_args, max_args; /* positional count; max -1 = unbounded */
    const char *summary;  /* one line */
    const char *details;  /* paragraph (lines end in \n), may be NULL */
    const struct cli_opt *opts; /* terminated by {NULL} */
    const char *example;  /* lines (end in \n) */
    int (*run)(struct cli *c, const struct cli_args *a);
};

/* The connection and output mode shared by every command. */
struct cli {
    const char *url;   /* admin base URL, no trailing slash */
    const char *token; /* may be NULL: --admin-token, --read-token, STATUSRELAY_ADMIN_TOKEN,
                        * STATUSRELAY_READ_TOKEN, the first given */
    const char *admin_flag, *read_flag; /* --admin-token, --read-token as given (cli.c) */
    int json;          /* --json: the API's JSON instead of tables */
    CURL *curl;
};

/* Parsed arguments of one command (argv pointers; nothing is copied). */
struct cli_args {
    const struct cli_cmd *cmd;
    const char **pos;
    int npos;
    const char *val[CLI_MAX_OPTS][CLI_MAX_REPEAT]; /* by option index; "" for a bare flag */
    int nval[CLI_MAX_OPTS];
};

/* ---- arguments (cli.c) ---------------------------------------------------------------- */

/* The last value of option name ("" for a bare flag), NULL when not given. */
const char *cli_opt(const struct cli_args *a, const char *name);
/* How many times option name was given; cli_opt_at gives value i of them. */
int cli_opt_count(const struct cli_args *a, const char *name);
const char *cli_opt_at(const struct cli_args *a, const char *name, int i);
/* One line "statusrelay CMD: <why> (see statusrelay CMD --help)" on stderr; returns
 * EXIT_USAGE for `return cli_usage_error(...)`. */
int cli_usage_error(const struct cli_args *a, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Option name as a positive integer in [1, max] into *out (absent: *out untouched, 0).
 * Returns 0, or EXIT_USAGE after a usage error naming the option. */
int cli_opt_int(const struct cli_args *a, const char *name, long max, long *out);

/* ---- REST client and output (client.c) ------------------------------------------------ */

/* Do one request (body may be NULL); *out gets the parsed JSON (NULL for an empty body).
 * Returns the HTTP status, or -1 when the server could not be reached. Unless quiet, an
 * unreachable server or an HTTP error >= 400 prints one line on stderr. */
long cli_call(struct cli *c, const char *method, const char *path, json_t *body, json_t **out,
              int quiet);
/* The process exit status for an HTTP status (see commands.h). */
int cli_exit_for(long status);
/* Pretty JSON of j on stdout. */
void cli_print_json(json_t *j);
/* One compact JSON line of j on stdout. */
void cli_print_json_line(json_t *j);
/* The string member k of o, "-" when absent or not a string. */
const char *cli_str(json_t *o, const char *k);
/* The number member k of o (0 when absent). */
long long cli_num(json_t *o, const char *k);
/* ms since the epoch as "YYYY-MM-DDTHH:MM:SSZ" ("-" for <= 0). */
void cli_fmt_time(long long ms, char *buf, size_t n);
/* "a,b,c" as a JSON array of strings / of integers (new reference). */
json_t *cli_list_strings(const char *s);
json_t *cli_list_numbers(const char *s);
/* path + "?k=v&..." from NULL-terminated key/value pairs; NULL values are skipped, values are
 * URL-escaped. Returns a malloc'd string. */
char *cli_path_query(const char *path, ...) __attribute__((sentinel));

/* ---- commands (requests.c, webhooks.c) ------------------------------------------------- */

int cli_track(struct cli *c, const struct cli_args *a);
int cli_untrack(struct cli *c, const struct cli_args *a);
int cli_status(struct cli *c, const struct cli_args *a);
int cli_find(struct cli *c, const struct cli_args *a);
int cli_requests(struct cli *c, const struct cli_args *a);
int cli_events(struct cli *c, const struct cli_args *a);
int cli_tail(struct cli *c, const struct cli_args *a);
int cli_wh_list(struct cli *c, const struct cli_args *a);
int cli_wh_add(struct cli *c, const struct cli_args *a);
int cli_wh_update(struct cli *c, const struct cli_args *a);
int cli_wh_show(struct cli *c, const struct cli_args *a);
int cli_wh_rm(struct cli *c, const struct cli_args *a);
int cli_wh_rotate(struct cli *c, const struct cli_args *a);
int cli_wh_reveal(struct cli *c, const struct cli_args *a);
int cli_wh_test(struct cli *c, const struct cli_args *a);
int cli_wh_enable(struct cli *c, const struct cli_args *a);
int cli_wh_disable(struct cli *c, const struct cli_args *a);
int cli_deliveries(struct cli *c, const struct cli_args *a);
int cli_replay(struct cli *c, const struct cli_args *a);
int cli_partitions(struct cli *c, const struct cli_args *a); /* partitions.c */
int cli_backfill(struct cli *c, const struct cli_args *a);   /* backfill.c */

#endif
