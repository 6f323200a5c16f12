/* keys.c - see keys.h. */
#include "store/keys.h"
#include "store/cluster_slot.h"

#include <stdint.h>
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

/* The slot window [*lo, *hi) of partition part of nparts (keys.h). */
static void spread_window(unsigned part, unsigned nparts, unsigned *lo, unsigned *hi)
{
    uint64_t q = 4u * (uint64_t)nparts;
    *lo = (unsigned)((4u * (uint64_t)part + 1) * CLUSTER_SLOTS / q);
    *hi = (unsigned)((4u * (uint64_t)part + 3) * CLUSTER_SLOTS / q);
}

size_t key_spread_tag(char *buf, size_t n, const char *prefix, unsigned part, unsigned nparts)
{
    if (nparts <= 1)
        return key_part_tag(buf, n, prefix, 0, 1);
    unsigned lo, hi;
    spread_window(part, nparts, &lo, &hi);
    unsigned centre = (lo + hi) / 2, best = 0, best_d = CLUSTER_SLOTS;
    char t[KEY_TAG_MAX];
    int base = snprintf(t, sizeof(t), "%s:p%u.", prefix, part);
    if (base < 0 || (size_t)base >= sizeof(t) - 8)
        return 0; /* a prefix config refuses */
    unsigned x;
    for (x = 0; x < 10000000u; x++) {
        int l = base + snprintf(t + base, sizeof(t) - (size_t)base, "%u", x);
        unsigned slot = cluster_crc16(t, (size_t)l) & (CLUSTER_SLOTS - 1);
        if (slot >= lo && slot < hi)
            break;
        unsigned d = slot > centre ? slot - centre : centre - slot;
        if (d < best_d)
            best_d = d, best = x;
    }
    int r = snprintf(buf, n, "{%s:p%u.%u}", prefix, part, x < 10000000u ? x : best);
    if (r < 0)
        return 0;
    return (size_t)r < n ? (size_t)r : n - 1;
}

size_t key_tag_of_scheme(char *buf, size_t n, enum key_tags tags, const char *prefix,
                         unsigned part, unsigned nparts)
{
    return tags == KEY_TAGS_SPREAD ? key_spread_tag(buf, n, prefix, part, nparts)
                                   : key_part_tag(buf, n, prefix, part, nparts);
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
