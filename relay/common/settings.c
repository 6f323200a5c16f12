/* settings.c - see settings.h. runs on: main thread at start-up. */
#include "relay/common/settings.h"
#include "relay/common/log.h"
#include "relay/common/util.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Name of the environment variable for a setting into buf. */
static void settings_env_name(const char *prefix, const char *name, char *buf, size_t n)
{
    size_t i = 0;
    for (const char *p = prefix; *p && i + 1 < n; p++)
        buf[i++] = *p;
    for (const char *p = name; *p && i + 1 < n; p++)
        buf[i++] = *p == '-' ? '_' : (char)toupper((unsigned char)*p);
    buf[i] = '\0';
}

static int parse_bool(const char *v, int *out)
{
    static const char *const yes[] = {"1", "true", "yes", "on"};
    static const char *const no[] = {"0", "false", "no", "off"};
    for (size_t i = 0; i < 4; i++) {
        if (strcasecmp(v, yes[i]) == 0)
            return *out = 1, 0;
        if (strcasecmp(v, no[i]) == 0)
            return *out = 0, 0;
    }
    return -1;
}

/* Store text v into the field of s. Returns NULL or a static reason. */
static const char *set_value(const struct setting *s, void *dst, const char *v)
{
    char *field = (char *)dst + s->offset;
    switch (s->type) {
    case SET_STR: {
        char **p = (char **)field;
        free(*p);
        *p = v ? xstrdup(v) : NULL;
        return NULL;
    }
    case SET_HOSTPORT: {
        char host[256];
        int port;
        if (v == NULL || parse_hostport(v, host, sizeof(host), &port) != 0)
            return "expected HOST:PORT";
        char **p = (char **)field;
        free(*p);
        *p = xstrdup(v);
        return NULL;
    }
    case SET_BOOL:
        return v && parse_bool(v, (int *)field) == 0 ? NULL : "expected true or false";
    case SET_LEVEL: {
        int l = v ? log_level_parse(v) : -1;
        if (l < 0)
            return "expected error, warn, info or debug";
        *(int *)field = l;
        return NULL;
    }
    case SET_INT: {
        char *end;
        errno = 0;
        long long n = v ? strtoll(v, &end, 10) : 0;
        if (v == NULL || *v == '\0' || *end != '\0' || errno != 0)
            return "expected an integer";
        if (n < s->min)
            return "value too small";
        *(int64_t *)field = n;
        return NULL;
    }
    case SET_DURATION: {
        int64_t ms;
        if (v == NULL || parse_duration_ms(v, &ms) != 0)
            return "expected a duration like 250ms, 5s, 5m, 2h or 1d";
        if (ms < s->min)
            return "duration too short";
        *(int64_t *)field = ms;
        return NULL;
    }
    case SET_DURLIST: {
        struct duration_list dl = {0};
        char buf[1024];
        if (v == NULL || strlen(v) >= sizeof(buf) || *v == '\0')
            return "expected a comma-separated list of durations";
        strcpy(buf, v);
        char *save = NULL;
        for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
            while (*t == ' ')
                t++;
            if (dl.n == SETTING_MAX_LIST)
                return "too many entries (at most 32)";
            if (parse_duration_ms(t, &dl.ms[dl.n]) != 0)
                return "expected a comma-separated list of durations";
            dl.n++;
        }
        if (dl.n == 0)
            return "expected at least one duration";
        *(struct duration_list *)field = dl;
        return NULL;
    }
    }
    return "unknown setting type";
}

static int bad(const char *prefix, const struct setting *s, const char *why, const char *v)
{
    char env[128];
    settings_env_name(prefix, s->name, env, sizeof(env));
    fprintf(stderr, "statusrelay: invalid setting %s (--%s): %s, got \"%s\"\n", env, s->name, why,
            v ? v : "");
    return -1;
}

int settings_load(const struct setting *table, void *dst, const char *env_prefix, int argc,
                  char **argv, const char **rest, int *nrest, int *help)
{
    return settings_load_given(table, dst, env_prefix, argc, argv, rest, nrest, help, NULL);
}

int settings_load_given(const struct setting *table, void *dst, const char *env_prefix,
                        int argc, char **argv, const char **rest, int *nrest, int *help,
                        unsigned char *given)
{
    *nrest = 0;
    *help = 0;
    for (const struct setting *s = table; s->name; s++) {
        const char *why = s->def || s->type == SET_STR ? set_value(s, dst, s->def) : NULL;
        if (why)
            return bad(env_prefix, s, why, s->def);
    }
    for (const struct setting *s = table; s->name; s++) {
        char env[128];
        settings_env_name(env_prefix, s->name, env, sizeof(env));
        const char *v = getenv(env);
        if (v == NULL)
            continue;
        const char *why = set_value(s, dst, v);
        if (why)
            return bad(env_prefix, s, why, v);
        if (given)
            given[s - table] = 1;
    }
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            *help = 1;
            continue;
        }
        if (strncmp(a, "--", 2) != 0) {
            rest[(*nrest)++] = a;
            continue;
        }
        const char *eq = strchr(a, '=');
        size_t nl = eq ? (size_t)(eq - a - 2) : strlen(a + 2);
        const struct setting *s;
        for (s = table; s->name; s++)
            if (strlen(s->name) == nl && strncmp(s->name, a + 2, nl) == 0)
                break;
        if (s->name == NULL) {
            rest[(*nrest)++] = a; /* a command flag (--json, --print-config): caller's */
            continue;
        }
        const char *v = eq ? eq + 1 : NULL;
        if (v == NULL && s->type == SET_BOOL)
            v = "true";
        else if (v == NULL) {
            if (i + 1 >= argc) {
                fprintf(stderr, "statusrelay: --%s needs a value\n", s->name);
                return -1;
            }
            v = argv[++i];
        }
        const char *why = set_value(s, dst, v);
        if (why)
            return bad(env_prefix, s, why, v);
        if (given)
            given[s - table] = 1;
    }
    return 0;
}

static void format_value(const struct setting *s, const void *src, char *buf, size_t n)
{
    const char *field = (const char *)src + s->offset;
    switch (s->type) {
    case SET_STR:
    case SET_HOSTPORT: {
        const char *v = *(char *const *)field;
        snprintf(buf, n, "%s", v == NULL ? "" : s->secret ? "****" : v);
        break;
    }
    case SET_BOOL:
        snprintf(buf, n, "%s", *(const int *)field ? "true" : "false");
        break;
    case SET_LEVEL:
        snprintf(buf, n, "%s", log_level_name(*(const int *)field));
        break;
    case SET_INT:
        snprintf(buf, n, "%lld", (long long)*(const int64_t *)field);
        break;
    case SET_DURATION:
        format_duration_ms(*(const int64_t *)field, buf, n);
        break;
    case SET_DURLIST: {
        const struct duration_list *dl = (const struct duration_list *)field;
        size_t off = 0;
        buf[0] = '\0';
        for (int i = 0; i < dl->n && off + 16 < n; i++) {
            char d[32];
            format_duration_ms(dl->ms[i], d, sizeof(d));
            off += (size_t)snprintf(buf + off, n - off, "%s%s", i ? "," : "", d);
        }
        break;
    }
    }
}

void settings_print(const struct setting *table, const void *src, const char *env_prefix,
                    void *f)
{
    for (const struct setting *s = table; s->name; s++) {
        char env[128], val[1024];
        settings_env_name(env_prefix, s->name, env, sizeof(env));
        format_value(s, src, val, sizeof(val));
        fprintf(f, "%s=%s\n", env, val);
    }
}

void settings_help(const struct setting *table, const char *env_prefix, void *f)
{
    for (const struct setting *s = table; s->name; s++) {
        char env[128];
        settings_env_name(env_prefix, s->name, env, sizeof(env));
        fprintf(f, "  --%-26s %s\n  %-28s %s (default: %s)\n", s->name, env, "", s->help,
                s->def ? s->def : "unset");
    }
}

void settings_free(const struct setting *table, void *dst)
{
    for (const struct setting *s = table; s->name; s++)
        if (s->type == SET_STR || s->type == SET_HOSTPORT) {
            char **p = (char **)((char *)dst + s->offset);
            free(*p);
            *p = NULL;
        }
}
