/* script_table.h - what the typed script modules (store/polls.c, watches.c, leader.c) share:
 * a module's table of embedded scripts, each registered on first use, and the decimal text of
 * numeric arguments.
 * runs on: core thread only (the tables are filled lazily, without locks). */
#ifndef STORE_SCRIPT_TABLE_H
#define STORE_SCRIPT_TABLE_H

struct store_script;

/* table[id], registered as the embedded script names[id] (store_script_init) on first use;
 * immutable after. table and names are the module's (static storage). */
const struct store_script *script_table_get(struct store_script *table,
                                            const char *const *names, unsigned id);

/* v as decimal text into buf (at least SCRIPT_NUM_MAX bytes). Returns buf. */
#define SCRIPT_NUM_MAX 24
const char *script_num(char *buf, long long v);

#endif
