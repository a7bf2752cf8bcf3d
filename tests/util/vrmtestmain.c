/*
 * vrmtestmain.c: a test program's cases as a table, added in one loop
 */
#include <config.h>

#include "vrmtestmain.h"

void
vrmTestAddFuncs(const vrmTestFunc *funcs, size_t nfuncs)
{
    size_t i;

    for (i = 0; i < nfuncs; i++)
        g_test_add_func(funcs[i].path, funcs[i].func);
}

int
vrmTestMain(int argc, char **argv, void (*init)(int *argc, char ***argv),
            const vrmTestFunc *funcs, size_t nfuncs)
{
    if (init)
        init(&argc, &argv);
    else
        g_test_init(&argc, &argv, NULL);
    vrmTestAddFuncs(funcs, nfuncs);
    return g_test_run();
}

void
vrmTestAddCases(const char *prefix, const void *cases, size_t size, size_t ncases,
                size_t nameOffset, GTestDataFunc func)
{
    size_t i;

    for (i = 0; i < ncases; i++) {
        const char *c = (const char *)cases + i * size;
        g_autofree char *path = g_strconcat(prefix, *(const char *const *)(c + nameOffset),
                                            NULL);

        g_test_add_data_func(path, c, func);
    }
}
