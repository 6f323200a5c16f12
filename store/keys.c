/* keys.c - see keys.h. */
#include "store/keys.h"
#include "store/cluster_slot.h"

#include <stdio.h>
#include <string.h>

size_t key_build(char *buf, size_t n, const char *tag, const char *kind, const char *a,
                 const char *b)
{
    int r;
    if (a == NULL)
        r = snprintf(buf, n, "%s:%s", tag, kind);
    else if (b == NULL)
        r = snprintf(buf, n, "%s:%s:%s", tag, kind, a);
    else
        r = snprintf(buf, n, "%s:%s:%s:%s", tag, kind, a, b);
    if (r < 0)
        return 0;
    return (size_t)r < n ? (size_t)r : n - 1;
}

unsigned key_partition(const char *id, size_t len, unsigned nparts)
{
    if (nparts <= 1)
        return 0;
    return cluster_crc16(id, len) % nparts;
}

size_t key_part_tag(char *buf, size_t n, const char *prefix, unsigned part, unsigned nparts)
{
    int r = nparts <= 1 ? snprintf(buf, n, "{%s}", prefix)
                        : snprintf(buf, n, "{%s:p%u}", prefix, part);
    if (r < 0)
        return 0;
    return (size_t)r < n ? (size_t)r : n - 1;
}

size_t key_ids_in(unsigned part, unsigned nparts, const char *const *ids, size_t n,
                  const char **out)
{
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (key_partition(ids[i], strlen(ids[i]), nparts) == part)
            out[m++] = ids[i];
    return m;
}
