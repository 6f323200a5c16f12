/* script_table.c - see script_table.h. runs on: core thread only. */
#include "store/script_table.h"
#include "store/command.h"

#include <stdio.h>

const struct store_script *script_table_get(struct store_script *table,
                                            const char *const *names, unsigned id)
{
    if (table[id].name == NULL)
        store_script_init(&table[id], names[id]);
    return &table[id];
}

const char *script_num(char *buf, long long v)
{
    snprintf(buf, SCRIPT_NUM_MAX, "%lld", v);
    return buf;
}
