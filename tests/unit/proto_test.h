/* proto_test.h - shared by the protocol/ unit tests: the chaos allocator and fixture loading.
 *
 * Include it FIRST, then the protocol .c files under test: it renames malloc, calloc,
 * realloc, strdup and free for everything that follows, so every allocation of the code
 * under test can be made to fail (chaos_arm(n): the n-th allocation from now returns NULL)
 * and every allocation is counted (chaos_live: blocks not yet freed), which turns a leak on
 * an error path into a failed assertion even without LeakSanitizer.
 * Memory from other allocators (jansson's json_dumps) is released with real_free.
 * runs on: the test process, one thread. Run from the repository root. */
#ifndef TESTS_UNIT_PROTO_TEST_H
#define TESTS_UNIT_PROTO_TEST_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>
#include <openssl/evp.h>

static long chaos_fail_at;  /* 0: never fail; else the call number that fails */
static long chaos_calls;    /* allocation calls since chaos_arm */
static long chaos_live;     /* blocks allocated and not yet freed */
static int chaos_tripped;   /* the armed failure happened */

static __attribute__((unused)) void chaos_arm(long n)
{
    chaos_fail_at = n;
    chaos_calls = 0;
    chaos_tripped = 0;
}

static __attribute__((unused)) void chaos_disarm(void)
{
    chaos_fail_at = 0;
}

static int chaos_fail_now(void)
{
    if (chaos_fail_at > 0 && ++chaos_calls == chaos_fail_at) {
        chaos_tripped = 1;
        return 1;
    }
    return 0;
}

static __attribute__((unused)) void *chaos_malloc(size_t n)
{
    void *p = chaos_fail_now() ? NULL : malloc(n);
    chaos_live += p != NULL;
    return p;
}

static __attribute__((unused)) void *chaos_calloc(size_t a, size_t b)
{
    void *p = chaos_fail_now() ? NULL : calloc(a, b);
    chaos_live += p != NULL;
    return p;
}

static __attribute__((unused)) void *chaos_realloc(void *old, size_t n)
{
    void *p = chaos_fail_now() ? NULL : realloc(old, n);
    chaos_live += old == NULL && p != NULL;
    return p;
}

static __attribute__((unused)) char *chaos_strdup(const char *s)
{
    char *p = chaos_fail_now() ? NULL : strdup(s);
    chaos_live += p != NULL;
    return p;
}

static __attribute__((unused)) void chaos_free(void *p)
{
    chaos_live -= p != NULL;
    free(p);
}

static __attribute__((unused)) void real_free(void *p)
{
    free(p);
}

#define malloc chaos_malloc
#define calloc chaos_calloc
#define realloc chaos_realloc
#define strdup chaos_strdup
#define free chaos_free

/* Read tests/fixtures/upstream/<name> (path from __FILE__, as test_sign.c does). The text is
 * NUL-terminated; *len (may be NULL) gets its length. Caller free()s. */
static __attribute__((unused)) char *fixture_path(const char *dir, const char *name, size_t *len)
{
    char path[512];
    const char *file = __FILE__, *slash = strrchr(file, '/');
    snprintf(path, sizeof(path), "%.*s/../%s/%s", slash ? (int)(slash - file) : 1,
             slash ? file : ".", dir, name);
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        fprintf(stderr, "cannot open %s\n", path);
        return NULL;
    }
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    for (size_t got; buf != NULL && (got = fread(buf + n, 1, cap - n - 1, f)) > 0;) {
        n += got;
        if (cap - n - 1 == 0) {
            char *nb = realloc(buf, cap * 2);
            if (nb == NULL) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
            cap *= 2;
        }
    }
    fclose(f);
    if (buf != NULL) {
        buf[n] = '\0';
        if (len != NULL)
            *len = n;
    }
    return buf;
}

static __attribute__((unused)) char *fixture(const char *name, size_t *len)
{
    return fixture_path("fixtures/upstream", name, len);
}

#endif
