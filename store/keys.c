/* keys.c - see keys.h. */
#include "store/keys.h"

#include <stdio.h>

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
