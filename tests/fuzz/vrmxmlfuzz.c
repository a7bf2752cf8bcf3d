/*
 * vrmxmlfuzz.c: libFuzzer target for the XML layer
 *
 * Every input goes through each parser of xml/: the migration element,
 * the control messages, the messages between helpers (peer input of
 * root's daemon), the domain-XML surgery and the helper's key file.
 * Besides the sanitizers, it checks properties that must hold for any
 * input the parsers accept:
 *   - format(parse(x)) parses again and formats to the same text;
 *   - the locator the hook splices into an accepted domain XML reads back
 *     unchanged, no offer or answer survives, and a second splice
 *     changes nothing;
 *   - the canonical form of an accepted key file loads again;
 *   - no parser reports VRM_ERR_INTERNAL: in particular the parser and the
 *     RNG schema agree (a document the parser accepts but the schema
 *     refuses would leave users with libxml2's terse schema message).
 * Build: CC=clang meson setup build-fuzz -Dfuzzing=true \
 *          -Db_sanitize=address,undefined -Db_lundef=false
 * Run:   tests/fuzz/run-fuzz.sh build-fuzz 60
 */
#include <config.h>

#include <stdint.h>

#define VRM_FUZZ_NAME "vrmxmlfuzz"
#include "vrmfuzz.h"
#include "vrmdomainxml.h"
#include "vrmhelperconf.h"
#include "vrmmigrationdef.h"

/* Larger inputs only slow the search down. */
#define VRM_FUZZ_MAX_INPUT (64 * 1024)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char *
fuzzMigrationReformat(const char *xml)
{
    g_autoptr(vrmMigrationDef) def = vrmMigrationDefParseString(xml);

    return def ? vrmMigrationDefFormat(def) : NULL;
}

/* What parses as a @what formats to a fixed point */
static void
fuzzDocument(const char *str, const char *what, vrmFuzzReformatFunc reformat)
{
    g_autofree char *out = reformat(str);

    if (!out) {
        vrmFuzzCheckInternal(str);
        return;
    }
    vrmFuzzFixedPoint(what, out, reformat);
}

static void
fuzzDomain(const char *str)
{
    g_autoptr(vrmMigrationDef) def = NULL;
    g_autoptr(vrmMigrationDef) back = NULL;
    g_autoptr(vrmLocator) locator = vrmLocatorNew("dst.example.org",
                                                  "192.0.2.1", 16530);
    g_autofree char *with = NULL;
    g_autofree char *again = NULL;

    if (vrmDomainXMLGetMigration(str, &def) < 0) {
        vrmFuzzCheckInternal(str);
        return;
    }
    /* what the destination's hook prints: the locator in, any offer or
     * answer of an old version out */
    if (!(with = vrmDomainXMLSetLocator(str, locator))) {
        vrmFuzzCheckInternal(str);     /* e.g. our element there but invalid */
        return;
    }
    if (vrmDomainXMLGetMigration(with, &back) != 1 ||
        !vrmLocatorEqual(back->locator, locator))
        vrmFuzzFail("locator spliced into a domain XML does not read back",
                    with, vrmGetLastErrorMessage());
    if (back->offer || back->answer)
        vrmFuzzFail("an offer or answer survived the hook's edit", str, with);
    if (!(again = vrmDomainXMLSetLocator(with, locator)) ||
        strcmp(again, with) != 0)
        vrmFuzzFail("setting the same locator twice changed the XML", with,
                    again ? again : vrmGetLastErrorMessage());
}

static void
fuzzConfig(const uint8_t *data, size_t size)
{
    g_autoptr(vrmHelperConfig) conf = NULL;
    g_autoptr(vrmHelperConfig) again = NULL;
    g_autofree char *out = NULL;

    if (!(conf = vrmHelperConfigLoadData((const char *)data, size, "fuzz")))
        return;
    out = vrmHelperConfigFormat(conf);
    if (!(again = vrmHelperConfigLoadData(out, strlen(out), "canonical")))
        vrmFuzzFail("canonical key file does not load", out,
                    vrmGetLastErrorMessage());
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static bool initialized;
    g_autofree char *str = NULL;

    if (!initialized) {
        if (!g_getenv("VRM_SCHEMA_DIR"))
            g_setenv("VRM_SCHEMA_DIR", VRM_SOURCE_SCHEMA_DIR, TRUE);
        initialized = true;
    }
    if (size > VRM_FUZZ_MAX_INPUT)
        return 0;

    str = g_strndup((const char *)data, size);
    fuzzDocument(str, "migration XML", fuzzMigrationReformat);
    fuzzDocument(str, "control message", vrmFuzzControlReformat);
    fuzzDocument(str, "peer message", vrmFuzzPeerReformat);
    fuzzDomain(str);
    fuzzConfig(data, size);
    vrmResetLastError();
    return 0;
}
