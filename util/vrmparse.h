/*
 * vrmparse.h: the one grammar for numbers, sizes, names and addresses
 *
 * Every program of virt-rdma (CLI options, engine options, the helper's
 * configuration, the XML layer) reads these values with these functions.
 * None of them reports an error: callers know which option, attribute or
 * key the value came from and say so.
 *
 * Public API summary
 * ------------------
 *   vrmParseUInt64(str, &v)   canonical decimal: digits only, no sign, no
 *                             blank, no leading zero, no overflow
 *   vrmParseSize(str, &v)     a size as virsh and GLib users type it:
 *                             "4096", "64K", "64KiB", "1M", "1MiB", "2G",
 *                             "1GiB", "1T"; K/M/G/T and KiB/MiB/GiB/TiB are
 *                             binary (1024), KB/MB/GB/TB decimal (1000), as
 *                             in virsh; "B" alone means bytes; case-insensitive
 *   vrmSizeSyntaxHelp()       the sentence that describes that grammar
 *   vrmValidName(str)         device, group or domain-like name:
 *                             [A-Za-z0-9_.-], 1 to VRM_NAME_MAX characters
 *   vrmValidAddress(str)      an IPv4 or IPv6 literal (inet_pton)
 *   vrmValidHostName(str)     a DNS host name as certificates carry it:
 *                             dot-separated labels of letters, digits and
 *                             '-' (1 to 63 each, not starting with '-'),
 *                             at most VRM_HOST_NAME_MAX characters
 */
#pragma once

#include <stdbool.h>

bool vrmParseUInt64(const char *str, unsigned long long *value);
/* Field 22 of a /proc/PID/stat text (its start, in clock ticks after boot);
 * 0 if the text is not one */
guint64 vrmParseProcStartTime(const char *stat);
bool vrmParseSize(const char *str, unsigned long long *value);
const char *vrmSizeSyntaxHelp(void);
bool vrmValidName(const char *str);
bool vrmValidAddress(const char *str);

#define VRM_HOST_NAME_MAX 253
bool vrmValidHostName(const char *str);
