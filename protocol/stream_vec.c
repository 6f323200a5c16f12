/* stream_vec.c - see stream_vec.h: the vector cursor of a partitioned event stream.
 * runs on: any thread (pure). */
#include "protocol/stream_vec.h"
#include "protocol/proto.h"

#include <stdio.h>
#include <string.h>

/* bare_max: a component without "-<seq>" gets seq UINT64_MAX (svec_parse_after). */
static int parse(const char *s, struct svec_pos *out, unsigned max, int bare_max)
{
    if (s == NULL || s[0] == '\0')
        return -1;
    unsigned n = 0;
    for (const char *p = s;;) {
        size_t l = strcspn(p, ",");
        char one[SVEC_ID_TEXT];
        if (l == 0 || l >= sizeof(one) || n >= max)
            return -1;
        memcpy(one, p, l);
        one[l] = '\0';
        if (proto_stream_id_parse(one, &out[n].ms, &out[n].seq) != 0)
            return -1;
        if (bare_max && memchr(one, '-', l) == NULL)
            out[n].seq = UINT64_MAX;
        n++;
        p += l;
        if (*p == '\0')
            return (int)n;
        p++; /* the comma: a component must follow */
    }
}

int svec_parse(const char *s, struct svec_pos *out, unsigned max)
{
    return parse(s, out, max, 0);
}

int svec_parse_after(const char *s, struct svec_pos *out, unsigned max)
{
    return parse(s, out, max, 1);
}

int svec_format(char *buf, size_t cap, const struct svec_pos *v, unsigned n)
{
    size_t len = 0;
    if (cap == 0)
        return -1;
    buf[0] = '\0';
    for (unsigned i = 0; i < n; i++) {
        int w = snprintf(buf + len, cap - len, "%s%llu-%llu", i ? "," : "",
                         (unsigned long long)v[i].ms, (unsigned long long)v[i].seq);
        if (w < 0 || (size_t)w >= cap - len) {
            buf[0] = '\0';
            return -1;
        }
        len += (size_t)w;
    }
    return (int)len;
}

int svec_pos_cmp(const struct svec_pos *a, const struct svec_pos *b)
{
    if (a->ms != b->ms)
        return a->ms < b->ms ? -1 : 1;
    return a->seq < b->seq ? -1 : a->seq > b->seq;
}

int svec_ge(const struct svec_pos *a, const struct svec_pos *b, unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        if (svec_pos_cmp(&a[i], &b[i]) < 0)
            return 0;
    return 1;
}
