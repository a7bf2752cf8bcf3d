/*
 * migrate-app.c: a management application's live migration over RDMA
 * through libvirtrdma, as a program written against libvirt would do it.
 *
 *   migrate-app [-c SRC_URI] [--parallel N] [--chunk-size BYTES]
 *               [--helper-socket PATH] DOMAIN DEST_URI
 *
 * Build it like any user of the library:
 *   cc migrate-app.c $(pkg-config --cflags --libs virt-rdma libvirt)
 *
 * On failure it prints vrmLastError()'s code, the part that refused and
 * the message, and exits with 3 for a refusal by a host's policy or a
 * missing RDMA device (try another host), 1 otherwise: what an
 * orchestrator needs to decide whether to retry elsewhere.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>
#include <virt-rdma/virt-rdma.h>

static const char *
domainName(int domain)
{
    switch (domain) {
    case VRM_FROM_LIBRARY: return "library";
    case VRM_FROM_HELPER: return "helper";
    case VRM_FROM_LIBVIRT: return "libvirt";
    }
    return "none";
}

int
main(int argc, char **argv)
{
    const char *srcURI = NULL, *helperSocket = NULL;
    const char *domName = NULL, *destURI = NULL;
    unsigned long long chunkSize = 0;
    int parallel = 0, i, ret = 1;
    virTypedParameterPtr params = NULL;
    int nparams = 0, maxparams = 0;
    unsigned int flags = VIR_MIGRATE_LIVE | VIR_MIGRATE_PEER2PEER;
    virConnectPtr conn = NULL;
    virDomainPtr dom = NULL;
    const vrmError *err;

    for (i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-c") && i + 1 < argc)
            srcURI = argv[++i];
        else if (!strcmp(argv[i], "--parallel") && i + 1 < argc)
            parallel = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--chunk-size") && i + 1 < argc)
            chunkSize = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--helper-socket") && i + 1 < argc)
            helperSocket = argv[++i];
        else if (!domName)
            domName = argv[i];
        else if (!destURI)
            destURI = argv[i];
        else
            domName = NULL, i = argc;
    }
    if (!domName || !destURI) {
        fprintf(stderr, "usage: migrate-app [-c SRC_URI] [--parallel N] [--chunk-size BYTES] "
                        "[--helper-socket PATH] DOMAIN DEST_URI\n");
        return 2;
    }

    if (!(conn = virConnectOpen(srcURI)) ||
        (!(dom = virDomainLookupByName(conn, domName)))) {
        fprintf(stderr, "migrate-app: %s\n", virGetLastErrorMessage());
        goto cleanup;
    }
    if (parallel > 0) {
        flags |= VIR_MIGRATE_PARALLEL;
        virTypedParamsAddInt(&params, &nparams, &maxparams,
                             VIR_MIGRATE_PARAM_PARALLEL_CONNECTIONS, parallel);
    }
    if (chunkSize)
        virTypedParamsAddULLong(&params, &nparams, &maxparams,
                                VRM_MIGRATE_PARAM_CHUNK_SIZE, chunkSize);
    if (helperSocket)
        virTypedParamsAddString(&params, &nparams, &maxparams,
                                VRM_MIGRATE_PARAM_HELPER_SOCKET, helperSocket);

    if (vrmDomainMigrateToURI3(dom, destURI, params, nparams, flags) == 0) {
        printf("migrate-app: %s migrated to %s\n", domName, destURI);
        ret = 0;
        goto cleanup;
    }
    err = vrmLastError();
    printf("migrate-app: failed: code %d, from the %s: %s\n",
           err->code, domainName(err->domain), err->message);
    if (err->code == VRM_ERROR_POLICY || err->code == VRM_ERROR_NO_DEVICE ||
        err->code == VRM_ERROR_RESOURCE)
        ret = 3;

 cleanup:
    virTypedParamsFree(params, nparams);
    if (dom)
        virDomainFree(dom);
    if (conn)
        virConnectClose(conn);
    return ret;
}
