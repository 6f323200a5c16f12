/* tag_spread.c - how many masters of an evenly split Redis Cluster the N partitions of a
 * deployment use, with the plain tags "{<prefix>:p<k>}" and the spread tags
 * "{<prefix>:p<k>.<x>}" (store/keys.h key_spread_tag, docs/partitions.md), over many
 * random prefixes: N partitions on N masters whose slot ranges are the ones
 * redis-cli --cluster create assigns. Pure computation: no Redis.
 *
 *   tag_spread [--prefixes 3000] [--from 3] [--to 16] [--seed 1]
 *
 * Prints one row per N: masters used (min / mean / max) and the prefixes that use all N, for
 * each scheme. runs on: the command line. */
#include "store/cluster_slot.h"
#include "store/keys.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The master (0..m-1) of slot when m masters share the slots as redis-cli --cluster create
 * gives them (clusterManagerCreate: lround of a running float cursor). */
static unsigned master_of(unsigned slot, unsigned m)
{
    double per = (double)CLUSTER_SLOTS / m, cursor = 0;
    long first = 0;
    for (unsigned i = 0; i < m; i++) {
        long last = lround(cursor + per - 1);
        if (last > CLUSTER_SLOTS - 1 || i == m - 1)
            last = CLUSTER_SLOTS - 1;
        if (last < first)
            last = first;
        if ((long)slot >= first && (long)slot <= last)
            return i;
        first = last + 1;
        cursor += per;
    }
    return m - 1;
}

static uint64_t rng = 1;
static unsigned next_rand(void)
{
    rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return (unsigned)(rng >> 33);
}

/* A random prefix of 2..24 characters of [a-z0-9_-]. */
static void random_prefix(char *p)
{
    static const char cs[] = "abcdefghijklmnopqrstuvwxyz0123456789_-";
    unsigned len = 2 + next_rand() % 23;
    for (unsigned i = 0; i < len; i++)
        p[i] = cs[next_rand() % (sizeof(cs) - 1)];
    p[len] = '\0';
}

static unsigned used(const char *prefix, unsigned n, enum key_tags scheme)
{
    unsigned char hit[KEY_MAX_PARTITIONS] = {0};
    unsigned count = 0;
    char t[KEY_TAG_MAX];
    for (unsigned k = 0; k < n; k++) {
        size_t l = key_tag_of_scheme(t, sizeof(t), scheme, prefix, k, n);
        unsigned m = master_of(cluster_key_slot(t, l), n);
        if (!hit[m]++)
            count++;
    }
    return count;
}

int main(int argc, char **argv)
{
    unsigned prefixes = 3000, from = 3, to = 16;
    for (int i = 1; i + 1 < argc; i += 2) {
        unsigned v = (unsigned)strtoul(argv[i + 1], NULL, 10);
        if (strcmp(argv[i], "--prefixes") == 0)
            prefixes = v;
        else if (strcmp(argv[i], "--from") == 0)
            from = v;
        else if (strcmp(argv[i], "--to") == 0)
            to = v;
        else if (strcmp(argv[i], "--seed") == 0)
            rng = v;
    }
    if (from < 2 || to > KEY_MAX_PARTITIONS || from > to || prefixes == 0) {
        fprintf(stderr, "tag_spread: --from 2..64 <= --to, --prefixes >= 1\n");
        return 2;
    }
    char (*ps)[32] = malloc(sizeof(*ps) * prefixes);
    if (ps == NULL)
        return 1;
    for (unsigned i = 0; i < prefixes; i++)
        random_prefix(ps[i]);
    printf("N partitions on N masters (redis-cli --cluster create ranges), %u random prefixes\n",
           prefixes);
    printf("masters used: min / mean / max, then how many prefixes use all N\n");
    printf("%-4s %-31s %s\n", "N", "plain {P:p<k>}", "spread {P:p<k>.<x>}");
    for (unsigned n = from; n <= to; n++) {
        printf("%-4u", n);
        for (int sc = 0; sc < 2; sc++) {
            unsigned mn = n, mx = 0, all = 0;
            double sum = 0;
            for (unsigned i = 0; i < prefixes; i++) {
                unsigned u = used(ps[i], n, sc ? KEY_TAGS_SPREAD : KEY_TAGS_PLAIN);
                mn = u < mn ? u : mn;
                mx = u > mx ? u : mx;
                sum += u;
                all += u == n;
            }
            printf(" %2u / %5.2f / %2u  %5u     ", mn, sum / prefixes, mx, all);
        }
        printf("\n");
    }
    free(ps);
    return 0;
}
