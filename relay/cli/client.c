/* client.c (cli) - the operator commands' REST client (one blocking libcurl easy handle) and
 * their output helpers. See internal.h.
 * runs on: main thread. */
#include "relay/cli/internal.h"
#include "relay/commands.h"
#include "relay/common/util.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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

/* The error code and message of an error body: {"error": {"code", "message"}} (the /v1
 * shape) or the upstream's {"message", "errorCode"}. */
static void error_parts(json_t *body, const char **code, const char **msg)
{
    json_t *e = json_object_get(body, "error");
    *code = json_string_value(json_object_get(e, "code"));
    *msg = json_string_value(json_object_get(e, "message"));
    if (*code == NULL)
        *code = json_string_value(json_object_get(body, "errorCode"));
    if (*msg == NULL)
        *msg = json_string_value(json_object_get(body, "message"));
}

long cli_call(struct cli *c, const char *method, const char *path, json_t *body, json_t **out,
              int quiet)
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
        if (!quiet)
            fprintf(stderr, "statusrelay: cannot reach %s: %s\n", c->url, curl_easy_strerror(rc));
    } else {
        curl_easy_getinfo(c->curl, CURLINFO_RESPONSE_CODE, &status);
        if (b.n > 0)
            *out = json_loadb(b.p, b.n, 0, NULL);
        if (status >= 400 && !quiet) {
            const char *code, *msg;
            error_parts(*out, &code, &msg);
            fprintf(stderr, "statusrelay: %s %s: HTTP %ld %s%s%s\n", method, path, status,
                    code ? code : "", msg ? ": " : "", msg ? msg : "");
            if (code != NULL && strcmp(code, "read_only_token") == 0)
                fprintf(stderr, "statusrelay: this command changes state: it needs the admin "
                                "token (STATUSRELAY_ADMIN_TOKEN or --admin-token); the read "
                                "token only reads\n");
        }
    }
    free(text);
    free(b.p);
    curl_slist_free_all(h);
    return status;
}

int cli_exit_for(long status)
{
    return status < 0                        ? 1
           : status == 404                   ? EXIT_NOTFOUND
           : status >= 400 && status < 500   ? EXIT_USAGE
           : status >= 400                   ? 1
                                             : 0;
}

void cli_print_json(json_t *j)
{
    char *t = json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    if (t)
        puts(t);
    free(t);
}

void cli_print_json_line(json_t *j)
{
    char *t = json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER);
    if (t)
        puts(t);
    free(t);
}

const char *cli_str(json_t *o, const char *k)
{
    json_t *v = json_object_get(o, k);
    return json_is_string(v) ? json_string_value(v) : "-";
}

long long cli_num(json_t *o, const char *k)
{
    return (long long)json_number_value(json_object_get(o, k));
}

void cli_fmt_time(long long ms, char *buf, size_t n)
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

json_t *cli_list_strings(const char *s)
{
    json_t *a = json_array();
    char *dup = xstrdup(s), *save = NULL;
    for (char *t = strtok_r(dup, ",", &save); t; t = strtok_r(NULL, ",", &save))
        json_array_append_new(a, json_string(t));
    free(dup);
    return a;
}

json_t *cli_list_numbers(const char *s)
{
    json_t *a = json_array();
    char *dup = xstrdup(s), *save = NULL;
    for (char *t = strtok_r(dup, ",", &save); t; t = strtok_r(NULL, ",", &save))
        json_array_append_new(a, json_integer(strtoll(t, NULL, 10)));
    free(dup);
    return a;
}

char *cli_path_query(const char *path, ...)
{
    size_t cap = strlen(path) + 64, len = strlen(path);
    char *p = xmalloc(cap);
    memcpy(p, path, len + 1);
    int first = 1;
    va_list ap;
    va_start(ap, path);
    for (const char *k = va_arg(ap, const char *); k != NULL; k = va_arg(ap, const char *)) {
        const char *v = va_arg(ap, const char *);
        if (v == NULL)
            continue;
        char *ev = url_escape(v);
        size_t need = len + strlen(k) + strlen(ev) + 3;
        if (need > cap) {
            cap = need * 2;
            p = xrealloc(p, cap);
        }
        len += (size_t)snprintf(p + len, cap - len, "%c%s=%s", first ? '?' : '&', k, ev);
        first = 0;
        free(ev);
    }
    va_end(ap);
    return p;
}
