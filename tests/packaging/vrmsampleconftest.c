/*
 * vrmsampleconftest.c: the sample configuration the packages install as
 * /etc/virt-rdma/virt-rdmad.conf (driver/helper/virt-rdmad.conf) goes
 * through the helper's own parser: it is accepted as shipped and with every
 * commented-out setting switched on, it names every group and key the
 * parser knows, each commented-out value that has a default is that
 * default, no value carries a trailing comment, and the access group it
 * sets is the group of the socket unit.
 */
#include <config.h>

#include <stdbool.h>
#include <string.h>

#include <glib.h>

#include "vrmerror.h"
#include "vrmhelperconf.h"

typedef struct {
    char *group;
    char *key;
    char *value;
    bool commented;     /* "#key=value": documents a default or an example */
} testSetting;

static void
testSettingFree(testSetting *s)
{
    g_free(s->group);
    g_free(s->key);
    g_free(s->value);
    g_free(s);
}

static char *
testSourcePath(const char *rel)
{
    const char *src = g_getenv("VRM_SOURCE_DIR");

    g_assert_nonnull(src);
    return g_build_filename(src, rel, NULL);
}

static char *
testSampleText(void)
{
    g_autofree char *path = testSourcePath("driver/helper/virt-rdmad.conf");
    char *text = NULL;

    g_assert_true(g_file_get_contents(path, &text, NULL, NULL));
    return text;
}

/* Settings are "key=value" or "#key=value" (no blank after '#'); text
 * comments start with "# " or are a lone '#'. */
static GPtrArray *
testSampleSettings(const char *text)
{
    GPtrArray *settings = g_ptr_array_new_with_free_func((GDestroyNotify)testSettingFree);
    g_autoptr(GRegex) setting = g_regex_new("^(#?)([a-z][a-z0-9-]*)=(.*)$", 0, 0, NULL);
    g_autoptr(GRegex) group = g_regex_new("^\\[([a-z]+)\\]$", 0, 0, NULL);
    g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
    g_autofree char *current = NULL;
    size_t i;

    for (i = 0; lines[i]; i++) {
        g_autoptr(GMatchInfo) m = NULL;

        if (g_regex_match(group, lines[i], 0, &m)) {
            g_free(current);
            current = g_match_info_fetch(m, 1);
        } else {
            g_clear_pointer(&m, g_match_info_free);
            if (g_regex_match(setting, lines[i], 0, &m)) {
                testSetting *s = g_new0(testSetting, 1);
                g_autofree char *hash = g_match_info_fetch(m, 1);

                g_assert_nonnull(current);
                s->group = g_strdup(current);
                s->key = g_match_info_fetch(m, 2);
                s->value = g_match_info_fetch(m, 3);
                s->commented = *hash == '#';
                g_ptr_array_add(settings, s);
            }
        }
    }
    return settings;
}

static const testSetting *
testFindSetting(GPtrArray *settings, const char *group, const char *key)
{
    size_t i;

    for (i = 0; i < settings->len; i++) {
        const testSetting *s = g_ptr_array_index(settings, i);

        if (g_str_equal(s->group, group) && g_str_equal(s->key, key))
            return s;
    }
    return NULL;
}

/* The quoted names after @label in the parser's refusal of @doc. */
static GPtrArray *
testAllowedNames(const char *doc, const char *label, const char *pattern)
{
    GPtrArray *names = g_ptr_array_new_with_free_func(g_free);
    g_autoptr(vrmHelperConfig) conf = NULL;
    g_autoptr(GRegex) re = g_regex_new(pattern, 0, 0, NULL);
    g_autoptr(GMatchInfo) m = NULL;
    const char *msg;
    const char *list;

    vrmResetLastError();
    conf = vrmHelperConfigLoadData(doc, strlen(doc), "probe");
    g_assert_null(conf);
    msg = vrmGetLastErrorMessage();
    if (!(list = strstr(msg, label)))
        g_error("the parser's refusal no longer lists what is allowed after '%s': %s", label, msg);
    g_regex_match(re, list, 0, &m);
    while (g_match_info_matches(m)) {
        g_ptr_array_add(names, g_match_info_fetch(m, 1));
        g_match_info_next(m, NULL);
    }
    g_assert_cmpuint(names->len, >, 0);
    return names;
}

static void
testAcceptedAsShipped(void)
{
    g_autofree char *path = testSourcePath("driver/helper/virt-rdmad.conf");
    g_autoptr(vrmHelperConfig) conf = NULL;

    vrmResetLastError();
    if (!(conf = vrmHelperConfigLoadFile(path)))
        g_error("%s", vrmGetLastErrorMessage());
}

static void
testAcceptedUncommented(void)
{
    g_autofree char *text = testSampleText();
    g_autoptr(GRegex) re = g_regex_new("^#([a-z][a-z0-9-]*=)", G_REGEX_MULTILINE, 0, NULL);
    g_autofree char *all = g_regex_replace(re, text, -1, 0, "\\1", 0, NULL);
    g_autoptr(vrmHelperConfig) conf = NULL;

    g_assert_nonnull(all);
    vrmResetLastError();
    if (!(conf = vrmHelperConfigLoadData(all, strlen(all), "uncommented sample")))
        g_error("%s", vrmGetLastErrorMessage());
}

static void
testEveryKeyDocumented(void)
{
    g_autofree char *text = testSampleText();
    g_autoptr(GPtrArray) settings = testSampleSettings(text);
    g_autoptr(GPtrArray) groups =
        testAllowedNames("[no-such-group]\n", "allowed groups:", "'\\[([a-z-]+)\\]'");
    size_t i, j;

    for (i = 0; i < groups->len; i++) {
        const char *group = g_ptr_array_index(groups, i);
        g_autofree char *doc = g_strdup_printf("[%s]\nno-such-key=1\n", group);
        g_autoptr(GPtrArray) keys =
            testAllowedNames(doc, "allowed keys:", "'([a-z][a-z0-9-]*)'");

        for (j = 0; j < keys->len; j++) {
            const char *key = g_ptr_array_index(keys, j);

            if (!testFindSetting(settings, group, key))
                g_error("the sample does not document key '%s' of group '[%s]'", key, group);
        }
    }
}

/* virt-rdmad.conf(5) names every key the daemon accepts, under its
 * group's section ("[group]" underlined, then "``key``" at a line's
 * start, alone or in a list) */
static void
testEveryKeyInManPage(void)
{
    g_autofree char *path = testSourcePath("docs/man/virt-rdmad.conf.rst");
    g_autofree char *page = NULL;
    g_autoptr(GPtrArray) groups =
        testAllowedNames("[no-such-group]\n", "allowed groups:", "'\\[([a-z-]+)\\]'");
    size_t i, j;

    g_assert_true(g_file_get_contents(path, &page, NULL, NULL));
    for (i = 0; i < groups->len; i++) {
        const char *group = g_ptr_array_index(groups, i);
        g_autofree char *doc = g_strdup_printf("[%s]\nno-such-key=1\n", group);
        g_autofree char *heading = g_strdup_printf("\n[%s]\n=", group);
        g_autoptr(GPtrArray) keys =
            testAllowedNames(doc, "allowed keys:", "'([a-z][a-z0-9-]*)'");
        const char *section = strstr(page, heading);
        g_autofree char *body = NULL;
        const char *next;

        if (!section)
            g_error("virt-rdmad.conf(5) has no section [%s]", group);
        section += strlen(heading);
        /* up to the next section: a "[...]" line underlined with '=' */
        next = strstr(section, "\n\n[");
        body = next ? g_strndup(section, next - section) : g_strdup(section);
        for (j = 0; j < keys->len; j++) {
            g_autofree char *first = g_strdup_printf("\n``%s``", (char *)g_ptr_array_index(keys, j));
            g_autofree char *listed = g_strdup_printf(", ``%s``", (char *)g_ptr_array_index(keys, j));

            if (!strstr(body, first) && !strstr(body, listed))
                g_error("virt-rdmad.conf(5) does not document key '%s' of group '[%s]'",
                        (char *)g_ptr_array_index(keys, j), group);
        }
    }
}

static void
testDefaultsAreTrue(void)
{
    g_autofree char *text = testSampleText();
    g_autoptr(GPtrArray) settings = testSampleSettings(text);
    g_autoptr(vrmHelperConfig) defaults = vrmHelperConfigNew();
    g_autofree char *canonical = vrmHelperConfigFormat(defaults);
    g_autoptr(GPtrArray) real = testSampleSettings(canonical);
    size_t i;

    g_assert_cmpuint(real->len, >, 0);
    for (i = 0; i < real->len; i++) {
        const testSetting *d = g_ptr_array_index(real, i);
        const testSetting *s = testFindSetting(settings, d->group, d->key);

        g_assert_nonnull(s);
        if (s->commented && !g_str_equal(s->value, d->value))
            g_error("the sample shows '#%s=%s' in '[%s]' but the default is '%s'",
                    s->key, s->value, s->group, d->value);
    }
}

static void
testNoTrailingComments(void)
{
    g_autofree char *text = testSampleText();
    g_autoptr(GPtrArray) settings = testSampleSettings(text);
    size_t i;

    g_assert_cmpuint(settings->len, >, 0);
    for (i = 0; i < settings->len; i++) {
        const testSetting *s = g_ptr_array_index(settings, i);

        if (strchr(s->value, '#'))
            g_error("key '%s' in '[%s]' carries a comment after its value: '%s'",
                    s->key, s->group, s->value);
    }
}

/* What it sets for real: the access group, the socket unit's group. */
static void
testAccessGroupIsTheUnits(void)
{
    g_autofree char *text = testSampleText();
    g_autoptr(GPtrArray) settings = testSampleSettings(text);
    g_autofree char *unitPath = testSourcePath("driver/helper/virt-rdmad.socket");
    g_autofree char *unit = NULL;
    g_autoptr(GRegex) re = g_regex_new("^SocketGroup=(.+)$", G_REGEX_MULTILINE, 0, NULL);
    g_autoptr(GMatchInfo) m = NULL;
    g_autofree char *unitGroup = NULL;
    const testSetting *group = testFindSetting(settings, "access", "group");
    size_t i;

    g_assert_true(g_file_get_contents(unitPath, &unit, NULL, NULL));
    g_assert_true(g_regex_match(re, unit, 0, &m));
    unitGroup = g_match_info_fetch(m, 1);
    g_assert_nonnull(group);
    g_assert_false(group->commented);
    g_assert_cmpstr(group->value, ==, unitGroup);
    for (i = 0; i < settings->len; i++) {
        const testSetting *s = g_ptr_array_index(settings, i);

        if (!s->commented && s != group)
            g_error("the sample sets '%s' in '[%s]'; only [access] group is meant to be set",
                    s->key, s->group);
    }
}

int
main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/sampleconf/accepted-as-shipped", testAcceptedAsShipped);
    g_test_add_func("/sampleconf/accepted-uncommented", testAcceptedUncommented);
    g_test_add_func("/sampleconf/every-key-documented", testEveryKeyDocumented);
    g_test_add_func("/sampleconf/every-key-in-man-page", testEveryKeyInManPage);
    g_test_add_func("/sampleconf/defaults-are-true", testDefaultsAreTrue);
    g_test_add_func("/sampleconf/no-trailing-comments", testNoTrailingComments);
    g_test_add_func("/sampleconf/access-group-is-the-units", testAccessGroupIsTheUnits);
    return g_test_run();
}
