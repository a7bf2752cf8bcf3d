/*
 * vrmtestmain.h: a test program's cases as a table, added in one loop
 *
 * GLib only, so that every unit test may link it (tests/util/meson.build:
 * vrmtestmain_dep); each case keeps its own path, as g_test_add_func()
 * would have given it.
 */
#pragma once

#include <stddef.h>

#include <glib.h>

typedef struct {
    const char *path;
    GTestFunc func;
} vrmTestFunc;

/* g_test_add_func() of each of @funcs, in order */
void vrmTestAddFuncs(const vrmTestFunc *funcs, size_t nfuncs);

/* @init (NULL: g_test_init() alone), which may add cases of its own, then
 * @funcs; runs them all */
int vrmTestMain(int argc, char **argv, void (*init)(int *argc, char ***argv),
                const vrmTestFunc *funcs, size_t nfuncs);

/* The main() of a test program: vrmTestMain() of the table @funcs (as
 * libvirt's VIR_TEST_MAIN) */
#define VRM_TEST_MAIN(init, funcs) \
    int \
    main(int argc, char **argv) \
    { \
        return vrmTestMain(argc, argv, init, funcs, G_N_ELEMENTS(funcs)); \
    }

/* g_test_add_data_func() of each of the @ncases cases of @size bytes at
 * @cases, as @prefix followed by the case's name (the const char * at
 * @nameOffset in it); use VRM_TEST_ADD_CASES */
void vrmTestAddCases(const char *prefix, const void *cases, size_t size, size_t ncases,
                     size_t nameOffset, GTestDataFunc func);

/* Each case of the array @cases (a struct with a member "name") as
 * @prefix<name>, run by @func */
#define VRM_TEST_ADD_CASES(prefix, cases, func) \
    vrmTestAddCases(prefix, cases, sizeof((cases)[0]), G_N_ELEMENTS(cases), \
                    G_STRUCT_OFFSET(__typeof__((cases)[0]), name), func)
