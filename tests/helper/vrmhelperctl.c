/*
 * vrmhelperctl: a bare control-socket client for the tests
 *
 *   vrmhelperctl [--socket PATH] list
 *   vrmhelperctl [--socket PATH] query ID | cancel ID | query-domain NAME
 *   vrmhelperctl [--socket PATH] open DOMAIN [CHANNELS [CHUNK [DEPTH]]]
 *   vrmhelperctl [--socket PATH] raw < request.xml
 *   vrmhelperctl [--socket PATH] offer DOMAIN [CHANNELS [CHUNK [DEPTH]]] < domain.xml
 *       opens a job and prints the domain XML with the offer added (what
 *       virt-rdma migrate sends as DEST_XML); "job ID PATH" on stderr
 *
 * Prints the reply document; exit 0 for an ok reply, 1 for an error
 * reply (its message on stderr), 2 when there was no reply.
 */
#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vrmhelperclient.h"
#include "vrmdomainxml.h"
#include "vrmerror.h"
#include "vrmi18n.h"

int
main(int argc, char **argv)
{
    g_autoptr(vrmControlMessage) req = NULL;
    g_autoptr(vrmControlMessage) reply = NULL;
    g_autofree char *text = NULL;
    const char *sock = NULL;
    const char *cmd;

    vrmI18nInit();
    if (argc >= 3 && g_str_equal(argv[1], "--socket")) {
        sock = argv[2];
        argv += 2;
        argc -= 2;
    }
    if (argc < 2) {
        fprintf(stderr, "usage: vrmhelperctl [--socket PATH] list|query ID|cancel ID|open DOMAIN [CH [CHUNK [DEPTH]]]|raw\n");
        return 2;
    }
    cmd = argv[1];
    if (g_str_equal(cmd, "list")) {
        req = vrmControlMessageNew(VRM_CONTROL_JOB_LIST);
    } else if ((g_str_equal(cmd, "query") || g_str_equal(cmd, "cancel")) && argc >= 3) {
        req = vrmControlMessageNew(g_str_equal(cmd, "query") ?
                                   VRM_CONTROL_JOB_QUERY : VRM_CONTROL_JOB_CANCEL);
        req->hasId = true;
        req->id = g_ascii_strtoull(argv[2], NULL, 10);
    } else if (g_str_equal(cmd, "query-domain") && argc >= 3) {
        req = vrmControlMessageNew(VRM_CONTROL_JOB_QUERY);
        req->domainName = g_strdup(argv[2]);
    } else if ((g_str_equal(cmd, "open") || g_str_equal(cmd, "offer")) && argc >= 3) {
        req = vrmControlMessageNew(VRM_CONTROL_JOB_OPEN);
        req->domainName = g_strdup(argv[2]);
        req->overrides = g_new0(vrmMigrationParams, 1);
        if (argc >= 4)
            req->overrides->channels = atoi(argv[3]);
        if (argc >= 5)
            req->overrides->chunkSize = atoi(argv[4]);
        if (argc >= 6)
            req->overrides->ringDepth = atoi(argv[5]);
    } else if (g_str_equal(cmd, "raw")) {
        g_autoptr(GString) in = g_string_new(NULL);
        char buf[4096];
        size_t r;

        while ((r = fread(buf, 1, sizeof(buf), stdin)) > 0)
            g_string_append_len(in, buf, r);
        if (!(req = vrmControlMessageParseString(in->str))) {
            fprintf(stderr, "vrmhelperctl: %s\n", vrmGetLastErrorMessage());
            return 2;
        }
    } else {
        fprintf(stderr, "vrmhelperctl: unknown command %s\n", cmd);
        return 2;
    }
    if (!(reply = vrmHelperClientCall(sock, req, 120 * 1000))) {
        fprintf(stderr, "vrmhelperctl: %s\n", vrmGetLastErrorMessage());
        return 2;
    }
    if (g_str_equal(cmd, "offer") && reply->status == VRM_REPLY_OK &&
        reply->jobs->len == 1) {
        const vrmJobRecord *job = g_ptr_array_index(reply->jobs, 0);
        g_autoptr(GString) in = g_string_new(NULL);
        g_autofree char *out = NULL;
        char buf[4096];
        size_t r;

        while ((r = fread(buf, 1, sizeof(buf), stdin)) > 0)
            g_string_append_len(in, buf, r);
        if (!job->migration || !job->migration->offer ||
            !(out = vrmDomainXMLSetOffer(in->str, job->migration->offer))) {
            fprintf(stderr, "vrmhelperctl: %s\n", vrmGetLastErrorMessage());
            return 2;
        }
        fputs(out, stdout);
        fprintf(stderr, "job %llu %s\n", job->id, job->socketPath);
        return 0;
    }
    text = vrmControlMessageFormat(reply);
    fputs(text, stdout);
    if (vrmHelperReplyCheck(reply) < 0) {
        fprintf(stderr, "vrmhelperctl: %s\n", vrmGetLastErrorMessage());
        return 1;
    }
    return 0;
}
