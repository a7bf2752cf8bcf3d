/*
 * vrmenum.h: enums with string tables (libvirt's VIR_ENUM_DECL/IMPL)
 *
 * Public API summary
 * ------------------
 *   VRM_ENUM_DECL(vrmFoo)                    declares vrmFooTypeToString/FromString
 *   VRM_ENUM_IMPL(vrmFoo, VRM_FOO_LAST, ...) defines them; the table size is
 *                                            checked against _LAST statically
 *   vrmEnumAllowedValues(toString, last)     "'a', 'b', 'c'" for error messages
 *   VRM_TABLE_IMPL(type, table, count, get)  a table's rows for its users:
 *                                            count() and get(i), NULL past the end
 */
#pragma once

#include <stddef.h>

#include <glib.h>

#define VRM_ENUM_DECL(name) \
    const char *name##TypeToString(int type); \
    int name##TypeFromString(const char *str)

#define VRM_ENUM_IMPL(name, lastValue, ...) \
    static const char *const name##TypeList[] = { __VA_ARGS__ }; \
    G_STATIC_ASSERT(G_N_ELEMENTS(name##TypeList) == lastValue); \
    const char * \
    name##TypeToString(int type) \
    { \
        return vrmEnumToString(name##TypeList, \
                               G_N_ELEMENTS(name##TypeList), type); \
    } \
    int \
    name##TypeFromString(const char *str) \
    { \
        return vrmEnumFromString(name##TypeList, \
                                 G_N_ELEMENTS(name##TypeList), str); \
    }

/* The two accessors of a static table of rows (the settings, the stats
 * keys, the typed parameters): how many, and row I or NULL */
#define VRM_TABLE_IMPL(type, table, countFunc, getFunc) \
    size_t \
    countFunc(void) \
    { \
        return G_N_ELEMENTS(table); \
    } \
    const type * \
    getFunc(size_t i) \
    { \
        return i < G_N_ELEMENTS(table) ? &table[i] : NULL; \
    }

const char *vrmEnumToString(const char *const *names, size_t n, int type);
int vrmEnumFromString(const char *const *names, size_t n, const char *str);

typedef const char *(*vrmEnumToStringFunc)(int type);
typedef int (*vrmEnumFromStringFunc)(const char *str);

/* "'a', 'b', 'c'": the values of an enum, for error messages. */
char *vrmEnumAllowedValues(vrmEnumToStringFunc toString, int last);
