/*
 * virt-rdma-hook: libvirt's qemu hook, installed as
 * /etc/libvirt/hooks/qemu.d/virt-rdma
 *
 * libvirt runs it as `virt-rdma <domain> <operation> <sub-operation> -`
 * with the domain XML on standard input, with an empty environment. Only
 * `migrate begin` on the destination host matters: if the domain is
 * RDMA-enabled (an <rdma:migration> element in its metadata), the local
 * virt-rdmad negotiates the migration with the source host's virt-rdmad
 * (whose locator the element carries), starts the destination engine and
 * answers once it is connected; the hook then prints the XML with only
 * the locator changed to this host's (and any offer or answer of the
 * first version removed), and libvirt starts the destination QEMU with
 * it. Nothing secret is ever printed. When RDMA cannot carry the
 * migration (the helper here or there down, no device, the budget...),
 * [migration] fallback decides: `tcp` (the default) prints nothing and
 * exits 0, so libvirt goes on as it would without virt-rdma, with one
 * warning line in the journal; `refuse` exits 1 with one line on standard
 * error, which libvirt reports as the migration's error, before the
 * destination QEMU starts. Not RDMA-enabled, and every other operation:
 * print nothing, exit 0.
 *
 * Settings (the control socket, the time to wait) come from the helper's
 * configuration file, /etc/virt-rdma/virt-rdmad.conf ($VRM_HELPER_CONFIG
 * in tests), never from the environment, which libvirt does not pass.
 */
#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <unistd.h>

#include "vrmhelperclient.h"
#include "vrmhelperconf.h"
#include "vrmdomainxml.h"
#include "vrmerror.h"
#include "vrmi18n.h"
#include "vrmlog.h"

static int
vrmHookFail(const char *message)
{
    g_autofree char *line = vrmLogSanitize(message ? message : _("unknown error"));

    /* one line: libvirt shows it as the migration's error */
    fprintf(stderr, "virt-rdma: %s\n", line);
    return 1;
}

/*
 * RDMA cannot carry this migration and the policy lets it go on over TCP:
 * nothing on standard output (libvirt keeps its XML), one warning in the
 * journal (libvirt drops a successful hook's standard error) and on
 * standard error (for whoever runs the hook by hand).
 */
static int
vrmHookOverTcp(const char *domain, const char *why)
{
    g_autofree char *line = vrmLogSanitize(why ? why : _("unknown error"));
    /* the name is the domain XML's: no newline or escape reaches the log */
    g_autofree char *name = vrmLogSanitize(domain ? domain : "?");

    openlog("virt-rdma-hook", LOG_PID, LOG_DAEMON);
    syslog(LOG_WARNING, _("%1$s migrates in over TCP, not RDMA ([migration] fallback = tcp): %2$s"),
           name, line);
    closelog();
    fprintf(stderr, _("virt-rdma: warning: %1$s migrates in over TCP, not RDMA ([migration] fallback = tcp): %2$s\n"),
            name, line);
    return 0;
}

static char *
vrmHookReadStdin(size_t *len)
{
    g_autoptr(GString) buf = g_string_new(NULL);
    char chunk[65536];
    size_t r;

    while ((r = fread(chunk, 1, sizeof(chunk), stdin)) > 0) {
        g_string_append_len(buf, chunk, r);
        if (buf->len > VRM_XML_MAX_DOCUMENT_SIZE) {
            vrmReportError(VRM_ERR_RESOURCE,
                           _("the domain XML on standard input is larger than %1$u bytes"),
                           VRM_XML_MAX_DOCUMENT_SIZE);
            return NULL;
        }
    }
    if (ferror(stdin)) {
        vrmReportError(VRM_ERR_SYSTEM, _("cannot read the domain XML from standard input"));
        return NULL;
    }
    *len = buf->len;
    return g_string_free(g_steal_pointer(&buf), FALSE);
}

/* <name> and <uuid> of the domain */
static int
vrmHookDomainIdentity(const char *xml, size_t len, char **name, char **uuid)
{
    g_autoptr(xmlDoc) doc = vrmXMLParseMemory(xml, len, _("domain XML"), true);
    g_autoptr(xmlXPathContext) ctxt = NULL;
    xmlXPathObjectPtr obj;

    if (!doc || !(ctxt = vrmXMLNewContext(doc)))
        return -1;
    obj = xmlXPathEvalExpression(BAD_CAST "string(/domain/name)", ctxt);
    if (obj && obj->stringval && *obj->stringval)
        *name = g_strdup((const char *)obj->stringval);
    xmlXPathFreeObject(obj);
    obj = xmlXPathEvalExpression(BAD_CAST "string(/domain/uuid)", ctxt);
    if (obj && obj->stringval && *obj->stringval)
        *uuid = g_strdup((const char *)obj->stringval);
    xmlXPathFreeObject(obj);
    if (!*uuid || !g_uuid_string_is_valid(*uuid)) {
        vrmReportError(VRM_ERR_XML, _("the domain XML has no valid <uuid>"));
        return -1;
    }
    return 0;
}

static int
vrmHookMigrateBegin(const char *argDomain)
{
    g_autoptr(vrmHelperConfig) conf = NULL;
    g_autofree char *socketPath = NULL;
    g_autofree char *xml = NULL;
    g_autofree char *name = NULL;
    g_autofree char *uuid = NULL;
    g_autofree char *out = NULL;
    g_autoptr(vrmMigrationDef) def = NULL;
    g_autoptr(vrmControlMessage) req = NULL;
    g_autoptr(vrmControlMessage) reply = NULL;
    const vrmJobRecord *job;
    size_t len = 0;
    int r;

    if (!(xml = vrmHookReadStdin(&len)))
        return vrmHookFail(vrmGetLastErrorMessage());
    if ((r = vrmDomainXMLGetMigration(xml, &def)) < 0)
        return vrmHookFail(vrmGetLastErrorMessage());
    if (r == 0 || def->disabled)
        return 0;   /* not RDMA-enabled, or opted out: untouched */
    if (!(conf = vrmHelperConfigLoadDefault()))
        return vrmHookFail(vrmGetLastErrorMessage());
    socketPath = vrmHelperConfigSocketPath(conf);
    if (vrmHookDomainIdentity(xml, len, &name, &uuid) < 0)
        return vrmHookFail(vrmGetLastErrorMessage());

    req = vrmControlMessageNew(VRM_CONTROL_JOB_INCOMING);
    req->domainName = g_strdup(name ? name : argDomain);
    req->domainUUID = g_steal_pointer(&uuid);
    req->migration = vrmMigrationDefCopy(def);
    /* what the first version left there is not sent on */
    g_clear_pointer(&req->migration->offer, vrmOfferFree);
    g_clear_pointer(&req->migration->answer, vrmAnswerFree);

    if (!(reply = vrmHelperClientCall(socketPath, req, conf->hookTimeout * 1000))) {
        /* the helper down, hung or gone: never a reason to stop libvirt,
         * unless the policy says so; an impostor on its socket always is */
        if (conf->fallback == VRM_FALLBACK_TCP && vrmGetLastErrorCode() != VRM_ERR_AUTH)
            return vrmHookOverTcp(req->domainName, vrmGetLastErrorMessage());
        return vrmHookFail(vrmGetLastErrorMessage());
    }
    if (vrmHelperReplyCheck(reply) < 0)
        return vrmHookFail(vrmGetLastErrorMessage());
    /* the helper fell back itself, and has logged and recorded why */
    if (reply->jobs->len == 1 &&
        ((vrmJobRecord *)g_ptr_array_index(reply->jobs, 0))->state == VRM_JOB_STATE_OVER_TCP)
        return 0;
    if (reply->jobs->len != 1 ||
        !(job = g_ptr_array_index(reply->jobs, 0))->migration ||
        !job->migration->locator)
        return vrmHookFail(_("virt-rdmad accepted the migration but named no locator"));
    if (!(out = vrmDomainXMLSetLocator(xml, job->migration->locator)))
        return vrmHookFail(vrmGetLastErrorMessage());
    if (fputs(out, stdout) == EOF || fflush(stdout) != 0)
        return vrmHookFail(_("cannot write the domain XML to standard output"));
    return 0;
}

int
main(int argc, char **argv)
{
    vrmI18nInit();
    vrmLogSetProgram("virt-rdma-hook");

    if (argc >= 2 && (g_str_equal(argv[1], "--help") || g_str_equal(argv[1], "-h"))) {
        /* message-style: exempt-begin: help text (GLib's --help conventions) */
        printf(_("Usage: %1$s DOMAIN OPERATION SUB-OPERATION EXTRA\n"
                 "libvirt's qemu hook for virt-rdma (install as /etc/libvirt/hooks/qemu.d/virt-rdma).\n"
                 "For 'migrate begin' of an RDMA-enabled domain it reads the domain XML on\n"
                 "standard input, lets the local virt-rdmad negotiate the migration with the\n"
                 "source host's, and prints the XML back with this host's locator.\n"
                 "Settings: %2$s ([paths] run-dir, [hook] timeout, [migration] fallback).\n"),
               argv[0], vrmHelperConfigDefaultPath());
        /* message-style: exempt-end */
        return 0;
    }
    if (argc < 4 || !g_str_equal(argv[2], "migrate") || !g_str_equal(argv[3], "begin"))
        return 0;   /* every other operation: untouched, at once */
    return vrmHookMigrateBegin(argv[1]);
}
