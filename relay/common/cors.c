/* cors.c - see cors.h. Pure string work. runs on: any thread. */
#include "relay/common/cors.h"

#include <string.h>
#include <strings.h>

/* The next entry of a comma-separated list: *p advances past it; *n is its length with the
 * surrounding spaces cut. Returns the entry's first byte, or NULL at the end. */
static const char *next_entry(const char **p, size_t *n)
{
    const char *s = *p;
    while (*s == ' ' || *s == '\t' || *s == ',')
        s++;
    if (*s == '\0')
        return NULL;
    const char *e = strchr(s, ',');
    if (e == NULL)
        e = s + strlen(s);
    *p = e;
    while (e > s && (e[-1] == ' ' || e[-1] == '\t'))
        e--;
    *n = (size_t)(e - s);
    return s;
}

const char *cors_allow_origin(const char *list, const char *origin)
{
    if (list == NULL || origin == NULL || origin[0] == '\0')
        return NULL;
    size_t on = strlen(origin), n;
    for (const char *p = list, *e; (e = next_entry(&p, &n)) != NULL;) {
        if (n == 1 && e[0] == '*')
            return "*";
        if (n == on && strncasecmp(e, origin, n) == 0)
            return origin;
    }
    return NULL;
}

static int host_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '-' || c == '.' || c == '_' || c == '[' || c == ']' || c == ':';
}

const char *cors_list_check(const char *list)
{
    size_t n;
    if (list == NULL)
        return NULL;
    for (const char *p = list, *e; (e = next_entry(&p, &n)) != NULL;) {
        if (n == 1 && e[0] == '*')
            continue;
        const char *sep = NULL;
        for (size_t i = 0; i + 2 < n; i++)
            if (e[i] == ':' && e[i + 1] == '/' && e[i + 2] == '/') {
                sep = e + i;
                break;
            }
        if (sep == NULL || sep == e)
            return "each origin must be \"*\" or scheme://host[:port] (comma-separated)";
        for (const char *c = e; c < sep; c++)
            if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
                  (c > e && ((*c >= '0' && *c <= '9') || *c == '+' || *c == '-' || *c == '.'))))
                return "an origin's scheme is malformed (expected e.g. https://app.example)";
        const char *h = sep + 3, *end = e + n;
        if (h == end)
            return "an origin has no host (expected e.g. https://app.example)";
        for (const char *c = h; c < end; c++)
            if (!host_char(*c))
                return "an origin is scheme://host[:port] only: no path, no trailing slash";
    }
    return NULL;
}

int cors_headers_ok(const char *s)
{
    if (s == NULL || strlen(s) > CORS_HEADERS_MAX)
        return 0;
    for (; *s != '\0'; s++) {
        unsigned char c = (unsigned char)*s;
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              strchr("!#$%&'*+-.^_`|~, ", c) != NULL))
            return 0;
    }
    return 1;
}
