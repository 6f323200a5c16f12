/* settings.h - a table-driven parser for settings given as environment variables and flags.
 *
 * Each setting `foo-bar` is read from STATUSRELAY_<PREFIX>FOO_BAR and from `--foo-bar VALUE`
 * (or `--foo-bar=VALUE`; booleans also as a bare `--foo-bar`); flags win over the
 * environment, both over the default. A bad value is one clear line on stderr naming the
 * setting, and the caller exits with status 2. Used by `serve` (config.c) and `sim`.
 * runs on: main thread, before any loop starts. */
#ifndef RELAY_SETTINGS_H
#define RELAY_SETTINGS_H

#include <stddef.h>
#include <stdint.h>

enum setting_type {
    SET_STR,      /* char * (heap, may be NULL when default is NULL) */
    SET_BOOL,     /* int: true/false/1/0/yes/no/on/off */
    SET_INT,      /* int64_t, >= min */
    SET_DURATION, /* int64_t ms: 250ms, 5s, 5m, 2h, 1d */
    SET_DURLIST,  /* struct duration_list: comma-separated durations */
    SET_HOSTPORT, /* char *: host:port */
    SET_LEVEL,    /* int: error|warn|info|debug */
};

#define SETTING_MAX_LIST 32
struct duration_list {
    int n;
    int64_t ms[SETTING_MAX_LIST];
};

struct setting {
    const char *name; /* flag form: "redis-url" */
    enum setting_type type;
    size_t offset;    /* into the destination struct */
    const char *def;  /* default as text; NULL = unset */
    int secret;       /* masked by settings_print */
    int64_t min;      /* SET_INT / SET_DURATION lower bound */
    const char *help;
};

/* Apply defaults, then env (prefix e.g. "STATUSRELAY_" or "STATUSRELAY_SIM_"), then flags.
 * Arguments not starting with "--" are collected into *rest / *nrest (argv pointers, array
 * owned by the caller of size argc). "--help"/"-h" sets *help. Returns 0, or -1 after
 * printing "statusrelay: invalid setting <name> (<ENV>): <why>" to stderr. */
int settings_load(const struct setting *table, void *dst, const char *env_prefix, int argc,
                  char **argv, const char **rest, int *nrest, int *help);
/* settings_load that also reports which settings were given (environment or flag): given has
 * one byte per table row (may be NULL), set to 1 for each given setting, left alone otherwise.
 * Lets the caller derive an unset setting from a given one. */
int settings_load_given(const struct setting *table, void *dst, const char *env_prefix,
                        int argc, char **argv, const char **rest, int *nrest, int *help,
                        unsigned char *given);
/* Print one `NAME=value` line per setting to f (secrets as "****" when set). */
void settings_print(const struct setting *table, const void *src, const char *env_prefix,
                    void *f);
/* Print a help table of the settings: flag, env, default, help. */
void settings_help(const struct setting *table, const char *env_prefix, void *f);
/* Free heap strings held by dst. */
void settings_free(const struct setting *table, void *dst);

#endif
