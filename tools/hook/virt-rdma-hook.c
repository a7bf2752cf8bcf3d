/*
 * virt-rdma-hook: libvirt's qemu hook, installed as
 * /etc/libvirt/hooks/qemu.d/virt-rdma
 *
 * libvirt runs it as `virt-rdma <domain> <operation> <sub-operation> -`
 * with the domain XML on standard input. Only `migrate begin` on the
 * destination host matters: if the XML carries a virt-rdma offer, ask the
 * local virt-rdmad to accept it (policy, capabilities, a destination
 * engine connected to the source engine) and print the XML with the
 * answer added; libvirt starts the destination QEMU with that XML. Any
 * problem: exit 1 with one line on standard error, which libvirt reports
 * as the migration's error. Without an offer, and for every other
 * operation: print nothing, exit 0.
 */
#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "vrmhelperclient.h"
#include "vrmdomainxml.h"
#include "vrmerror.h"
#include "vrmi18n.h"
#include "vrmlog.h"

#define VRM_HOOK_TIMEOUT_DEFAULT_S 90

static int
vrmHookFail(const char *message)
{
    g_autofree char *line = g_strdup(message ? message : _("unknown error"));

    /* one line: libvirt shows it as the migration's error */
    g_strdelimit(line, "\r\n", ' ');
    fprintf(stderr, "virt-rdma: %s\n", line);
    return 1;
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
                           _("The domain XML on standard input is larger than %1$u bytes."),
                           VRM_XML_MAX_DOCUMENT_SIZE);
            return NULL;
        }
    }
    if (ferror(stdin)) {
        vrmReportError(VRM_ERR_SYSTEM, _("Cannot read the domain XML from standard input."));
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
    return 0;
}

static int
vrmHookMigrateBegin(const char *argDomain)
{
    g_autofree char *xml = NULL;
    g_autofree char *name = NULL;
    g_autofree char *uuid = NULL;
    g_autofree char *out = NULL;
    g_autoptr(vrmMigrationDef) def = NULL;
    g_autoptr(vrmControlMessage) req = NULL;
    g_autoptr(vrmControlMessage) reply = NULL;
    const char *env = g_getenv("VRM_HOOK_TIMEOUT");
    int timeout = VRM_HOOK_TIMEOUT_DEFAULT_S;
    const vrmJobRecord *job;
    size_t len = 0;
    int r;

    if (env && *env)
        timeout = MAX(1, atoi(env));
    if (!(xml = vrmHookReadStdin(&len)))
        return vrmHookFail(vrmGetLastErrorMessage());
    if ((r = vrmDomainXMLGetMigration(xml, &def)) < 0)
        return vrmHookFail(vrmGetLastErrorMessage());
    if (r == 0 || !def->offer)
        return 0;   /* not a virt-rdma migration: untouched */

    if (vrmHookDomainIdentity(xml, len, &name, &uuid) < 0)
        return vrmHookFail(vrmGetLastErrorMessage());
    req = vrmControlMessageNew(VRM_CONTROL_JOB_ACCEPT);
    req->domainName = g_strdup(name ? name : argDomain);
    req->domainUUID = g_steal_pointer(&uuid);
    req->migration = vrmMigrationDefNew();
    req->migration->offer = vrmOfferCopy(def->offer);

    if (!(reply = vrmHelperClientCall(NULL, req, timeout * 1000)) ||
        vrmHelperReplyCheck(reply) < 0)
        return vrmHookFail(vrmGetLastErrorMessage());
    if (reply->jobs->len != 1 ||
        !(job = g_ptr_array_index(reply->jobs, 0))->migration ||
        !job->migration->answer) {
        return vrmHookFail(_("virt-rdmad accepted the migration but sent no answer."));
    }
    if (!(out = vrmDomainXMLSetAnswer(xml, job->migration->answer)))
        return vrmHookFail(vrmGetLastErrorMessage());
    if (fputs(out, stdout) == EOF || fflush(stdout) != 0)
        return vrmHookFail(_("Cannot write the domain XML to standard output."));
    return 0;
}

int
main(int argc, char **argv)
{
    vrmI18nInit();
    vrmLogSetProgram("virt-rdma-hook");

    if (argc >= 2 && (g_str_equal(argv[1], "--help") || g_str_equal(argv[1], "-h"))) {
        printf(_("Usage: %1$s DOMAIN OPERATION SUB-OPERATION EXTRA\n"
                 "libvirt's qemu hook for virt-rdma (install as /etc/libvirt/hooks/qemu.d/virt-rdma).\n"
                 "For 'migrate begin' it reads the domain XML on standard input and, if it\n"
                 "carries a virt-rdma offer, prints it back with the destination's answer.\n"
                 "Environment: VRM_HELPER_SOCKET (control socket), VRM_HOOK_TIMEOUT (seconds).\n"),
               argv[0]);
        return 0;
    }
    if (argc < 4 || !g_str_equal(argv[2], "migrate") || !g_str_equal(argv[3], "begin"))
        return 0;   /* every other operation: untouched, at once */
    return vrmHookMigrateBegin(argv[1]);
}
