/*
 * vrmclijobfmt.h: a migration job's statistics as text and JSON
 *
 * The libvirt part is exactly what virsh 9.0 `domjobinfo` prints for the
 * same typed parameters (labels, units, widths, which lines appear for which
 * job type), so that users and their scripts read `virt-rdma jobinfo` like
 * `virsh domjobinfo`; tests/tools/vrmjobfmttest.c compares the two on
 * fixtures and on random parameter sets with the real virsh. The RDMA part
 * follows in the same style, from one table of our own statistics.
 *
 * Public API summary
 * ------------------
 *   vrmJobFormatLibvirt(type, params, n, completed, anystats)  virsh's text
 *   vrmJobFormatRaw(type, params, n)      virsh's --rawstats text
 *   vrmJobFormatRDMA(params, n)           our lines ("RDMA ..."), or why none
 *   vrmJobFormatJSON(type, params, n)     one JSON object (docs/json.rst)
 *   vrmJobFormatPrettySize(bytes, &unit)  virsh's scaled sizes
 */
#pragma once

#include <stdbool.h>

#include <glib.h>

#include <libvirt/libvirt.h>

char *vrmJobFormatLibvirt(int type, virTypedParameterPtr params, int nparams,
                          bool completed, bool anystats);
char *vrmJobFormatRaw(int type, virTypedParameterPtr params, int nparams);
char *vrmJobFormatRDMA(virTypedParameterPtr params, int nparams);
char *vrmJobFormatJSON(int type, virTypedParameterPtr params, int nparams);
double vrmJobFormatPrettySize(unsigned long long bytes, const char **unit);
