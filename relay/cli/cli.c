/* cli.c - operator commands: clients of the REST API (STATUSRELAY_ADMIN_URL,
 * STATUSRELAY_ADMIN_TOKEN). Tables for people by default, --json for scripts. Exit codes:
 * 0 ok, 1 failure (server error, unreachable), 2 usage, 3 not found.
 * runs on: main thread (blocking libcurl easy; no event loop). */
#include "relay/commands.h"
#include "relay/common/util.h"

#include <curl/curl.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct cli {
    const char *url;   /* admin base URL, no trailing slash */
    const char *token; /* may be NULL */
    int json;
    CURL *curl;
};

struct buf {
    char *p;
    size_t n;
};

static size_t on_body(char *d, size_t sz, size_t nm, void *arg)
{
    struct buf *b = arg;
    size_t n = sz * nm;
    b->p = xrealloc(b->p, b->n + n + 1);
    memcpy(b->p + b->n, d, n);
    b->n += n;
    b->p[b->n] = '\0';
    return n;
}

/* Do one request; *out gets the parsed JSON (NULL for an empty body). Returns the HTTP
 * status or -1 after printing a one-line error. */
static long call(struct cli *c, const char *method, const char *path, json_t *body,
                 json_t **out)
{
    struct buf b = {0};
    char url[4096], auth[512];
    snprintf(url, sizeof(url), "%s%s", c->url, path);
    struct curl_slist *h = curl_slist_append(NULL, "content-type: application/json");
    if (c->token) {
        snprintf(auth, sizeof(auth), "authorization: Bearer %s", c->token);
        h = curl_slist_append(h, auth);
    }
    char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
    curl_easy_reset(c->curl);
    curl_easy_setopt(c->curl, CURLOPT_URL, url);
    curl_easy_setopt(c->curl, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(c->curl, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c->curl, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c->curl, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(c->curl, CURLOPT_TIMEOUT, 30L);
    curl_easy_setopt(c->curl, CURLOPT_NOSIGNAL, 1L);
    if (text)
        curl_easy_setopt(c->curl, CURLOPT_POSTFIELDS, text);
    CURLcode rc = curl_easy_perform(c->curl);
    long status = -1;
    *out = NULL;
    if (rc != CURLE_OK) {
        fprintf(stderr, "statusrelay: cannot reach %s: %s\n", c->url, curl_easy_strerror(rc));
    } else {
        curl_easy_getinfo(c->curl, CURLINFO_RESPONSE_CODE, &status);
        if (b.n > 0)
            *out = json_loadb(b.p, b.n, 0, NULL);
        if (status >= 400) {
            json_t *e = json_object_get(json_object_get(*out, "error"), "message");
            json_t *code = json_object_get(json_object_get(*out, "error"), "code");
            fprintf(stderr, "statusrelay: %s %s: HTTP %ld %s%s%s\n", method, path, status,
                    json_string_value(code) ? json_string_value(code) : "",
                    e ? ": " : "", e ? json_string_value(e) : "");
        }
    }
    free(text);
    free(b.p);
    curl_slist_free_all(h);
    return status;
}

static int exit_for(long status)
{
    return status < 0 ? 1 : status == 404 ? EXIT_NOTFOUND : status >= 400 && status < 500 ? 2
                          : status >= 400 ? 1 : 0;
}

static void print_json(json_t *j)
{
    char *t = json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    if (t)
        puts(t);
    free(t);
}

static const char *str(json_t *o, const char *k)
{
    json_t *v = json_object_get(o, k);
    return json_is_string(v) ? json_string_value(v) : "-";
}

static long long num(json_t *o, const char *k)
{
    return (long long)json_number_value(json_object_get(o, k));
}

static void fmt_time(long long ms, char *buf, size_t n)
{
    if (ms <= 0) {
        snprintf(buf, n, "-");
        return;
    }
    time_t t = (time_t)(ms / 1000);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, n, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* ---- commands ------------------------------------------------------------------------ */

static int cmd_track(struct cli *c, int argc, const char **argv)
{
    if (argc < 1) {
        fprintf(stderr, "usage: statusrelay track ID... [--json]\n");
        return EXIT_USAGE;
    }
    json_t *ids = json_array();
    for (int i = 0; i < argc; i++)
        json_array_append_new(ids, json_string(argv[i]));
    json_t *body = json_pack("{s:o}", "requestIds", ids), *out;
    long st = call(c, "POST", "/v1/requests", body, &out);
    if (st >= 200 && st < 300) {
        if (c->json)
            print_json(out);
        else
            printf("tracking %d request(s)\n", argc);
    }
    json_decref(body);
    json_decref(out);
    return exit_for(st);
}

static int cmd_status(struct cli *c, int argc, const char **argv)
{
    if (argc != 1) {
        fprintf(stderr, "usage: statusrelay status ID [--json]\n");
        return EXIT_USAGE;
    }
    char *id = url_escape(argv[0]);
    char path[1024];
    json_t *state, *events = NULL;
    snprintf(path, sizeof(path), "/v1/requests/%s", id);
    long st = call(c, "GET", path, NULL, &state);
    if (st == 200) {
        snprintf(path, sizeof(path), "/v1/events?requestId=%s&limit=200", id);
        long st2 = call(c, "GET", path, NULL, &events);
        if (st2 != 200)
            st = st2;
    }
    if (st == 200 && c->json) {
        json_object_set(state, "events", json_object_get(events, "events"));
        print_json(state);
    } else if (st == 200) {
        char t[32];
        fmt_time(num(state, "updatedAt"), t, sizeof(t));
        printf("request   %s\nstatus    %s\nupdated   %s\nseq       %lld\nchains    %lld -> "
               "%lld\nfail      %s / refund %s\n\n",
               str(state, "requestId"), str(state, "status"), t, num(state, "seq"),
               num(state, "originChainId"), num(state, "destinationChainId"),
               str(state, "failReason"), str(state, "refundFailReason"));
        printf("%-5s %-12s %-12s %-9s %s\n", "SEQ", "STATUS", "PREVIOUS", "SOURCE", "AT");
        size_t i;
        json_t *e;
        json_array_foreach(json_object_get(events, "events"), i, e)
        {
            fmt_time(num(e, "createdAt"), t, sizeof(t));
            printf("%-5lld %-12s %-12s %-9s %s\n", num(e, "seq"), str(e, "status"),
                   str(e, "previousStatus"), str(e, "source"), t);
        }
    }
    free(id);
    json_decref(state);
    json_decref(events);
    return exit_for(st);
}

static json_t *parse_list_numbers(const char *s)
{
    json_t *a = json_array();
    char *dup = xstrdup(s), *save = NULL;
    for (char *t = strtok_r(dup, ",", &save); t; t = strtok_r(NULL, ",", &save))
        json_array_append_new(a, json_integer(strtoll(t, NULL, 10)));
    free(dup);
    return a;
}

static json_t *parse_list_strings(const char *s)
{
    json_t *a = json_array();
    char *dup = xstrdup(s), *save = NULL;
    for (char *t = strtok_r(dup, ",", &save); t; t = strtok_r(NULL, ",", &save))
        json_array_append_new(a, json_string(t));
    free(dup);
    return a;
}

static void print_webhook_row(json_t *w)
{
    printf("%-26s %-8s %-9s %s\n", str(w, "id"),
           json_is_true(json_object_get(w, "enabled")) ? "enabled" : "disabled",
           str(w, "signatureScheme"), str(w, "url"));
}

static int cmd_webhooks(struct cli *c, int argc, const char **argv)
{
    const char *sub = argc > 0 ? argv[0] : "list";
    char path[1024];
    json_t *out = NULL, *body = NULL;
    long st;
    if (strcmp(sub, "list") == 0) {
        st = call(c, "GET", "/v1/webhooks", NULL, &out);
        if (st == 200 && c->json)
            print_json(out);
        else if (st == 200) {
            printf("%-26s %-8s %-9s %s\n", "ID", "STATE", "SCHEME", "URL");
            size_t i;
            json_t *w, *list = json_object_get(out, "webhooks");
            json_array_foreach(list, i, w) print_webhook_row(w);
        }
    } else if (strcmp(sub, "add") == 0) {
        if (argc < 2) {
            fprintf(stderr, "usage: statusrelay webhooks add URL [--status a,b] [--request-ids "
                            "x,y] [--origin-chains 1,2] [--destination-chains 3] [--scheme "
                            "standard|upstream|both] [--ed25519] [--latest] [--description "
                            "TEXT]\n");
            return EXIT_USAGE;
        }
        body = json_pack("{s:s}", "url", argv[1]);
        json_t *filters = json_object();
        for (int i = 2; i < argc; i++) {
            const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
            if (strcmp(a, "--ed25519") == 0) {
                json_object_set_new(body, "signing", json_string("ed25519"));
                continue;
            }
            if (strcmp(a, "--latest") == 0) {
                json_object_set_new(body, "mode", json_string("latest"));
                continue;
            }
            if (v == NULL) {
                fprintf(stderr, "statusrelay: %s needs a value\n", a);
                json_decref(filters);
                json_decref(body);
                return EXIT_USAGE;
            }
            i++;
            if (strcmp(a, "--status") == 0)
                json_object_set_new(filters, "status", parse_list_strings(v));
            else if (strcmp(a, "--request-ids") == 0)
                json_object_set_new(filters, "requestIds", parse_list_strings(v));
            else if (strcmp(a, "--origin-chains") == 0)
                json_object_set_new(filters, "originChainIds", parse_list_numbers(v));
            else if (strcmp(a, "--destination-chains") == 0)
                json_object_set_new(filters, "destinationChainIds", parse_list_numbers(v));
            else if (strcmp(a, "--scheme") == 0)
                json_object_set_new(body, "signatureScheme", json_string(v));
            else if (strcmp(a, "--description") == 0)
                json_object_set_new(body, "description", json_string(v));
            else {
                fprintf(stderr, "statusrelay: unknown option %s\n", a);
                json_decref(filters);
                json_decref(body);
                return EXIT_USAGE;
            }
        }
        json_object_set_new(body, "filters", filters);
        st = call(c, "POST", "/v1/webhooks", body, &out);
        if (st == 201 && c->json)
            print_json(out);
        else if (st == 201)
            printf("id      %s\nurl     %s\n%s  %s\n", str(out, "id"), str(out, "url"),
                   json_object_get(out, "publicKey") ? "pubkey" : "secret",
                   json_object_get(out, "publicKey") ? str(out, "publicKey")
                                                     : str(out, "secret"));
    } else if (argc >= 2 && (strcmp(sub, "show") == 0 || strcmp(sub, "rm") == 0 ||
                             strcmp(sub, "rotate-secret") == 0 || strcmp(sub, "test") == 0 ||
                             strcmp(sub, "enable") == 0 || strcmp(sub, "disable") == 0)) {
        char *id = url_escape(argv[1]);
        snprintf(path, sizeof(path), "/v1/webhooks/%s", id);
        free(id);
        if (strcmp(sub, "show") == 0)
            st = call(c, "GET", path, NULL, &out);
        else if (strcmp(sub, "rm") == 0)
            st = call(c, "DELETE", path, NULL, &out);
        else if (strcmp(sub, "enable") == 0 || strcmp(sub, "disable") == 0) {
            body = json_pack("{s:b}", "enabled", strcmp(sub, "enable") == 0);
            st = call(c, "PATCH", path, body, &out);
        } else {
            strncat(path, strcmp(sub, "test") == 0 ? "/test" : "/rotate-secret",
                    sizeof(path) - strlen(path) - 1);
            st = call(c, "POST", path, NULL, &out);
        }
        if (st >= 200 && st < 300) {
            if (c->json && out)
                print_json(out);
            else if (strcmp(sub, "rm") == 0)
                printf("deleted %s\n", argv[1]);
            else if (strcmp(sub, "rotate-secret") == 0)
                printf("secret  %s\n", str(out, "secret"));
            else if (out)
                print_json(out);
        }
    } else {
        fprintf(stderr, "usage: statusrelay webhooks add|list|show|rm|rotate-secret|test|"
                        "enable|disable [ID]\n");
        return EXIT_USAGE;
    }
    json_decref(body);
    json_decref(out);
    return exit_for(st);
}

static int cmd_deliveries(struct cli *c, int argc, const char **argv)
{
    const char *wh = NULL, *state = NULL;
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--state") == 0 && i + 1 < argc)
            state = argv[++i];
        else if (argv[i][0] != '-')
            wh = argv[i];
    }
    if (wh == NULL) {
        fprintf(stderr, "usage: statusrelay deliveries WEBHOOK_ID [--state "
                        "pending|delivered|dead|superseded|skipped] [--json]\n");
        return EXIT_USAGE;
    }
    char path[1024];
    char *id = url_escape(wh);
    snprintf(path, sizeof(path), "/v1/webhooks/%s/deliveries%s%s", id, state ? "?state=" : "",
             state ? state : "");
    free(id);
    json_t *out;
    long st = call(c, "GET", path, NULL, &out);
    if (st == 200 && c->json)
        print_json(out);
    else if (st == 200) {
        printf("%-40s %-10s %-10s %-8s %s\n", "DELIVERY", "STATE", "STATUS", "ATTEMPTS",
               "LAST");
        size_t i;
        json_t *d;
        json_array_foreach(json_object_get(out, "deliveries"), i, d)
        {
            json_t *att = json_object_get(d, "attempts");
            json_t *last = json_array_get(att, json_array_size(att) - 1);
            char lastbuf[64] = "-";
            if (last)
                snprintf(lastbuf, sizeof(lastbuf), "%lld %s", num(last, "statusCode"),
                         str(last, "error"));
            printf("%-40s %-10s %-10s %-8zu %s\n", str(d, "id"), str(d, "state"),
                   str(d, "status"), json_array_size(att), lastbuf);
        }
    }
    json_decref(out);
    return exit_for(st);
}

static int cmd_replay(struct cli *c, int argc, const char **argv)
{
    json_t *body = json_object(), *out;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--dead") == 0)
            json_object_set_new(body, "dead", json_true());
        else if (strcmp(a, "--dry-run") == 0)
            json_object_set_new(body, "dryRun", json_true());
        else if (v && strcmp(a, "--since") == 0 && ++i)
            json_object_set_new(body, "since", json_integer(strtoll(v, NULL, 10)));
        else if (v && strcmp(a, "--until") == 0 && ++i)
            json_object_set_new(body, "until", json_integer(strtoll(v, NULL, 10)));
        else if (v && strcmp(a, "--request") == 0 && ++i)
            json_object_set_new(body, "requestId", json_string(v));
        else if (v && strcmp(a, "--webhook") == 0 && ++i)
            json_object_set_new(body, "webhookId", json_string(v));
        else {
            fprintf(stderr, "usage: statusrelay replay [--since MS] [--until MS] [--request ID] "
                            "[--webhook ID] [--dead] [--dry-run] [--json]\n");
            json_decref(body);
            return EXIT_USAGE;
        }
    }
    long st = call(c, "POST", "/v1/replay", body, &out);
    if (st >= 200 && st < 300 && c->json)
        print_json(out);
    else if (st >= 200 && st < 300)
        printf("%s %lld delivery(ies)%s%s\n",
               json_is_true(json_object_get(body, "dryRun")) ? "would replay" : "replaying",
               num(out, "count"), json_object_get(out, "replayId") ? " replay=" : "",
               json_object_get(out, "replayId") ? str(out, "replayId") : "");
    json_decref(body);
    json_decref(out);
    return exit_for(st);
}

static volatile sig_atomic_t stop_tail;
static void on_sigint(int sig)
{
    stop_tail = 1;
}

static int cmd_tail(struct cli *c, int argc, const char **argv)
{
    const char *rid = NULL, *status = NULL;
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--request") == 0 && i + 1 < argc)
            rid = argv[++i];
        else if (strcmp(argv[i], "--status") == 0 && i + 1 < argc)
            status = argv[++i];
        else {
            fprintf(stderr, "usage: statusrelay tail [--request ID] [--status S] [--json]\n");
            return EXIT_USAGE;
        }
    }
    signal(SIGINT, on_sigint);
    signal(SIGTERM, on_sigint);
    char after[128] = "$"; /* "$" = from now on */
    int first = 1;
    while (!stop_tail) {
        char path[1024];
        snprintf(path, sizeof(path), "/v1/events?limit=500&after=%s%s%s", after,
                 rid ? "&requestId=" : "", rid ? rid : "");
        json_t *out;
        long st = call(c, "GET", path, NULL, &out);
        if (st != 200) {
            json_decref(out);
            return exit_for(st);
        }
        size_t i;
        json_t *e;
        json_array_foreach(json_object_get(out, "events"), i, e)
        {
            if (!first && (status == NULL || strcmp(status, str(e, "status")) == 0)) {
                if (c->json) {
                    char *t = json_dumps(e, JSON_COMPACT | JSON_PRESERVE_ORDER);
                    puts(t);
                    free(t);
                } else {
                    char t[32];
                    fmt_time(num(e, "createdAt"), t, sizeof(t));
                    printf("%s %-12s <- %-12s seq=%-3lld %-8s %s\n", t, str(e, "status"),
                           str(e, "previousStatus"), num(e, "seq"), str(e, "source"),
                           str(e, "requestId"));
                }
            }
            snprintf(after, sizeof(after), "%s", str(e, "streamId"));
        }
        json_t *cur = json_object_get(out, "cursor");
        if (json_is_string(cur))
            snprintf(after, sizeof(after), "%s", json_string_value(cur));
        first = 0;
        fflush(stdout);
        json_decref(out);
        usleep(300 * 1000);
    }
    return 0;
}

int cli_main(const char *cmd, int argc, char **argv)
{
    struct cli c = {0};
    const char **rest = xcalloc((size_t)argc + 1, sizeof(*rest));
    int n = 0, help = 0;
    c.url = getenv("STATUSRELAY_ADMIN_URL");
    c.token = getenv("STATUSRELAY_ADMIN_TOKEN");
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0)
            c.json = 1;
        else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
            help = 1;
        else if (strcmp(argv[i], "--admin-url") == 0 && i + 1 < argc)
            c.url = argv[++i];
        else if (strncmp(argv[i], "--admin-url=", 12) == 0)
            c.url = argv[i] + 12;
        else if (strcmp(argv[i], "--admin-token") == 0 && i + 1 < argc)
            c.token = argv[++i];
        else if (strncmp(argv[i], "--admin-token=", 14) == 0)
            c.token = argv[i] + 14;
        else
            rest[n++] = argv[i];
    }
    if (c.url == NULL)
        c.url = "http://127.0.0.1:8080";
    char *base = xstrdup(c.url);
    for (size_t l = strlen(base); l > 0 && base[l - 1] == '/'; l--)
        base[l - 1] = '\0';
    c.url = base;
    int rc;
    if (help) {
        printf("usage: statusrelay %s ... [--json] [--admin-url URL] [--admin-token TOKEN]\n"
               "Talks to the REST API at STATUSRELAY_ADMIN_URL (default "
               "http://127.0.0.1:8080)\nwith STATUSRELAY_ADMIN_TOKEN. Exit codes: 0 ok, 1 "
               "failure, 2 usage, 3 not found.\n\n"
               "  track ID...                      start tracking requests\n"
               "  status ID                        current state and event timeline\n"
               "  webhooks list|add URL|show ID|rm ID|rotate-secret ID|test ID|enable ID|"
               "disable ID\n"
               "  deliveries WEBHOOK_ID [--state S] deliveries with attempts\n"
               "  replay [--since MS] [--until MS] [--request ID] [--webhook ID] [--dead] "
               "[--dry-run]\n"
               "  tail [--request ID] [--status S] follow events until Ctrl-C\n",
               cmd);
        rc = 0;
    } else {
        curl_global_init(CURL_GLOBAL_DEFAULT);
        c.curl = curl_easy_init();
        if (strcmp(cmd, "track") == 0)
            rc = cmd_track(&c, n, rest);
        else if (strcmp(cmd, "status") == 0)
            rc = cmd_status(&c, n, rest);
        else if (strcmp(cmd, "webhooks") == 0)
            rc = cmd_webhooks(&c, n, rest);
        else if (strcmp(cmd, "deliveries") == 0)
            rc = cmd_deliveries(&c, n, rest);
        else if (strcmp(cmd, "replay") == 0)
            rc = cmd_replay(&c, n, rest);
        else if (strcmp(cmd, "tail") == 0)
            rc = cmd_tail(&c, n, rest);
        else {
            fprintf(stderr, "statusrelay: unknown command %s\n", cmd);
            rc = EXIT_USAGE;
        }
        curl_easy_cleanup(c.curl);
        curl_global_cleanup();
    }
    free(base);
    free(rest);
    return rc;
}
