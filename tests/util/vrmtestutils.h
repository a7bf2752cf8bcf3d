/*
 * vrmtestutils.h: fixtures and golden files for the unit tests
 *
 * Expected outputs are rewritten instead of compared when the environment
 * variable VRM_TEST_REGENERATE_OUTPUT is set (like libvirt's
 * VIR_TEST_REGENERATE_OUTPUT): review the diff, then commit it.
 */
#pragma once

#include <stdbool.h>

#include <glib.h>

/* Point the schema lookup at the source tree and set up i18n. */
void vrmTestInit(int *argc, char ***argv);

/* $VRM_SOURCE_DIR/tests/<subdir> ("xml/migrationdata"), or the compiled-in
 * source path. */
char *vrmTestDataDir(const char *subdir);

/*
 * Sorted names of the files of @dir ending in @suffix, except those
 * ending in one of @exclude (NULL-terminated, may be NULL).
 */
GPtrArray *vrmTestListFiles(const char *dir, const char *suffix,
                            const char *const *exclude);

char *vrmTestReadFile(const char *path);

/*
 * Compare @actual with the contents of @path. With
 * VRM_TEST_REGENERATE_OUTPUT set, write @actual to @path instead.
 * Returns true if equal (or regenerated); prints a diff-like report
 * otherwise.
 */
bool vrmTestCompareToFile(const char *actual, const char *path);

/* Runs python3 with @args (the script, then its arguments; NULL-terminated)
 * and, last, a temporary file @name that holds @text; its output in @out
 * and @err. Returns whether it exited with 0 */
bool vrmTestRunPython(const char *const *args, const char *name,
                      const char *text, char **out, char **err);

/* Each line of @text is a valid @kind ("capabilities", "jobinfo", "jobs",
 * "event") of docs/virt-rdma.schema.json, as python3-jsonschema checks
 * it; the test fails with the validator's complaint otherwise */
void vrmTestAssertJSONValid(const char *kind, const char *text);

/* The message expected by an invalid fixture: <fixture minus suffix>.err */
char *vrmTestErrPath(const char *fixture, const char *suffix);
